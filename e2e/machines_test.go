package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	wire "github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/api/termproto"
	"github.com/paddockhq/paddock/bench/harness"
	"github.com/paddockhq/paddock/bench/netns"
	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/shared/runtime/runtimetest"
	"github.com/paddockhq/paddock/shared/testkit"
)

// machines is a cluster of three "machines": each node in its own network
// namespace, with its own data_dir and its own workspace_root (nothing
// shared but the switch), agentctl listening on the node's address by
// default.
type machines struct {
	c  *harness.Cluster
	nw *netns.Net
}

// startMachines starts three machines running the standalone runtime.
func startMachines(t *testing.T) *machines {
	t.Helper()
	nw := newMachineNet(t)
	common := `
agent "demo-tty" {
  protocol                = "pty"
  command                 = ["paddock-demo-agent", "--tty"]
  new_args                = ["--session-id", "{{resume_token}}"]
  resume_args             = ["--resume", "{{resume_token}}"]
  supports_session_resume = true
}
`
	return startMachinesOn(t, nw, common, func(i int) string {
		// Each machine's own disk: a workspace root no other node sees.
		root := filepath.Join(t.TempDir(), fmt.Sprintf("machine%d-workspaces", i+1))
		return fmt.Sprintf("plugin \"standalone\" {\n  config {\n    workspace_root = %q\n  }\n}\n", root)
	})
}

// newMachineNet makes the three machines' network namespaces. At cleanup,
// after every later cleanup (servers, engines), whatever still runs in a
// namespace is killed and the namespaces are removed.
func newMachineNet(t *testing.T) *netns.Net {
	t.Helper()
	requireNetns(t)
	prefix := fmt.Sprintf("pm%d", os.Getpid()%100000)
	_ = netns.CleanStale(prefix)
	nw, err := netns.New(prefix, 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for i := range nw.Hosts {
			killNamespace(t, nw, i)
		}
		if err := nw.Close(); err != nil {
			t.Errorf("remove namespaces: %v", err)
		}
	})
	return nw
}

// startMachinesOn starts a node on each machine of nw: every node gets the
// demo agent, the ACL token and common; machine i also gets perHost(i).
func startMachinesOn(t *testing.T, nw *netns.Net, common string, perHost func(i int) string) *machines {
	t.Helper()
	shared := fmt.Sprintf(`
plugin_dir = %q
acl {
  token = %q
}
agent "demo" {
  protocol = "acp"
  command  = ["paddock-demo-agent"]
}
`, filepath.Join(binDir, "plugins"), termToken) + common
	var hosts []harness.HostSpec
	for i, h := range nw.Hosts {
		hosts = append(hosts, harness.HostSpec{IP: h.IP, Wrap: nw.Wrapper(i), Extra: perHost(i)})
	}
	runtimetest.CleanupProcesses(t)
	c, err := harness.StartHosts(harness.Options{Bin: binDir, Dir: t.TempDir(), Extra: shared, Token: termToken}, hosts)
	if err != nil {
		t.Fatal(err)
	}
	m := &machines{c: c, nw: nw}
	t.Cleanup(func() {
		c.Stop()
		if t.Failed() {
			for _, n := range c.Nodes {
				t.Logf("--- log of %s ---\n%s", n.Name, n.Log())
			}
		}
	})
	return m
}

// killMachine kills every process in machine i's network namespace (its
// server, plugins, agentctls and agents): the machine is gone.
func (m *machines) killMachine(t *testing.T, i int) {
	t.Helper()
	m.c.Nodes[i].Kill()
	killNamespace(t, m.nw, i)
}

// killNamespace SIGKILLs every process in host i's network namespace.
func killNamespace(t *testing.T, nw *netns.Net, i int) {
	t.Helper()
	if err := nw.KillAll(i, time.Second); err != nil {
		t.Fatal(err)
	}
}

func (m *machines) index(n *harness.Node) int {
	for i, x := range m.c.Nodes {
		if x == n {
			return i
		}
	}
	return -1
}

// TestMachinesKeepSessionsThroughLeaderKillAndNodeLoss is the multi-machine
// story: sessions on all three machines; the leader's server process is
// killed (its machine lives on) and every session keeps its agentctl and
// its memory through the new leader, never passing through ERROR; then a
// whole machine goes: its session waits as node_unavailable while the
// others work, and comes back when the machine does.
func TestMachinesKeepSessionsThroughLeaderKillAndNodeLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	m := startMachines(t)
	leader := leaderOf(t, m.c)
	api := machineClient(t, leader)
	testkit.WaitFor(t, 20*time.Second, "every machine registered and answering", testkit.Cond(func() bool {
		hs, err := api.Nodes(testCtx(t))
		ok := 0
		for _, h := range hs {
			if h.Available && h.Plugins["standalone"] {
				ok++
			}
		}
		return err == nil && ok == 3
	}))
	task, err := api.CreateTask(testCtx(t), wire.CreateTaskRequest{Title: "three machines"})
	if err != nil {
		t.Fatal(err)
	}

	// One session placed on each machine, and one left to the leader.
	type placed struct {
		liveSession
		node string
		pid  int
	}
	var sessions []*placed
	for i, n := range m.c.Nodes {
		agent := []string{"demo", "demo-tty", "demo"}[i]
		s, err := api.CreateSession(testCtx(t), task.ID, wire.CreateSessionRequest{Agent: agent, Runtime: "standalone",
			RuntimeOptions: map[string]string{"node": n.Name}})
		if err != nil {
			t.Fatalf("session on %s: %v", n.Name, err)
		}
		sessions = append(sessions, &placed{liveSession: liveSession{id: s.ID, agent: agent, word: fmt.Sprintf("word%d", i)}, node: n.Name})
	}
	auto, err := api.CreateSession(testCtx(t), task.ID, wire.CreateSessionRequest{Agent: "demo", Runtime: "standalone"})
	if err != nil {
		t.Fatal(err)
	}
	sessions = append(sessions, &placed{liveSession: liveSession{id: auto.ID, agent: "demo", word: "word3"}})
	for i, s := range sessions {
		waitState(t, api, s.id, wire.SessionWaitingForInput)
		exs, err := api.Executors(testCtx(t), s.id)
		if err != nil || len(exs) != 1 {
			t.Fatalf("executors of %s: %+v %v", s.id, exs, err)
		}
		ex := exs[0]
		if s.node == "" {
			s.node = ex.Node
		}
		host := m.nw.Hosts[m.index(nodeNamed(t, m.c, s.node))].IP
		if ex.Node != s.node || !strings.Contains(ex.AgentctlURL, "//"+host+":") {
			t.Fatalf("session %d: executor on %s at %s, want node %s at %s", i, ex.Node, ex.AgentctlURL, s.node, host)
		}
		s.pid = ex.PID
		if got := promptAndWait(t, api, s.id, "remember "+s.word); !strings.Contains(got, s.word) {
			t.Fatalf("session %d: remember answered %q", i, got)
		}
	}
	onFollower := sessions[m.index(followerOf(t, m.c, leader))]

	// A session on a follower works through the leader: terminal (relayed
	// by the leader's node to the follower's agentctl) and files.
	tc, _ := termAttach(t, leader, onFollower.id, "shell", termproto.Hello{})
	tc.Input("echo \"on $((1+1)) machines\"\r")
	tc.WaitOutput("on 2 machines")
	tc.Close()
	if err := api.WriteFile(testCtx(t), onFollower.id, "notes.txt", stringsReader("kept on "+onFollower.node)); err != nil {
		t.Fatalf("write a file on %s: %v", onFollower.node, err)
	}

	// Kill the leader's server process only: its machine, agentctls and
	// agents live on.
	watch := watchNeverError(t, m.c, leader, sessions[0].id, sessions[1].id, sessions[2].id, sessions[3].id)
	leader.Kill()
	newLeader := leaderOf(t, m.c)
	napi := machineClient(t, newLeader)
	for i, s := range sessions {
		testkit.WaitFor(t, 30*time.Second, fmt.Sprintf("session %d live on the new leader", i), testkit.Cond(func() bool {
			st, err := napi.SessionStatus(testCtx(t), s.id)
			return err == nil && st.IsAgentRunning && st.State == wire.SessionWaitingForInput
		}))
		if got, want := promptAndWait(t, napi, s.id, "recall"), "you asked me to remember: "+s.word; got != want {
			t.Fatalf("session %d on %s after the leader's kill: recall = %q, want %q", i, s.node, got, want)
		}
		exs, _ := napi.Executors(testCtx(t), s.id)
		if len(exs) != 1 || exs[0].PID != s.pid || exs[0].Node != s.node {
			t.Fatalf("session %d after the leader's kill: executor %+v, want the same agentctl (pid %d) on %s", i, exs, s.pid, s.node)
		}
	}
	if bad := watch(); bad != "" {
		t.Fatal(bad)
	}
	if err := leader.Start(); err != nil {
		t.Fatal(err)
	}

	// Lose a whole machine (not the leader's): its session waits, named.
	victim := followerOf(t, m.c, newLeader)
	vi := m.index(victim)
	lost := sessions[vi]
	// And one session there that is deleted, with force, while the
	// machine is gone: its workspace goes when the machine is back. (The
	// victim may be the server just restarted: it must answer first.)
	testkit.WaitFor(t, 20*time.Second, victim.Name+" answering as an executor host", testkit.Cond(func() bool {
		hs, _ := napi.Nodes(testCtx(t))
		for _, h := range hs {
			if h.Node == victim.Name && h.Available && h.Plugins["standalone"] {
				return true
			}
		}
		return false
	}))
	doomed, err := napi.CreateSession(testCtx(t), task.ID, wire.CreateSessionRequest{Agent: "demo", Runtime: "standalone",
		RuntimeOptions: map[string]string{"node": victim.Name}})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, napi, doomed.ID, wire.SessionWaitingForInput)
	doomedExs, err := napi.Executors(testCtx(t), doomed.ID)
	if err != nil || len(doomedExs) != 1 || doomedExs[0].WorkspacePath == "" {
		t.Fatalf("executors of the session to delete: %+v %v", doomedExs, err)
	}
	doomedWorkspace := doomedExs[0].WorkspacePath
	lostAt := time.Now()
	m.killMachine(t, vi)
	testkit.WaitFor(t, 30*time.Second, "the lost machine's session to say node_unavailable", testkit.Cond(func() bool {
		st, err := napi.SessionStatus(testCtx(t), lost.id)
		if err == nil && st.State == wire.SessionError {
			t.Fatalf("the lost machine's session went to ERROR: %+v", st)
		}
		return err == nil && st.ResumeReason != nil && *st.ResumeReason == wire.ReasonNodeUnavailable &&
			st.ResumeMessage != nil && strings.Contains(*st.ResumeMessage, victim.Name)
	}))
	t.Logf("%s's session showed node_unavailable %s after the machine was killed", victim.Name, time.Since(lostAt).Round(time.Millisecond))
	// The operator sees it too: list-peers shows the killed server failed
	// (once autopilot's next round has seen it miss its contact threshold).
	peersSay := ""
	testkit.WaitFor(t, 15*time.Second, "list-peers to show the killed server unhealthy", testkit.Cond(func() bool {
		peers, err := napi.RaftPeers(testCtx(t))
		if err != nil {
			peersSay = err.Error()
			return false
		}
		for _, p := range peers {
			want := p.ID != victim.Name
			if p.Healthy == nil || *p.Healthy != want || p.LastContact == nil {
				peersSay = fmt.Sprintf("peer %s: healthy %v, last contact %v; want healthy=%v with a last contact", p.ID, p.Healthy, p.LastContact, want)
				return false
			}
		}
		return true
	}))
	if peersSay != "" {
		t.Logf("list-peers caught up after a while; before, it said %s", peersSay)
	}
	if _, err := napi.Resume(testCtx(t), lost.id); err == nil || !strings.Contains(err.Error(), victim.Name) {
		t.Fatalf("resume of a session whose machine is gone: %v, want a conflict naming %s", err, victim.Name)
	}
	for i, s := range sessions {
		if s == lost || s.node == victim.Name {
			continue
		}
		if got, want := promptAndWait(t, napi, s.id, "recall"), "you asked me to remember: "+s.word; got != want {
			t.Fatalf("session %d on %s while %s is down: recall = %q", i, s.node, victim.Name, got)
		}
	}

	// A delete needs the machine, unless forced: then the session is
	// COMPLETED now and its executor waits to be destroyed there.
	if _, err := napi.DeleteSession(testCtx(t), doomed.ID); err == nil || !strings.Contains(err.Error(), victim.Name) || !strings.Contains(err.Error(), "with force") {
		t.Fatalf("delete of a session whose machine is gone: %v, want a conflict naming %s and the forced delete", err, victim.Name)
	}
	if s, err := napi.DeleteSession(testCtx(t), doomed.ID, client.Force()); err != nil || s.State != wire.SessionCompleted {
		t.Fatalf("forced delete while %s is down: %+v %v, want COMPLETED", victim.Name, s, err)
	}
	if exs, err := napi.Executors(testCtx(t), doomed.ID); err != nil || len(exs) != 1 || !exs[0].DestroyPending {
		t.Fatalf("the deleted session's executor while its machine is down: %+v %v, want destroy_pending", exs, err)
	}
	if _, err := os.Stat(doomedWorkspace); err != nil {
		t.Fatalf("the deleted session's workspace went while its machine was down: %v", err)
	}

	// The machine comes back (its server only: its agentctls died with
	// it): the session is recovered on it and remembers, and the deleted
	// session's executor and workspace are destroyed there.
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 60*time.Second, "the deleted session's executor destroyed on its machine", testkit.Cond(func() bool {
		exs, err := napi.Executors(testCtx(t), doomed.ID)
		return err == nil && len(exs) == 1 && !exs[0].DestroyPending
	}))
	if _, err := os.Stat(doomedWorkspace); !os.IsNotExist(err) {
		t.Fatalf("the deleted session's workspace %s after its machine came back: %v, want it removed", doomedWorkspace, err)
	}
	testkit.WaitFor(t, 60*time.Second, "the lost machine's session to run again", testkit.Cond(func() bool {
		st, err := napi.SessionStatus(testCtx(t), lost.id)
		return err == nil && st.IsAgentRunning && st.State == wire.SessionWaitingForInput
	}))
	if got, want := promptAndWait(t, napi, lost.id, "recall"), "you asked me to remember: "+lost.word; got != want {
		t.Fatalf("session on %s after its machine came back: recall = %q, want %q", victim.Name, got, want)
	}
	exs, _ := napi.Executors(testCtx(t), lost.id)
	if len(exs) != 1 || exs[0].Node != victim.Name {
		t.Fatalf("executor after the machine came back: %+v, want it on %s", exs, victim.Name)
	}
}

// nodeNamed returns the cluster's node with that name.
func nodeNamed(t *testing.T, c *harness.Cluster, name string) *harness.Node {
	t.Helper()
	for _, n := range c.Nodes {
		if n.Name == name {
			return n
		}
	}
	t.Fatalf("no node %q", name)
	return nil
}

// followerOf returns a running node other than leader.
func followerOf(t *testing.T, c *harness.Cluster, leader *harness.Node) *harness.Node {
	t.Helper()
	for _, n := range c.Running() {
		if n != leader {
			return n
		}
	}
	t.Fatal("no follower")
	return nil
}

// watchNeverError polls the sessions' states through every running node but
// skip until stop is called, and returns what it saw go wrong ("" when no
// session was ever ERROR).
func watchNeverError(t *testing.T, c *harness.Cluster, skip *harness.Node, ids ...string) (stop func() string) {
	t.Helper()
	done := make(chan struct{})
	var mu sync.Mutex
	bad := ""
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			case <-time.After(50 * time.Millisecond):
			}
			for _, n := range c.Running() {
				if n == skip {
					continue
				}
				cl, err := client.New(n.URL(), termToken, client.WithTimeout(time.Second))
				if err != nil {
					continue
				}
				for _, id := range ids {
					s, err := cl.GetSession(testCtx(t), id, client.Stale())
					if err == nil && s.State == wire.SessionError {
						mu.Lock()
						if bad == "" {
							bad = fmt.Sprintf("session %s passed through ERROR: %s", id, s.ErrorMessage)
						}
						mu.Unlock()
					}
				}
			}
		}
	}()
	return func() string {
		close(done)
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return bad
	}
}

// machineClient is an API client of n with the cluster's token.
func machineClient(t *testing.T, n *harness.Node) *client.Client {
	t.Helper()
	c, err := client.New(n.URL(), termToken)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
