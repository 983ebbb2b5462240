package state

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/paddockhq/paddock/api"
)

// TestTaskCloseAndReopen: close makes a task DONE whatever its sessions do,
// and DONE stays while they change; reopen makes it follow its sessions
// again; other target states are refused.
func TestTaskCloseAndReopen(t *testing.T) {
	h := newHarness(t)
	h.taskAndSession()
	task := func() api.TaskState {
		tk, _ := h.store.Task("t1")
		return tk.State
	}
	h.mustApply(CmdSetSessionState, &SetSessionStateBody{SessionID: "s1", State: api.SessionStarting})
	h.mustApply(CmdSetSessionState, &SetSessionStateBody{SessionID: "s1", State: api.SessionWaitingForInput})
	if got := task(); got != api.TaskReview {
		t.Fatalf("task with a waiting session is %s, want REVIEW", got)
	}
	h.mustApply(CmdSetTaskState, &SetTaskStateBody{TaskID: "t1", State: api.TaskDone})
	if got := task(); got != api.TaskDone {
		t.Fatalf("closed task is %s, want DONE", got)
	}
	h.mustApply(CmdSetSessionState, &SetSessionStateBody{SessionID: "s1", State: api.SessionRunning})
	if got := task(); got != api.TaskDone {
		t.Fatalf("a session's turn moved a closed task to %s", got)
	}
	h.mustApply(CmdSetTaskState, &SetTaskStateBody{TaskID: "t1", State: api.TaskDone}) // closing twice is fine
	h.mustApply(CmdSetTaskState, &SetTaskStateBody{TaskID: "t1", State: api.TaskOpen})
	if got := task(); got != api.TaskInProgress {
		t.Fatalf("reopened task with a running session is %s, want IN_PROGRESS", got)
	}
	h.mustApply(CmdSetTaskState, &SetTaskStateBody{TaskID: "t1", State: api.TaskOpen}) // reopening an open task changes nothing
	if got := task(); got != api.TaskInProgress {
		t.Fatalf("reopening a task that is not done moved it to %s", got)
	}
	for _, bad := range []api.TaskState{api.TaskReview, api.TaskInProgress, "LATER"} {
		if err := h.apply(CmdSetTaskState, "", &SetTaskStateBody{TaskID: "t1", State: bad}).Err; !errors.Is(err, ErrInvalid) {
			t.Errorf("set task to %q: err=%v, want ErrInvalid", bad, err)
		}
	}
	if err := h.apply(CmdSetTaskState, "", &SetTaskStateBody{TaskID: "nope", State: api.TaskDone}).Err; !errors.Is(err, ErrNotFound) {
		t.Errorf("close of an unknown task: err=%v, want ErrNotFound", err)
	}
}

// TestDeleteTask: a task whose sessions have not all ended is not removed;
// once they are COMPLETED the task goes with its sessions, executors,
// leases and messages, and the other tasks keep theirs.
func TestDeleteTask(t *testing.T) {
	h := newHarness(t)
	h.taskAndSession()
	h.mustApply(CmdCreateTask, &CreateTaskBody{Task: api.Task{ID: "t2", Title: "other"}})
	h.mustApply(CmdCreateSession, &CreateSessionBody{Session: api.Session{ID: "s2", TaskID: "t2", Agent: "demo", Runtime: "standalone"}})
	h.mustApply(CmdPutExecutor, NewPutExecutor(api.Executor{ID: "e1", SessionID: "s1", Secret: "x"}))
	h.mustApply(CmdClaimLease, &ClaimLeaseBody{SessionID: "s1", ExecutorID: "e1", Nonce: "n"})
	h.mustApply(CmdPutMessage, &PutMessageBody{SessionID: "s1", Message: api.Message{ID: "m1", Role: api.RoleUser, Text: "hi"}})

	if err := h.apply(CmdDeleteTask, "", &DeleteTaskBody{TaskID: "t1"}).Err; !errors.Is(err, ErrConflict) {
		t.Fatalf("delete of a task with a live session: err=%v, want ErrConflict", err)
	}
	if _, ok := h.store.Task("t1"); !ok {
		t.Fatal("a refused delete removed the task")
	}
	h.mustApply(CmdDeleteSession, &DeleteSessionBody{SessionID: "s1"})
	h.mustApply(CmdDeleteTask, &DeleteTaskBody{TaskID: "t1"})
	if _, ok := h.store.Task("t1"); ok {
		t.Error("task t1 still there")
	}
	if _, ok := h.store.Session("s1"); ok {
		t.Error("session s1 of the deleted task still there")
	}
	if _, ok := h.store.Executor("e1"); ok {
		t.Error("executor e1 of the deleted task still there")
	}
	if _, ok := h.store.Lease("s1"); ok {
		t.Error("lease of s1 still there")
	}
	if len(h.store.Messages("s1")) != 0 {
		t.Error("messages of s1 still there")
	}
	if _, ok := h.store.Session("s2"); !ok {
		t.Error("the other task's session went too")
	}
	if err := h.apply(CmdDeleteTask, "", &DeleteTaskBody{TaskID: "t1"}).Err; !errors.Is(err, ErrNotFound) {
		t.Errorf("second delete: err=%v, want ErrNotFound", err)
	}
}

// TestTaskStateFollowsManySessions: a task with several sessions is
// IN_PROGRESS while any of them starts or runs and REVIEW while none does
// and one waits, through a snapshot and restore, session deletes, and a
// task deleted and created again under the same id.
func TestTaskStateFollowsManySessions(t *testing.T) {
	h := newHarness(t)
	h.mustApply(CmdCreateTask, &CreateTaskBody{Task: api.Task{ID: "t1", Title: "x"}})
	for _, id := range []string{"s1", "s2", "s3"} {
		h.mustApply(CmdCreateSession, &CreateSessionBody{Session: api.Session{ID: id, TaskID: "t1", Agent: "demo", Runtime: "standalone"}})
	}
	move := func(h *harness, id string, to api.SessionState) {
		t.Helper()
		if to == api.SessionCompleted {
			h.mustApply(CmdDeleteSession, &DeleteSessionBody{SessionID: id})
			return
		}
		h.mustApply(CmdSetSessionState, &SetSessionStateBody{SessionID: id, State: to})
	}
	expect := func(h *harness, want api.TaskState, after string) {
		t.Helper()
		if tk, _ := h.store.Task("t1"); tk.State != want {
			t.Fatalf("after %s: task %s, want %s", after, tk.State, want)
		}
	}
	move(h, "s1", api.SessionStarting)
	move(h, "s2", api.SessionStarting)
	move(h, "s1", api.SessionWaitingForInput)
	expect(h, api.TaskInProgress, "s1 waits while s2 starts")
	move(h, "s2", api.SessionWaitingForInput)
	expect(h, api.TaskReview, "both wait")
	move(h, "s3", api.SessionStarting)
	move(h, "s3", api.SessionRunning)
	expect(h, api.TaskInProgress, "s3 runs")

	// A restored state counts its sessions afresh.
	snap, err := h.fsm.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	r := newHarness(t)
	r.idx = h.idx
	if err := r.fsm.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	for _, x := range []*harness{h, r} {
		move(x, "s3", api.SessionError)
		expect(x, api.TaskReview, "s3 failed, s1 and s2 wait")
		move(x, "s1", api.SessionRunning)
		expect(x, api.TaskInProgress, "s1 runs")
		move(x, "s1", api.SessionCompleted)
		expect(x, api.TaskReview, "s1 deleted while running, s2 waits")
		move(x, "s2", api.SessionRunning)
		expect(x, api.TaskInProgress, "s2 runs")
		move(x, "s2", api.SessionWaitingForInput)
		expect(x, api.TaskReview, "s2 waits again")
	}

	// A task deleted and created again starts with no counted sessions.
	move(h, "s2", api.SessionCompleted)
	move(h, "s3", api.SessionCompleted)
	h.mustApply(CmdDeleteTask, &DeleteTaskBody{TaskID: "t1"})
	h.mustApply(CmdCreateTask, &CreateTaskBody{Task: api.Task{ID: "t1", Title: "again"}})
	h.mustApply(CmdCreateSession, &CreateSessionBody{Session: api.Session{ID: "s4", TaskID: "t1", Agent: "demo", Runtime: "standalone"}})
	move(h, "s4", api.SessionStarting)
	move(h, "s4", api.SessionWaitingForInput)
	expect(h, api.TaskReview, "the new task's only session waits")
}

// BenchmarkSessionStateChangeInALargeTask applies a session's turn (RUNNING
// and back) in a task of 1,000 sessions: the task's state follows from its
// tally, not from a scan of every session.
func BenchmarkSessionStateChangeInALargeTask(b *testing.B) {
	h := newHarness(&testing.T{})
	h.mustApply(CmdCreateTask, &CreateTaskBody{Task: api.Task{ID: "t1", Title: "x"}})
	for i := 0; i < 1000; i++ {
		id := fmt.Sprintf("s%d", i)
		h.mustApply(CmdCreateSession, &CreateSessionBody{Session: api.Session{ID: id, TaskID: "t1", Agent: "demo", Runtime: "standalone"}})
		h.mustApply(CmdSetSessionState, &SetSessionStateBody{SessionID: id, State: api.SessionStarting})
		h.mustApply(CmdSetSessionState, &SetSessionStateBody{SessionID: id, State: api.SessionWaitingForInput})
	}
	run, wait := encoded(b, &SetSessionStateBody{SessionID: "s500", State: api.SessionRunning}), encoded(b, &SetSessionStateBody{SessionID: "s500", State: api.SessionWaitingForInput})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		h.idx++
		h.fsm.Apply(&raft.Log{Index: h.idx, Type: raft.LogCommand, Data: run})
		h.idx++
		h.fsm.Apply(&raft.Log{Index: h.idx, Type: raft.LogCommand, Data: wait})
	}
}

func encoded(b *testing.B, body *SetSessionStateBody) []byte {
	buf, err := Command{Type: CmdSetSessionState, Now: t0, Body: body}.Encode()
	if err != nil {
		b.Fatal(err)
	}
	return buf
}
