package e2e

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	wire "github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/bench/harness"
	"github.com/paddockhq/paddock/shared/nice"
	"github.com/paddockhq/paddock/shared/testkit"
)

// TestTheServerRunsAboveItsSessions: a server started in a session of its
// own (as systemd and the harness start it) with server.nice = -5 raises
// every thread and its scheduling group to it; its session's agentctl
// leads a group of its own at 0 and the agent one at 19, so the order on
// a busy host is server, agentctl, agent. The default (0) leaves the
// server at its parent's priority.
func TestTheServerRunsAboveItsSessions(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	if os.Geteuid() != 0 {
		t.Skip("raising a priority needs root (the tests run as root in CI)")
	}
	raised := leaderOf(t, startClusterWith(t, harness.Options{Size: 1, Extra: defaultNice(t, standaloneConfig(t)), ServerExtra: "  nice = -5"}))
	waitPriority(t, raised.PID(), -5)
	if !strings.Contains(raised.Log(), "raised the server's CPU priority") {
		t.Fatalf("the server's log does not say it raised its priority:\n%s", raised.Log())
	}
	api := apiClient(t, raised)
	task, err := api.CreateTask(testCtx(t), wire.CreateTaskRequest{Title: "priority"})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := api.CreateSession(testCtx(t), task.ID, wire.CreateSessionRequest{Agent: "demo", Runtime: "standalone"})
	if err != nil {
		t.Fatal(err)
	}
	var agentctl, agent int
	testkit.WaitFor(t, 30*time.Second, "the session's agentctl and agent", testkit.Cond(func() bool {
		exs, err := api.Executors(testCtx(t), sess.ID)
		if err != nil {
			return false
		}
		for _, ex := range exs {
			if ex.Status == wire.ExecutorReady && ex.PID != 0 {
				agentctl = ex.PID
			}
		}
		kids := harness.ChildPIDs(agentctl)
		if agentctl == 0 || len(kids) == 0 {
			return false
		}
		agent = kids[0]
		return true
	}))
	if g, ok, err := nice.GroupOf(agentctl); err != nil || (ok && g != 0) {
		t.Fatalf("agentctl's scheduling group at nice %d (%v), want 0", g, err)
	}
	waitPriority(t, agent, 19)

	plain := leaderOf(t, startCluster(t, 1, false, ""))
	own, err := nice.Of(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if n, err := nice.Of(plain.PID()); err != nil || n != own {
		t.Fatalf("by default the server is at nice %d (%v), want %d as its parent", n, err, own)
	}
	if g, ok, err := nice.GroupOf(plain.PID()); err != nil || (ok && g != 0) {
		t.Fatalf("by default its scheduling group is at nice %d (%v), want 0", g, err)
	}
}

// waitPriority waits until every thread of pid, and its scheduling group
// where it has one, is at nice n (a group's change may wait out the
// kernel's rate limit).
// defaultNice takes standaloneConfig's nice = 0 out, leaving the
// standalone plugin's default priority for its agents.
func defaultNice(t *testing.T, config string) string {
	t.Helper()
	out := strings.Replace(config, "    nice                  = 0\n", "", 1)
	if out == config {
		t.Fatal("standaloneConfig sets no nice to take out")
	}
	return out
}

func waitPriority(t *testing.T, pid, n int) {
	t.Helper()
	var got string
	defer func() {
		if t.Failed() {
			t.Logf("pid %d, last seen: %s", pid, got)
		}
	}()
	testkit.WaitFor(t, 10*time.Second, fmt.Sprintf("pid %d at nice %d", pid, n), testkit.Cond(func() bool {
		var bad []string
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			got = err.Error()
			return false
		}
		for _, e := range tasks {
			tid, _ := strconv.Atoi(e.Name())
			if v, err := nice.Of(tid); err == nil && v != n {
				bad = append(bad, fmt.Sprintf("thread %d at %d", tid, v))
			}
		}
		if g, ok, err := nice.GroupOf(pid); err != nil || (ok && g != n) {
			bad = append(bad, fmt.Sprintf("scheduling group at %d (%v)", g, err))
		}
		got = strings.Join(bad, ", ")
		return len(bad) == 0
	}))
}
