package state

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/paddockhq/paddock/api"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

type harness struct {
	t     testing.TB
	fsm   *FSM
	store *Store
	idx   uint64
}

func newHarness(t *testing.T) *harness {
	s := NewStore()
	return &harness{t: t, fsm: NewFSM(s), store: s}
}

func (h *harness) apply(typ CommandType, key string, body any) *Result {
	h.t.Helper()
	buf, err := Command{Type: typ, Key: key, Now: t0.Add(time.Duration(h.idx) * time.Second), Body: body}.Encode()
	if err != nil {
		h.t.Fatal(err)
	}
	h.idx++
	return h.fsm.Apply(&raft.Log{Index: h.idx, Type: raft.LogCommand, Data: buf}).(*Result)
}

func (h *harness) mustApply(typ CommandType, body any) *Result {
	h.t.Helper()
	r := h.apply(typ, "", body)
	if r.Err != nil {
		h.t.Fatalf("apply %d: %v", typ, r.Err)
	}
	return r
}

func (h *harness) taskAndSession() {
	h.mustApply(CmdCreateTask, &CreateTaskBody{Task: api.Task{ID: "t1", Title: "x"}})
	h.mustApply(CmdCreateSession, &CreateSessionBody{Session: api.Session{ID: "s1", TaskID: "t1", Agent: "demo", Runtime: "standalone"}})
}

func TestSessionTransitions(t *testing.T) {
	cases := []struct {
		path []api.SessionState
		ok   bool
	}{
		{[]api.SessionState{api.SessionStarting, api.SessionWaitingForInput, api.SessionRunning, api.SessionWaitingForInput, api.SessionStopped, api.SessionStarting}, true},
		{[]api.SessionState{api.SessionStarting, api.SessionError, api.SessionStarting, api.SessionWaitingForInput}, true},
		{[]api.SessionState{api.SessionRunning}, false},         // CREATED → RUNNING skips STARTING
		{[]api.SessionState{api.SessionWaitingForInput}, false}, // CREATED → WAITING
		{[]api.SessionState{api.SessionStarting, api.SessionWaitingForInput, api.SessionStopped, api.SessionRunning}, false},
		{[]api.SessionState{api.SessionCompleted, api.SessionStarting}, false}, // COMPLETED is final
	}
	for _, c := range cases {
		h := newHarness(t)
		h.taskAndSession()
		var err error
		for _, to := range c.path {
			if to == api.SessionCompleted {
				err = h.apply(CmdDeleteSession, "", &DeleteSessionBody{SessionID: "s1"}).Err
			} else {
				err = h.apply(CmdSetSessionState, "", &SetSessionStateBody{SessionID: "s1", State: to}).Err
			}
			if err != nil {
				break
			}
		}
		if (err == nil) != c.ok {
			t.Errorf("path %v: err=%v, want ok=%v", c.path, err, c.ok)
		}
		if err != nil && !errors.Is(err, ErrConflict) {
			t.Errorf("path %v: err=%v, want ErrConflict", c.path, err)
		}
	}
}

// A stop on record stays through the session's moves while it is being
// stopped, ends when it stops (or fails), and cannot be recorded for a
// session that is not starting or running.
func TestStopRequestedLastsUntilTheSessionStops(t *testing.T) {
	h := newHarness(t)
	h.taskAndSession()
	requested := func() bool { s, _ := h.store.Session("s1"); return s.StopRequested }
	h.mustApply(CmdSetSessionState, &SetSessionStateBody{SessionID: "s1", State: api.SessionStarting})
	h.mustApply(CmdRequestStop, &RequestStopBody{SessionID: "s1"})
	h.mustApply(CmdSetSessionState, &SetSessionStateBody{SessionID: "s1", State: api.SessionWaitingForInput})
	if !requested() {
		t.Fatal("the stop request did not outlast the move to WAITING_FOR_INPUT")
	}
	h.mustApply(CmdSetSessionState, &SetSessionStateBody{SessionID: "s1", State: api.SessionStopped})
	if requested() {
		t.Fatal("STOPPED kept the stop request")
	}
	if err := h.apply(CmdRequestStop, "", &RequestStopBody{SessionID: "s1"}).Err; !errors.Is(err, ErrConflict) {
		t.Fatalf("a stop request for a STOPPED session: %v, want a conflict", err)
	}
	h.mustApply(CmdSetSessionState, &SetSessionStateBody{SessionID: "s1", State: api.SessionStarting})
	h.mustApply(CmdRequestStop, &RequestStopBody{SessionID: "s1"})
	h.mustApply(CmdSetSessionState, &SetSessionStateBody{SessionID: "s1", State: api.SessionError, ErrorMessage: "x"})
	if requested() {
		t.Fatal("ERROR kept the stop request")
	}
	if err := h.apply(CmdRequestStop, "", &RequestStopBody{SessionID: "nope"}).Err; !errors.Is(err, ErrNotFound) {
		t.Fatalf("a stop request for no session: %v, want not found", err)
	}
}

func TestTaskStateFollowsSessions(t *testing.T) {
	h := newHarness(t)
	h.taskAndSession()
	step := func(to api.SessionState, want api.TaskState) {
		t.Helper()
		h.mustApply(CmdSetSessionState, &SetSessionStateBody{SessionID: "s1", State: to})
		if task, _ := h.store.Task("t1"); task.State != want {
			t.Fatalf("after session %s: task %s, want %s", to, task.State, want)
		}
	}
	step(api.SessionStarting, api.TaskInProgress)
	step(api.SessionWaitingForInput, api.TaskReview)
	step(api.SessionRunning, api.TaskInProgress)
	step(api.SessionWaitingForInput, api.TaskReview)
}

func TestIdempotentRetry(t *testing.T) {
	h := newHarness(t)
	h.mustApply(CmdCreateTask, &CreateTaskBody{Task: api.Task{ID: "t1"}})
	first := h.apply(CmdCreateSession, "key-1", &CreateSessionBody{Session: api.Session{ID: "s1", TaskID: "t1"}})
	again := h.apply(CmdCreateSession, "key-1", &CreateSessionBody{Session: api.Session{ID: "s1", TaskID: "t1"}})
	if first.Err != nil || again.Err != nil {
		t.Fatalf("errors: %v, %v", first.Err, again.Err)
	}
	if !again.Duplicate || again.Index != first.Index {
		t.Fatalf("retry = %+v, want duplicate of index %d", again, first.Index)
	}
	// A failed command's retry returns the same error kind.
	bad := h.apply(CmdSetSessionState, "key-2", &SetSessionStateBody{SessionID: "nope", State: api.SessionStarting})
	badAgain := h.apply(CmdSetSessionState, "key-2", &SetSessionStateBody{SessionID: "nope", State: api.SessionStarting})
	if !errors.Is(bad.Err, ErrNotFound) || !errors.Is(badAgain.Err, ErrNotFound) {
		t.Fatalf("errors %v / %v, want ErrNotFound both times", bad.Err, badAgain.Err)
	}
	if n := len(h.store.Sessions(SessionFilter{})); n != 1 {
		t.Fatalf("%d sessions, want 1", n)
	}
}

func TestUnknownCommandPanicsUnlessIgnorable(t *testing.T) {
	h := newHarness(t)
	ignorable := []byte{byte(IgnoreUnknownFlag | 0x33), bodyVersion, '{', '}'}
	if r := h.fsm.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: ignorable}).(*Result); r.Err != nil {
		t.Fatalf("ignorable unknown command: %v", r.Err)
	}
	for name, data := range map[string][]byte{
		"unknown type": {0x33, bodyVersion, '{', '}'},
		"bad version":  {byte(CmdCreateTask), 9, '{', '}'},
		"bad json":     {byte(CmdCreateTask), bodyVersion, '{'},
		"short":        {byte(CmdCreateTask)},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: Apply did not panic", name)
				}
			}()
			h.fsm.Apply(&raft.Log{Index: 2, Type: raft.LogCommand, Data: data})
		}()
	}
}

func TestSnapshotRestoreKeepsEverything(t *testing.T) {
	h := newHarness(t)
	h.taskAndSession()
	h.mustApply(CmdSetResumeToken, &SetResumeTokenBody{SessionID: "s1", ResumeToken: "tok-1"})
	h.mustApply(CmdPutExecutor, NewPutExecutor(api.Executor{ID: "e1", SessionID: "s1", Status: api.ExecutorReady, Secret: "sekrit", Handle: []byte("h")}))
	h.mustApply(CmdPutMessage, &PutMessageBody{SessionID: "s1", Message: api.Message{ID: "m1", Role: api.RoleAgent, Text: "hi"}})
	claim := h.mustApply(CmdClaimLease, &ClaimLeaseBody{SessionID: "s1", ExecutorID: "e1", Nonce: "n", TTL: time.Second})
	h.apply(CmdCreateTask, "dedupe-key", &CreateTaskBody{Task: api.Task{ID: "t2"}})

	snap, err := h.fsm.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	other := newHarness(t)
	if err := other.fsm.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	s, _ := other.store.Session("s1")
	e, _ := other.store.Executor("e1")
	l, _ := other.store.Lease("s1")
	if s.ResumeToken != "tok-1" || !s.HasResumeToken || s.ExecutorID != "e1" {
		t.Errorf("session after restore: %+v", s)
	}
	if e.Secret != "sekrit" || string(e.Handle) != "h" {
		t.Errorf("executor private fields lost: %+v", e)
	}
	if l.FencingToken != claim.FencingToken || l.State != api.LeaseHeld {
		t.Errorf("lease after restore: %+v", l)
	}
	if m := other.store.Messages("s1"); len(m) != 1 || m[0].Text != "hi" {
		t.Errorf("messages after restore: %+v", m)
	}
	if _, ok := other.store.Outcome("dedupe-key"); !ok {
		t.Error("idempotency keys lost in snapshot")
	}
	if other.store.LastIndex() != h.store.LastIndex() {
		t.Errorf("last index %d, want %d", other.store.LastIndex(), h.store.LastIndex())
	}
}

func TestRestoreRejectsGarbage(t *testing.T) {
	h := newHarness(t)
	h.taskAndSession()
	for _, bad := range []string{"", "not json", `{"tasks":[1,2]}`, `{"unknown_field":1}`} {
		if err := h.fsm.Restore(io.NopCloser(bytes.NewBufferString(bad))); err == nil {
			t.Errorf("restore of %q succeeded", bad)
		}
		if _, ok := h.store.Session("s1"); !ok {
			t.Fatalf("restore of %q lost existing state", bad)
		}
	}
}

func TestLeaseFencing(t *testing.T) {
	h := newHarness(t)
	h.taskAndSession()
	a := h.mustApply(CmdClaimLease, &ClaimLeaseBody{SessionID: "s1", ExecutorID: "e1", Nonce: "n1", TTL: time.Second})
	if r := h.apply(CmdClaimLease, "", &ClaimLeaseBody{SessionID: "s1", ExecutorID: "e2", Nonce: "n2", TTL: time.Second}); !errors.Is(r.Err, ErrConflict) {
		t.Fatalf("second holder claim: %v, want conflict", r.Err)
	}
	if r := h.apply(CmdReclaimLease, "", &ReleaseLeaseBody{SessionID: "s1", FencingToken: a.FencingToken + 1}); !errors.Is(r.Err, ErrConflict) {
		t.Fatalf("reclaim with wrong token: %v, want conflict", r.Err)
	}
	h.mustApply(CmdReclaimLease, &ReleaseLeaseBody{SessionID: "s1", FencingToken: a.FencingToken})
	b := h.mustApply(CmdClaimLease, &ClaimLeaseBody{SessionID: "s1", ExecutorID: "e2", Nonce: "n2", TTL: time.Second})
	if b.FencingToken <= a.FencingToken {
		t.Fatalf("token went from %d to %d, want strictly higher", a.FencingToken, b.FencingToken)
	}
}

func TestMessagesUpsertAndBound(t *testing.T) {
	h := newHarness(t)
	h.taskAndSession()
	sub := h.store.Subscribe(EventFilter{SessionID: "s1"}, 0)
	defer sub.Close()
	h.mustApply(CmdPutMessage, &PutMessageBody{SessionID: "s1", Message: api.Message{ID: "m1", Role: api.RoleAgent, Text: "he"}})
	h.mustApply(CmdPutMessage, &PutMessageBody{SessionID: "s1", Message: api.Message{ID: "m1", Role: api.RoleAgent, Text: "hello", Complete: true}})
	if got := []string{(<-sub.C).Type, (<-sub.C).Type}; got[0] != api.EventMessageAdded || got[1] != api.EventMessageUpdated {
		t.Fatalf("events %v", got)
	}
	msgs := h.store.Messages("s1")
	if len(msgs) != 1 || msgs[0].Text != "hello" || !msgs[0].Complete {
		t.Fatalf("messages %+v", msgs)
	}
	for i := 0; i < MaxMessagesPerSession+5; i++ {
		h.mustApply(CmdPutMessage, &PutMessageBody{SessionID: "s1", Message: api.Message{ID: string(rune('a'+i%26)) + time.Duration(i).String(), Role: api.RoleUser}})
	}
	if n := len(h.store.Messages("s1")); n != MaxMessagesPerSession {
		t.Fatalf("%d messages kept, want %d", n, MaxMessagesPerSession)
	}
}

func TestEventsFilteredAndReplayedSince(t *testing.T) {
	h := newHarness(t)
	h.taskAndSession()
	h.mustApply(CmdCreateSession, &CreateSessionBody{Session: api.Session{ID: "s2", TaskID: "t1"}})
	mark := h.store.LastIndex()
	h.mustApply(CmdSetSessionState, &SetSessionStateBody{SessionID: "s1", State: api.SessionStarting})
	h.mustApply(CmdSetSessionState, &SetSessionStateBody{SessionID: "s2", State: api.SessionStarting})

	sub := h.store.Subscribe(EventFilter{SessionID: "s1"}, mark)
	defer sub.Close()
	e := <-sub.C
	if e.SessionID != "s1" || e.Index <= mark || e.Data["to"] != string(api.SessionStarting) {
		t.Fatalf("replayed event %+v", e)
	}
	h.mustApply(CmdSetSessionState, &SetSessionStateBody{SessionID: "s2", State: api.SessionWaitingForInput})
	h.mustApply(CmdSetSessionState, &SetSessionStateBody{SessionID: "s1", State: api.SessionWaitingForInput})
	if e := <-sub.C; e.SessionID != "s1" || e.Data["to"] != string(api.SessionWaitingForInput) {
		t.Fatalf("live event %+v leaked or wrong", e)
	}
}

func TestComputeStatus(t *testing.T) {
	yes, no := true, false
	base := api.Session{ID: "s1", TaskID: "t1", Agent: "demo", Runtime: "standalone", State: api.SessionStopped}
	withToken := base
	withToken.HasResumeToken = true
	lost := &api.Executor{Status: api.ExecutorError}
	cases := []struct {
		name       string
		in         StatusInput
		reason     string
		resumable  bool
		needResume bool
	}{
		{"running", StatusInput{Session: withToken, AgentRunning: true, SupportsResume: &yes}, "", true, false},
		{"not resumable wins", StatusInput{Session: withToken, SupportsResume: &no, Executor: lost}, api.ReasonNotResumable, false, false},
		{"no token", StatusInput{Session: base, SupportsResume: &yes}, api.ReasonMissingResumeToken, false, false},
		{"executor lost", StatusInput{Session: withToken, SupportsResume: &yes, Executor: lost}, api.ReasonExecutorLost, true, true},
		{"stopped", StatusInput{Session: withToken, SupportsResume: &yes}, api.ReasonAgentNotRunning, true, true},
		{"starting new", StatusInput{Session: starting(base), SupportsResume: &yes}, api.ReasonMissingResumeToken, false, false},
		{"created", StatusInput{Session: created(base)}, api.ReasonMissingResumeToken, false, false},
		{"starting resume", StatusInput{Session: starting(withToken), SupportsResume: &yes}, api.ReasonAgentNotRunning, true, true},
		{"workspace missing", StatusInput{Session: withToken, SupportsResume: &yes, WorkspaceMissing: "/w/s1/workspace"}, api.ReasonWorkspaceMissing, false, false},
		{"workspace missing wins", StatusInput{Session: withToken, SupportsResume: &no, Executor: lost, WorkspaceMissing: "/w/s1/workspace"}, api.ReasonWorkspaceMissing, false, false},
	}
	for _, c := range cases {
		st := ComputeStatus(c.in)
		got := ""
		if st.ResumeReason != nil {
			got = *st.ResumeReason
			if st.ResumeMessage == nil || *st.ResumeMessage == "" {
				t.Errorf("%s: reason without message", c.name)
			}
		}
		if got != c.reason || st.IsResumable != c.resumable || st.NeedsResume != c.needResume {
			t.Errorf("%s: reason %q resumable %v needs %v; want %q %v %v", c.name, got, st.IsResumable, st.NeedsResume, c.reason, c.resumable, c.needResume)
		}
		if got == api.ReasonWorkspaceMissing && !strings.Contains(*st.ResumeMessage, c.in.WorkspaceMissing) {
			t.Errorf("%s: message %q does not name the workspace %s", c.name, *st.ResumeMessage, c.in.WorkspaceMissing)
		}
		if st.ResumeMessage != nil && (st.State == api.SessionStarting || st.State == api.SessionCreated) && *st.ResumeMessage != startingMessage {
			t.Errorf("%s: a starting session's message %q asks for something", c.name, *st.ResumeMessage)
		}
	}
}

func starting(s api.Session) api.Session { s.State = api.SessionStarting; return s }
func created(s api.Session) api.Session  { s.State = api.SessionCreated; return s }

func FuzzDecodeCommand(f *testing.F) {
	good, _ := Command{Type: CmdCreateTask, Key: "k", Now: t0, Body: &CreateTaskBody{Task: api.Task{ID: "t"}}}.Encode()
	f.Add(good)
	f.Add([]byte{0x80 | 5, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		cmd, ok, err := DecodeCommand(data)
		if err == nil && ok && bodyFor(cmd.Type) == nil {
			t.Fatalf("decoded unknown type %d", cmd.Type)
		}
	})
}

type memSink struct{ bytes.Buffer }

func (m *memSink) ID() string    { return "mem" }
func (m *memSink) Cancel() error { return nil }
func (m *memSink) Close() error  { return nil }

// HeldLeases lists the held leases, each naming its session, and leaves
// out one released or reclaimed.
func TestHeldLeasesListsOnlyHeldOnes(t *testing.T) {
	h := newHarness(t)
	h.taskAndSession()
	h.mustApply(CmdCreateSession, &CreateSessionBody{Session: api.Session{ID: "s2", TaskID: "t1", Agent: "demo", Runtime: "standalone"}})
	h.mustApply(CmdCreateSession, &CreateSessionBody{Session: api.Session{ID: "s3", TaskID: "t1", Agent: "demo", Runtime: "standalone"}})
	a := h.mustApply(CmdClaimLease, &ClaimLeaseBody{SessionID: "s1", ExecutorID: "e1", Nonce: "n1", TTL: time.Second})
	b := h.mustApply(CmdClaimLease, &ClaimLeaseBody{SessionID: "s2", ExecutorID: "e2", Nonce: "n2", TTL: time.Second})
	h.mustApply(CmdReleaseLease, &ReleaseLeaseBody{SessionID: "s2", FencingToken: b.FencingToken})
	got := h.store.HeldLeases()
	if len(got) != 1 || got[0].SessionID != "s1" || got[0].HolderNonce != "n1" || got[0].FencingToken != a.FencingToken {
		t.Fatalf("held leases %+v, want only s1's (token %d)", got, a.FencingToken)
	}
}

// BenchmarkHeldLeases is the lease keeper's scan of 1,000 held leases
// (five times a second on a leader); BenchmarkSessionsThenLeases is the
// scan it replaced, every session copied and sorted, then its lease read.
func BenchmarkHeldLeases(b *testing.B) {
	h := leasedSessions(b, 1000)
	b.ResetTimer()
	for b.Loop() {
		if len(h.store.HeldLeases()) != 1000 {
			b.Fatal("leases missing")
		}
	}
}

func BenchmarkSessionsThenLeases(b *testing.B) {
	h := leasedSessions(b, 1000)
	b.ResetTimer()
	for b.Loop() {
		n := 0
		for _, s := range h.store.Sessions(SessionFilter{}) {
			if l, ok := h.store.Lease(s.ID); ok && l.State == api.LeaseHeld {
				n++
			}
		}
		if n != 1000 {
			b.Fatal("leases missing")
		}
	}
}

// leasedSessions is a store with n sessions, each holding a lease.
func leasedSessions(b *testing.B, n int) *harness {
	h := &harness{t: b, store: NewStore()}
	h.fsm = NewFSM(h.store)
	h.taskAndSession()
	h.mustApply(CmdClaimLease, &ClaimLeaseBody{SessionID: "s1", ExecutorID: "e", Nonce: "n", TTL: time.Minute})
	for i := 2; i <= n; i++ {
		id := fmt.Sprintf("s%d", i)
		h.mustApply(CmdCreateSession, &CreateSessionBody{Session: api.Session{ID: id, TaskID: "t1", Agent: "demo", Runtime: "standalone"}})
		h.mustApply(CmdClaimLease, &ClaimLeaseBody{SessionID: id, ExecutorID: "e" + id, Nonce: "n" + id, TTL: time.Minute})
	}
	if len(h.store.HeldLeases()) != n {
		b.Fatalf("%d sessions with leases set up, want %d", len(h.store.HeldLeases()), n)
	}
	return h
}
