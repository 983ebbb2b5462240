package client

// EventFilter selects the events of an Events stream; empty fields match all.
type EventFilter struct {
	SessionID string
	TaskID    string
}
