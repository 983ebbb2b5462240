package sessions

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/shared/agentctl"
	"github.com/paddockhq/paddock/shared/testkit"
	"github.com/paddockhq/paddock/supervisor/state"
)

// renewalDropper stands in front of an agentctl and refuses the next drop
// lease renewals (503, agentctl never sees them), noting when renewals
// were refused and passed on.
type renewalDropper struct {
	proxy *httputil.ReverseProxy
	mu    sync.Mutex
	drop  int
	// dropped and passed are when each refused and each passed renewal came.
	dropped, passed []time.Time
}

func (d *renewalDropper) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/lease" {
		d.proxy.ServeHTTP(w, r)
		return
	}
	d.mu.Lock()
	refuse := d.drop > 0
	if refuse {
		d.drop--
		d.dropped = append(d.dropped, time.Now())
	} else {
		d.passed = append(d.passed, time.Now())
	}
	d.mu.Unlock()
	if refuse {
		http.Error(w, "dropped by the test", http.StatusServiceUnavailable)
		return
	}
	d.proxy.ServeHTTP(w, r)
}

func (d *renewalDropper) times() (dropped, passed []time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]time.Time(nil), d.dropped...), append([]time.Time(nil), d.passed...)
}

// A lease renewal that fails is tried again soon, not a renewal interval
// later: on a starved host one lost round trip would otherwise cost a third
// of the TTL of the 80% agentctl waits before it stops its agent. A new
// leader renews at once.
func TestAFailedLeaseRenewalIsRetriedSoon(t *testing.T) {
	w := newWorld(t, "n1", "n2")
	w.cfg.Lease.TTL = 6 * time.Second // renewals every 1.2 s
	s := w.seedLive(liveOpts{id: "s1", node: "n1"})
	dropper := &renewalDropper{drop: 2}
	w.proxyAgentctl(s, func(p *httputil.ReverseProxy) http.Handler { dropper.proxy = p; return dropper })
	started := time.Now()
	m := w.leader("n2")
	renew, _ := m.leaseTimes()
	testkit.WaitFor(t, 3*renew, "a renewal to reach agentctl", testkit.Cond(func() bool {
		_, passed := dropper.times()
		return len(passed) > 0
	}))
	dropped, passed := dropper.times()
	if len(dropped) != 2 {
		t.Fatalf("%d renewals refused before one passed, want 2", len(dropped))
	}
	if d := dropped[0].Sub(started); d > renew/2 {
		t.Errorf("the new leader's first renewal came %s after it started leading, want at once", d.Round(time.Millisecond))
	}
	if d := passed[0].Sub(dropped[0]); d > renew/2 {
		t.Fatalf("after a failed renewal the next reached agentctl %s later, want well under the %s interval", d.Round(time.Millisecond), renew)
	}
	if _, ok := m.LeaseExpiry(s.id); !ok {
		t.Fatal("the leader does not track the renewed lease")
	}
	// Once renewed, the lease keeps its interval: no renewal storm.
	testkit.WaitFor(t, 3*renew, "the next regular renewal", testkit.Cond(func() bool {
		_, passed := dropper.times()
		return len(passed) > 1
	}))
	_, passed = dropper.times()
	if d := passed[1].Sub(passed[0]); d < renew*3/4 || d > w.cfg.Lease.TTL/4 {
		t.Errorf("renewed again %s after a renewal that passed, want about the %s interval (TTL/5: a leader stall of up to ~0.6 TTL is survived)", d.Round(time.Millisecond), renew)
	}
}

// renewalCounter stands in front of an agentctl and notes when each lease
// renewal (POST /v1/lease) came. With polled it answers the event stream
// 404, as an agentctl older than the stream does, so the pump polls; with
// stripLease it also drops a poll's lease parameter, as an agentctl older
// than it would ignore it.
type renewalCounter struct {
	proxy      *httputil.ReverseProxy
	polled     bool
	stripLease bool
	mu         sync.Mutex
	renewals   []time.Time
}

func (c *renewalCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if c.polled && refuseStream(w, r) {
		return
	}
	switch r.URL.Path {
	case "/v1/lease":
		c.mu.Lock()
		c.renewals = append(c.renewals, time.Now())
		c.mu.Unlock()
	case "/v1/events":
		if c.stripLease {
			q := r.URL.Query()
			q.Del("lease")
			r.URL.RawQuery = q.Encode()
		}
	}
	c.proxy.ServeHTTP(w, r)
}

// between counts the renewals that came in [from, to).
func (c *renewalCounter) between(from, to time.Time) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.renewals {
		if !t.Before(from) && t.Before(to) {
			n++
		}
	}
	return n
}

// An agentctl the pump follows through its event stream is renewed by the
// keeper throughout a streaming turn (the stream renews nothing). One older
// than the stream is polled: while a turn streams, the pump's polls renew
// the session's lease and the keeper sends no renewals of its own; once
// the session is idle (a poll waits up to 20 s) the keeper renews it
// again. An agentctl that does not renew through polls is renewed by the
// keeper throughout.
func TestAStreamingSessionStaysRenewed(t *testing.T) {
	for _, c := range []struct {
		name               string
		polled, stripLease bool
	}{
		{"agentctl with the event stream", false, false},
		{"agentctl renewing through polls", true, false},
		{"agentctl without poll renewals", true, true},
	} {
		t.Run(c.name, func(t *testing.T) { streamingRenewals(t, &renewalCounter{polled: c.polled, stripLease: c.stripLease}) })
	}
}

func streamingRenewals(t *testing.T, counter *renewalCounter) {
	w := newWorld(t, "n1", "n2")
	w.cfg.Lease.TTL = 3 * time.Second // renewals every 600 ms
	s := w.seedLive(liveOpts{id: "s1", node: "n1"})
	keeperOnly := !counter.polled || counter.stripLease
	w.proxyAgentctl(s, func(p *httputil.ReverseProxy) http.Handler { counter.proxy = p; return counter })
	m := w.leader("n2")
	renew, _ := m.leaseTimes()
	continueSession(t, m, s.id)
	const n = 4000 // ≥ 4 s at the test agent's 1 ms chunk delay
	if err := m.Prompt(recoverCtx(t), s.id, fmt.Sprintf("stream %d", n)); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	testkit.WaitFor(t, 60*time.Second, "the session to wait for input", testkit.Cond(func() bool {
		return w.session(s.id).State == api.SessionWaitingForInput
	}))
	ended := time.Now()
	if ended.Sub(started) < 3*renew {
		t.Fatalf("the turn took %s, too short to tell (want at least %s)", ended.Sub(started).Round(time.Millisecond), 3*renew)
	}
	msgs := w.r.store.Messages(s.id)
	if last := msgs[len(msgs)-1]; last.Role != api.RoleAgent || !last.Complete {
		t.Fatalf("the reply was cut: last message %s, complete %v", last.Role, last.Complete)
	}
	// A renewal sent in the turn's first interval may still be due from
	// before it; after that, none while the polls renew.
	during := counter.between(started.Add(renew), ended)
	t.Logf("%s turn: %d keeper renewals after its first %s", ended.Sub(started).Round(time.Millisecond), during, renew)
	if want := int(ended.Sub(started)/renew) - 2; keeperOnly && during < want {
		t.Errorf("%d keeper renewals of an agentctl that is not renewed through polls, want at least %d", during, want)
	}
	if !keeperOnly && during > 1 {
		t.Errorf("%d keeper renewals while the pump's polls renewed the lease, want at most 1", during)
	}
	// Idle again: the keeper renews.
	testkit.WaitFor(t, 5*renew, "the keeper to renew the idle session", testkit.Cond(func() bool {
		return counter.between(ended, time.Now()) >= 2
	}))
	if _, ok := m.LeaseExpiry(s.id); !ok {
		t.Fatal("the leader does not track the lease")
	}
	if st, err := s.client.AgentState(recoverCtx(t)); err != nil || st.Status != agentctl.StatusWaitingForInput {
		t.Fatalf("agent %+v, %v; want it waiting for input (never self-fenced)", st, err)
	}
}

// BenchmarkLeaseKeeperRound measures one round of the lease keeper (ten a
// second on a leader) with 1,000 held leases none of which is due: what
// an idle fleet costs the leader between renewals.
func BenchmarkLeaseKeeperRound(b *testing.B) {
	answer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"fencing_token":1,"nonce":"any"}`))
	}))
	defer answer.Close()
	r := newReplicated()
	cfg := testConfig()
	cfg.Lease.TTL = time.Hour // nothing falls due again while the benchmark runs
	r.must(b, state.CmdCreateTask, &state.CreateTaskBody{Task: api.Task{ID: "t1", Title: "t1", Workspace: api.Workspace{Path: b.TempDir()}}})
	for i := range 1000 {
		id, ex := fmt.Sprintf("s%04d", i), fmt.Sprintf("ex%04d", i)
		r.must(b, state.CmdCreateSession, &state.CreateSessionBody{Session: api.Session{ID: id, TaskID: "t1", Agent: "demo", Runtime: "standalone"}})
		r.must(b, state.CmdClaimLease, &state.ClaimLeaseBody{SessionID: id, ExecutorID: ex, Nonce: "n-" + id, TTL: cfg.Lease.TTL})
		r.must(b, state.CmdPutExecutor, state.NewPutExecutor(api.Executor{ID: ex, SessionID: id, Runtime: "standalone", Node: "n1",
			Status: api.ExecutorReady, AgentctlURL: answer.URL, Nonce: "n-" + id, Secret: secretForTests}))
	}
	m := New(Options{Cluster: fsmCluster{id: "n1", r: r}, Config: cfg, Logger: hclog.NewNullLogger()})
	m.startLeaseClock()
	k := newLeaseKeeper(m)
	ctx := context.Background()
	k.round(ctx) // the first round renews every lease
	k.wg.Wait()
	b.Run("between listings", func(b *testing.B) {
		for b.Loop() {
			k.round(ctx)
		}
	})
	b.Run("listing", func(b *testing.B) { // once a renewal interval
		for b.Loop() {
			k.listed = time.Time{}
			k.round(ctx)
		}
	})
}

// A lease claimed after the keeper listed the held leases is renewed all
// the same: the keeper lists them again once a renewal interval.
func TestALeaseClaimedAfterTheKeeperListedIsRenewed(t *testing.T) {
	w := newWorld(t, "n1", "n2")
	w.cfg.Lease.TTL = 2 * time.Second // renewals every 400 ms; agentctl stops its agent 1.6 s after the last
	m := w.leader("n2")
	renew, _ := m.leaseTimes()
	s := w.seedLive(liveOpts{id: "s1", node: "n1"}) // claimed, and renewed once by the test
	counter := &renewalCounter{}
	w.proxyAgentctl(s, func(p *httputil.ReverseProxy) http.Handler { counter.proxy = p; return counter })
	from := time.Now()
	testkit.WaitFor(t, 3*w.cfg.Lease.TTL, "three keeper renewals of the new lease", testkit.Cond(func() bool {
		return counter.between(from, time.Now()) >= 3
	}))
	if took := time.Since(from); took > 3*renew+w.cfg.Lease.TTL/2 {
		t.Errorf("three renewals took %s, want about %s", took.Round(time.Millisecond), 3*renew)
	}
	if st, err := s.client.AgentState(recoverCtx(t)); err != nil || st.Status != agentctl.StatusWaitingForInput {
		t.Fatalf("agent %+v, %v; want it waiting for input (never self-fenced)", st, err)
	}
}
