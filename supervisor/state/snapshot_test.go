package state

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/paddockhq/paddock/api"
)

// encodedWithEncodingJSON is a snapshot as Persist wrote it before it had
// its own encoder: the oracle Persist must match byte for byte.
func encodedWithEncodingJSON(t testing.TB, s *Store) []byte {
	t.Helper()
	var buf bytes.Buffer
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := json.NewEncoder(&buf).Encode(s.d); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func persisted(t testing.TB, f *FSM) []byte {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	return sink.Bytes()
}

func TestSnapshotIsWhatEncodingJSONWrites(t *testing.T) {
	h := newHarness(t)
	same := func(what string) {
		t.Helper()
		got, want := persisted(t, h.fsm), encodedWithEncodingJSON(t, h.store)
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: snapshot differs from encoding/json's\n got: %.600s\nwant: %.600s", what, got, want)
		}
	}
	same("empty state") // its transcripts (omitempty) left out

	// Titles and paths encoding/json escapes go through it; the rest
	// through the task codec.
	titles := []string{"plain", "quote \" and \\ backslash", "<b>&amp;</b>", "naïve ☃", "tab\tnewline\n", "\u2028\u2029", "bad \xff utf-8", ""}
	for i, title := range titles {
		h.mustApply(CmdCreateTask, &CreateTaskBody{Task: api.Task{ID: fmt.Sprintf("t%02d", i), Title: title,
			Workspace: api.Workspace{Path: "/srv/repo " + title, Branch: "b"}}})
	}
	h.mustApply(CmdCreateTask, &CreateTaskBody{Task: api.Task{ID: "é<key>", Title: "a key encoding/json escapes"}})
	h.taskAndSession()
	h.mustApply(CmdSetResumeToken, &SetResumeTokenBody{SessionID: "s1", ResumeToken: "tok-1"})
	h.mustApply(CmdPutExecutor, NewPutExecutor(api.Executor{ID: "e1", SessionID: "s1", Status: api.ExecutorReady, Secret: "sekrit", Handle: []byte("h")}))
	h.mustApply(CmdPutMessage, &PutMessageBody{SessionID: "s1", Message: api.Message{ID: "m1", Role: api.RoleAgent, Text: "hi <there>"}})
	h.mustApply(CmdClaimLease, &ClaimLeaseBody{SessionID: "s1", ExecutorID: "e1", Nonce: "n", TTL: time.Second})
	h.apply(CmdCreateTask, "dedupe-key", &CreateTaskBody{Task: api.Task{ID: "t-deduped"}})
	same("populated state")

	// A task's times in another zone and with nanoseconds.
	h.store.mu.Lock()
	tk := h.store.d.Tasks["t00"]
	tk.CreatedAt = time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.FixedZone("x", -7*3600-30*60))
	tk.UpdatedAt = time.Time{}
	h.store.mu.Unlock()
	same("odd times")

}

func TestSnapshotIsNotChangedByLaterApplies(t *testing.T) {
	h := newHarness(t)
	h.mustApply(CmdCreateTask, &CreateTaskBody{Task: api.Task{ID: "t1", Title: "before"}})
	before := encodedWithEncodingJSON(t, h.store)
	snap, err := h.fsm.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	h.mustApply(CmdSetTaskState, &SetTaskStateBody{TaskID: "t1", State: api.TaskDone})
	h.mustApply(CmdCreateTask, &CreateTaskBody{Task: api.Task{ID: "t2", Title: "after"}})
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(sink.Bytes(), before) {
		t.Fatalf("snapshot taken before the applies holds them:\n got: %s\nwant: %s", sink.Bytes(), before)
	}
	other := newHarness(t)
	if err := other.fsm.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if tk, ok := other.store.Task("t1"); !ok || tk.State != api.TaskOpen || tk.Title != "before" {
		t.Errorf("restored task t1: %+v, %v", tk, ok)
	}
	if _, ok := other.store.Task("t2"); ok {
		t.Error("restored state has a task created after the snapshot")
	}
}

// Persist runs while raft goes on applying (it is called from raft's
// snapshot goroutine): it must read nothing an apply changes. Run with -race.
func TestSnapshotPersistsWhileAppliesGoOn(t *testing.T) {
	h := newHarness(t)
	for i := range 200 {
		h.mustApply(CmdCreateTask, &CreateTaskBody{Task: api.Task{ID: fmt.Sprintf("t%03d", i), Title: "x"}})
	}
	want := encodedWithEncodingJSON(t, h.store)
	snap, err := h.fsm.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan []byte)
	go func() {
		sink := &memSink{}
		if err := snap.Persist(sink); err != nil {
			t.Error(err)
		}
		done <- sink.Bytes()
	}()
	for i := range 200 {
		h.mustApply(CmdSetTaskState, &SetTaskStateBody{TaskID: fmt.Sprintf("t%03d", i), State: api.TaskDone})
	}
	if got := <-done; !bytes.Equal(got, want) {
		t.Fatalf("snapshot persisted during applies differs from the state it was taken of")
	}
}

// BenchmarkSnapshotOfManyTasks is a snapshot of 100,000 tasks (the state
// a few trials of the cluster suite's writes leave): Snapshot, which holds
// up applies, and Persist.
func BenchmarkSnapshotOfManyTasks(b *testing.B) {
	s := NewStore()
	f := NewFSM(s)
	now := time.Now()
	for i := range 100_000 {
		id := fmt.Sprintf("%08x-8c1e-4b7a-9d2f-%012x", i*7919, i)
		s.d.Tasks[id] = &api.Task{ID: id, Title: fmt.Sprintf("bench-%d", i), State: api.TaskOpen, CreatedAt: now, UpdatedAt: now}
	}
	b.ResetTimer()
	for range b.N {
		snap, _ := f.Snapshot()
		if err := snap.Persist(discardSink{}); err != nil {
			b.Fatal(err)
		}
	}
}

type discardSink struct{}

func (discardSink) Write(p []byte) (int, error) { return len(p), nil }
func (discardSink) ID() string                  { return "discard" }
func (discardSink) Cancel() error               { return nil }
func (discardSink) Close() error                { return nil }

var _ raft.SnapshotSink = discardSink{}
