package recovery_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/shared/runtime"
	"github.com/paddockhq/paddock/shared/testkit"
	"github.com/paddockhq/paddock/supervisor/config"
	"github.com/paddockhq/paddock/supervisor/plugins"
	"github.com/paddockhq/paddock/supervisor/recovery"
	"github.com/paddockhq/paddock/supervisor/sessions"
	"github.com/paddockhq/paddock/supervisor/state"
)

// store builds replicated state through the real FSM.
type store struct {
	t     *testing.T
	fsm   *state.FSM
	store *state.Store
	idx   uint64
}

func newStore(t *testing.T) *store {
	s := state.NewStore()
	return &store{t: t, fsm: state.NewFSM(s), store: s}
}

func (s *store) apply(typ state.CommandType, body any) {
	s.t.Helper()
	buf, err := state.Command{Type: typ, Now: time.Now(), Body: body}.Encode()
	if err != nil {
		s.t.Fatal(err)
	}
	s.idx++
	if r := s.fsm.Apply(&raft.Log{Index: s.idx, Type: raft.LogCommand, Data: buf}).(*state.Result); r.Err != nil {
		s.t.Fatalf("apply %d: %v", typ, r.Err)
	}
}

// executor records a session on rt whose executor ends in status.
func (s *store) executor(session, rt, executorID string, status api.ExecutorStatus) {
	s.t.Helper()
	s.apply(state.CmdCreateSession, &state.CreateSessionBody{Session: api.Session{ID: session, TaskID: "t1", Agent: "demo", Runtime: rt}})
	s.apply(state.CmdPutExecutor, state.NewPutExecutor(api.Executor{ID: executorID, SessionID: session, Runtime: rt, Status: api.ExecutorStarting, Handle: []byte("h")}))
	if status != api.ExecutorStarting {
		s.apply(state.CmdSetExecutorState, &state.SetExecutorStateBody{ExecutorID: executorID, Status: status})
	}
}

// fakeSessions recovers a session once release is closed.
type fakeSessions struct {
	release   chan struct{}
	recovered chan string
}

func (f *fakeSessions) Recover(ctx context.Context, id string, _ bool) (sessions.Outcome, error) {
	select {
	case <-f.release:
	case <-ctx.Done():
		return sessions.OutcomeLost, ctx.Err()
	}
	f.recovered <- id
	return sessions.OutcomeContinued, nil
}

func (f *fakeSessions) Start(context.Context, string) error      { return nil }
func (f *fakeSessions) DestroyAbandoned(context.Context, string) {}

// plainRuntime is a runtime without the optional Reconciler.
type plainRuntime struct{ runtime.Runtime }

// reconciler records its calls and removes the executors it was told of
// that are not owned.
type reconciler struct {
	plainRuntime
	present []string
	err     error

	mu    sync.Mutex
	calls []runtime.ReconcileRequest
	seen  chan struct{} // one value per call, never blocking
}

func newReconciler(present ...string) *reconciler {
	return &reconciler{present: present, seen: make(chan struct{}, 1000)}
}

func (r *reconciler) Reconcile(ctx context.Context, req runtime.ReconcileRequest) ([]string, error) {
	if _, ok := ctx.Deadline(); !ok {
		return nil, errors.New("called without a deadline")
	}
	r.mu.Lock()
	r.calls = append(r.calls, req)
	r.mu.Unlock()
	r.seen <- struct{}{}
	if r.err != nil {
		return nil, r.err
	}
	owned := req.OwnedSet()
	var removed []string
	for _, id := range r.present {
		if !owned(id) {
			removed = append(removed, "container-of-"+id)
		}
	}
	return removed, nil
}

func (r *reconciler) requests() []runtime.ReconcileRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// fakeRuntimes stands in for plugins.Manager.
type fakeRuntimes struct {
	healthy map[string]runtime.Runtime
	sick    []string
}

func (f *fakeRuntimes) List() []plugins.Status {
	var out []plugins.Status
	for name := range f.healthy {
		out = append(out, plugins.Status{Name: name, Healthy: true})
	}
	for _, name := range f.sick {
		out = append(out, plugins.Status{Name: name, Healthy: false, Error: "exited"})
	}
	slices.SortFunc(out, func(a, b plugins.Status) int { return compare(a.Name, b.Name) })
	return out
}

func compare(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (f *fakeRuntimes) Get(name string) (runtime.Runtime, error) {
	if rt, ok := f.healthy[name]; ok {
		return rt, nil
	}
	return nil, fmt.Errorf("runtime %q: %w", name, plugins.ErrUnhealthy)
}

// The leader reconciles only after its recovery pass, with every executor
// row as owned (any status, any runtime), on healthy runtimes only; a
// runtime without the capability or with an error does not stop the others;
// passes repeat every interval and stop with leadership.
func TestOrphansAfterRecoveryAndPeriodically(t *testing.T) {
	st := newStore(t)
	st.apply(state.CmdCreateTask, &state.CreateTaskBody{Task: api.Task{ID: "t1", Title: "x"}})
	st.executor("s-starting", "docker", "ex-starting", api.ExecutorStarting)
	st.executor("s-ready", "docker", "ex-ready", api.ExecutorReady)
	st.executor("s-stopped", "docker", "ex-stopped", api.ExecutorStopped)
	st.executor("s-error", "docker", "ex-error", api.ExecutorError)
	st.executor("s-other", "standalone", "ex-other-runtime", api.ExecutorReady)
	wantOwned := []string{"ex-error", "ex-other-runtime", "ex-ready", "ex-starting", "ex-stopped"}

	docker := newReconciler("ex-ready", "ex-stopped", "ex-other-runtime", "ex-orphan")
	broken := newReconciler()
	broken.err = fmt.Errorf("engine down: %w", runtime.ErrUnavailable)
	sick := newReconciler("ex-orphan")
	rts := &fakeRuntimes{healthy: map[string]runtime.Runtime{"docker": docker, "broken": broken, "standalone": plainRuntime{}}, sick: []string{"sick"}}

	sess := &fakeSessions{release: make(chan struct{}), recovered: make(chan string, 10)}
	cfg := config.Default()
	r := recovery.New(st.store, sess, cfg, nil).WithOrphans(recovery.OrphanOptions{Runtimes: rts, Cluster: "c1", Grace: 3 * time.Second, Interval: 30 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})

	// Recovery is still running (a session blocks it): no reconcile yet.
	select {
	case id := <-sess.recovered:
		t.Fatalf("session %s recovered before release", id)
	case <-docker.seen:
		t.Fatal("Reconcile called while recovery was running")
	case <-time.After(200 * time.Millisecond): // proving an absence needs a bound
	}
	if r.LastOrphans() != nil {
		t.Fatal("an orphan report before recovery finished")
	}
	close(sess.release)
	testkit.WaitFor(t, 10*time.Second, "the first reconcile report", testkit.Cond(func() bool { return r.LastOrphans() != nil }))
	if r.Last() == nil {
		t.Fatal("reconciled before the recovery report was recorded")
	}
	rep := r.LastOrphans()
	if got := rep.Removed["docker"]; len(got) != 1 || got[0] != "container-of-ex-orphan" {
		t.Errorf("removed on docker %v, want only the orphan's container", got)
	}
	if !slices.Equal(rep.Unsupported, []string{"standalone"}) {
		t.Errorf("unsupported %v, want [standalone]", rep.Unsupported)
	}
	if err := rep.Errors["broken"]; !errors.Is(err, runtime.ErrUnavailable) || len(rep.Errors) != 1 {
		t.Errorf("errors %v, want broken's ErrUnavailable only", rep.Errors)
	}
	if n := len(sick.requests()); n != 0 {
		t.Errorf("an unhealthy runtime was asked %d times", n)
	}
	req := docker.requests()[0]
	got := slices.Clone(req.Owned)
	slices.Sort(got)
	if !slices.Equal(got, wantOwned) || req.Cluster != "c1" || req.Grace != 3*time.Second {
		t.Errorf("request %+v, want owned %v, cluster c1, grace 3s", req, wantOwned)
	}

	// Periodic passes; an executor recorded meanwhile is owned in the next.
	st.executor("s-new", "docker", "ex-new", api.ExecutorStarting)
	testkit.WaitFor(t, 10*time.Second, "a pass that owns the new executor", testkit.Cond(func() bool {
		reqs := docker.requests()
		return slices.Contains(reqs[len(reqs)-1].Owned, "ex-new")
	}))

	// Leadership ends: Run returns and no pass follows.
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	n := len(docker.requests())
	time.Sleep(100 * time.Millisecond) // proving an absence needs a bound: > 3 intervals
	if m := len(docker.requests()); m != n {
		t.Fatalf("%d passes after leadership ended", m-n)
	}
}

// Without WithOrphans, Run returns after its recovery pass, as before.
func TestRunWithoutOrphansReturns(t *testing.T) {
	st := newStore(t)
	sess := &fakeSessions{release: make(chan struct{}), recovered: make(chan string, 1)}
	r := recovery.New(st.store, sess, config.Default(), nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(context.Background())
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run without orphan reconciling did not return")
	}
	if r.Last() == nil || r.LastOrphans() != nil {
		t.Fatalf("reports: recovery %v, orphans %v", r.Last(), r.LastOrphans())
	}
}
