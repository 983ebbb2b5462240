package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/client"
)

// writeClusterConfigs writes one config per node, bound to 127.0.0.1..n.
func writeClusterConfigs(t *testing.T, n int) (dirs, cfgs, https []string) {
	t.Helper()
	type addr struct {
		ip         string
		http, raft int
	}
	var addrs []addr
	for i := 1; i <= n; i++ {
		ip := fmt.Sprintf("127.0.0.%d", i)
		addrs = append(addrs, addr{ip, freePortOn(t, ip), freePortOn(t, ip)})
	}
	for i, a := range addrs {
		var join []string
		for j, b := range addrs {
			if j != i {
				join = append(join, fmt.Sprintf("%q", fmt.Sprintf("%s:%d", b.ip, b.http)))
			}
		}
		dir := t.TempDir()
		cfg := fmt.Sprintf(`node_name = "node%d"
data_dir  = "./data"
bind_addr = %q
log_level = "info"
ports {
  http = %d
  raft = %d
}
server {
  bootstrap_expect = %d
  retry_join       = [%s]
}
`, i+1, a.ip, a.http, a.raft, n, strings.Join(join, ", "))
		path := filepath.Join(dir, "config.hcl")
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		dirs, cfgs, https = append(dirs, dir), append(cfgs, path), append(https, fmt.Sprintf("%s:%d", a.ip, a.http))
	}
	return dirs, cfgs, https
}

// leaderOf waits until exactly one running process reports leadership and
// every running process agrees on it.
func leaderOf(t *testing.T, procs []*proc, exclude *proc) *proc {
	t.Helper()
	var leader *proc
	waitFor(t, 20*time.Second, "a leader", func() bool {
		leader = nil
		for _, p := range procs {
			if p == exclude {
				continue
			}
			isLeader, ok := healthy(p.http)
			if !ok {
				return false
			}
			if isLeader {
				if leader != nil {
					return false
				}
				leader = p
			}
		}
		if leader == nil {
			return false
		}
		for _, p := range procs {
			if p == exclude {
				continue
			}
			st, err := p.client(client.WithStaleReads(true)).Status(testCtx(t), client.Stale())
			if err != nil || st.LeaderHTTP != "http://"+leader.http {
				return false
			}
		}
		return true
	})
	return leader
}

func TestThreeProcessClusterSurvivesLeaderKill(t *testing.T) {
	if testing.Short() {
		t.Skip("process cluster")
	}
	dirs, cfgs, https := writeClusterConfigs(t, 3)
	var procs []*proc
	for i := range cfgs {
		procs = append(procs, startServer(t, fmt.Sprintf("node%d", i+1), dirs[i], cfgs[i], https[i]))
	}
	leader := leaderOf(t, procs, nil)
	var follower *proc
	for _, p := range procs {
		if p != leader {
			follower = p
			break
		}
	}
	// A write sent to a follower is visible in every node's own state.
	first, err := follower.client().CreateTask(testCtx(t), client.CreateTaskRequest{Title: "via follower"})
	if err != nil {
		t.Fatalf("write via follower: %v", err)
	}
	for _, p := range procs {
		stale := p.client()
		waitFor(t, 5*time.Second, p.name+" to see the write with ?stale=true", func() bool {
			_, err := stale.GetTask(testCtx(t), first.ID, client.Stale())
			return err == nil
		})
	}
	acked := []string{first.ID}
	for i := 0; i < 10; i++ {
		task, err := procs[i%3].client().CreateTask(testCtx(t), client.CreateTaskRequest{Title: fmt.Sprintf("t%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		acked = append(acked, task.ID)
	}

	// kill -9 the leader: a new leader accepts writes and has every acked write.
	leader.kill()
	newLeader := leaderOf(t, procs, leader)
	after, err := newLeader.client().CreateTask(testCtx(t), client.CreateTaskRequest{Title: "after failover"})
	if err != nil {
		t.Fatalf("write after failover: %v", err)
	}
	acked = append(acked, after.ID)
	for _, id := range acked {
		if _, err := newLeader.client().GetTask(testCtx(t), id); err != nil {
			t.Fatalf("acknowledged write %s lost: %v", id, err)
		}
	}

	// The killed node restarts from its data_dir and catches up.
	leader.start()
	waitFor(t, 15*time.Second, "restarted node to catch up", func() bool {
		_, err := leader.client().GetTask(testCtx(t), after.ID, client.Stale())
		return err == nil
	})
	tasks, err := leader.client().ListTasks(testCtx(t), client.Stale())
	if err != nil || len(tasks) != len(acked) {
		t.Fatalf("restarted node has %d tasks (%v), want %d", len(tasks), err, len(acked))
	}
}

// TestRunConfigAnswersStatus is `make run` on a fresh clone: the repository's
// config.hcl starts a node that answers `paddock status`.
func TestRunConfigAnswersStatus(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	repoCfg, err := filepath.Abs("../config.hcl")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p := startServer(t, "make-run", dir, repoCfg, "127.0.0.1:7700")
	var out []byte
	waitFor(t, 20*time.Second, "paddock status to succeed", func() bool {
		out, err = exec.Command(filepath.Join(binDir, "paddock"), "status", "-address", "http://"+p.http).CombinedOutput()
		return err == nil
	})
	if !strings.Contains(string(out), "Leader") {
		t.Fatalf("paddock status output:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "raft", "raft.db")); err != nil {
		t.Fatalf("data not under ./data: %v", err)
	}
}

// TestBadConfigStartsNothing: each kind of config error exits 1 with a
// file:line:column diagnostic and a hint, before anything is created.
func TestBadConfigStartsNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	cases := map[string]string{
		"syntax":           "ports {\n  http = \n}\n",
		"unknown":          "colour = \"red\"\n",
		"bootstrap_expect": "server {\n  bootstrap_expect = 2\n}\n",
		"duration":         "server {\n  heartbeat_timeout = \"fast\"\n}\n",
		"size":             "terminal {\n  replay_bytes = \"lots\"\n}\n",
		"port":             "ports {\n  http = 70000\n}\n",
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "bad.hcl")
			if err := os.WriteFile(path, []byte("data_dir = \"./data\"\n"+body), 0o600); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(filepath.Join(binDir, "paddock"), "server", "-config", path)
			cmd.Dir = dir
			out, err := cmd.CombinedOutput()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
				t.Fatalf("exit: %v, want 1; output:\n%s", err, out)
			}
			if !strings.Contains(string(out), "bad.hcl:") || !strings.Contains(strings.ToLower(string(out)), "hint") {
				t.Fatalf("output lacks file:line:col or hint:\n%s", out)
			}
			if _, err := os.Stat(filepath.Join(dir, "data")); !os.IsNotExist(err) {
				t.Fatalf("data dir created by a failed start (%v)", err)
			}
		})
	}
}
