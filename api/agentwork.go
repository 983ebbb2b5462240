package api

import (
	"encoding/json"
	"time"
)

// The agent's work: what an Agent Client Protocol agent reports besides its
// prose (its thoughts, tool calls and plan) and the permission requests a
// person answers. These are transcript entries (Message.ToolCall,
// Message.Plan) and the objects of GET /v1/sessions/{id}/permissions.

// Message roles for the agent's work, beside RoleUser, RoleAgent and
// RoleSystem.
const (
	// RoleThought: the agent's reasoning (ACP agent_thought_chunk), text.
	RoleThought Role = "thought"
	// RoleTool: one tool call, in Message.ToolCall; every update of the
	// call merges into its one entry.
	RoleTool Role = "tool"
	// RolePlan: the agent's plan, in Message.Plan; an update replaces the
	// turn's plan entry.
	RolePlan Role = "plan"
)

// ToolKind is what a tool call does, as the agent declares it.
type ToolKind string

// Tool kinds (ACP's ToolKind); an agent's unknown kind is recorded as
// ToolOther.
const (
	ToolRead    ToolKind = "read"
	ToolEdit    ToolKind = "edit"
	ToolDelete  ToolKind = "delete"
	ToolMove    ToolKind = "move"
	ToolSearch  ToolKind = "search"
	ToolExecute ToolKind = "execute"
	ToolThink   ToolKind = "think"
	ToolFetch   ToolKind = "fetch"
	ToolOther   ToolKind = "other"
)

// ToolKinds lists every tool kind, in the order above.
var ToolKinds = []ToolKind{ToolRead, ToolEdit, ToolDelete, ToolMove, ToolSearch, ToolExecute, ToolThink, ToolFetch, ToolOther}

// ToolCallStatus is where a tool call is.
type ToolCallStatus string

// Tool call statuses (ACP's ToolCallStatus).
const (
	ToolPending    ToolCallStatus = "pending"
	ToolInProgress ToolCallStatus = "in_progress"
	ToolCompleted  ToolCallStatus = "completed"
	ToolFailed     ToolCallStatus = "failed"
)

// ToolCall is a tool call entry's call: ACP's tool_call, with every
// tool_call_update of the same id merged in (a field an update leaves out
// keeps its value; content and locations an update carries replace the
// call's).
type ToolCall struct {
	// ID is the agent's toolCallId.
	ID        string          `json:"id"`
	Title     string          `json:"title"`
	Kind      ToolKind        `json:"kind"`
	Status    ToolCallStatus  `json:"status"`
	Locations []ToolLocation  `json:"locations"`
	Content   []ToolContent   `json:"content"`
	RawInput  json.RawMessage `json:"raw_input,omitempty"`
	RawOutput json.RawMessage `json:"raw_output,omitempty"`
}

// ToolLocation is a file a tool call touches (Line is 1-based; nil when the
// agent named no line).
type ToolLocation struct {
	Path string `json:"path"`
	Line *int   `json:"line,omitempty"`
}

// Tool call content types.
const (
	ContentText     = "text"
	ContentDiff     = "diff"
	ContentTerminal = "terminal"
)

// ToolContent is one piece of a tool call's content: text (Text), a diff of
// one file (Path, OldText — nil for a new file — and NewText), or a terminal
// of the session that runs the call's command (Terminal, its name).
type ToolContent struct {
	Type     string  `json:"type"`
	Text     string  `json:"text,omitempty"`
	Path     string  `json:"path,omitempty"`
	OldText  *string `json:"old_text,omitempty"`
	NewText  string  `json:"new_text,omitempty"`
	Terminal string  `json:"terminal,omitempty"`
}

// Plan is a plan entry's plan: the agent's list of what it will do.
type Plan struct {
	Entries []PlanEntry `json:"entries"`
}

// PlanEntry is one step of a plan. Priority is high, medium or low; Status
// is pending, in_progress or completed.
type PlanEntry struct {
	Content  string `json:"content"`
	Priority string `json:"priority"`
	Status   string `json:"status"`
}

// PermissionState is where a permission request is.
type PermissionState string

// Permission request states.
const (
	// PermissionPending: the agent waits for a person's answer.
	PermissionPending PermissionState = "pending"
	// PermissionAnswered: answered with OptionID, by a person (AnsweredBy)
	// or by the profile's policy (AnsweredBy "policy").
	PermissionAnswered PermissionState = "answered"
	// PermissionCancelled: the turn was cancelled, the session stopped or
	// the agent exited before an answer.
	PermissionCancelled PermissionState = "cancelled"
	// PermissionTimedOut: agent.NAME.permission_timeout passed; the reject
	// option (OptionID) was chosen.
	PermissionTimedOut PermissionState = "timed_out"
)

// Permission option kinds (ACP's PermissionOptionKind).
const (
	OptionAllowOnce    = "allow_once"
	OptionAllowAlways  = "allow_always"
	OptionRejectOnce   = "reject_once"
	OptionRejectAlways = "reject_always"
)

// AnsweredByPolicy is Permission.AnsweredBy for a request the profile's
// policy (permission = "allow" | "deny", auto_allow) answered.
const AnsweredByPolicy = "policy"

// PermissionOption is one answer the agent offers (its optionId).
type PermissionOption struct {
	OptionID string `json:"option_id"`
	Name     string `json:"name"`
	Kind     string `json:"kind"`
}

// Permission is one permission request of a session's agent.
type Permission struct {
	ID         string             `json:"id"`
	SessionID  string             `json:"session_id"`
	ToolCallID string             `json:"tool_call_id"`
	Title      string             `json:"title"`
	Kind       ToolKind           `json:"kind"`
	Options    []PermissionOption `json:"options"`
	State      PermissionState    `json:"state"`
	// OptionID is the option chosen ("" while pending or when cancelled).
	OptionID string `json:"option_id"`
	// AnsweredBy is who answered: "policy", or the answering client's
	// identity ("user", "read-only" never answers).
	AnsweredBy string     `json:"answered_by"`
	CreatedAt  time.Time  `json:"created_at"`
	AnsweredAt *time.Time `json:"answered_at"`
}

// Permissions answers GET /v1/sessions/{id}/permissions, oldest first.
type Permissions struct {
	Permissions []Permission `json:"permissions"`
}

// AnswerPermissionRequest is the body of
// POST /v1/sessions/{id}/permissions/{pid}.
type AnswerPermissionRequest struct {
	OptionID string `json:"option_id"`
}

// AgentCommand is a slash command the agent announced
// (available_commands_update); a prompt "/NAME INPUT" runs it.
type AgentCommand struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	InputHint   string `json:"input_hint,omitempty"`
}

// AgentMode is a mode the agent offers (ACP session modes).
type AgentMode struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
}

// AgentModes is the agent's modes and the current one.
type AgentModes struct {
	CurrentModeID string      `json:"current_mode_id"`
	Available     []AgentMode `json:"available"`
}

// SetModeRequest is the body of POST /v1/sessions/{id}/mode.
type SetModeRequest struct {
	ModeID string `json:"mode_id"`
}

// Permission events, beside the session's other events: their data holds
// "permission" (the Permission object).
const (
	EventPermissionRequested = "session.permission.requested"
	EventPermissionAnswered  = "session.permission.answered"
)
