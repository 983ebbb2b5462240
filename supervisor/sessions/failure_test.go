package sessions

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/shared/runtime"
	"github.com/paddockhq/paddock/shared/testkit"
	"github.com/paddockhq/paddock/supervisor/config"
	"github.com/paddockhq/paddock/supervisor/state"
)

// Recording a failure over the real FSM: the session is ERROR with the
// reason and the message, an agentctl_error event says so, the executor
// row is marked only when the executor failed, and the lease is kept,
// released or reclaimed as the failure value says.
func TestRecordFailure(t *testing.T) {
	cases := []struct {
		name     string
		f        failure
		lease    api.LeaseState
		executor api.ExecutorStatus
	}{
		{name: "agent not running: the lease is released",
			f:     failure{Reason: api.ReasonAgentNotRunning, Err: errors.New("the agent exited with code 1")},
			lease: api.LeaseReleased, executor: api.ExecutorReady},
		{name: "holder proven dead: the lease is reclaimed",
			f:     failure{Reason: api.ReasonAgentNotRunning, Executor: "ex-1", Err: errors.New("agentctl restarted")},
			lease: api.LeaseExpired, executor: api.ExecutorError},
		{name: "holder not proven gone: the lease is kept",
			f:     failure{Reason: api.ReasonExecutorLost, Executor: "ex-1", KeepLease: true, Err: errors.New("agentctl unreachable")},
			lease: api.LeaseHeld, executor: api.ExecutorError},
		{name: "kept lease, executor untouched",
			f:     failure{Reason: api.ReasonAgentNotRunning, KeepLease: true, Err: errors.New("the executor failed during a leader change")},
			lease: api.LeaseHeld, executor: api.ExecutorReady},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, "n1")
			token := w.recorded("s1", api.SessionWaitingForInput, api.Executor{ID: "ex-1", Node: "n1", Status: api.ExecutorReady, Handle: handleOf("ex-1")})
			m := w.leader("n1")

			m.record(recoverCtx(t), w.session("s1"), tc.f)

			sess := w.session("s1")
			if sess.State != api.SessionError || sess.StateReason != tc.f.Reason || sess.ErrorMessage != tc.f.Err.Error() {
				t.Errorf("session %s (%q: %q), want ERROR (%s: %q)", sess.State, sess.StateReason, sess.ErrorMessage, tc.f.Reason, tc.f.Err)
			}
			if l := w.lease("s1"); l.State != tc.lease || l.FencingToken != token {
				t.Errorf("lease %s token %d, want %s token %d", l.State, l.FencingToken, tc.lease, token)
			}
			if ex := w.executor("ex-1"); ex.Status != tc.executor {
				t.Errorf("executor %s, want %s", ex.Status, tc.executor)
			}
			var reported bool
			for _, e := range w.r.events("s1") {
				reported = reported || (e.Type == api.EventAgentctlError && e.Data["reason"] == tc.f.Reason && e.Data["message"] == tc.f.Err.Error())
			}
			if !reported {
				t.Errorf("no agentctl_error event with reason %s", tc.f.Reason)
			}
			// The lease keeper's view agrees: a kept lease stays tracked
			// until it expires, an ended one is forgotten.
			if _, tracked := m.LeaseExpiry("s1"); tracked != (tc.lease == api.LeaseHeld) {
				t.Errorf("lease tracked=%v after recording, want %v", tracked, tc.lease == api.LeaseHeld)
			}
		})
	}
}

// A failure whose operation was abandoned (leadership lost) is not
// recorded: the next leader finds out what happened.
func TestRecordFailureOfAnAbandonedOperation(t *testing.T) {
	w := newWorld(t, "n1")
	w.recorded("s1", api.SessionWaitingForInput, api.Executor{ID: "ex-1", Node: "n1", Status: api.ExecutorReady, Handle: handleOf("ex-1")})
	m := w.leader("n1")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	before := w.r.store.LastIndex()

	m.record(ctx, w.session("s1"), failure{Reason: api.ReasonExecutorLost, Executor: "ex-1", Err: errors.New("cut off")})

	if after := w.r.store.LastIndex(); after != before {
		t.Errorf("%d commands applied for an abandoned operation", after-before)
	}
}

// A launch that fails records a failure that ends the lease it claimed: no
// agent ever ran under that lease, so a retry need not wait it out.
func TestLaunchFailureEndsTheLeaseItClaimed(t *testing.T) {
	w := newWorld(t, "n1")
	w.rts["n1"].onLaunch = func(runtime.LaunchRequest) (runtime.LaunchResponse, error) {
		return runtime.LaunchResponse{}, errors.New("image not found")
	}
	w.r.must(t, state.CmdCreateTask, &state.CreateTaskBody{Task: api.Task{ID: "t1", Title: "x", Workspace: api.Workspace{Path: workspaceDir(t)}}})
	w.r.must(t, state.CmdCreateSession, &state.CreateSessionBody{Session: api.Session{ID: "s1", TaskID: "t1", Agent: "demo", Runtime: "standalone"}})
	m := w.leader("n1")

	if err := m.Start(recoverCtx(t), "s1"); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 20*time.Second, "the session to be ERROR", testkit.Cond(func() bool { return w.session("s1").State == api.SessionError }))
	sess := w.session("s1")
	if sess.StateReason != api.ReasonExecutorLost {
		t.Errorf("reason %q, want %s (message %q)", sess.StateReason, api.ReasonExecutorLost, sess.ErrorMessage)
	}
	if l := w.lease("s1"); l.State == api.LeaseHeld {
		t.Errorf("lease %+v still held after a failed launch", l)
	}
	if ex := w.executor(sess.ExecutorID); ex.Status != api.ExecutorError || ex.Node != "n1" {
		t.Errorf("executor %+v, want error on n1", ex)
	}
}

// A launch brings the session up on the bring-up path recovery shares:
// the agentctl it launched holds the lease, the executor is ready on its
// node with the agent's probed capabilities, and the agent takes prompts.
func TestStartBringsTheSessionUp(t *testing.T) {
	w := newWorld(t, "n1", "n2")
	w.r.must(t, state.CmdCreateTask, &state.CreateTaskBody{Task: api.Task{ID: "t1", Title: "x", Workspace: api.Workspace{Path: workspaceDir(t)}}})
	w.r.must(t, state.CmdCreateSession, &state.CreateSessionBody{Session: api.Session{ID: "s1", TaskID: "t1", Agent: "demo", Runtime: "standalone",
		RuntimeOptions: map[string]string{OptionNode: "n2"}}})
	m := w.leader("n1")

	if err := m.Start(recoverCtx(t), "s1"); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 30*time.Second, "the session to take prompts", testkit.Cond(func() bool { return w.session("s1").State == api.SessionWaitingForInput }))
	sess := w.session("s1")
	ex := w.executor(sess.ExecutorID)
	if ex.Status != api.ExecutorReady || ex.Node != "n2" || !ex.SupportsSessionResume || ex.AgentExecutionID == "" {
		t.Errorf("executor %+v, want ready on n2, resumable, with an agent execution", ex)
	}
	if l := w.lease("s1"); l.State != api.LeaseHeld || l.HolderNonce != ex.Nonce || l.HolderExecutorID != ex.ID {
		t.Errorf("lease %+v, want held by executor %s nonce %s", l, ex.ID, ex.Nonce)
	}
	if calls := w.rts["n1"].executorCalls(); len(calls) != 0 {
		t.Errorf("the leader's own plugin was asked %v for a session placed on n2", calls)
	}
	if err := m.Prompt(recoverCtx(t), "s1", "remember pear"); err != nil {
		t.Fatal(err)
	}
	w.agentSaid("s1", "pear")
}

// An agentctl that goes out of reach under a live leader while its runtime
// cannot prove it gone (a partition: the process may still run) keeps its
// lease when the session is failed; the lease keeper reclaims it only at
// expiry. One whose runtime proves it gone has its lease reclaimed at once.
func TestLostAgentctlKeepsTheLeaseUnlessProvenGone(t *testing.T) {
	for _, proven := range []bool{false, true} {
		name := "not proven gone"
		if proven {
			name = "proven gone"
		}
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, "n1")
			w.cfg.Lease.TTL = 5 * time.Second // wide enough to see the kept lease before it expires
			w.cfg.Recovery.AutoResume = config.AutoResumeNone
			if !proven {
				w.rts["n1"].onInspect = func(fakeHandle) (runtime.InspectResponse, error) {
					return runtime.InspectResponse{State: runtime.StateRunning}, nil
				}
			}
			s := w.seedLive(liveOpts{id: "s1", node: "n1"})
			m := w.leader("n1")
			continueSession(t, m, s.id)
			token := w.lease(s.id).FencingToken

			w.rts["n1"].proc(s.executorID).kill()
			testkit.WaitFor(t, 20*time.Second, "the session to be ERROR", testkit.Cond(func() bool { return w.session(s.id).State == api.SessionError }))

			l := w.lease(s.id)
			switch {
			case !proven && (l.State != api.LeaseHeld || l.FencingToken != token):
				t.Errorf("lease %s token %d, want held token %d until it expires", l.State, l.FencingToken, token)
			case proven && l.State != api.LeaseExpired:
				t.Errorf("lease %s, want reclaimed (expired) at once", l.State)
			}
			if ex := w.executor(s.executorID); ex.Status != api.ExecutorError {
				t.Errorf("executor %s, want error", ex.Status)
			}
			if !proven {
				testkit.WaitFor(t, 20*time.Second, "the kept lease to be reclaimed at expiry", testkit.Cond(func() bool { return w.lease(s.id).State == api.LeaseExpired }))
			}
		})
	}
}

// A lifecycle call waiting for a session's lock (held by a launch that may
// take minutes) gives up when its context ends, and the lock stays usable.
func TestLifecycleLockWaitEndsWithItsContext(t *testing.T) {
	w := newWorld(t, "n1")
	w.recorded("s1", api.SessionWaitingForInput, api.Executor{ID: "ex-1", Node: "n1", Status: api.ExecutorReady, Handle: handleOf("ex-1")})
	m := w.leader("n1")
	lock := m.sessionLock("s1")
	if !lock.TryLock() {
		t.Fatal("the lock of an idle session is taken")
	}
	for name, call := range map[string]func(context.Context) error{
		"delete": func(ctx context.Context) error { return m.Delete(ctx, "s1", false) },
		"recover": func(ctx context.Context) error {
			_, err := m.Recover(ctx, "s1", true)
			return err
		},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		began := time.Now()
		err := call(ctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(began) > 5*time.Second {
			t.Errorf("%s behind a held lock = %v after %s; want the context's deadline, promptly", name, err, time.Since(began).Round(time.Millisecond))
		}
	}
	lock.Unlock()
	if !lock.TryLock() {
		t.Fatal("the lock was left taken by a call that gave up")
	}
	lock.Unlock()
}

// An agentctl that dies after its health check but before the agent starts
// (a failover racing a machine's agentctls dying) is a lost executor: the
// executor goes to error and the lease stays held until it expires, so the
// lease keeper resumes the session then. Recorded as an agent failure, it
// left the executor ready and nothing resumed the session.
func TestAgentctlLostBeforeTheAgentStartsIsALostExecutor(t *testing.T) {
	w := newWorld(t, "n1")
	w.cfg.Lease.TTL = 5 * time.Second // wide enough to see the kept lease before it expires
	w.cfg.Recovery.AutoResume = config.AutoResumeNone
	s := w.seedLive(liveOpts{id: "s1", node: "n1"})
	m := w.leader("n1")
	w.rts["n1"].proc(s.executorID).kill()
	testkit.WaitFor(t, 10*time.Second, "agentctl to stop answering", testkit.Cond(func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := s.client.Health(ctx)
		return err != nil
	}))

	b := &bringUp{sess: w.session(s.id), ex: s.executor, recorded: s.executor, client: s.client, token: s.token, plan: planResume}
	out, err := m.runAgent(recoverCtx(t), recoverCtx(t), b)
	if err != nil || out != OutcomeLost {
		t.Fatalf("runAgent = %s, %v; want lost", out, err)
	}
	if ex := w.executor(s.executorID); ex.Status != api.ExecutorError {
		t.Errorf("executor %s, want error", ex.Status)
	}
	if l := w.lease(s.id); l.State != api.LeaseHeld || l.FencingToken != s.token {
		t.Errorf("lease %s token %d, want held token %d until it expires", l.State, l.FencingToken, s.token)
	}
	if sess := w.session(s.id); sess.State != api.SessionError || sess.StateReason != api.ReasonAgentNotRunning {
		t.Errorf("session %s (%s), want ERROR agent_not_running", sess.State, sess.StateReason)
	}
}
