package api

import "time"

// SessionState is the lifecycle state of a session (docs/API.md, "Sessions").
type SessionState string

// Session states.
const (
	SessionCreated         SessionState = "CREATED"
	SessionStarting        SessionState = "STARTING"
	SessionWaitingForInput SessionState = "WAITING_FOR_INPUT"
	SessionRunning         SessionState = "RUNNING"
	SessionStopped         SessionState = "STOPPED"
	SessionError           SessionState = "ERROR"
	SessionCompleted       SessionState = "COMPLETED"
)

// Active reports whether a session in this state should have a running
// agent (starting, waiting for input or running a turn).
func (s SessionState) Active() bool {
	return s == SessionStarting || s == SessionWaitingForInput || s == SessionRunning
}

// TaskState is the lifecycle state of a task.
type TaskState string

// Task states.
const (
	TaskOpen       TaskState = "OPEN"
	TaskInProgress TaskState = "IN_PROGRESS"
	TaskReview     TaskState = "REVIEW"
	TaskDone       TaskState = "DONE"
)

// ExecutorStatus is the status of an executor row.
type ExecutorStatus string

// Executor statuses.
const (
	ExecutorStarting ExecutorStatus = "starting"
	ExecutorReady    ExecutorStatus = "ready"
	ExecutorError    ExecutorStatus = "error"
	ExecutorStopped  ExecutorStatus = "stopped"
)

// LeaseState is the state of a session lease.
type LeaseState string

// Lease states.
const (
	LeaseHeld     LeaseState = "held"
	LeaseReleased LeaseState = "released"
	LeaseExpired  LeaseState = "expired"
)

// Workspace names the repository or directory a task works in.
type Workspace struct {
	Path   string `json:"path"`
	Branch string `json:"branch"`
}

// Task is a unit of work with many sessions.
type Task struct {
	ID        string    `json:"id"`
	Title     string    `json:"title"`
	Workspace Workspace `json:"workspace"`
	State     TaskState `json:"state"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Session is the unit of execution. ResumeToken is kept in replicated state but
// only its presence (HasResumeToken) is shown by the API.
type Session struct {
	ID             string            `json:"id"`
	TaskID         string            `json:"task_id"`
	State          SessionState      `json:"state"`
	Agent          string            `json:"agent"`
	Runtime        string            `json:"runtime"`
	RuntimeOptions map[string]string `json:"runtime_options,omitempty"`
	ExecutorID     string            `json:"executor_id"`
	HasResumeToken bool              `json:"has_resume_token"`
	ResumeToken    string            `json:"-"`
	ErrorMessage   string            `json:"error_message"`
	// StateReason says why the session last entered ERROR or STOPPED (a
	// resume reason such as agent_not_running or executor_lost).
	StateReason string `json:"state_reason,omitempty"`
	// LastTurnOutcome is how the session's last turn ended (a TurnOutcome);
	// empty until a turn has ended.
	LastTurnOutcome TurnOutcome `json:"last_turn_outcome,omitempty"`
	// StopRequested is set when a stop has been answered and the session
	// is not STOPPED yet (its agent is being stopped). It is replicated
	// before the stop is answered, so a leader that takes over in between
	// finishes the stop instead of continuing the session; any move to
	// STOPPED, ERROR or COMPLETED clears it.
	StopRequested bool `json:"stop_requested,omitempty"`
	// Name is what a person named the session (POST
	// /v1/sessions/{id}/rename): at most 200 characters, no control
	// characters; "" for none.
	Name string `json:"name"`
	// Pinned sessions come first in paged lists and searches (POST
	// /v1/sessions/{id}/pin). Neither a rename nor a pin is activity:
	// they leave LastActivityAt as it is.
	Pinned         bool      `json:"pinned"`
	CreatedAt      time.Time `json:"created_at"`
	UpdatedAt      time.Time `json:"updated_at"`
	LastActivityAt time.Time `json:"last_activity_at"`
}

// Executor is where a session runs. Secret and Handle never leave the cluster.
type Executor struct {
	ID          string         `json:"id"`
	SessionID   string         `json:"session_id"`
	TaskID      string         `json:"task_id"`
	Runtime     string         `json:"runtime"`
	Node        string         `json:"node"`
	Status      ExecutorStatus `json:"status"`
	AgentctlURL string         `json:"agentctl_url"`
	// AgentctlFingerprint is the SHA-256 of agentctl's TLS certificate when
	// its URL is https; every node pins it.
	AgentctlFingerprint   string `json:"agentctl_fingerprint,omitempty"`
	ContainerID           string `json:"container_id"`
	PID                   int    `json:"pid"`
	Nonce                 string `json:"nonce"`
	SupportsSessionResume bool   `json:"supports_session_resume"`
	// ResumeProbed says SupportsSessionResume is what agentctl's probe of
	// the agent answered: an agentctl that is up (a nonce) may have failed
	// to probe its agent (one that did not start, or answer in time).
	ResumeProbed          bool `json:"resume_probed,omitempty"`
	SupportsWorkspaceOnly bool `json:"supports_workspace_only"`
	// DestroyPending: the session was deleted with force while the
	// executor's node did not answer; the leader destroys the executor
	// (and its workspace) there when the node answers again.
	DestroyPending   bool      `json:"destroy_pending,omitempty"`
	WorkspacePath    string    `json:"workspace_path"`
	WorktreePath     string    `json:"worktree_path"`
	WorktreeBranch   string    `json:"worktree_branch"`
	LastSeenAt       time.Time `json:"last_seen_at"`
	ErrorMessage     string    `json:"error_message"`
	AgentExecutionID string    `json:"-"`
	Secret           string    `json:"-"`
	Handle           []byte    `json:"-"`
}

// ProbedResume is the probe's answer to whether the agent resumes sessions,
// and whether there is one. Only a probe sets SupportsSessionResume, so a
// true one recorded before ResumeProbed existed counts as probed.
func (e Executor) ProbedResume() (supports, probed bool) {
	return e.SupportsSessionResume, e.ResumeProbed || e.SupportsSessionResume
}

// Lease names the single live owner of a session's agent execution.
type Lease struct {
	SessionID        string     `json:"session_id"`
	HolderExecutorID string     `json:"holder_executor_id"`
	HolderNonce      string     `json:"holder_nonce"`
	FencingToken     uint64     `json:"fencing_token"`
	State            LeaseState `json:"state"`
	ExpiresAt        time.Time  `json:"expires_at"`
}

// Role is who wrote a message.
type Role string

// Message roles.
const (
	RoleUser   Role = "user"
	RoleAgent  Role = "agent"
	RoleSystem Role = "system"
)

// TurnOutcome is how a turn ended (the status object's last_turn_outcome).
type TurnOutcome string

// Turn outcomes.
const (
	// TurnCompleted: the agent answered and ended the turn.
	TurnCompleted TurnOutcome = "completed"
	// TurnCancelled: the user cancelled the turn.
	TurnCancelled TurnOutcome = "cancelled"
	// TurnInterrupted: the turn was cut short because its agent stopped
	// (it died, its executor was lost, or the session was stopped).
	TurnInterrupted TurnOutcome = "interrupted"
	// TurnFailed: the agent answered the turn with an error.
	TurnFailed TurnOutcome = "failed"
)

// Message is one conversation entry with its whole text so far.
type Message struct {
	ID        string    `json:"id"`
	Role      Role      `json:"role"`
	Text      string    `json:"text"`
	Complete  bool      `json:"complete"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// ToolCall is a RoleTool entry's call (nil for other roles).
	ToolCall *ToolCall `json:"tool_call,omitempty"`
	// Plan is a RolePlan entry's plan (nil for other roles).
	Plan *Plan `json:"plan,omitempty"`
}
