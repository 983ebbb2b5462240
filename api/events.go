package api

import "time"

// Event is one session-scoped event; Index is the raft index of the write
// that produced it.
type Event struct {
	Type      string         `json:"type"`
	SessionID string         `json:"session_id"`
	TaskID    string         `json:"task_id"`
	Index     uint64         `json:"index"`
	Data      map[string]any `json:"data"`
	// Delta is set on a session.message.updated sent to a subscriber that
	// asked for deltas (GET /v1/events?deltas=true) and holds the message
	// from an earlier event of its subscription: what the update added, in
	// place of the whole message (Data is then empty).
	Delta *MessageDelta `json:"delta,omitempty"`
}

// MessageDelta is what one update added to a streamed message's text: the
// message's text is now the text the subscriber holds cut to From bytes,
// then Text.
type MessageDelta struct {
	ID        string    `json:"id"`
	From      int       `json:"from"`
	Text      string    `json:"text"`
	Complete  bool      `json:"complete"`
	UpdatedAt time.Time `json:"updated_at"`
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
