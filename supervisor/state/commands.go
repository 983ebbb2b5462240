package state

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/paddockhq/paddock/api"
)

// CommandType identifies a raft command. The high bit marks a command that an
// older node may ignore if it does not know it (forward compatibility).
type CommandType uint8

// IgnoreUnknownFlag marks a command type that nodes may skip when unknown.
const IgnoreUnknownFlag CommandType = 0x80

// Each command is declared once, beside the function that applies it: its
// CommandType constant (the type byte, persisted in the raft log: never
// renumber or reuse a number; IgnoreUnknownFlag is set in the constant of a
// command older nodes may skip) and one register call naming its body type
// and its apply function. TestCommandTypesAreFrozen lists the numbers taken.

// command is one registered command type: the body its entries decode into
// and the function that applies them.
type command struct {
	newBody func() any // a fresh *...Body to decode into
	apply   applyFunc
}

// registry holds the registered commands, by type byte.
type registry [256]*command

// commands is every command this build knows, filled by the register calls
// in the package's init functions.
var commands registry

// register declares command type t: entries of type t decode into
// newBody() and are applied by apply. It panics on a type registered
// twice, so two commands can never share a number.
func register(t CommandType, newBody func() any, apply applyFunc) {
	commands.register(t, newBody, apply)
}

func (r *registry) register(t CommandType, newBody func() any, apply applyFunc) {
	if newBody == nil || apply == nil {
		panic(fmt.Sprintf("state: command type %d registered without a body or an apply function", t))
	}
	if r[t] != nil {
		panic(fmt.Sprintf("state: command type %d registered twice", t))
	}
	r[t] = &command{newBody: newBody, apply: apply}
}

// newBody is the body constructor of a command whose body is a *T.
func newBody[T any]() any { return new(T) }

// Proposal is a command to commit, before the cluster gives it a key and
// a time (cluster.Node.LeaderApplyAll commits several in one go).
type Proposal struct {
	Type CommandType
	Body any
}

// bodyVersion is the version of every body encoded by this build.
const bodyVersion = 1

// Command is one state change, ready to be encoded into the raft log.
type Command struct {
	Type CommandType
	// Key makes the command idempotent: a second command with the same key
	// returns the first one's outcome without applying again.
	Key string
	// Now is the leader's clock when it built the command.
	Now time.Time
	// Body is one of the *Body types below, matching Type.
	Body any
}

// envelope is the JSON after the two header bytes: {"key","now","body"}.
// Decoding sets Body to the command type's body pointer first, so the body
// is decoded in the same pass as the envelope.
type envelope struct {
	Key  string    `json:"key"`
	Now  time.Time `json:"now"`
	Body any       `json:"body"`
}

// Encode serialises the command: type byte, version byte, JSON envelope.
// The envelope is written around the body's JSON, so a command is encoded
// by at most one reflective marshal (its body's; none for the bodies with
// a hand-written codec, codec.go).
func (c Command) Encode() ([]byte, error) {
	body, err := encodeBody(c.Body)
	if err != nil {
		return nil, fmt.Errorf("encode command %d body: %w", c.Type, err)
	}
	now, err := c.Now.UTC().MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("encode command %d: %w", c.Type, err)
	}
	out := make([]byte, 0, 2+len(`{"key":"","now":,"body":}`)+len(c.Key)+len(now)+len(body))
	out = append(out, byte(c.Type), bodyVersion)
	out = append(out, `{"key":`...)
	if key, ok := appendString(out, c.Key); ok {
		out = key
	} else {
		key, err := json.Marshal(c.Key)
		if err != nil {
			return nil, fmt.Errorf("encode command %d: %w", c.Type, err)
		}
		out = append(out, key...)
	}
	out = append(append(append(out, `,"now":`...), now...), `,"body":`...)
	out = append(out, body...)
	return append(out, '}'), nil
}

// RegisterNodeBody records a server's addresses so any node can reach the
// leader's HTTP API.
type RegisterNodeBody struct {
	Node NodeInfo `json:"node"`
}

// CreateTaskBody creates a task; the leader fills in ID and times.
type CreateTaskBody struct {
	Task api.Task `json:"task"`
}

// SetTaskStateBody changes a task's state: DONE closes it; OPEN reopens a
// task, whose state then follows its sessions again.
type SetTaskStateBody struct {
	TaskID string        `json:"task_id"`
	State  api.TaskState `json:"state"`
}

// DeleteTaskBody removes a task whose sessions have all ended (COMPLETED),
// with those sessions and everything recorded for them.
type DeleteTaskBody struct {
	TaskID string `json:"task_id"`
}

// CreateSessionBody creates a session in CREATED. ResumeToken is carried
// beside the session because Session hides it from JSON.
type CreateSessionBody struct {
	Session     api.Session `json:"session"`
	ResumeToken string      `json:"resume_token,omitempty"`
}

// SetSessionStateBody moves a session to State. When From is not empty the
// change is a compare-and-set: it fails with ErrConflict unless the session is
// in one of those states.
// RequestStopBody marks a starting or running session as being stopped.
type RequestStopBody struct {
	SessionID string `json:"session_id"`
}

type SetSessionStateBody struct {
	SessionID    string             `json:"session_id"`
	State        api.SessionState   `json:"state"`
	From         []api.SessionState `json:"from,omitempty"`
	ErrorMessage string             `json:"error_message,omitempty"`
	Reason       string             `json:"reason,omitempty"`
	// TurnOutcome, when set, records how the turn that this change ends
	// went; TurnError says why a failed or interrupted one did. A change
	// from RUNNING to ERROR, STOPPED or STARTING needs neither: that turn
	// was interrupted, and the FSM records it so.
	TurnOutcome api.TurnOutcome `json:"turn_outcome,omitempty"`
	TurnError   string          `json:"turn_error,omitempty"`
	// NotActivity: the change is not the session's activity (a recovery
	// on a restart or failover moved it), so last_activity_at stays.
	NotActivity bool `json:"not_activity,omitempty"`
}

// SetResumeTokenBody stores the agent's conversation id for a session.
type SetResumeTokenBody struct {
	SessionID   string `json:"session_id"`
	ResumeToken string `json:"resume_token"`
}

// PutExecutorBody inserts or replaces an executor row and links it to its
// session. The fields Executor hides from JSON travel beside it; build it with
// NewPutExecutor.
type PutExecutorBody struct {
	Executor         api.Executor `json:"executor"`
	Secret           string       `json:"secret,omitempty"`
	Handle           []byte       `json:"handle,omitempty"`
	AgentExecutionID string       `json:"agent_execution_id,omitempty"`
}

// NewPutExecutor returns the body that stores e, private fields included.
func NewPutExecutor(e api.Executor) *PutExecutorBody {
	return &PutExecutorBody{Executor: e, Secret: e.Secret, Handle: e.Handle, AgentExecutionID: e.AgentExecutionID}
}

// SetExecutorStateBody updates an executor's status and liveness.
type SetExecutorStateBody struct {
	ExecutorID   string             `json:"executor_id"`
	Status       api.ExecutorStatus `json:"status"`
	ErrorMessage string             `json:"error_message,omitempty"`
	Nonce        string             `json:"nonce,omitempty"`
	// Destroyed clears destroy_pending: the executor's node destroyed it.
	Destroyed bool `json:"destroyed,omitempty"`
}

// PutMessageBody inserts or updates one message of a session. Without
// Source, Message.ID is the message's id in the session. With Source (the
// agentctl boot that numbered it), Message.ID is that agentctl's id and the
// FSM gives the message an id unique in the session: agentctl numbers
// messages afresh with every boot. History marks a message the agent
// replayed when it resumed a conversation: it is recorded only into a
// transcript that does not already hold the conversation.
type PutMessageBody struct {
	SessionID string      `json:"session_id"`
	Message   api.Message `json:"message"`
	Source    string      `json:"source,omitempty"`
	History   bool        `json:"history,omitempty"`
}

// AppendMessageBody records what a message that agentctl streams (Source,
// agentctl's MessageID) says from byte From of its text on: Text replaces
// the recorded text after From, so a streamed reply's writes carry what
// it added since the last one instead of its whole text so far (replicated
// bytes linear in the reply, not quadratic). The message must be recorded
// from the same agentctl boot with at least From bytes of text; otherwise
// the command is a conflict and changes nothing (the writer then puts the
// whole message).
type AppendMessageBody struct {
	SessionID string `json:"session_id"`
	Source    string `json:"source"`
	MessageID string `json:"message_id"`
	From      int    `json:"from"`
	Text      string `json:"text"`
	Complete  bool   `json:"complete,omitempty"`
}

// ClaimLeaseBody claims a session's lease for a holder.
type ClaimLeaseBody struct {
	SessionID  string        `json:"session_id"`
	ExecutorID string        `json:"executor_id"`
	Nonce      string        `json:"nonce"`
	TTL        time.Duration `json:"ttl"`
}

// ReleaseLeaseBody releases (or, with Expire, reclaims) a lease, as a
// compare-and-set on its fencing token.
type ReleaseLeaseBody struct {
	SessionID    string `json:"session_id"`
	FencingToken uint64 `json:"fencing_token"`
}

// SetLeaseNonceBody records the holder's agentctl boot nonce once it is
// known, as a compare-and-set on the fencing token.
type SetLeaseNonceBody struct {
	SessionID    string `json:"session_id"`
	FencingToken uint64 `json:"fencing_token"`
	Nonce        string `json:"nonce"`
}

// RecoverExecutorsBody records, in one command, that a new leader found
// many sessions' recorded agentctls alive as recorded (a recovery run): for
// each item, its executor row when it changed, then its events in order
// (agentctl_starting, agentctl_ready). Each item is a compare-and-set on its
// session's lease: it is still held with FencingToken by the agentctl with
// boot nonce Nonce, so a recovery never records an executor ready under a
// lease that has moved on. The command is all or nothing: one item that
// fails the check refuses the whole command (ErrConflict) and nothing of it
// is applied.
type RecoverExecutorsBody struct {
	Items []RecoveredExecutor `json:"items"`
}

// RecoveredExecutor is one session's part of a RecoverExecutorsBody.
type RecoveredExecutor struct {
	SessionID string `json:"session_id"`
	// ExecutorID, FencingToken and Nonce name the lease the item expects:
	// held by this executor (the session's) under this token, its holder
	// the agentctl with this boot nonce.
	ExecutorID   string `json:"executor_id"`
	FencingToken uint64 `json:"fencing_token"`
	Nonce        string `json:"nonce"`
	// Executor, when set, replaces the session's executor row (its session
	// and boot nonce must be the item's).
	Executor *PutExecutorBody `json:"executor,omitempty"`
	Events   []RecoveredEvent `json:"events"`
}

// RecoveredEvent is one session event a RecoveredExecutor publishes.
type RecoveredEvent struct {
	Type string         `json:"type"`
	Data map[string]any `json:"data"`
}

// DeleteSessionBody ends a session for good (COMPLETED).
type DeleteSessionBody struct {
	SessionID string `json:"session_id"`
	// Abandon marks the session's executor destroy_pending: the delete was
	// forced while its node did not answer, and the executor is destroyed
	// when the node answers again.
	Abandon bool `json:"abandon,omitempty"`
}

// PublishEventBody records a session event that is not a state change
// (agentctl_starting, agentctl_ready, agentctl_error).
type PublishEventBody struct {
	SessionID string         `json:"session_id"`
	Type      string         `json:"type"`
	Data      map[string]any `json:"data"`
}

// NodeInfo is one server of the cluster.
type NodeInfo struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	HTTPAddr string `json:"http_addr"`
}

// bodyFor returns a fresh body value for a command type, or nil if unknown.
func bodyFor(t CommandType) any {
	if c := commands[t]; c != nil {
		return c.newBody()
	}
	return nil
}

// DecodeCommand parses an encoded command. It returns ok=false for an unknown
// type that carries IgnoreUnknownFlag; any other decoding failure is an error.
// An entry in the form Encode writes is read by the hand-written codec
// (codec.go); any other is read by encoding/json, with the same result.
func DecodeCommand(data []byte) (cmd Command, ok bool, err error) {
	if len(data) < 2 {
		return Command{}, false, fmt.Errorf("command too short (%d bytes)", len(data))
	}
	t := CommandType(data[0])
	if data[1] != bodyVersion {
		return Command{}, false, fmt.Errorf("command %d: unsupported body version %d", t, data[1])
	}
	body := bodyFor(t)
	if body == nil {
		if t&IgnoreUnknownFlag != 0 {
			return Command{Type: t}, false, nil
		}
		return Command{}, false, fmt.Errorf("unknown command type %d", t)
	}
	if key, now, raw, ok := splitEnvelope(data[2:]); ok && decodeBody(raw, body) {
		return Command{Type: t, Key: key, Now: now, Body: body}, true, nil
	}
	body = bodyFor(t) // a failed fast decode may have set part of the first one
	env := envelope{Body: body}
	if err := json.Unmarshal(data[2:], &env); err != nil {
		return Command{}, false, fmt.Errorf("command %d: decode: %w", t, err)
	}
	if env.Body != body { // "body": null replaced the pointer
		return Command{}, false, fmt.Errorf("command %d: no body", t)
	}
	return Command{Type: t, Key: env.Key, Now: env.Now, Body: body}, true, nil
}
