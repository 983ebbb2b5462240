package api

// SessionItem is a session as a picker lists it: the session, a summary
// of its transcript and, in a search, what matched. GET /v1/sessions
// answers items when it pages (q, cursor or limit) or with summary=true.
type SessionItem struct {
	Session
	// FirstPrompt is the first line of the session's first user message
	// (at most 120 characters; "" when there is none).
	FirstPrompt string `json:"first_prompt"`
	// LastReply is the first line of the session's last agent message
	// with text (at most 120 characters; "" when there is none).
	LastReply string `json:"last_reply"`
	// MessageCount counts the entries of the stored transcript, every
	// role (at most the 1,000 most recent are kept).
	MessageCount int `json:"message_count"`
	// Match is, in a search (q), the text around what matched (at most
	// 160 characters, on one line); MatchField says where it is: name,
	// title (the task's), id (the session's or the task's, a prefix),
	// agent or transcript; MatchMessageID names the transcript message.
	Match          string `json:"match,omitempty"`
	MatchField     string `json:"match_field,omitempty"`
	MatchMessageID string `json:"match_message_id,omitempty"`
}

// Where a search matched (SessionItem.MatchField).
const (
	MatchName       = "name"
	MatchTitle      = "title"
	MatchID         = "id"
	MatchAgent      = "agent"
	MatchTranscript = "transcript"
)

// SessionPage is a page of GET /v1/sessions?q=&cursor=&limit=. NextCursor
// is empty on the last page; a page may hold fewer than limit items (even
// none) while NextCursor is set, when the search's work bound was reached.
type SessionPage struct {
	Sessions   []SessionItem `json:"sessions"`
	NextCursor string        `json:"next_cursor,omitempty"`
}
