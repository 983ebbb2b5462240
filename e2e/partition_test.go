package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	wire "github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/bench/chaos"
	"github.com/paddockhq/paddock/bench/harness"
	"github.com/paddockhq/paddock/bench/netns"
	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/shared/agentctl"
	"github.com/paddockhq/paddock/shared/runtime/runtimetest"
	"github.com/paddockhq/paddock/shared/testkit"
)

// requireNetns skips without network namespaces, except under CI, where
// .ci/run installs iproute2 and runs as root: there it must run.
func requireNetns(t *testing.T) {
	t.Helper()
	if _, err := netns.IPPath(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("network namespaces are required under CI: %v", err)
		}
		t.Skipf("network namespaces unavailable (%v); set up iproute2 and run as root", err)
	}
}

// nsCluster starts three nodes, each in its own network namespace on one
// switch, every node's agentctl listening on that node's address.
func nsCluster(t *testing.T, ttl time.Duration) (*harness.Cluster, *netns.Net, string) {
	t.Helper()
	requireNetns(t)
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Fatalf("unshare (util-linux) is needed for per-node pid namespaces: %v", err)
	}
	prefix := fmt.Sprintf("pp%d", os.Getpid()%100000)
	_ = netns.CleanStale(prefix)
	nw, err := netns.New(prefix, 3)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	common := fmt.Sprintf(`
plugin_dir = %q
lease {
  ttl = %q
}
agent "demo" {
  protocol = "acp"
  command  = ["paddock-demo-agent"]
}
`, filepath.Join(binDir, "plugins"), ttl.String())
	var hosts []harness.HostSpec
	for i, h := range nw.Hosts {
		// Each node also gets its own pid namespace (and /proc), as on
		// separate machines: a node's runtime cannot see, probe or kill the
		// agentctl processes another node started; the workspace root is
		// shared storage.
		wrap := append(nw.Wrapper(i), "unshare", "--pid", "--kill-child", "--mount-proc")
		hosts = append(hosts, harness.HostSpec{IP: h.IP, Wrap: wrap,
			Extra: fmt.Sprintf("plugin \"standalone\" {\n  config {\n    workspace_root = %q\n    shared_workspace_root = true\n    listen = %q\n  }\n}\n", root, h.IP+":0")})
	}
	// Cleanups run last-in first-out: the servers stop, every process the
	// test started is killed, then the namespaces go.
	t.Cleanup(func() {
		if err := nw.Close(); err != nil {
			t.Errorf("remove namespaces: %v", err)
		}
	})
	runtimetest.CleanupProcesses(t)
	c, err := harness.StartHosts(harness.Options{Bin: binDir, Dir: t.TempDir(), Extra: common}, hosts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Stop()
		if t.Failed() {
			for _, n := range c.Nodes {
				t.Logf("--- log of %s ---\n%s", n.Name, n.Log())
			}
		}
	})
	return c, nw, root
}

// leaderAmong waits until one of nodes says it leads.
func leaderAmong(t *testing.T, nodes []*harness.Node, timeout time.Duration) *harness.Node {
	t.Helper()
	var leader *harness.Node
	testkit.WaitFor(t, timeout, "a leader among "+fmt.Sprint(len(nodes))+" nodes", testkit.Cond(func() bool {
		for _, n := range nodes {
			resp, err := (&http.Client{Timeout: 500 * time.Millisecond}).Get(n.URL() + "/v1/health")
			if err != nil {
				continue
			}
			var h struct {
				Leader bool `json:"leader"`
			}
			err = json.NewDecoder(resp.Body).Decode(&h)
			resp.Body.Close()
			if err == nil && h.Leader {
				leader = n
				return true
			}
		}
		return false
	}))
	return leader
}

// demoAgentsIn counts demo agent processes whose cwd is workspace.
func demoAgentsIn(workspace string) int {
	n := 0
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || isZombie(pid) {
			continue
		}
		exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		cwd, _ := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
		if filepath.Base(exe) == "paddock-demo-agent" && cwd == workspace {
			n++
		}
	}
	return n
}

func TestPartitionedLeaderLosesSessionToMajority(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	const ttl = 2 * time.Second
	c, nw, _ := nsCluster(t, ttl)
	leader := leaderOf(t, c)
	li := -1
	var majority []*harness.Node
	for i, n := range c.Nodes {
		if n == leader {
			li = i
		} else {
			majority = append(majority, n)
		}
	}
	api := apiClient(t, leader)
	task, err := api.CreateTask(testCtx(t), wire.CreateTaskRequest{Title: "partition"})
	if err != nil {
		t.Fatal(err)
	}
	s := startSessions(t, api, task.ID, 1, "demo")[0]
	exs, err := api.Executors(testCtx(t), s.id)
	if err != nil || len(exs) == 0 {
		t.Fatal(exs, err)
	}
	oldEx := exs[0]
	if !strings.Contains(oldEx.AgentctlURL, nw.Hosts[li].IP) {
		t.Fatalf("the session's agentctl %s is not on the leader's host %s", oldEx.AgentctlURL, nw.Hosts[li].IP)
	}
	stateDir := filepath.Join(filepath.Dir(oldEx.WorkspacePath), "state")
	watch := watchExecutions(t, stateDir)
	old, err := api.Lease(testCtx(t), s.id)
	if err != nil || old.State != wire.LeaseHeld {
		t.Fatalf("lease: %+v %v", old, err)
	}
	secret, haveSecret := executorSecret(t, api, s.id)

	// Cut the leader (and the session's agentctl with it) off.
	cut := time.Now()
	if err := nw.Cut(li); err != nil {
		t.Fatal(err)
	}
	healed := false
	defer func() {
		if !healed {
			_ = nw.Heal(li)
		}
	}()
	newLeader := leaderAmong(t, majority, 30*time.Second)
	t.Logf("%s leads the majority %s after the cut", newLeader.Name, time.Since(cut).Round(time.Millisecond))
	mapi := apiClient(t, newLeader)
	// The majority reclaims after expiry and resumes the session on its side.
	var cur *wire.Lease
	testkit.WaitFor(t, 90*time.Second, "the majority to resume the session under a new lease", testkit.Cond(func() bool {
		st, err := mapi.SessionStatus(testCtx(t), s.id)
		if err != nil {
			return false
		}
		if st.State == wire.SessionError {
			_, _ = mapi.Resume(testCtx(t), s.id)
		}
		cur, err = mapi.Lease(testCtx(t), s.id)
		return err == nil && cur.State == wire.LeaseHeld && cur.FencingToken > old.FencingToken && st.IsAgentRunning && st.State == wire.SessionWaitingForInput
	}))
	regranted := time.Now()
	t.Logf("session resumed under token %d (was %d) %s after the cut", cur.FencingToken, old.FencingToken, time.Since(cut).Round(time.Millisecond))
	exs, err = mapi.Executors(testCtx(t), s.id)
	if err != nil || len(exs) == 0 {
		t.Fatal(exs, err)
	}
	newEx := exs[0]
	if strings.Contains(newEx.AgentctlURL, nw.Hosts[li].IP) {
		t.Fatalf("the session still runs on the cut-off host: %s", newEx.AgentctlURL)
	}
	// The cut-off side's agent stopped by itself (self-fenced), before the
	// new execution started.
	execs := executions(t, watch, s.id)
	if len(execs) < 2 {
		t.Fatalf("executions %+v", execs)
	}
	oldRun, newRun := execs[len(execs)-2], execs[len(execs)-1]
	if oldRun.Token != old.FencingToken || newRun.Token != cur.FencingToken || !newRun.Alive {
		t.Fatalf("executions %+v; want the old under %d, the new alive under %d", execs, old.FencingToken, cur.FencingToken)
	}
	if oldRun.End.IsZero() || !oldRun.End.Before(newRun.Start) || !oldRun.End.Before(regranted) {
		t.Fatalf("old agent %+v did not stop before the new one %+v", oldRun, newRun)
	}
	log, _ := os.ReadFile(filepath.Join(stateDir, "agentctl.log"))
	if !strings.Contains(string(log), "self-fencing") {
		t.Errorf("the cut-off agentctl's log does not show self-fencing:\n%s", log)
	}
	t.Logf("old agent stopped %s after the cut; new agent started %s after it", oldRun.End.Sub(cut).Round(time.Millisecond), newRun.Start.Sub(oldRun.End).Round(time.Millisecond))

	// The old leader's side, still cut off, acts on the session through
	// its own agentctl with what it holds (the executor's secret and the
	// old token): refused by token, because the new agentctl raised the
	// durable fence in the session's state dir.
	if haveSecret {
		staleLeader(t, nw, li, oldEx.AgentctlURL, secret, old.FencingToken)
		if n := len(executions(t, watch, s.id)); n != len(execs) {
			t.Fatalf("a stale request started an agent: %d executions, was %d", n, len(execs))
		}
	}

	// Heal. The old leader rejoins as a follower; exactly one execution of
	// the session is alive.
	if err := nw.Heal(li); err != nil {
		t.Fatal(err)
	}
	healed = true
	final := leaderOf(t, c)
	fapi := apiClient(t, final)
	testkit.WaitFor(t, 30*time.Second, "the healed node to agree on the lease", testkit.Cond(func() bool {
		l, err := apiClient(t, leader).Lease(testCtx(t), s.id, client.Stale())
		return err == nil && l.FencingToken == cur.FencingToken
	}))
	if vs := chaos.Check(executions(t, watch, s.id), nil, time.Now()); len(vs) > 0 {
		t.Fatalf("executions: %v", vs)
	}
	alive := 0
	for _, e := range executions(t, watch, s.id) {
		if e.Alive {
			alive++
		}
	}
	if alive != 1 || demoAgentsIn(newEx.WorkspacePath) != 1 {
		t.Fatalf("%d journaled and %d running agent executions after healing; want exactly 1", alive, demoAgentsIn(newEx.WorkspacePath))
	}
	// The session may have moved leaders while healing; wait until it runs.
	testkit.WaitFor(t, 60*time.Second, "the session to run after healing", testkit.Cond(func() bool {
		st, err := fapi.SessionStatus(testCtx(t), s.id)
		return err == nil && st.IsAgentRunning && st.State == wire.SessionWaitingForInput
	}))
	if got := promptAndWait(t, fapi, s.id, "recall"); got != "you asked me to remember: "+s.word {
		t.Fatalf("after the partition: %q", got)
	}

	// After healing, the old leader's side reaching the new agentctl with
	// the old token is refused too.
	if !haveSecret {
		t.Skip("the agentctl secret is not readable; stale-leader requests not sent")
	}
	staleLeader(t, nw, li, newEx.AgentctlURL, secret, old.FencingToken)
	if got := promptAndWait(t, fapi, s.id, "recall"); got != "you asked me to remember: "+s.word {
		t.Fatalf("the stale requests disturbed the agent: %q", got)
	}
	if n := demoAgentsIn(newEx.WorkspacePath); n != 1 {
		t.Fatalf("%d agents running after the stale requests; want 1", n)
	}
}

// staleLeader runs TestStaleLeaderHelper inside host i's namespace against
// an agentctl with a stale token; every mutating call must get 409.
func staleLeader(t *testing.T, nw *netns.Net, i int, url, secret string, token uint64) {
	t.Helper()
	cmd := nw.Command(i, os.Args[0], "-test.run", "^TestStaleLeaderHelper$", "-test.v")
	cmd.Env = append(os.Environ(), "PADDOCK_BIN="+binDir, "PADDOCK_STALE_URL="+url, "PADDOCK_STALE_SECRET="+secret,
		fmt.Sprintf("PADDOCK_STALE_TOKEN=%d", token))
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestStaleLeaderHelper") {
		t.Fatalf("stale-leader requests to %s from %s: %v\n%s", url, nw.Hosts[i].Namespace, err, out)
	}
	t.Logf("from %s to %s with token %d:\n%s", nw.Hosts[i].Namespace, url, token, out)
}

// TestStaleLeaderHelper runs inside the old leader's namespace (started by
// TestPartitionedLeaderLosesSessionToMajority): every mutating call with the
// old token must be refused with 409.
func TestStaleLeaderHelper(t *testing.T) {
	url := os.Getenv("PADDOCK_STALE_URL")
	if url == "" {
		t.Skip("helper process only")
	}
	tok, err := strconv.ParseUint(os.Getenv("PADDOCK_STALE_TOKEN"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	ac := agentctl.NewClient(url, os.Getenv("PADDOCK_STALE_SECRET"), 5*time.Second)
	ac.SetFencingToken(tok)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for name, call := range map[string]func() error{
		"renew lease": func() error { _, err := ac.RenewLease(ctx, 2*time.Second); return err },
		"prompt":      func() error { _, err := ac.Prompt(ctx, "remember stale"); return err },
		"stop agent":  func() error { _, err := ac.StopAgent(ctx); return err },
		"start agent": func() error {
			_, err := ac.StartAgent(ctx, agentctl.Profile{Protocol: "acp", Command: []string{"paddock-demo-agent"}}, "")
			return err
		},
	} {
		var ae *agentctl.APIError
		if err := call(); !errors.As(err, &ae) || ae.Status != 409 || !strings.Contains(ae.Message, "lower than") {
			t.Errorf("%s with stale token %d: %v; want 409 (stale fencing token)", name, tok, err)
		} else {
			t.Logf("%s refused: %s", name, ae.Message)
		}
	}
}
