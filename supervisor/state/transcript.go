package state

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/paddockhq/paddock/api"
)

// A session's transcript outlives its agent executions: every execution runs
// under an agentctl that numbers its messages from m1 at each boot, and a
// resumed ACP agent replays the whole conversation before its first new turn.
// The FSM therefore gives each message its session id itself ("m" and a
// number that only grows within the session) and keeps, for the agentctl
// boot that feeds the session now, which session message each agentctl id
// became, so that streamed updates land on the right message. Replayed
// history is recorded only into a transcript that does not hold the
// conversation yet (a session created with the resume token of an existing
// conversation).

// transcript is a session's message numbering.
type transcript struct {
	// Seq is the number of the last message id given ("m<Seq>").
	Seq uint64 `json:"seq"`
	// Source is the agentctl boot whose ids Keys maps.
	Source string `json:"source,omitempty"`
	// History is set when Source's replayed history is being recorded (it
	// arrived into an empty transcript).
	History bool `json:"history,omitempty"`
	// Keys maps Source's message ids to the session's.
	Keys map[string]string `json:"keys,omitempty"`
}

func (t *transcript) clone() *transcript {
	c := *t
	c.Keys = copyMap(t.Keys)
	return &c
}

// transcriptOf returns a session's numbering, created on first use with Seq
// past every id the session already has (ids written before the FSM
// numbered messages were agentctl's own "m<N>").
func (d *data) transcriptOf(sessionID string) *transcript {
	if t, ok := d.Transcripts[sessionID]; ok {
		return t
	}
	t := &transcript{}
	for _, m := range d.Messages[sessionID] {
		t.Seq = max(t.Seq, messageNumber(m.ID))
	}
	d.Transcripts[sessionID] = t
	return t
}

// messageNumber is N of an id "mN", else 0.
func messageNumber(id string) uint64 {
	n, err := strconv.ParseUint(strings.TrimPrefix(id, "m"), 10, 64)
	if err != nil || !strings.HasPrefix(id, "m") {
		return 0
	}
	return n
}

// newMessageID returns the session's next message id, never one it holds.
func (d *data) newMessageID(sessionID string) string {
	t := d.transcriptOf(sessionID)
	for {
		t.Seq++
		id := "m" + strconv.FormatUint(t.Seq, 10)
		if findMessage(d.Messages[sessionID], id) == nil {
			return id
		}
	}
}

func findMessage(msgs []*api.Message, id string) *api.Message {
	for _, m := range msgs {
		if m.ID == id {
			return m
		}
	}
	return nil
}

// appendMessage adds a message to a session, dropping the oldest beyond
// MaxMessagesPerSession, and returns its message.added event.
func (d *data) appendMessage(s *api.Session, m *api.Message, idx uint64) api.Event {
	msgs := append(d.Messages[s.ID], m)
	if len(msgs) > MaxMessagesPerSession {
		msgs = msgs[len(msgs)-MaxMessagesPerSession:]
		if t := d.Transcripts[s.ID]; t != nil && len(t.Keys) > MaxMessagesPerSession {
			// Forget the keys of dropped messages (amortised: only once
			// the map has outgrown the transcript).
			for k, id := range t.Keys {
				if findMessage(msgs, id) == nil {
					delete(t.Keys, k)
				}
			}
		}
	}
	d.Messages[s.ID] = msgs
	return sessionEvent(s, api.EventMessageAdded, idx, map[string]any{"message": *m})
}

// putSourcedMessage records a message numbered by an agentctl boot
// (PutMessageBody.Source) under the session's own id.
func putSourcedMessage(d *data, s *api.Session, b *PutMessageBody, idx uint64, now time.Time) []api.Event {
	t := d.transcriptOf(s.ID)
	if b.Source != t.Source {
		if b.History && len(d.Messages[s.ID]) > 0 {
			return nil // the transcript already holds the replayed conversation
		}
		t.Source, t.History, t.Keys = b.Source, b.History, map[string]string{}
	}
	id, known := t.Keys[b.Message.ID]
	if !known && b.History && !t.History {
		return nil // replayed history of an execution whose history was not wanted
	}
	s.LastActivityAt = now
	if m := findMessage(d.Messages[s.ID], id); known && m != nil {
		m.Text, m.Complete, m.UpdatedAt = b.Message.Text, b.Message.Complete, now
		m.ToolCall, m.Plan = b.Message.ToolCall, b.Message.Plan
		return []api.Event{sessionEvent(s, api.EventMessageUpdated, idx, map[string]any{"message": *m})}
	}
	id = d.newMessageID(s.ID)
	t.Keys[b.Message.ID] = id
	m := &api.Message{ID: id, Role: b.Message.Role, Text: b.Message.Text, Complete: b.Message.Complete, CreatedAt: now, UpdatedAt: now,
		ToolCall: b.Message.ToolCall, Plan: b.Message.Plan}
	return []api.Event{d.appendMessage(s, m, idx)}
}

// CmdAppendMessage adds to the text of a message agentctl streams
// (AppendMessageBody).
const CmdAppendMessage CommandType = 18

func init() { register(CmdAppendMessage, newBody[AppendMessageBody], applyAppendMessage) }

// applyAppendMessage records the text a streamed message added (see
// AppendMessageBody).
func applyAppendMessage(d *data, idx uint64, now time.Time, body any) ([]api.Event, uint64, error) {
	b := body.(*AppendMessageBody)
	s, ok := d.Sessions[b.SessionID]
	if !ok {
		return nil, 0, notFound("session", b.SessionID)
	}
	var m *api.Message
	if t := d.Transcripts[s.ID]; t != nil && b.Source != "" && t.Source == b.Source {
		if id, known := t.Keys[b.MessageID]; known {
			m = findMessage(d.Messages[s.ID], id)
		}
	}
	if m == nil {
		return nil, 0, conflictf("message %s of agentctl %s is not recorded in session %s", b.MessageID, b.Source, s.ID)
	}
	if b.From < 0 || b.From > len(m.Text) {
		return nil, 0, conflictf("message %s holds %d bytes of text, not the %d the addition follows", m.ID, len(m.Text), b.From)
	}
	d.appendText(s.ID, m, b.From, b.Text)
	m.Complete, m.UpdatedAt = b.Complete, now
	if b.Complete {
		d.endStream(s.ID)
	}
	s.LastActivityAt = now
	ev := sessionEvent(s, api.EventMessageUpdated, idx, map[string]any{"message": *m})
	// What the addition changed, for subscribers that take deltas (the
	// text is now the text before it cut to From, then Text).
	ev.Delta = &api.MessageDelta{ID: m.ID, From: b.From, Text: b.Text, Complete: m.Complete, UpdatedAt: now}
	return []api.Event{ev}, 0, nil
}

// streamText is the text of the message a session's agent streams now,
// grown in place: each addition is appended to one buffer that doubles as
// it fills, where building text[:from]+addition copied the whole text so
// far on every write (quadratic in a reply's length, on every node, and as
// much garbage: with the event ring holding each version, a 10 KB reply
// kept ~1.5 MB alive). A strings.Builder never changes bytes a string it
// returned holds, so every earlier version of the text (in an event, a
// snapshot, a reader's copy) stays as it was.
type streamText struct {
	msg  *api.Message
	buf  *strings.Builder
	text string // what msg.Text was set to from buf
}

// appendText sets m's text to its first from bytes and add after them.
func (d *data) appendText(sessionID string, m *api.Message, from int, add string) {
	st := d.streams[sessionID]
	// m.Text == st.text compares pointers first: O(1) while nothing else
	// replaced the text.
	if st == nil || st.msg != m || from != len(m.Text) || m.Text != st.text {
		st = &streamText{msg: m, buf: &strings.Builder{}}
		st.buf.Grow(max(2*(from+len(add)), 1024))
		st.buf.WriteString(m.Text[:from])
		if d.streams == nil {
			d.streams = map[string]*streamText{}
		}
		d.streams[sessionID] = st
	}
	st.buf.WriteString(add)
	st.text = st.buf.String()
	m.Text = st.text
}

// endStream forgets a session's streamed text buffer (its message is
// complete, or the session is gone); the message keeps its text, copied
// to its size when the buffer's spare room is large.
func (d *data) endStream(sessionID string) {
	st := d.streams[sessionID]
	if st == nil {
		return
	}
	delete(d.streams, sessionID)
	if st.msg.Text == st.text && st.buf.Cap() > len(st.text)+len(st.text)/4 {
		st.msg.Text = strings.Clone(st.text)
	}
}

// endTurn records how a turn ended when a state change ends one: the
// outcome the change carries, or interrupted when a running turn's session
// leaves RUNNING for ERROR, STOPPED or STARTING (its agent is gone). An
// interrupted or failed turn gets a system message saying so and why.
func endTurn(d *data, s *api.Session, from api.SessionState, b *SetSessionStateBody, idx uint64, now time.Time) []api.Event {
	outcome, why := b.TurnOutcome, b.TurnError
	if outcome == "" && from == api.SessionRunning {
		switch b.State {
		case api.SessionError:
			outcome, why = api.TurnInterrupted, b.ErrorMessage
		case api.SessionStopped:
			outcome, why = api.TurnInterrupted, "the session was stopped"
		case api.SessionStarting:
			outcome, why = api.TurnInterrupted, "the agent stopped and the session is being resumed"
		}
	}
	if outcome == "" {
		return nil
	}
	s.LastTurnOutcome = outcome
	var text string
	switch outcome {
	case api.TurnInterrupted:
		text = "This turn was interrupted"
	case api.TurnFailed:
		text = "This turn failed"
	default:
		return nil
	}
	if why = strings.TrimSuffix(strings.TrimSpace(why), "."); why != "" {
		text = fmt.Sprintf("%s: %s.", text, why)
	} else {
		text += "."
	}
	m := &api.Message{ID: d.newMessageID(s.ID), Role: api.RoleSystem, Text: text, Complete: true, CreatedAt: now, UpdatedAt: now}
	return []api.Event{d.appendMessage(s, m, idx)}
}

// Recorded reports whether the sourced message b would change nothing but
// timestamps: its agentctl boot (Source) and message are the transcript's,
// recorded with b's role, text and completeness. A recovery that mirrors
// the messages a continued agentctl kept skips those (each would be one
// more commit on the session's path).
func (s *Store) Recorded(b *PutMessageBody) bool {
	if b.Source == "" {
		return false
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	t := s.d.Transcripts[b.SessionID]
	if t == nil || t.Source != b.Source {
		return false
	}
	id, ok := t.Keys[b.Message.ID]
	if !ok {
		return false
	}
	m := findMessage(s.d.Messages[b.SessionID], id)
	return m != nil && m.Role == b.Message.Role && m.Text == b.Message.Text && m.Complete == b.Message.Complete &&
		reflect.DeepEqual(m.ToolCall, b.Message.ToolCall) && reflect.DeepEqual(m.Plan, b.Message.Plan)
}
