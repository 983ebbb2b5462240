package state

import (
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/paddockhq/paddock/api"
)

// A session's meta is what a person says of it to find it again: a name,
// and whether it is pinned. Neither is activity: setting them leaves
// last_activity_at (the order of lists) as it is.

// MaxSessionNameLen bounds a session's name, in characters.
const MaxSessionNameLen = 200

// EventMetaChanged: a session was renamed or (un)pinned.
const EventMetaChanged = api.EventMetaChanged

// SetSessionMetaBody renames and/or (un)pins a session; a nil field is
// left as it is. An empty Name clears the name.
type SetSessionMetaBody struct {
	SessionID string  `json:"session_id"`
	Name      *string `json:"name,omitempty"`
	Pinned    *bool   `json:"pinned,omitempty"`
}

// CheckSessionName refuses a name longer than MaxSessionNameLen
// characters, not UTF-8, or holding a control character (a newline, a
// tab, an escape).
func CheckSessionName(name string) error {
	if !utf8.ValidString(name) {
		return invalidf("a session name must be UTF-8 text")
	}
	if n := utf8.RuneCountInString(name); n > MaxSessionNameLen {
		return invalidf("a session name is at most %d characters, not %d", MaxSessionNameLen, n)
	}
	for _, r := range name {
		if unicode.IsControl(r) {
			return invalidf("a session name cannot hold control characters (%U)", r)
		}
	}
	return nil
}

// CmdSetSessionMeta renames or (un)pins a session (SetSessionMetaBody). An
// older node may skip it: it has nowhere to keep a name or a pin.
const CmdSetSessionMeta CommandType = IgnoreUnknownFlag | 22

func init() { register(CmdSetSessionMeta, newBody[SetSessionMetaBody], applySetSessionMeta) }

// applySetSessionMeta sets a session's name and pin. A change publishes
// session.meta_changed and moves updated_at, never last_activity_at; a
// command that changes nothing publishes nothing.
func applySetSessionMeta(d *data, idx uint64, now time.Time, body any) ([]api.Event, uint64, error) {
	b := body.(*SetSessionMetaBody)
	s, ok := d.Sessions[b.SessionID]
	if !ok {
		return nil, 0, notFound("session", b.SessionID)
	}
	if b.Name == nil && b.Pinned == nil {
		return nil, 0, invalidf("set_session_meta changes neither the name nor the pin")
	}
	if b.Name != nil {
		if err := CheckSessionName(*b.Name); err != nil {
			return nil, 0, err
		}
	}
	changed := false
	if b.Name != nil && *b.Name != s.Name {
		s.Name, changed = *b.Name, true
	}
	if b.Pinned != nil && *b.Pinned != s.Pinned {
		s.Pinned, changed = *b.Pinned, true
	}
	if !changed {
		return nil, 0, nil
	}
	s.UpdatedAt = now
	return []api.Event{sessionEvent(s, EventMetaChanged, idx, map[string]any{"name": s.Name, "pinned": s.Pinned})}, 0, nil
}
