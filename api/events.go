package api

// Event is one session-scoped event; Index is the raft index of the write
// that produced it.
type Event struct {
	Type      string         `json:"type"`
	SessionID string         `json:"session_id"`
	TaskID    string         `json:"task_id"`
	Index     uint64         `json:"index"`
	Data      map[string]any `json:"data"`
}

// Event types (docs/API.md, "Events").
const (
	EventAgentctlStarting = "session.agentctl_starting"
	EventAgentctlReady    = "session.agentctl_ready"
	EventAgentctlError    = "session.agentctl_error"
	EventStateChanged     = "session.state_changed"
	EventMessageAdded     = "session.message.added"
	EventMessageUpdated   = "session.message.updated"
	EventLeaseChanged     = "session.lease_changed"
	// EventMetaChanged: a session was renamed or (un)pinned; data
	// {"name","pinned"} holds both as they are now.
	EventMetaChanged = "session.meta_changed"
)
