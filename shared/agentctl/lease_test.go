package agentctl_test

import (
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/paddockhq/paddock/shared/agentctl"
)

// TestLeaseSelfFencing: once the supervisor renews the lease, agentctl stops
// the agent by itself when renewals stop; a stale token cannot renew.
func TestLeaseSelfFencing(t *testing.T) {
	env := append(os.Environ(), "PATH="+binDir+":"+os.Getenv("PATH"))
	srv, err := agentctl.NewServer(agentctl.Options{SessionID: "s1", Workspace: t.TempDir(), Secret: "x", Env: env, Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	defer srv.Close()
	c := agentctl.NewClient(hs.URL, "x", 10*time.Second)
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
