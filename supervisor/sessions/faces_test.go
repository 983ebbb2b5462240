package sessions

import (
	"testing"
	"time"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/shared/testkit"
	"github.com/paddockhq/paddock/supervisor/state"
)

// Audit findings ("the faces, round two"): what a restart or a failover
// may and may not write for a session, over the real FSM and real
// agentctls.

// agentctlErrors counts a session's agentctl_error events.
func (w *world) agentctlErrors(id string) int {
	n := 0
	for _, e := range w.r.events(id) {
		if e.Type == api.EventAgentctlError {
			n++
		}
	}
	return n
}

// A recovery that finds the agent gone asks agentctl's probe again rather
// than trust the one recorded at launch (the agent may have been upgraded
// since): a row that says the agent cannot resume does not stop a resume
// the agent now offers, and the row records the new answer.
func TestRecoverProbesTheAgentAgain(t *testing.T) {
	w := newWorld(t, "n1", "n2")
	s := w.seedLive(liveOpts{id: "s1", node: "n1", remember: "quince"})
	old := s.executor
	old.SupportsSessionResume, old.ResumeProbed = false, true // what an older agent said
	w.r.must(t, state.CmdPutExecutor, state.NewPutExecutor(old))
	w.rts["n1"].proc(s.executorID).kill()
	m := w.leader("n2")

	out, err := m.Recover(recoverCtx(t), s.id, true)
	if err != nil || out != OutcomeResumed {
		t.Fatalf("Recover = %s, %v; want resumed (the agent resumes now)", out, err)
	}
	if ex := w.executor(s.executorID); !ex.SupportsSessionResume || !ex.ResumeProbed {
		t.Errorf("executor row supports_session_resume=%v resume_probed=%v, want the new probe's true", ex.SupportsSessionResume, ex.ResumeProbed)
	}
}

// The common recovery path (the agentctl answers as recorded and its agent
// is continued) refreshes the executor row's last_seen_at.
func TestRecoverRefreshesLastSeenAt(t *testing.T) {
	w := newWorld(t, "n1", "n2")
	s := w.seedLive(liveOpts{id: "s1", node: "n1"})
	before := s.executor.LastSeenAt
	testkit.WaitFor(t, 5*time.Second, "the clock to pass the recorded last_seen_at", testkit.Cond(func() bool {
		return time.Now().After(before.Add(time.Millisecond))
	}))
	m := w.leader("n2")
	continueSession(t, m, s.id)
	if got := w.executor(s.executorID).LastSeenAt; !got.After(before) {
		t.Errorf("last_seen_at %s after a recovery found the executor alive, want later than %s", got, before)
	}
}

// A session in ERROR because its agent cannot resume is recovered on every
// restart (its agentctl keeps the workspace): its ERROR and agentctl_error
// event are recorded once, not again by each recovery, and its
// last_activity_at does not move.
func TestRecoverRecordsANotResumableErrorOnce(t *testing.T) {
	w := newWorld(t, "n1", "n2")
	s := w.seedLive(liveOpts{id: "s1", node: "n1", agent: "demo-noresume"})
	w.rts["n1"].proc(s.executorID).kill()
	m, end := w.leaderUntil("n2")
	if out, err := m.Recover(recoverCtx(t), s.id, true); err != nil || out != OutcomeWorkspace {
		t.Fatalf("Recover = %s, %v; want workspace", out, err)
	}
	first := w.session(s.id)
	if first.State != api.SessionError || first.StateReason != api.ReasonNotResumable {
		t.Fatalf("session %s (%q), want ERROR not_resumable", first.State, first.StateReason)
	}
	errs := w.agentctlErrors(s.id)
	end()

	for _, node := range []string{"n1", "n2"} { // two restarts
		m := w.leader(node)
		out, err := m.Recover(recoverCtx(t), s.id, false)
		if err != nil || out != OutcomeWorkspace {
			t.Fatalf("Recover on %s = %s, %v; want workspace", node, out, err)
		}
		if n := w.agentctlErrors(s.id); n != errs {
			t.Errorf("restart on %s: %d agentctl_error events, want the %d recorded before", node, n, errs)
		}
		got := w.session(s.id)
		if got.State != api.SessionError || got.StateReason != api.ReasonNotResumable || got.ErrorMessage != first.ErrorMessage {
			t.Errorf("session %s (%q: %s), want ERROR not_resumable as before", got.State, got.StateReason, got.ErrorMessage)
		}
		if !got.LastActivityAt.Equal(first.LastActivityAt) {
			t.Errorf("restart on %s moved last_activity_at %s → %s", node, first.LastActivityAt, got.LastActivityAt)
		}
		if l, ok := w.r.store.Lease(s.id); ok && l.State == api.LeaseHeld {
			t.Errorf("restart on %s left the lease held (%+v) with no agent", node, l)
		}
	}
}

// A restart does not count as activity: a live session that nobody used
// keeps its last_activity_at through recoveries that continue its agent,
// and through one that resumes it (its agentctl was restarted).
func TestRecoverKeepsLastActivityAt(t *testing.T) {
	w := newWorld(t, "n1", "n2")
	s := w.seedLive(liveOpts{id: "s1", node: "n1"})
	m, end := w.leaderUntil("n2")
	continueSession(t, m, s.id) // the first leader after the launch
	before := w.session(s.id)
	end()

	m, end = w.leaderUntil("n1") // a restart
	continueSession(t, m, s.id)
	if got := w.session(s.id).LastActivityAt; !got.Equal(before.LastActivityAt) {
		t.Errorf("a restart that continued the agent moved last_activity_at %s → %s", before.LastActivityAt, got)
	}
	end()

	w.rts["n1"].proc(s.executorID).kill() // the machine restarted too
	m = w.leader("n2")
	if out, err := m.Recover(recoverCtx(t), s.id, true); err != nil || out != OutcomeResumed {
		t.Fatalf("Recover = %s, %v; want resumed", out, err)
	}
	if got := w.session(s.id); got.State != api.SessionWaitingForInput || !got.LastActivityAt.Equal(before.LastActivityAt) {
		t.Errorf("a restart that resumed the agent: session %s, last_activity_at %s → %s", got.State, before.LastActivityAt, got.LastActivityAt)
	}
	if err := m.Prompt(recoverCtx(t), s.id, "hello"); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 20*time.Second, "a prompt to move last_activity_at", testkit.Cond(func() bool {
		return w.session(s.id).LastActivityAt.After(before.LastActivityAt)
	}))
}

// seenNow is row with recorded's last_seen_at: a recovery that finds the
// executor alive refreshes it and nothing else.
func seenNow(row, recorded api.Executor) api.Executor {
	row.LastSeenAt = recorded.LastSeenAt
	return row
}
