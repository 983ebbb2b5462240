package agentctl

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/shared/agentctl/workspace"
)

// FencingHeader carries the session's fencing token on every mutating request.
const FencingHeader = "X-Paddock-Fencing-Token"

// Protocols an agent profile may use.
const (
	ProtocolACP = "acp"
	ProtocolPTY = "pty"
)

// Agent statuses reported by AgentState.Status.
const (
	StatusNone            = "none"
	StatusStarting        = "starting"
	StatusWaitingForInput = "waiting_for_input"
	StatusRunning         = "running"
	StatusExited          = "exited"
	StatusError           = "error"
)

// Event types published on the event stream.
const (
	EventAgentStarted        = "agent_started"
	EventAgentStopped        = "agent_stopped"
	EventMessageAdded        = "message_added"
	EventMessageUpdated      = "message_updated"
	EventTurnFinished        = "turn_finished"
	EventPermissionRequested = "permission_requested"
	EventPermissionAnswered  = "permission_answered"
	EventCommandsUpdated     = "commands_updated"
	EventModeUpdated         = "mode_updated"
	EventAgentError          = "agent_error"
)

// Message roles.
const (
	RoleUser    = "user"
	RoleAgent   = "agent"
	RoleSystem  = "system"
	RoleThought = string(api.RoleThought)
	RoleTool    = string(api.RoleTool)
	RolePlan    = string(api.RolePlan)
)

// Permission policies of a Profile.
const (
	PermissionAsk   = "ask"
	PermissionAllow = "allow"
	PermissionDeny  = "deny"
)

// Turn outcomes carried by turn_finished events.
const (
	OutcomeEndTurn   = "end_turn"
	OutcomeCancelled = "cancelled"
	OutcomeError     = "error"
	// OutcomeInterrupted: the agent exited before it ended the turn.
	OutcomeInterrupted = "interrupted"
)

// Error codes used in JSON error bodies.
const (
	CodeBadRequest   = "bad_request"
	CodeUnauthorized = "unauthorized"
	CodeNotFound     = "not_found"
	CodeConflict     = "conflict"
	CodeUnavailable  = "unavailable"
	CodeInternal     = "internal"
)

var tokenRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)

// ErrBadToken is returned for resume tokens (and session ids) that do not match
// ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$.
var ErrBadToken = errors.New("token must match ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")

// ValidToken reports whether s may be used as a resume token or session id.
func ValidToken(s string) bool { return tokenRE.MatchString(s) }

// CheckToken returns a descriptive error wrapping ErrBadToken when s is invalid.
func CheckToken(what, s string) error {
	if !ValidToken(s) {
		return fmt.Errorf("invalid %s %q: %w", what, s, ErrBadToken)
	}
	return nil
}

// Profile describes how to start and resume one agent program.
type Profile struct {
	Protocol   string   `json:"protocol"`
	Command    []string `json:"command"`
	NewArgs    []string `json:"new_args,omitempty"`
	ResumeArgs []string `json:"resume_args,omitempty"`
	// Permission is how an ACP agent's permission requests are answered:
	// ask (a person answers through POST /v1/agent/permissions/{id}; ""
	// means ask), allow (an allow option is chosen) or deny (a reject
	// option is chosen).
	Permission            string            `json:"permission,omitempty"`
	SupportsSessionResume bool              `json:"supports_session_resume,omitempty"`
	Env                   map[string]string `json:"env,omitempty"`
	// AutoAllow lists tool kinds (api.ToolKinds) whose requests are allowed
	// without asking.
	AutoAllow []string `json:"auto_allow,omitempty"`
	// PermissionTimeout, when set, is how long a request waits for a
	// person: then its reject option is chosen and it is recorded
	// timed_out. Nanoseconds in JSON.
	PermissionTimeout time.Duration `json:"permission_timeout,omitempty"`
}

// Validate checks a profile for obvious mistakes.
func (p Profile) Validate() error {
	switch p.Protocol {
	case ProtocolACP, ProtocolPTY:
	default:
		return fmt.Errorf("profile protocol %q: must be %q or %q", p.Protocol, ProtocolACP, ProtocolPTY)
	}
	if len(p.Command) == 0 || strings.TrimSpace(p.Command[0]) == "" {
		return errors.New("profile command is empty")
	}
	switch p.Permission {
	case "", PermissionAsk, PermissionAllow, PermissionDeny:
	default:
		return fmt.Errorf("profile permission %q: must be ask, allow or deny", p.Permission)
	}
	for _, k := range p.AutoAllow {
		if !slices.Contains(api.ToolKinds, api.ToolKind(k)) {
			return fmt.Errorf("profile auto_allow kind %q: must be one of %v", k, api.ToolKinds)
		}
	}
	if p.PermissionTimeout < 0 {
		return fmt.Errorf("profile permission_timeout %s is negative", p.PermissionTimeout)
	}
	for k := range p.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return fmt.Errorf("profile env name %q is invalid", k)
		}
	}
	return nil
}

// StartRequest is the body of POST /v1/agent/start.
type StartRequest struct {
	Profile     Profile `json:"profile"`
	ResumeToken string  `json:"resume_token,omitempty"`
}

// PromptRequest is the body of POST /v1/agent/prompt.
type PromptRequest struct {
	Text string `json:"text"`
}

// PromptResponse answers POST /v1/agent/prompt.
type PromptResponse struct {
	MessageID string `json:"message_id"`
	Turn      int    `json:"turn"`
}

// ProbeRequest is the body of POST /v1/probe.
type ProbeRequest struct {
	Profile Profile `json:"profile"`
}

// Health answers GET /v1/health.
type Health struct {
	Status      string `json:"status"`
	SessionID   string `json:"session_id"`
	Nonce       string `json:"nonce"`
	PID         int    `json:"pid"`
	Workspace   string `json:"workspace"`
	AgentStatus string `json:"agent_status"`
	Fencing     uint64 `json:"fencing_token"`
	StartedAt   string `json:"started_at"`
	// Agent is the agent's state as GET /v1/agent answers it (without the
	// terminal controller), so one round trip tells a recovering
	// supervisor both who answers and what its agent does. Nil from an
	// agentctl built before it was added.
	Agent *AgentState `json:"agent,omitempty"`
}

// Capabilities answers GET /v1/capabilities and POST /v1/probe.
type Capabilities struct {
	SupportsSessionResume *bool `json:"supports_session_resume"`
	SupportsWorkspaceOnly bool  `json:"supports_workspace_only"`
}

// AgentState answers GET /v1/agent and POST /v1/agent/start.
type AgentState struct {
	Status                string `json:"status"`
	Protocol              string `json:"protocol,omitempty"`
	PID                   int    `json:"pid,omitempty"`
	ResumeToken           string `json:"resume_token,omitempty"`
	SupportsSessionResume bool   `json:"supports_session_resume"`
	Turn                  int    `json:"turn"`
	TurnRunning           bool   `json:"turn_running"`
	LastOutcome           string `json:"last_outcome,omitempty"`
	ExitCode              *int   `json:"exit_code"`
	Error                 string `json:"error,omitempty"`
	// Model is the model the agent reported for its session ("" when none;
	// ACP agents only).
	Model string `json:"model,omitempty"`
	// Controller is the client controlling the agent terminal (GET /v1/agent
	// only; nil when none is attached).
	Controller *TerminalController `json:"controller,omitempty"`
	// ChatController is the chat holding the conversation (GET /v1/agent
	// only; nil when none is registered): PUT /v1/controller/chat.
	ChatController *ChatController `json:"chat_controller,omitempty"`
	// Commands are the slash commands the agent announced (ACP).
	Commands []api.AgentCommand `json:"commands,omitempty"`
	// Modes are the agent's modes and the current one (nil when it offers
	// none).
	Modes *api.AgentModes `json:"modes,omitempty"`
	// PendingPermissions counts the requests waiting for an answer.
	PendingPermissions int `json:"pending_permissions"`
}

// TerminalController is the client controlling a terminal: the host, pid and
// nonce its hello gave (empty when it gave none) and when it attached.
type TerminalController struct {
	Host  string    `json:"host"`
	PID   int       `json:"pid"`
	Nonce string    `json:"nonce"`
	Since time.Time `json:"since"`
}

// Message is one conversation message with its whole text so far.
type Message struct {
	ID   string `json:"id"`
	Role string `json:"role"` // user | agent | system | thought | tool | plan
	Text string `json:"text"`
	// ToolCall is a tool entry's call (role tool): every update of the call
	// is merged into it.
	ToolCall *api.ToolCall `json:"tool_call,omitempty"`
	// Plan is a plan entry's plan (role plan): an update replaces it.
	Plan      *api.Plan `json:"plan,omitempty"`
	Complete  bool      `json:"complete"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// History marks a message the agent replayed while it resumed a
	// conversation (not said in this execution).
	History bool `json:"history,omitempty"`
}

// MessagesResponse answers GET /v1/messages.
type MessagesResponse struct {
	Messages []Message `json:"messages"`
}

// Event is one entry of the event stream. Seq increases by one per event
// within one agentctl boot (Nonce); a new nonce restarts Seq at 1.
type Event struct {
	Seq  uint64          `json:"seq"`
	Type string          `json:"type"`
	Time time.Time       `json:"time"`
	Data json.RawMessage `json:"data,omitempty"`
	// Delta stands for Data in GET /v1/events/stream's message_updated
	// events of a message's text the stream already carried: what the
	// update added, not the whole message again.
	Delta *TextDelta `json:"delta,omitempty"`
	// Message is a message event's message, decoded (and a delta applied)
	// by Client.Stream; never sent.
	Message *Message `json:"-"`
}

// TextDelta is what a message_updated event of GET /v1/events/stream adds to
// a message's text: the text from byte From on (From is the length the
// stream carried before), and the message's new Complete and UpdatedAt.
// Every other field of the message is as the stream last carried it.
type TextDelta struct {
	ID        string    `json:"id"`
	From      int       `json:"from"`
	Text      string    `json:"text"`
	Complete  bool      `json:"complete"`
	UpdatedAt time.Time `json:"updated_at"`
}

// EventsResponse answers GET /v1/events (long poll).
type EventsResponse struct {
	Nonce  string  `json:"nonce"`
	Events []Event `json:"events"`
	Next   uint64  `json:"next"` // pass as since= on the next call
	// Gather echoes the gather window the answer was held for (empty when
	// none was asked, and from an agentctl older than the parameter).
	Gather string `json:"gather,omitempty"`
	// LeaseDeadline is set when the poll renewed the lease (it asked with
	// Lease): agentctl's new self-fencing deadline. An agentctl older than
	// the parameter leaves it out and renews nothing.
	LeaseDeadline *time.Time `json:"lease_deadline,omitempty"`
	// Permissions is the agent's permission requests, as GET
	// /v1/agent/permissions lists them, when the poll asked for them
	// (EventsQuery.Permissions): listed after the events were read, so a
	// request missing from the list comes in a later event. Nil from an
	// agentctl older than the parameter.
	Permissions *api.Permissions `json:"permissions,omitempty"`
}

// EventsQuery is what one GET /v1/events asks for.
type EventsQuery struct {
	// Since is the first Seq wanted.
	Since uint64
	// Wait is how long the call waits for a first event (at most 60 s).
	Wait time.Duration
	// Compact leaves out message updates a later one in the answer
	// supersedes.
	Compact bool
	// Gather holds an answer whose events are all chunks of messages still
	// being written until Gather has passed since the first of them, so a
	// streamed reply comes a few times a second, not once per chunk. Any
	// other event (a complete message, a turn's end, the agent stopping)
	// is answered at once, with the chunks before it. Zero answers at once.
	Gather time.Duration
	// Lease, when set, renews the session's lease for Lease as the call
	// arrives, as POST /v1/lease does: the call then carries the fencing
	// token and a stale one is refused (409) before any wait.
	Lease time.Duration
	// Permissions asks for the agent's permission requests with the
	// answer (EventsResponse.Permissions): a catch-up's one round trip.
	Permissions bool
}

// Event payloads (Event.Data) by type.
type (
	// AgentStartedData is the payload of agent_started.
	AgentStartedData struct {
		PID         int    `json:"pid"`
		Protocol    string `json:"protocol"`
		ResumeToken string `json:"resume_token"`
		Resumed     bool   `json:"resumed"`
	}
	// AgentStoppedData is the payload of agent_stopped.
	AgentStoppedData struct {
		ExitCode int `json:"exit_code"`
	}
	// MessageData is the payload of message_added and message_updated.
	MessageData struct {
		Message Message `json:"message"`
	}
	// TurnFinishedData is the payload of turn_finished.
	TurnFinishedData struct {
		Turn    int    `json:"turn"`
		Outcome string `json:"outcome"`
		Error   string `json:"error,omitempty"`
	}
	// PermissionData is the payload of permission_requested and
	// permission_answered (SessionID is left empty: the supervisor fills
	// it).
	PermissionData struct {
		Permission api.Permission `json:"permission"`
	}
	// CommandsData is the payload of commands_updated.
	CommandsData struct {
		Commands []api.AgentCommand `json:"commands"`
	}
	// ModesData is the payload of mode_updated.
	ModesData struct {
		Modes api.AgentModes `json:"modes"`
	}
	// AgentErrorData is the payload of agent_error.
	AgentErrorData struct {
		Message string `json:"message"`
	}
)

// AnswerPermissionRequest is the body of POST /v1/agent/permissions/{id}.
type AnswerPermissionRequest struct {
	OptionID string `json:"option_id"`
	// AnsweredBy is who answered (recorded in the permission; "user" when
	// empty).
	AnsweredBy string `json:"answered_by,omitempty"`
}

// SetModeRequest is the body of POST /v1/agent/mode.
type SetModeRequest struct {
	ModeID string `json:"mode_id"`
}

// Terminal owners (api.Terminal.Owner).
const (
	// OwnerAgent: the agent runs the terminal (a command it started, or a
	// pty agent's own PTY).
	OwnerAgent = "agent"
	// OwnerUser: a person's shell.
	OwnerUser = "user"
)

// TerminalList answers GET /v1/terminals.
type TerminalList struct {
	Terminals []api.Terminal `json:"terminals"`
}

// ErrorBody is the JSON error envelope: {"error":{"code","message"}}.
type ErrorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// APIError is returned by Client and HostClient for non-2xx answers.
type APIError struct {
	Status  int
	Code    string
	Message string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("agentctl: %d %s: %s", e.Status, e.Code, e.Message)
}

// Info is the JSON written to -info-file and printed on stdout after listening.
type Info struct {
	URL       string `json:"url"`
	PID       int    `json:"pid"`
	Nonce     string `json:"nonce"`
	SessionID string `json:"session_id"`
	// Fingerprint is the SHA-256 (hex) of agentctl's TLS certificate when it
	// serves TLS (serve -tls; the URL is https); clients pin it.
	Fingerprint string `json:"fingerprint,omitempty"`
}

// GitStatus is the answer of GET /v1/git/status.
type GitStatus = workspace.GitStatus
