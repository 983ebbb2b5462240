package agentctl_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/paddockhq/paddock/shared/agentctl"
)

// TestLeaseSelfFencing: once the supervisor renews the lease, agentctl stops
// the agent by itself when renewals stop; a stale token cannot renew.
func TestLeaseSelfFencing(t *testing.T) {
	_, hs, c := inProcess(t, agentctl.Options{})
	c.SetFencingToken(5)
	w := newWatcher(c)
	if _, err := c.StartAgent(ctx(t), acpProfile, ""); err != nil {
		t.Fatal(err)
	}
	// Renewals within the TTL keep the agent running.
	for i := 0; i < 3; i++ {
		if _, err := c.RenewLease(ctx(t), time.Second); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond) // the gap between renewals under test, not a synchronisation
	}
	if st, _ := c.AgentState(ctx(t)); st.Status != agentctl.StatusWaitingForInput {
		t.Fatalf("agent stopped while its lease was renewed: %+v", st)
	}
	// A stale leader (lower token) cannot renew.
	stale := agentctl.NewClient(hs.URL, "x", 10*time.Second)
	stale.SetFencingToken(4)
	if _, err := stale.RenewLease(ctx(t), time.Second); err == nil {
		t.Fatal("renewal with a stale token accepted")
	}
	// No renewal: the agent is stopped before the TTL ends.
	start := time.Now()
	w.waitEvent(t, agentctl.EventLeaseExpired, nil, 5*time.Second)
	w.waitEvent(t, agentctl.EventAgentStopped, nil, 10*time.Second)
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("self-fencing took %s for a 1s TTL", took)
	}
}

// An events poll that asks for it renews the lease as it arrives (the
// supervisor's pump polls a busy session several times a second, so that
// session needs no renewals of its own); a poll that does not ask renews
// nothing, and one with a stale or missing token is refused before it
// waits.
func TestAnEventsPollRenewsTheLease(t *testing.T) {
	_, hs, c := inProcess(t, agentctl.Options{})
	c.SetFencingToken(5)
	if _, err := c.StartAgent(ctx(t), acpProfile, ""); err != nil {
		t.Fatal(err)
	}
	// Polls of 300 ms each, for twice the 800 ms agentctl allows a 1 s
	// lease, keep the agent running.
	var next uint64 = 1
	var last time.Time
	for start := time.Now(); time.Since(start) < 1600*time.Millisecond; {
		resp, err := c.Poll(ctx(t), agentctl.EventsQuery{Since: next, Wait: 300 * time.Millisecond, Lease: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if resp.LeaseDeadline == nil || !resp.LeaseDeadline.After(last) {
			t.Fatalf("a poll asking to renew answered deadline %v (last %v)", resp.LeaseDeadline, last)
		}
		last, next = *resp.LeaseDeadline, resp.Next
	}
	if st, _ := c.AgentState(ctx(t)); st.Status != agentctl.StatusWaitingForInput {
		t.Fatalf("agent stopped while polls renewed its lease: %+v", st)
	}
	// Refused before the wait: a stale token, no token, a bad TTL.
	stale := agentctl.NewClient(hs.URL, "x", 10*time.Second)
	stale.SetFencingToken(4)
	began := time.Now()
	_, err := stale.Poll(ctx(t), agentctl.EventsQuery{Since: next, Wait: 10 * time.Second, Lease: time.Second})
	if ae := apiErr(t, err); ae.Status != 409 || time.Since(began) > 5*time.Second {
		t.Fatalf("a renewing poll with a stale token: %+v after %s, want 409 at once", ae, time.Since(began))
	}
	for _, q := range []string{"lease=1s", "lease=soon", "lease=1ms"} {
		req, _ := http.NewRequest("GET", hs.URL+"/v1/events?since=1&"+q, nil)
		req.Header.Set("Authorization", "Bearer x")
		if q != "lease=1s" {
			req.Header.Set(agentctl.FencingHeader, "5")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 400 {
			t.Fatalf("GET /v1/events?%s (token %q): %d, want 400", q, req.Header.Get(agentctl.FencingHeader), resp.StatusCode)
		}
	}
	// Polls that do not ask renew nothing: the watcher's own polls see the
	// agent stopped once the last renewal's deadline passes.
	w := newWatcher(c)
	w.waitEvent(t, agentctl.EventLeaseExpired, nil, 5*time.Second)
}
