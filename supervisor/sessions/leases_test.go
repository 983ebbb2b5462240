package sessions

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
	"time"
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
	target, err := url.Parse(s.executor.AgentctlURL)
	if err != nil {
		t.Fatal(err)
	}
	dropper := &renewalDropper{proxy: httputil.NewSingleHostReverseProxy(target), drop: 2}
	front := httptest.NewServer(dropper)
	t.Cleanup(front.Close)
	w.agentctlBehind(s, front.URL)
	started := time.Now()
	m := w.leader("n2")
	renew, _ := m.leaseTimes()
	waitFor(t, 3*renew, "a renewal to reach agentctl", func() bool {
		_, passed := dropper.times()
		return len(passed) > 0
	})
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
	waitFor(t, 3*renew, "the next regular renewal", func() bool {
		_, passed := dropper.times()
		return len(passed) > 1
	})
	_, passed = dropper.times()
	if d := passed[1].Sub(passed[0]); d < renew*3/4 || d > w.cfg.Lease.TTL/4 {
		t.Errorf("renewed again %s after a renewal that passed, want about the %s interval (TTL/5: a leader stall of up to ~0.6 TTL is survived)", d.Round(time.Millisecond), renew)
	}
}
