package recovery_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

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
			st.apply(state.CmdCreateTask, &state.CreateTaskBody{Task: state.Task{ID: "t1", Title: "x"}})
			if tc.start {
				st.apply(state.CmdCreateSession, &state.CreateSessionBody{Session: state.Session{ID: "s1", TaskID: "t1", Agent: "demo", Runtime: "standalone"}})
			} else {
				st.executor("s1", "standalone", "ex-1", state.ExecutorReady)
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
	st.apply(state.CmdCreateTask, &state.CreateTaskBody{Task: state.Task{ID: "t1", Title: "x"}})
	st.executor("s-stuck", "standalone", "ex-stuck", state.ExecutorReady)
	st.executor("s-ok", "standalone", "ex-ok", state.ExecutorReady)
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
	waitFor(t, 10*time.Second, "a few retries of the stuck session", func() bool { return sess.callsOf("s-stuck") >= 3 })
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
