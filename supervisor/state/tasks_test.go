package state

import (
	"errors"
	"testing"
)

// TestTaskCloseAndReopen: close makes a task DONE whatever its sessions do,
// and DONE stays while they change; reopen makes it follow its sessions
// again; other target states are refused.
func TestTaskCloseAndReopen(t *testing.T) {
	h := newHarness(t)
	h.taskAndSession()
	task := func() TaskState {
		tk, _ := h.store.Task("t1")
		return tk.State
	}
	h.mustApply(CmdSetSessionState, &SetSessionStateBody{SessionID: "s1", State: SessionStarting})
	h.mustApply(CmdSetSessionState, &SetSessionStateBody{SessionID: "s1", State: SessionWaitingForInput})
	if got := task(); got != TaskReview {
		t.Fatalf("task with a waiting session is %s, want REVIEW", got)
	}
	h.mustApply(CmdSetTaskState, &SetTaskStateBody{TaskID: "t1", State: TaskDone})
	if got := task(); got != TaskDone {
		t.Fatalf("closed task is %s, want DONE", got)
	}
	h.mustApply(CmdSetSessionState, &SetSessionStateBody{SessionID: "s1", State: SessionRunning})
	if got := task(); got != TaskDone {
		t.Fatalf("a session's turn moved a closed task to %s", got)
	}
	h.mustApply(CmdSetTaskState, &SetTaskStateBody{TaskID: "t1", State: TaskDone}) // closing twice is fine
	h.mustApply(CmdSetTaskState, &SetTaskStateBody{TaskID: "t1", State: TaskOpen})
	if got := task(); got != TaskInProgress {
		t.Fatalf("reopened task with a running session is %s, want IN_PROGRESS", got)
	}
	h.mustApply(CmdSetTaskState, &SetTaskStateBody{TaskID: "t1", State: TaskOpen}) // reopening an open task changes nothing
	if got := task(); got != TaskInProgress {
		t.Fatalf("reopening a task that is not done moved it to %s", got)
	}
	for _, bad := range []TaskState{TaskReview, TaskInProgress, "LATER"} {
		if err := h.apply(CmdSetTaskState, "", &SetTaskStateBody{TaskID: "t1", State: bad}).Err; !errors.Is(err, ErrInvalid) {
			t.Errorf("set task to %q: err=%v, want ErrInvalid", bad, err)
		}
	}
	if err := h.apply(CmdSetTaskState, "", &SetTaskStateBody{TaskID: "nope", State: TaskDone}).Err; !errors.Is(err, ErrNotFound) {
		t.Errorf("close of an unknown task: err=%v, want ErrNotFound", err)
	}
}

// TestDeleteTask: a task whose sessions have not all ended is not removed;
// once they are COMPLETED the task goes with its sessions, executors,
// leases and messages, and the other tasks keep theirs.
func TestDeleteTask(t *testing.T) {
	h := newHarness(t)
	h.taskAndSession()
	h.mustApply(CmdCreateTask, &CreateTaskBody{Task: Task{ID: "t2", Title: "other"}})
	h.mustApply(CmdCreateSession, &CreateSessionBody{Session: Session{ID: "s2", TaskID: "t2", Agent: "demo", Runtime: "standalone"}})
	h.mustApply(CmdPutExecutor, NewPutExecutor(Executor{ID: "e1", SessionID: "s1", Secret: "x"}))
	h.mustApply(CmdClaimLease, &ClaimLeaseBody{SessionID: "s1", ExecutorID: "e1", Nonce: "n"})
	h.mustApply(CmdPutMessage, &PutMessageBody{SessionID: "s1", Message: Message{ID: "m1", Role: RoleUser, Text: "hi"}})

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
