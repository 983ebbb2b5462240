package server

import (
	"testing"
	"time"

	"github.com/paddockhq/paddock/shared/testkit"
	"github.com/paddockhq/paddock/supervisor/config"
)

// peerHealth is what list-peers shows for each server, asked of the node
// that leads now (i when none does: then health is unknown).
func (c *testCluster) peerHealth(i int) map[string]*bool {
	c.t.Helper()
	for j, s := range c.servers {
		if s != nil && s.Node.IsLeader() {
			i = j
		}
	}
	peers, err := c.client(i).RaftPeers(ctx(c.t))
	if err != nil {
		return nil
	}
	out := map[string]*bool{}
	for _, p := range peers {
		out[p.ID] = p.Healthy
	}
	return out
}

// TestAutopilotShowsAStoppedServerFailed: on a real three-node cluster the
// leader's autopilot reports every server healthy with a last contact; a
// follower that stops shows as unhealthy in list-peers within seconds while
// raft still lists it, and it is not removed (cleanup_dead_servers is off).
func TestAutopilotShowsAStoppedServerFailed(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	c := newTestCluster(t, 3, testToken)
	leader := c.waitLeader(-1)
	testkit.WaitFor(t, 15*time.Second, "every server healthy in autopilot's view", testkit.Cond(func() bool {
		h := c.peerHealth(leader)
		if len(h) != 3 {
			return false
		}
		for _, ok := range h {
			if ok == nil || !*ok {
				return false
			}
		}
		peers, err := c.client(leader).RaftPeers(ctx(t))
		if err != nil {
			return false
		}
		for _, p := range peers {
			if p.LastContact == nil {
				return false
			}
		}
		return true
	}))
	victim := c.follower()
	name := c.cfgs[victim].NodeName
	stoppedAt := time.Now()
	c.stop(victim)
	testkit.WaitFor(t, 15*time.Second, name+" unhealthy in list-peers, with its last contact", testkit.Cond(func() bool {
		peers, err := c.client(leader).RaftPeers(ctx(t))
		if err != nil {
			return false
		}
		for _, p := range peers {
			if p.ID == name {
				return p.Healthy != nil && !*p.Healthy && p.LastContact != nil && p.LastContact.Before(stoppedAt.Add(time.Second))
			}
		}
		return false
	}))
	t.Logf("%s showed unhealthy %s after it stopped", name, time.Since(stoppedAt).Round(time.Millisecond))
	// Failed, not forgotten: it stays a voter, and the others are healthy.
	testkit.WaitFor(t, 15*time.Second, "the other servers healthy while "+name+" is listed unhealthy", testkit.Cond(func() bool {
		h := c.peerHealth(leader)
		if len(h) != 3 || h[name] == nil || *h[name] {
			return false
		}
		for id, ok := range h {
			if id != name && (ok == nil || !*ok) {
				return false
			}
		}
		return true
	}))
}

// TestAutopilotCleansUpADeadServer: with server.cleanup_dead_servers the
// leader removes a server that stopped answering once it has failed.
func TestAutopilotCleansUpADeadServer(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	c := newTestClusterWith(t, 3, testToken, func(_ int, cfg *config.Config) { cfg.Server.CleanupDeadServers = true })
	leader := c.waitLeader(-1)
	victim := c.follower()
	name := c.cfgs[victim].NodeName
	c.stop(victim)
	testkit.WaitFor(t, 20*time.Second, name+" removed from the raft configuration", testkit.Cond(func() bool {
		h := c.peerHealth(leader)
		_, listed := h[name]
		return h != nil && len(h) == 2 && !listed
	}))
}
