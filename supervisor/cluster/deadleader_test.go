package cluster

import (
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/paddockhq/paddock/shared/testkit"
	"github.com/paddockhq/paddock/supervisor/state"
)

// TestOnlyVoterElectsItselfWithoutAHeartbeatTimeout: a one-server cluster
// restarting has no leader to hear from. With a 2 s heartbeat timeout raft
// alone would wait 2–4 s before its election; the server elects itself with
// the short timeout, then runs with its configured timing again.
func TestOnlyVoterElectsItselfWithoutAHeartbeatTimeout(t *testing.T) {
	start := oneVoter(t, func(c *Config) {
		c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout = 2*time.Second, 2*time.Second, 100*time.Millisecond
	})
	n := start()
	testkit.WaitFor(t, 15*time.Second, "the new cluster's first election", testkit.Cond(n.IsLeader)) // bootstrap: the usual timing, 2–4 s
	if err := n.Shutdown(); err != nil {
		t.Fatal(err)
	}

	began := time.Now()
	n = start()
	defer n.Shutdown()
	testkit.WaitFor(t, 5*time.Second, "the restarted server to lead", testkit.Cond(n.IsLeader))
	if took := time.Since(began); took >= 1500*time.Millisecond {
		t.Fatalf("the only voter led %s after its restart; a heartbeat timeout is 2 s", took)
	}
	testkit.WaitFor(t, 5*time.Second, "the configured timing to be restored", testkit.Cond(func() bool { return n.raft.ReloadableConfig().HeartbeatTimeout == 2*time.Second }))
}

// oneVoter returns a one-server config on a free loopback raft port (with
// cfg's timing and snapshot fields as edit sets them) and a start that
// opens and starts a node from it; each start reads the same data dir.
func oneVoter(t *testing.T, edit func(*Config)) func() *Node {
	t.Helper()
	ports, err := testkit.FreePorts("127.0.0.1", 1)
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
	cfg := Config{NodeID: "n1", DataDir: t.TempDir(), RaftAddr: addr, HTTPAddr: "127.0.0.1:1", BootstrapExpect: 1}
	edit(&cfg)
	return func() *Node {
		t.Helper()
		n, err := New(cfg, state.NewStore())
		if err != nil {
			t.Fatal(err)
		}
		n.Start()
		return n
	}
}
