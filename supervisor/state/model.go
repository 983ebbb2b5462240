package state

import "github.com/paddockhq/paddock/api"

// The model is the API's wire types (package api): what the FSM stores is
// what the API sends, less the fields tagged `json:"-"`.
type (
	// SessionState is the lifecycle state of a session.
	SessionState = api.SessionState
	// TaskState is the lifecycle state of a task.
	TaskState = api.TaskState
	// ExecutorStatus is the status of an executor row.
	ExecutorStatus = api.ExecutorStatus
	// LeaseState is the state of a session lease.
	LeaseState = api.LeaseState
	// Workspace names the repository or directory a task works in.
	Workspace = api.Workspace
	// Task is a unit of work with many sessions.
	Task = api.Task
	// Session is the unit of execution.
	Session = api.Session
	// Executor is where a session runs.
	Executor = api.Executor
	// Lease names the single live owner of a session's agent execution.
	Lease = api.Lease
	// Role is who wrote a message.
	Role = api.Role
	// TurnOutcome is how a turn ended.
	TurnOutcome = api.TurnOutcome
	// Message is one conversation entry with its whole text so far.
	Message = api.Message
	// Event is one session-scoped event.
	Event = api.Event
	// Status is the session status object.
	Status = api.Status
	// Controller identifies the client controlling an agent terminal.
	Controller = api.Controller
	// Permission is one permission request of a session's agent.
	Permission = api.Permission
	// PermissionState is where a permission request is.
	PermissionState = api.PermissionState
)

// Permission request states.
const (
	PermissionPending   = api.PermissionPending
	PermissionAnswered  = api.PermissionAnswered
	PermissionCancelled = api.PermissionCancelled
	PermissionTimedOut  = api.PermissionTimedOut
)

// Session states.
const (
	SessionCreated         = api.SessionCreated
	SessionStarting        = api.SessionStarting
	SessionWaitingForInput = api.SessionWaitingForInput
	SessionRunning         = api.SessionRunning
	SessionStopped         = api.SessionStopped
	SessionError           = api.SessionError
	SessionCompleted       = api.SessionCompleted
)

// Task states.
const (
	TaskOpen       = api.TaskOpen
	TaskInProgress = api.TaskInProgress
	TaskReview     = api.TaskReview
	TaskDone       = api.TaskDone
)

// Executor statuses.
const (
	ExecutorStarting = api.ExecutorStarting
	ExecutorReady    = api.ExecutorReady
	ExecutorError    = api.ExecutorError
	ExecutorStopped  = api.ExecutorStopped
)

// Lease states.
const (
	LeaseHeld     = api.LeaseHeld
	LeaseReleased = api.LeaseReleased
	LeaseExpired  = api.LeaseExpired
)

// Message roles.
const (
	RoleUser   = api.RoleUser
	RoleAgent  = api.RoleAgent
	RoleSystem = api.RoleSystem
	// RoleThought, RoleTool and RolePlan are the agent's work.
	RoleThought = api.RoleThought
	RoleTool    = api.RoleTool
	RolePlan    = api.RolePlan
)

// Turn outcomes.
const (
	TurnCompleted   = api.TurnCompleted
	TurnCancelled   = api.TurnCancelled
	TurnInterrupted = api.TurnInterrupted
	TurnFailed      = api.TurnFailed
)

// Event types.
const (
	EventAgentctlStarting = api.EventAgentctlStarting
	EventAgentctlReady    = api.EventAgentctlReady
	EventAgentctlError    = api.EventAgentctlError
	EventStateChanged     = api.EventStateChanged
	EventMessageAdded     = api.EventMessageAdded
	EventMessageUpdated   = api.EventMessageUpdated
	EventLeaseChanged     = api.EventLeaseChanged
	// EventPermissionRequested: a permission request waits for an answer.
	EventPermissionRequested = api.EventPermissionRequested
	// EventPermissionAnswered: a permission request ended (answered,
	// timed out or cancelled).
	EventPermissionAnswered = api.EventPermissionAnswered
)

// Resume reasons of the status object.
const (
	ReasonNotResumable       = api.ReasonNotResumable
	ReasonMissingResumeToken = api.ReasonMissingResumeToken
	ReasonExecutorLost       = api.ReasonExecutorLost
	ReasonAgentNotRunning    = api.ReasonAgentNotRunning
	ReasonNodeUnavailable    = api.ReasonNodeUnavailable
)
