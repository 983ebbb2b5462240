package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/bench/harness"
	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/shared/testkit"
)

func TestThreeProcessClusterSurvivesLeaderKill(t *testing.T) {
	if testing.Short() {
		t.Skip("process cluster")
	}
	c := startCluster(t, 3, true, "")
	leader := leaderOf(t, c)
	var follower *harness.Node
	for _, n := range c.Nodes {
		if n != leader {
			follower = n
			break
		}
	}
	// A write sent to a follower is visible in every node's own state.
	first, err := apiClient(t, follower).CreateTask(testCtx(t), api.CreateTaskRequest{Title: "via follower"})
	if err != nil {
		t.Fatalf("write via follower: %v", err)
	}
	for _, n := range c.Nodes {
		stale := apiClient(t, n)
		testkit.WaitFor(t, 5*time.Second, n.Name+" to see the write with ?stale=true", testkit.Cond(func() bool {
			_, err := stale.GetTask(testCtx(t), first.ID, client.Stale())
			return err == nil
		}))
	}
	acked := []string{first.ID}
	for i := 0; i < 10; i++ {
		task, err := apiClient(t, c.Nodes[i%3]).CreateTask(testCtx(t), api.CreateTaskRequest{Title: fmt.Sprintf("t%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		acked = append(acked, task.ID)
	}

	// kill -9 the leader: a new leader accepts writes and has every acked write.
	leader.Kill()
	newLeader := leaderOf(t, c)
	if newLeader == leader {
		t.Fatal("killed node still reported as leader")
	}
	after, err := apiClient(t, newLeader).CreateTask(testCtx(t), api.CreateTaskRequest{Title: "after failover"})
	if err != nil {
		t.Fatalf("write after failover: %v", err)
	}
	acked = append(acked, after.ID)
	for _, id := range acked {
		if _, err := apiClient(t, newLeader).GetTask(testCtx(t), id); err != nil {
			t.Fatalf("acknowledged write %s lost: %v", id, err)
		}
	}

	// The killed node restarts from its data_dir and catches up.
	if err := leader.Start(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 15*time.Second, "restarted node to catch up", testkit.Cond(func() bool {
		_, err := apiClient(t, leader).GetTask(testCtx(t), after.ID, client.Stale())
		return err == nil
	}))
	tasks, err := apiClient(t, leader).ListTasks(testCtx(t), client.Stale())
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
	// A clone's layout: config.hcl beside bin/ (relative paths in a config
	// file are relative to the file's directory).
	dir := t.TempDir()
	if err := os.Symlink(binDir, filepath.Join(dir, "bin")); err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(repoFile(t, "config.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.hcl"), src, 0o600); err != nil {
		t.Fatal(err)
	}
	n := startNode(t, "make-run", dir, "config.hcl", "127.0.0.1:7700")
	var out []byte
	testkit.WaitFor(t, 20*time.Second, "paddock status to succeed", testkit.Cond(func() bool {
		out, err = exec.Command(filepath.Join(binDir, "paddock"), "status", "-address", n.URL()).CombinedOutput()
		return err == nil
	}))
	if !strings.Contains(string(out), "Leader") {
		t.Fatalf("paddock status output:\n%s", out)
	}
	// A new data_dir with server.raft_store unset gets bolt's raft.db.
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
