package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/shared/runtime/runtimetest"
	"github.com/paddockhq/paddock/shared/testkit"
	"github.com/paddockhq/paddock/supervisor/config"
)

// testCluster is a cluster of in-process servers with real raft over
// loopback TCP and real HTTP APIs.
type testCluster struct {
	t       *testing.T
	cfgs    []*config.Config
	servers []*Server
}

// testConfig returns a config for node i of a cluster of n with the given
// HTTP ports of every node and its raft port.
func testConfig(t *testing.T, i int, httpPorts []int, raftPort int, token string) *config.Config {
	src := fmt.Sprintf(`
node_name = "n%d"
data_dir  = %q
bind_addr = "127.0.0.1"
log_level = "warn"
ports {
  http = %d
  raft = %d
}
server {
  bootstrap_expect     = %d
  retry_join           = [%s]
  heartbeat_timeout    = "200ms"
  election_timeout     = "200ms"
  leader_lease_timeout = "100ms"
}
plugin_dir = %q
plugin "standalone" {
  config {
    workspace_root = %q
  }
}
agent "demo" {
  protocol = "acp"
  command  = ["paddock-demo-agent"]
}
`, i+1, t.TempDir(), httpPorts[i], raftPort, len(httpPorts), joinList(httpPorts, i), filepath.Join(binDir, "plugins"), t.TempDir())
	if token != "" {
		src += fmt.Sprintf("acl {\n  token = %q\n}\n", token)
		if len(httpPorts) > 1 {
			// Servers that join each other share a node secret
			// (required with acl.token; never derived from it).
			src = strings.Replace(src, "server {\n", "server {\n  cluster_secret = \"test-cluster-node-secret\"\n", 1)
		}
	}
	cfg, err := config.Parse([]byte(src), "test.hcl")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func joinList(ports []int, self int) string {
	var out []string
	for i, p := range ports {
		if i != self {
			out = append(out, fmt.Sprintf("%q", fmt.Sprintf("127.0.0.1:%d", p)))
		}
	}
	return strings.Join(out, ", ")
}

func newTestCluster(t *testing.T, n int, token string) *testCluster {
	t.Helper()
	return newTestClusterWith(t, n, token, nil)
}

// newTestClusterWith is newTestCluster with each node's config changed by
// edit (when not nil) before the node starts.
func newTestClusterWith(t *testing.T, n int, token string, edit func(i int, cfg *config.Config)) *testCluster {
	t.Helper()
	ports := testkit.MustFreePorts(t, "127.0.0.1", 2*n) // every node's HTTP port, then every node's raft port
	c := &testCluster{t: t, servers: make([]*Server, n)}
	for i := 0; i < n; i++ {
		cfg := testConfig(t, i, ports[:n], ports[n+i], token)
		if edit != nil {
			edit(i, cfg)
		}
		c.cfgs = append(c.cfgs, cfg)
	}
	// The sessions' agentctls outlive the servers by design: the test's
	// cleanup ends them once the servers have stopped.
	runtimetest.CleanupProcesses(t)
	t.Cleanup(c.stopAll)
	for i := range c.cfgs {
		c.start(i)
	}
	c.waitLeader(-1)
	return c
}

func (c *testCluster) start(i int) {
	c.t.Helper()
	log := hclog.NewInterceptLogger(&hclog.LoggerOptions{Name: c.cfgs[i].NodeName, Level: hclog.Warn, Output: testWriter{c.t}})
	s, err := Start(c.cfgs[i], log)
	if err != nil {
		c.t.Fatalf("start n%d: %v", i+1, err)
	}
	c.servers[i] = s
}

func (c *testCluster) stop(i int) {
	if c.servers[i] != nil {
		_ = c.servers[i].Shutdown()
		c.servers[i] = nil
	}
}

func (c *testCluster) stopAll() {
	for i := range c.servers {
		c.stop(i)
	}
}

// waitLeader waits until every running node agrees on a leader other than
// node `not`, and returns its index.
func (c *testCluster) waitLeader(not int) int {
	c.t.Helper()
	leader := -1
	testkit.WaitFor(c.t, 15*time.Second, "a leader known to every node", testkit.Cond(func() bool {
		leader = -1
		var id string
		for i, s := range c.servers {
			if s == nil {
				continue
			}
			lid, addr := s.Node.Leader()
			if lid == "" || addr == "" || (id != "" && lid != id) {
				return false
			}
			id = lid
			if s.Node.IsLeader() {
				leader = i
			}
		}
		return leader >= 0 && leader != not
	}))
	return leader
}

func (c *testCluster) client(i int, opts ...client.Option) *client.Client {
	c.t.Helper()
	cl, err := client.New("http://"+c.servers[i].HTTPAddr(), c.cfgs[i].ACL.Token, opts...)
	if err != nil {
		c.t.Fatal(err)
	}
	return cl
}

func (c *testCluster) follower() int {
	for i, s := range c.servers {
		if s != nil && !s.Node.IsLeader() {
			return i
		}
	}
	c.t.Fatal("no follower")
	return -1
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestClusterCleanupEndsItsAgentctls: a session's agentctl and agent outlive
// the servers by design; the test cluster's cleanup must end them, or every
// test run leaves them behind until agentctl's idle timeout.
func TestClusterCleanupEndsItsAgentctls(t *testing.T) {
	var root string
	var agentctl int
	t.Run("session", func(t *testing.T) {
		c := newTestCluster(t, 1, "")
		root = filepath.Dir(t.TempDir())
		cl, sess := newDemoSession(t, c, "cleanup")
		waitSessionState(t, cl, sess.ID, api.SessionWaitingForInput)
		execs, err := cl.Executors(ctx(t), sess.ID)
		if err != nil || len(execs) != 1 || execs[0].PID == 0 {
			t.Fatalf("executors of the session: %+v %v", execs, err)
		}
		agentctl = execs[0].PID
	})
	if t.Failed() {
		return
	}
	if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", agentctl)); err == nil && !strings.Contains(string(stat), ") Z ") {
		t.Errorf("agentctl %d outlived the test that started it", agentctl)
	}
	if left := runtimetest.ProcessesUnder(root); len(left) > 0 {
		t.Errorf("processes %v outlived the test that started them", left)
	}
}
