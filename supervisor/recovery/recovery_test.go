package recovery_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/shared/testkit"
	"github.com/paddockhq/paddock/supervisor/config"
	"github.com/paddockhq/paddock/supervisor/recovery"
	"github.com/paddockhq/paddock/supervisor/sessions"
	"github.com/paddockhq/paddock/supervisor/state"
)

// scriptedSessions fails each session's first steps with the errors its
// script lists, then succeeds; it counts the calls per session.
type scriptedSessions struct {
	mu     sync.Mutex
	script map[string][]error
	calls  map[string]int
}

func (s *scriptedSessions) next(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.calls[id]
	s.calls[id]++
	if n < len(s.script[id]) {
		return s.script[id][n]
	}
	return nil
}

func (s *scriptedSessions) Recover(_ context.Context, id string, _ bool) (sessions.Outcome, error) {
	if err := s.next(id); err != nil {
		return sessions.OutcomeSkipped, err
	}
	return sessions.OutcomeContinued, nil
}

func (s *scriptedSessions) Start(_ context.Context, id string) error { return s.next(id) }
func (s *scriptedSessions) DestroyAbandoned(context.Context, string) {}

func (s *scriptedSessions) callsOf(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[id]
}

// Issue 21: a step refused while a leadership transfer is pending (or cut by
// a timeout) is retried until it succeeds, and the report tells retried,
// skipped and failed sessions apart; a domain refusal is not retried.
func TestRecoveryRetriesTransientFailures(t *testing.T) {
	transfer := fmt.Errorf("put executor: %w", raft.ErrLeadershipTransferInProgress)
	cases := []struct {
		name                             string
		script                           []error
		start                            bool
		wantCalls                        int
		wantOutcome                      sessions.Outcome
		wantRetried, wantFailed, retries int
	}{
		{name: "clean", wantCalls: 1, wantOutcome: sessions.OutcomeContinued},
		{name: "transfer pending", script: []error{transfer, transfer}, wantCalls: 3, wantOutcome: sessions.OutcomeContinued, wantRetried: 1, retries: 2},
		{name: "leadership in doubt", script: []error{raft.ErrLeadershipLost}, wantCalls: 2, wantOutcome: sessions.OutcomeContinued, wantRetried: 1, retries: 1},
		{name: "apply timed out", script: []error{raft.ErrEnqueueTimeout}, wantCalls: 2, wantOutcome: sessions.OutcomeContinued, wantRetried: 1, retries: 1},
		{name: "call timed out", script: []error{fmt.Errorf("health: %w", context.DeadlineExceeded)}, wantCalls: 2, wantOutcome: sessions.OutcomeContinued, wantRetried: 1, retries: 1},
		{name: "leader not ready", script: []error{sessions.ErrNotLeader}, wantCalls: 2, wantOutcome: sessions.OutcomeContinued, wantRetried: 1, retries: 1},
		{name: "start retried", start: true, script: []error{transfer}, wantCalls: 2, wantOutcome: sessions.OutcomeStarted, wantRetried: 1, retries: 1},
		{name: "domain refusal", script: []error{fmt.Errorf("claim: %w", state.ErrConflict)}, wantCalls: 1, wantOutcome: sessions.OutcomeSkipped, wantFailed: 1},
		{name: "refusal after a retry", script: []error{transfer, state.ErrNotFound}, wantCalls: 2, wantOutcome: sessions.OutcomeSkipped, wantRetried: 1, wantFailed: 1, retries: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := newStore(t)
			st.apply(state.CmdCreateTask, &state.CreateTaskBody{Task: api.Task{ID: "t1", Title: "x"}})
			if tc.start {
				st.apply(state.CmdCreateSession, &state.CreateSessionBody{Session: api.Session{ID: "s1", TaskID: "t1", Agent: "demo", Runtime: "standalone"}})
			} else {
				st.executor("s1", "standalone", "ex-1", api.ExecutorReady)
			}
			sess := &scriptedSessions{script: map[string][]error{"s1": tc.script}, calls: map[string]int{}}
			r := recovery.New(st.store, sess, config.Default(), nil)
			r.Run(context.Background())
			rep := r.Last()
			if got := sess.callsOf("s1"); got != tc.wantCalls {
				t.Errorf("%d calls, want %d", got, tc.wantCalls)
			}
			if rep.Outcomes[tc.wantOutcome] != 1 || len(rep.Outcomes) != 1 {
				t.Errorf("outcomes %v, want one %s", rep.Outcomes, tc.wantOutcome)
			}
			if rep.Retried != tc.wantRetried || rep.Retries != tc.retries || rep.Failed != tc.wantFailed || rep.Pending != 0 {
				t.Errorf("report retried %d retries %d failed %d pending %d, want %d %d %d 0",
					rep.Retried, rep.Retries, rep.Failed, rep.Pending, tc.wantRetried, tc.retries, tc.wantFailed)
			}
		})
	}
}

// A session that keeps failing transiently is retried until leadership ends,
// then reported pending (never done, never failed); the others finish.
func TestRecoveryRetriesUntilLeadershipEnds(t *testing.T) {
	st := newStore(t)
	st.apply(state.CmdCreateTask, &state.CreateTaskBody{Task: api.Task{ID: "t1", Title: "x"}})
	st.executor("s-stuck", "standalone", "ex-stuck", api.ExecutorReady)
	st.executor("s-ok", "standalone", "ex-ok", api.ExecutorReady)
	stuck := make([]error, 1000)
	for i := range stuck {
		stuck[i] = raft.ErrLeadershipTransferInProgress
	}
	sess := &scriptedSessions{script: map[string][]error{"s-stuck": stuck}, calls: map[string]int{}}
	r := recovery.New(st.store, sess, config.Default(), nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx)
	}()
	testkit.WaitFor(t, 10*time.Second, "a few retries of the stuck session", testkit.Cond(func() bool { return sess.callsOf("s-stuck") >= 3 }))
	if r.Last() != nil {
		t.Fatal("the run finished while a session was still being retried")
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after leadership ended")
	}
	rep := r.Last()
	if rep.Pending != 1 || rep.Failed != 0 || rep.Retried != 1 || rep.Outcomes[sessions.OutcomeContinued] != 1 || rep.Outcomes[sessions.OutcomeSkipped] != 0 {
		t.Fatalf("report %+v, want s-ok continued and s-stuck pending", rep)
	}
}

// gatedSessions holds every recovery until released, except those of the
// sessions named free; it records the order sessions were recovered in.
type gatedSessions struct {
	gate chan struct{}
	free map[string]bool
	mu   sync.Mutex
	done []string
}

func (g *gatedSessions) Recover(ctx context.Context, id string, _ bool) (sessions.Outcome, error) {
	if !g.free[id] {
		select {
		case <-g.gate:
		case <-ctx.Done():
			return sessions.OutcomeSkipped, ctx.Err()
		}
	}
	g.mu.Lock()
	g.done = append(g.done, id)
	g.mu.Unlock()
	return sessions.OutcomeContinued, nil
}

func (g *gatedSessions) Start(context.Context, string) error      { return nil }
func (g *gatedSessions) DestroyAbandoned(context.Context, string) {}

func (g *gatedSessions) recovered(id string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, d := range g.done {
		if d == id {
			return true
		}
	}
	return false
}

// TestExpediteRecoversASessionAheadOfThePass: while every worker of a pass
// is busy, a session someone waits for (Expedite) is recovered at once
// rather than in its turn, and the pass still recovers every session once
// and reports each once.
func TestExpediteRecoversASessionAheadOfThePass(t *testing.T) {
	st := newStore(t)
	st.apply(state.CmdCreateTask, &state.CreateTaskBody{Task: api.Task{ID: "t1", Title: "x"}})
	const n = 6
	for i := 0; i < n; i++ {
		st.executor(fmt.Sprintf("s%d", i), "standalone", fmt.Sprintf("ex-%d", i), api.ExecutorReady)
	}
	last := fmt.Sprintf("s%d", n-1) // the pass's order is the sessions' creation order
	g := &gatedSessions{gate: make(chan struct{}), free: map[string]bool{last: true}}
	r := recovery.New(st.store, g, config.Default(), nil).WithWorkers(2)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(context.Background())
	}()
	// Both workers are held by the first two sessions; the last waits its
	// turn behind three more unless it is expedited.
	testkit.WaitFor(t, 10*time.Second, "the pass to be under way", testkit.Cond(func() bool {
		r.Expedite(last)
		return g.recovered(last)
	}))
	if r.Last() != nil {
		t.Fatal("the pass finished before its held sessions were released")
	}
	close(g.gate)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the pass did not finish")
	}
	r.Expedite(last) // after the pass: nothing to do
	if got := len(g.done); got != n {
		t.Fatalf("%d recoveries (%v), want %d, each session once", got, g.done, n)
	}
	if rep := r.Last(); rep.Outcomes[sessions.OutcomeContinued] != n || rep.Pending != 0 {
		t.Fatalf("report %+v, want %d continued", rep, n)
	}
}

// callLog records which of Recover and Start each session got.
type callLog struct {
	mu    sync.Mutex
	calls []string
}

func (c *callLog) add(call string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, call)
}

func (c *callLog) Recover(_ context.Context, id string, _ bool) (sessions.Outcome, error) {
	c.add("recover " + id)
	return sessions.OutcomeStopped, nil
}

func (c *callLog) Start(_ context.Context, id string) error {
	c.add("start " + id)
	return nil
}
func (c *callLog) DestroyAbandoned(context.Context, string) {}

// A stop the last leader answered and did not finish goes to Recover
// (which finishes it) whatever became of its executor, and a session
// stopped before it ever started is not started.
func TestAStopOnRecordIsRecoveredNotStarted(t *testing.T) {
	st := newStore(t)
	st.apply(state.CmdCreateTask, &state.CreateTaskBody{Task: api.Task{ID: "t1", Title: "x"}})
	st.apply(state.CmdCreateSession, &state.CreateSessionBody{Session: api.Session{ID: "s-new", TaskID: "t1", Agent: "demo", Runtime: "standalone"}})
	st.apply(state.CmdRequestStop, &state.RequestStopBody{SessionID: "s-new"})
	// The stop's drain stopped the executor; STOPPED was never written.
	st.executor("s-drained", "standalone", "ex-drained", api.ExecutorStopped)
	st.apply(state.CmdSetSessionState, &state.SetSessionStateBody{SessionID: "s-drained", State: api.SessionStarting})
	st.apply(state.CmdSetSessionState, &state.SetSessionStateBody{SessionID: "s-drained", State: api.SessionWaitingForInput})
	st.apply(state.CmdRequestStop, &state.RequestStopBody{SessionID: "s-drained"})
	st.apply(state.CmdCreateSession, &state.CreateSessionBody{Session: api.Session{ID: "s-plain", TaskID: "t1", Agent: "demo", Runtime: "standalone"}})
	calls := &callLog{}
	r := recovery.New(st.store, calls, config.Default(), nil)
	r.Run(context.Background())
	slices.Sort(calls.calls)
	if want := []string{"recover s-drained", "recover s-new", "start s-plain"}; !slices.Equal(calls.calls, want) {
		t.Fatalf("calls %v, want %v", calls.calls, want)
	}
	if got := r.Last().Outcomes[sessions.OutcomeStopped]; got != 2 {
		t.Errorf("%d stopped outcomes in the report, want 2", got)
	}
}
