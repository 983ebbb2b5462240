package state

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/api"
)

func (h *harness) put(source, id string, role api.Role, text string, history bool) {
	h.t.Helper()
	h.mustApply(CmdPutMessage, &PutMessageBody{SessionID: "s1", Source: source, History: history,
		Message: api.Message{ID: id, Role: role, Text: text, Complete: true}})
}

func (h *harness) setState(to api.SessionState, b SetSessionStateBody) {
	h.t.Helper()
	b.SessionID, b.State = "s1", to
	h.mustApply(CmdSetSessionState, &b)
}

func transcriptOf(store *Store) (ids, texts []string) {
	for _, m := range store.Messages("s1") {
		ids = append(ids, m.ID)
		texts = append(texts, string(m.Role)+":"+m.Text)
	}
	return ids, texts
}

// Two agentctl boots both number their messages from m1; the session keeps
// every message under its own id, and a resumed agent's replayed history is
// not recorded twice.
func TestTranscriptNumbersMessagesAcrossExecutions(t *testing.T) {
	h := newHarness(t)
	h.taskAndSession()
	h.put("boot1", "m1", api.RoleUser, "remember cats", false)
	h.put("boot1", "m2", api.RoleAgent, "ok, remembering", false)
	h.put("boot1", "m2", api.RoleAgent, "ok, remembering cats", false) // a streamed update
	// The next execution replays the conversation, then takes a new turn.
	h.put("boot2", "m1", api.RoleUser, "remember cats", true)
	h.put("boot2", "m2", api.RoleAgent, "ok, remembering cats", true)
	h.put("boot2", "m3", api.RoleUser, "recall", false)
	h.put("boot2", "m4", api.RoleAgent, "you asked me to remember: cats", false)
	// A new leader catching up with boot2 sends everything again.
	for i, text := range []string{"remember cats", "ok, remembering cats"} {
		h.put("boot2", []string{"m1", "m2"}[i], api.RoleUser, text, true)
	}
	h.put("boot2", "m4", api.RoleAgent, "you asked me to remember: cats", false)
	// A pty agent replays nothing; its agentctl starts again at m1.
	h.put("boot3", "m1", api.RoleUser, "hello", false)

	ids, texts := transcriptOf(h.store)
	wantIDs := []string{"m1", "m2", "m3", "m4", "m5"}
	wantTexts := []string{"user:remember cats", "agent:ok, remembering cats", "user:recall", "agent:you asked me to remember: cats", "user:hello"}
	if strings.Join(ids, " ") != strings.Join(wantIDs, " ") || strings.Join(texts, "|") != strings.Join(wantTexts, "|") {
		t.Fatalf("transcript\n ids   %v\n texts %q\nwant\n ids   %v\n texts %q", ids, texts, wantIDs, wantTexts)
	}
}

// A session created with the token of an existing conversation records the
// history its agent replays.
func TestTranscriptRecordsReplayedHistoryIntoAnEmptyTranscript(t *testing.T) {
	h := newHarness(t)
	h.taskAndSession()
	h.put("boot1", "m1", api.RoleUser, "earlier", true)
	h.put("boot1", "m2", api.RoleAgent, "turn 1: earlier", true)
	h.put("boot1", "m3", api.RoleUser, "now", false)
	if _, texts := transcriptOf(h.store); len(texts) != 3 {
		t.Fatalf("transcript %q, want the replayed history and the new turn", texts)
	}
}

// Ids keep growing past those written before the FSM numbered messages.
func TestTranscriptContinuesAfterUnsourcedIDs(t *testing.T) {
	h := newHarness(t)
	h.taskAndSession()
	h.put("", "m1", api.RoleUser, "old", false)
	h.put("", "m2", api.RoleAgent, "old reply", false)
	h.put("boot1", "m1", api.RoleUser, "new", false)
	if ids, _ := transcriptOf(h.store); strings.Join(ids, " ") != "m1 m2 m3" {
		t.Fatalf("ids %v, want m1 m2 m3", ids)
	}
}

// How a turn ends sets last_turn_outcome; a turn cut short by its agent's
// end, or failed, leaves a system message saying so and why.
func TestTurnOutcomes(t *testing.T) {
	cases := []struct {
		name   string
		end    api.SessionState
		body   SetSessionStateBody
		want   api.TurnOutcome
		system string // "" when no system message is expected
	}{
		{"completed", api.SessionWaitingForInput, SetSessionStateBody{TurnOutcome: api.TurnCompleted}, api.TurnCompleted, ""},
		{"cancelled", api.SessionWaitingForInput, SetSessionStateBody{TurnOutcome: api.TurnCancelled}, api.TurnCancelled, ""},
		{"failed", api.SessionWaitingForInput, SetSessionStateBody{TurnOutcome: api.TurnFailed, TurnError: "session/prompt: boom"}, api.TurnFailed, "This turn failed: session/prompt: boom."},
		{"agent died", api.SessionError, SetSessionStateBody{ErrorMessage: "the agent exited with code 137", Reason: api.ReasonAgentNotRunning}, api.TurnInterrupted, "This turn was interrupted: the agent exited with code 137."},
		{"stopped", api.SessionStopped, SetSessionStateBody{Reason: api.ReasonAgentNotRunning}, api.TurnInterrupted, "This turn was interrupted: the session was stopped."},
		{"resumed by recovery", api.SessionStarting, SetSessionStateBody{}, api.TurnInterrupted, "This turn was interrupted: the agent stopped and the session is being resumed."},
		{"prompt undone", api.SessionWaitingForInput, SetSessionStateBody{}, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			h.taskAndSession()
			h.setState(api.SessionStarting, SetSessionStateBody{})
			h.setState(api.SessionWaitingForInput, SetSessionStateBody{})
			if st := ComputeStatus(StatusInput{Session: mustSession(t, h.store)}); st.LastTurnOutcome != nil {
				t.Fatalf("last_turn_outcome before any turn: %v", *st.LastTurnOutcome)
			}
			h.setState(api.SessionRunning, SetSessionStateBody{})
			h.put("boot1", "m1", api.RoleUser, "a prompt", false)
			h.setState(c.end, c.body)
			st := ComputeStatus(StatusInput{Session: mustSession(t, h.store)})
			got := api.TurnOutcome("")
			if st.LastTurnOutcome != nil {
				got = *st.LastTurnOutcome
			}
			if got != c.want {
				t.Errorf("last_turn_outcome = %q, want %q", got, c.want)
			}
			msgs := h.store.Messages("s1")
			if msgs[0].Text != "a prompt" {
				t.Errorf("the user's message is gone: %+v", msgs)
			}
			switch {
			case c.system == "" && len(msgs) != 1:
				t.Errorf("messages %+v, want only the prompt", msgs)
			case c.system != "" && (len(msgs) != 2 || msgs[1].Role != api.RoleSystem || msgs[1].Text != c.system || msgs[1].ID != "m2" || !msgs[1].Complete):
				t.Errorf("messages %+v, want the prompt then system m2 %q", msgs, c.system)
			}
		})
	}
}

// A state change that ends no turn records no outcome: a session that stops
// while waiting for input keeps the last turn's.
func TestStopBetweenTurnsKeepsTheOutcome(t *testing.T) {
	h := newHarness(t)
	h.taskAndSession()
	h.setState(api.SessionStarting, SetSessionStateBody{})
	h.setState(api.SessionWaitingForInput, SetSessionStateBody{})
	h.setState(api.SessionRunning, SetSessionStateBody{})
	h.setState(api.SessionWaitingForInput, SetSessionStateBody{TurnOutcome: api.TurnCompleted})
	h.setState(api.SessionStopped, SetSessionStateBody{})
	if s := mustSession(t, h.store); s.LastTurnOutcome != api.TurnCompleted || len(h.store.Messages("s1")) != 0 {
		t.Fatalf("outcome %q, messages %+v", s.LastTurnOutcome, h.store.Messages("s1"))
	}
}

// The numbering survives a snapshot: a restored node gives the same ids.
func TestTranscriptSurvivesASnapshot(t *testing.T) {
	h := newHarness(t)
	h.taskAndSession()
	h.put("boot1", "m1", api.RoleUser, "one", false)
	snap, err := h.fsm.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	h2 := newHarness(t)
	if err := h2.fsm.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	h2.idx = h.idx
	h2.put("boot1", "m1", api.RoleUser, "one, edited", false)
	h2.put("boot1", "m2", api.RoleAgent, "two", false)
	if ids, texts := transcriptOf(h2.store); strings.Join(ids, " ") != "m1 m2" || texts[0] != "user:one, edited" {
		t.Fatalf("after restore: %v %q", ids, texts)
	}
}

func mustSession(t *testing.T, s *Store) api.Session {
	t.Helper()
	sess, ok := s.Session("s1")
	if !ok {
		t.Fatal("no session s1")
	}
	return sess
}

// A streamed message's additions are recorded after the text they follow;
// an addition to a message not recorded from that agentctl boot, or after
// more text than the message holds, is a conflict and changes nothing.
func TestAppendMessageAddsToAStreamedMessage(t *testing.T) {
	h := newHarness(t)
	h.taskAndSession()
	h.mustApply(CmdPutMessage, &PutMessageBody{SessionID: "s1", Source: "boot1", Message: api.Message{ID: "m1", Role: api.RoleAgent, Text: "chunk 1\n"}})
	add := func(source, id string, from int, text string, complete bool) *Result {
		t.Helper()
		return h.apply(CmdAppendMessage, "", &AppendMessageBody{SessionID: "s1", Source: source, MessageID: id, From: from, Text: text, Complete: complete})
	}
	if r := add("boot1", "m1", 8, "chunk 2\n", false); r.Err != nil {
		t.Fatal(r.Err)
	}
	// Written again from an earlier point (a write whose answer was lost):
	// the text after it is replaced, not doubled.
	if r := add("boot1", "m1", 8, "chunk 2\nchunk 3\n", false); r.Err != nil {
		t.Fatal(r.Err)
	}
	for _, bad := range []struct {
		source, id string
		from       int
	}{{"boot1", "m1", 100}, {"boot1", "m1", -1}, {"boot1", "m9", 0}, {"boot2", "m1", 8}, {"", "m1", 8}} {
		if r := add(bad.source, bad.id, bad.from, "lost\n", true); !errors.Is(r.Err, ErrConflict) {
			t.Errorf("addition %+v: %v, want a conflict", bad, r.Err)
		}
	}
	if r := add("boot1", "m1", 24, "streamed 3", true); r.Err != nil {
		t.Fatal(r.Err)
	}
	msgs := h.store.Messages("s1")
	if len(msgs) != 1 || msgs[0].Text != "chunk 1\nchunk 2\nchunk 3\nstreamed 3" || !msgs[0].Complete {
		t.Fatalf("messages %+v", msgs)
	}
	if h.apply(CmdAppendMessage, "", &AppendMessageBody{SessionID: "nope", Source: "boot1", MessageID: "m1"}).Err == nil {
		t.Error("an addition to a missing session was applied")
	}
}
