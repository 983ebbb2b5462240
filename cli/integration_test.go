package cli

import (
	"context"
	"net"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/shared/testkit"
	"github.com/paddockhq/paddock/supervisor/api"
	"github.com/paddockhq/paddock/supervisor/cluster"
	"github.com/paddockhq/paddock/supervisor/config"
	"github.com/paddockhq/paddock/supervisor/state"
)

// startNode runs one real supervisor node (raft on loopback, the real API
// handler) with ACL token "tok" and returns its HTTP address.
func startNode(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	raftPorts, err := testkit.FreePorts("127.0.0.1", 1)
	if err != nil {
		t.Fatal(err)
	}
	raftAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(raftPorts[0]))

	cfg := config.Default()
	cfg.NodeName = "n1"
	cfg.DataDir = t.TempDir()
	cfg.ACL.Token = "tok"
	node, err := cluster.New(cluster.Config{
		NodeID: "n1", DataDir: cfg.DataDir, RaftAddr: raftAddr, HTTPAddr: ln.Addr().String(),
		BootstrapExpect: 1, HeartbeatTimeout: 200 * time.Millisecond, ElectionTimeout: 200 * time.Millisecond,
		LeaderLeaseTimeout: 100 * time.Millisecond, NodeSecret: cfg.NodeSecret(),
	}, state.NewStore())
	if err != nil {
		t.Fatalf("cluster.New: %v", err)
	}
	srv := httptest.NewUnstartedServer(api.New(api.Options{Cluster: node, Config: cfg}))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	node.Start()
	t.Cleanup(func() {
		srv.Close()
		_ = node.Shutdown()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if _, _, err := node.WaitForLeader(ctx); err != nil {
		t.Fatalf("no leader: %v", err)
	}
	return srv.URL
}

// TestAgainstRealSupervisor runs the CLI against the real API handler on a
// one-node raft cluster, so the client and server agree on paths and shapes.
func TestAgainstRealSupervisor(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a raft node")
	}
	addr := startNode(t)

	code, out, errOut := runCLI(addr, "status")
	if code != 0 {
		t.Fatalf("status: exit %d: %s", code, errOut)
	}
	assertInOrder(t, out, []string{"Leader", "n1", "ID", "n1", "Voter", "true"})

	code, out, errOut = runCLI(addr, "task", "create", "-title", "integration", "-workspace", t.TempDir())
	if code != 0 {
		t.Fatalf("task create: exit %d: %s", code, errOut)
	}
	id := strings.Fields(strings.TrimPrefix(out, "Created task "))[0]

	code, out, errOut = runCLI(addr, "task", "list")
	if code != 0 || !strings.Contains(out, id[:8]+" ") || strings.Contains(out, id) || !strings.Contains(out, "integration") {
		t.Fatalf("task list: exit %d, out %q, err %q", code, out, errOut)
	}
	if code, out, _ = runCLI(addr, "task", "list", "-verbose"); code != 0 || !strings.Contains(out, id) {
		t.Fatalf("task list -verbose: exit %d, out %q", code, out)
	}
	// -q prints the id alone, for ID=$(paddock task create -q …).
	if code, out, _ = runCLI(addr, "task", "create", "-q", "-title", "quiet"); code != 0 || len(strings.TrimSpace(out)) != len(id) || strings.Count(out, "\n") != 1 {
		t.Fatalf("task create -q: exit %d, out %q", code, out)
	}
	quietID := strings.TrimSpace(out)
	if code, out, _ = runCLI(addr, "task", "list", "-q"); code != 0 || out != id+"\n"+quietID+"\n" && out != quietID+"\n"+id+"\n" {
		t.Fatalf("task list -q: exit %d, out %q", code, out)
	}
	code, out, _ = runCLI(addr, "task", "list", "-json", "-stale")
	if code != 0 || !strings.Contains(out, `"tasks"`) || !strings.Contains(out, id) {
		t.Fatalf("task list -json: exit %d, out %q", code, out)
	}

	code, out, errOut = runCLI(addr, "session", "status", "no-such-session")
	if code != 1 || out != "" {
		t.Errorf("session status of a missing session: exit %d, out %q", code, out)
	}
	assertOneErrorLine(t, errOut, "(not_found)")

	code, _, errOut = runCLI(addr, "operator", "raft", "list-peers", "-token", "wrong")
	if code != 1 {
		t.Errorf("wrong token: exit %d", code)
	}
	assertOneErrorLine(t, errOut, "(unauthorized)")

	if code, out, _ := runCLI(addr, "session", "list"); code != 0 || out != "No sessions\n" {
		t.Errorf("session list: exit %d, out %q", code, out)
	}

	c, err := client.New(addr, "tok")
	if err != nil {
		t.Fatal(err)
	}
	h, err := c.Health(context.Background())
	if err != nil || h.Status != "ok" || h.Node != "n1" || !h.Leader {
		t.Errorf("Health = %+v, %v", h, err)
	}
	if _, err := c.GetTask(context.Background(), "missing"); !client.IsCode(err, "not_found") {
		t.Errorf("GetTask(missing) = %v, want not_found", err)
	}
}
