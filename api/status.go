package api

import "time"

// Status is the session status object of GET /v1/sessions/{id}/status.
// Pointer fields marshal as null when unknown; every field is always present.
type Status struct {
	SessionID        string          `json:"session_id"`
	TaskID           string          `json:"task_id"`
	State            SessionState    `json:"state"`
	AgentProfileID   *string         `json:"agent_profile_id"`
	ExecutorStatus   *ExecutorStatus `json:"executor_status"`
	AgentExecutionID *string         `json:"agent_execution_id"`
	Runtime          *string         `json:"runtime"`
	IsAgentRunning   bool            `json:"is_agent_running"`
	IsResumable      bool            `json:"is_resumable"`
	NeedsResume      bool            `json:"needs_resume"`
	ResumeReason     *string         `json:"resume_reason"`
	ResumeMessage    *string         `json:"resume_message"`
	WorktreePath     *string         `json:"worktree_path"`
	WorktreeBranch   *string         `json:"worktree_branch"`
	// Node is the node that owns the session's executor (null before one).
	Node *string `json:"node"`
	// LastTurnOutcome is how the last turn ended; null when none has.
	LastTurnOutcome *TurnOutcome `json:"last_turn_outcome"`
	// Model is the model the running agent reported for the session; null
	// when it reports none or does not run.
	Model *string `json:"model"`
	// Controller is the client controlling the session: the one attached
	// to its agent terminal, or else the `paddock chat` holding its
	// conversation (Controller.Via says which); null when none does.
	Controller *Controller `json:"controller"`
	// PendingPermissions counts the agent's permission requests that wait
	// for a person's answer (the session stays RUNNING meanwhile).
	PendingPermissions int `json:"pending_permissions"`
	// Commands are the slash commands the running agent announced (empty
	// when none).
	Commands []AgentCommand `json:"commands"`
	// Modes are the running agent's session modes; null when it offers none.
	Modes *AgentModes `json:"modes"`
}

// Controller identifies the client controlling a session: the host, pid
// and start nonce it gave (a terminal's hello, or a chat's registration;
// empty when a terminal client gave none, as a browser), when it took
// control, and how it controls (Via).
type Controller struct {
	Host  string    `json:"host"`
	PID   int       `json:"pid"`
	Nonce string    `json:"nonce"`
	Since time.Time `json:"since"`
	// Via is ViaTerminal or ViaChat.
	Via string `json:"via"`
}

// How a client controls a session (Controller.Via).
const (
	// ViaTerminal: attached to the agent's own terminal (a pty agent);
	// it owns the agent's keystrokes.
	ViaTerminal = "terminal"
	// ViaChat: a `paddock chat` holds the conversation (a lease it
	// renews while it runs; PUT /v1/sessions/{id}/controller).
	ViaChat = "chat"
)

// Resume reasons of the status object (docs/API.md, "Status object").
const (
	ReasonNotResumable       = "not_resumable"
	ReasonMissingResumeToken = "missing_resume_token"
	ReasonExecutorLost       = "executor_lost"
	ReasonAgentNotRunning    = "agent_not_running"
	// ReasonNodeUnavailable: the node that owns the session's executor does
	// not answer; the session waits for it (its message names the node).
	ReasonNodeUnavailable = "node_unavailable"
	// ReasonWorkspaceMissing: the session's workspace directory is gone
	// (removed, or its disk is not mounted), so there is nothing to resume
	// in; the session is not resumable and its message names the path.
	ReasonWorkspaceMissing = "workspace_missing"
)
