package e2e

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	wire "github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/api/termproto"
	"github.com/paddockhq/paddock/bench/harness"
	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/shared/testkit"
)

// liveSession is a session created for a recovery test with what it was told.
type liveSession struct {
	id, agent, word string
}

// startSessions creates n sessions (agents cycled from agents) and has each
// remember a word.
func startSessions(t *testing.T, api *client.Client, taskID string, n int, agents ...string) []liveSession {
	t.Helper()
	var out []liveSession
	for i := 0; i < n; i++ {
		agent := agents[i%len(agents)]
		s, err := api.CreateSession(testCtx(t), taskID, wire.CreateSessionRequest{Agent: agent, Runtime: "standalone"})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, liveSession{id: s.ID, agent: agent, word: fmt.Sprintf("word%d", i)})
	}
	for _, s := range out {
		waitState(t, api, s.id, wire.SessionWaitingForInput)
		if got := promptAndWait(t, api, s.id, "remember "+s.word); got != "ok, remembering "+s.word {
			t.Fatalf("session %s: %q", s.id, got)
		}
	}
	return out
}

// agentctlPID is the host pid of a session's agentctl.
func agentctlPID(t *testing.T, api *client.Client, sessionID string) int {
	t.Helper()
	exs, err := api.Executors(testCtx(t), sessionID)
	if err != nil || len(exs) == 0 || exs[0].PID == 0 {
		t.Fatalf("executor of %s: %+v %v", sessionID, exs, err)
	}
	return exs[0].PID
}

func killPID(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill %d: %v", pid, err)
	}
	testkit.WaitFor(t, 10*time.Second, fmt.Sprintf("pid %d to die", pid), testkit.Cond(func() bool {
		return syscall.Kill(pid, 0) != nil || isZombie(pid)
	}))
}

func isZombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	for i := len(b) - 1; i > 0; i-- {
		if b[i] == ')' && i+2 < len(b) {
			return b[i+2] == 'Z'
		}
	}
	return false
}

// checkRecovered verifies every session after a recovery: resumable ones
// answer recall with their word; the non-resumable one whose agent died is
// ERROR/not_resumable with its workspace usable; other live ones continue.
func checkRecovered(t *testing.T, api *client.Client, sessions []liveSession, deadNonResumable string) {
	t.Helper()
	for _, s := range sessions {
		if s.id == deadNonResumable {
			testkit.WaitFor(t, 60*time.Second, "the non-resumable session to be ERROR", testkit.Cond(func() bool {
				st, err := api.SessionStatus(testCtx(t), s.id)
				return err == nil && st.State == wire.SessionError && st.ResumeReason != nil && *st.ResumeReason == wire.ReasonNotResumable
			}))
			if err := api.WriteFile(testCtx(t), s.id, "still-usable.txt", stringsReader("yes")); err != nil {
				t.Fatalf("workspace of the non-resumable session: %v", err)
			}
			continue
		}
		testkit.WaitFor(t, 60*time.Second, "session "+s.id+" to run again", testkit.Cond(func() bool {
			st, err := api.SessionStatus(testCtx(t), s.id)
			return err == nil && st.IsAgentRunning && st.State == wire.SessionWaitingForInput
		}))
		want := "you asked me to remember: " + s.word
		if got := promptAndWait(t, api, s.id, "recall"); got != want {
			t.Fatalf("session %s (%s) after recovery: recall = %q, want %q", s.id, s.agent, got, want)
		}
	}
}

func TestRestartSingleNodeRecoversSessions(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	c := startCluster(t, 1, false, standaloneConfig(t))
	node := leaderOf(t, c)
	api := apiClient(t, node)
	task, err := api.CreateTask(testCtx(t), wire.CreateTaskRequest{Title: "restart"})
	if err != nil {
		t.Fatal(err)
	}
	sessions := startSessions(t, api, task.ID, 4, "demo", "demo", "demo-noresume", "demo-tty")
	resumable, nonResumable := sessions[1], sessions[2]
	pids := map[string]int{}
	for _, s := range sessions {
		pids[s.id] = agentctlPID(t, api, s.id)
	}
	node.Kill()
	killPID(t, pids[resumable.id])
	killPID(t, pids[nonResumable.id])
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	leaderOf(t, c)
	checkRecovered(t, api, sessions, nonResumable.id)
	// Untouched sessions continued with the same agentctl.
	for _, s := range []liveSession{sessions[0], sessions[3]} {
		if got := agentctlPID(t, api, s.id); got != pids[s.id] {
			t.Errorf("session %s: agentctl pid %d, want the same %d", s.id, got, pids[s.id])
		}
	}
	// The recovery run is in the node's metrics: two continued, one
	// resumed, one left with its workspace only.
	var lines []string
	for outcome, want := range map[string]int{"continued": 2, "resumed": 1, "workspace": 1} {
		lines = append(lines, fmt.Sprintf("paddock_recovery_last_sessions{outcome=%q} %d\n", outcome, want))
	}
	var metrics string
	testkit.WaitFor(t, 30*time.Second, "the recovery run in the metrics", testkit.Cond(func() bool {
		metrics = metricsText(t, node)
		for _, l := range lines {
			if !strings.Contains(metrics, l) {
				return false
			}
		}
		return true
	}))
	if strings.Contains(metrics, "paddock_recovery_last_duration_seconds 0\n") {
		t.Error("the recovery run has no duration")
	}
}

// metricsText is a node's /v1/metrics.
func metricsText(t *testing.T, n *harness.Node) string {
	t.Helper()
	resp, err := http.Get(n.URL() + "/v1/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("metrics: %s %v", resp.Status, err)
	}
	return string(b)
}

func TestLeaderKillRecoversSessionsOnNewLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	c := startCluster(t, 3, true, standaloneConfig(t))
	leader := leaderOf(t, c)
	api := apiClient(t, leader)
	task, err := api.CreateTask(testCtx(t), wire.CreateTaskRequest{Title: "failover"})
	if err != nil {
		t.Fatal(err)
	}
	sessions := startSessions(t, api, task.ID, 10, "demo", "demo-noresume", "demo-tty", "demo", "demo")
	resumable, nonResumable := sessions[0], sessions[1]
	rPID, nPID := agentctlPID(t, api, resumable.id), agentctlPID(t, api, nonResumable.id)

	// A terminal attached through the leader, with a shell that has state.
	tc, att := termAttach(t, leader, sessions[3].id, "shell", termproto.Hello{})
	tc.Input("export X=kept42\r")
	pid := tc.ShellPid()
	// A background job prints once the test lets it (after the client has
	// lost its connection), then removes its go file: the output is made
	// while no client is attached, whatever the failover takes.
	goFile := filepath.Join(t.TempDir(), "go")
	tc.Input(fmt.Sprintf("(while [ ! -e %s ]; do sleep 0.05; done; echo \"DURING$((40+2))\"; rm %s) &\r", goFile, goFile))
	tc.WaitOutput("$((40+2))")
	leader.Kill()
	killPID(t, rPID)
	killPID(t, nPID)
	newLeader := leaderOf(t, c)
	if newLeader == leader {
		t.Fatal("the killed node still leads")
	}
	// The client lost its connection with the leader and reconnects through
	// another node with its epoch and offset: same shell, state kept, and
	// what the shell printed meanwhile replayed.
	tc.WaitClosed()
	pos := tc.Position()
	if err := os.WriteFile(goFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "the detached shell printed", testkit.Cond(func() bool {
		_, err := os.Stat(goFile)
		return errors.Is(err, os.ErrNotExist)
	}))
	tc2, att2 := termAttach(t, newLeader, sessions[3].id, "shell", termproto.Hello{Epoch: att.Epoch, Offset: &pos})
	if att2.Epoch != att.Epoch || att2.Replay != termproto.ReplayDelta {
		t.Fatalf("reattach: epoch %s replay %s, want the same epoch and a delta", att2.Epoch, att2.Replay)
	}
	tc2.WaitOutput("DURING42")
	if got := tc2.ShellPid(); got != pid {
		t.Fatalf("shell pid %d after failover, want %d", got, pid)
	}
	tc2.Input("echo \"X=$X.\"\r")
	tc2.WaitOutput("X=kept42.")
	checkRecovered(t, apiClient(t, newLeader), sessions, nonResumable.id)
	// A survivor's runtime found or restarted every executor: it is the
	// survivor's now (a node-local runtime proves one gone only from its
	// node). On a loaded machine leadership may move between the survivors
	// during recovery, so either may hold it; never the killed node.
	exs, err := apiClient(t, newLeader).Executors(testCtx(t), resumable.id)
	if err != nil || len(exs) == 0 || exs[0].Node == leader.Name || exs[0].Node == "" {
		t.Fatalf("executor of a recovered session: %+v %v, want a survivor's node (not %s)", exs, err, leader.Name)
	}
}

func TestRecoveryFailurePaths(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	c := startCluster(t, 1, false, standaloneConfig(t))
	node := leaderOf(t, c)
	api := apiClient(t, node)
	task, err := api.CreateTask(testCtx(t), wire.CreateTaskRequest{Title: "failures"})
	if err != nil {
		t.Fatal(err)
	}
	sessions := startSessions(t, api, task.ID, 2, "demo")
	gone, killed := sessions[0], sessions[1]

	// agentctl killed while the leader lives: ERROR agent_not_running, then
	// auto_resume relaunches it and the conversation continues.
	events, err := api.Events(testCtx(t), client.EventFilter{SessionID: killed.id}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer events.Close()
	killPID(t, agentctlPID(t, api, killed.id))
	sawError := false
	for !sawError {
		e, err := events.Next()
		if err != nil {
			t.Fatal(err)
		}
		sawError = e.Type == wire.EventStateChanged && e.Data["to"] == string(wire.SessionError) && e.Data["reason"] == wire.ReasonAgentNotRunning
	}
	testkit.WaitFor(t, 60*time.Second, "auto-resume of the session whose agentctl died", testkit.Cond(func() bool {
		st, err := api.SessionStatus(testCtx(t), killed.id)
		return err == nil && st.IsAgentRunning && st.State == wire.SessionWaitingForInput
	}))
	if got := promptAndWait(t, api, killed.id, "recall"); got != "you asked me to remember: "+killed.word {
		t.Fatalf("after auto-resume: %q", got)
	}

	// Workspace deleted during a restart: executor error, session ERROR
	// executor_lost with a message.
	exs, err := api.Executors(testCtx(t), gone.id)
	if err != nil || len(exs) == 0 {
		t.Fatal(err)
	}
	node.Kill()
	killPID(t, exs[0].PID)
	if err := os.RemoveAll(filepath.Dir(exs[0].WorkspacePath)); err != nil {
		t.Fatal(err)
	}
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	leaderOf(t, c)
	testkit.WaitFor(t, 60*time.Second, "the session without workspace to be ERROR executor_lost", testkit.Cond(func() bool {
		st, err := api.SessionStatus(testCtx(t), gone.id)
		return err == nil && st.State == wire.SessionError && st.ResumeReason != nil && *st.ResumeReason == wire.ReasonExecutorLost
	}))
	ex, err := api.Executor(testCtx(t), exs[0].ID)
	if err != nil || ex.Status != wire.ExecutorError || ex.ErrorMessage == "" {
		t.Fatalf("executor after losing its workspace: %+v %v", ex, err)
	}
}

// TestLeadershipLostDuringRecovery asks a leader that is recovering sessions
// to hand leadership on (issue 21), both ways it can go: the transfer
// succeeds and the new leader recovers every session, or it fails and the
// old leader, which raft made refuse commands while the transfer was
// pending, still recovers every session. Nothing is recovered twice: the
// same agentctl (pid and boot nonce) serves each session afterwards.
func TestLeadershipLostDuringRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	t.Run("transfer succeeds", func(t *testing.T) {
		c := startCluster(t, 3, true, standaloneConfig(t))
		rs := startRecoverySessions(t, c, 30)
		// Kill the leader; as soon as a new one leads, hand leadership to
		// the third node while it recovers. A transfer can time out on a
		// loaded machine: ask again until the third node leads.
		rs.leader.Kill()
		next := leaderOf(t, c)
		target := otherNode(c, rs.leader, next)
		testkit.WaitFor(t, 60*time.Second, "leadership to move to "+target.Name, testkit.Cond(func() bool {
			if leads, _ := target.Leads(); leads {
				return true
			}
			if _, err := apiClient(t, next).TransferLeadership(testCtx(t), target.Name); err != nil {
				t.Logf("transfer leadership to %s: %v", target.Name, err)
			}
			leads, _ := target.Leads()
			return leads
		}))
		rs.waitRecoveredOn(t, leaderOf(t, c))
	})

	t.Run("transfer fails", func(t *testing.T) {
		// Leases long enough that agentctls paused below never self-fence.
		c := startCluster(t, 3, true, standaloneConfig(t)+"lease {\n  ttl = \"60s\"\n}\n")
		rs := startRecoverySessions(t, c, 30)
		// Hold part of the recovery up: with their agentctls paused, the
		// runtime cannot reattach those sessions until they are resumed.
		held := rs.ids[:10]
		var pids []int
		for _, id := range held {
			pids = append(pids, rs.before[id].PID)
		}
		signalAll(t, pids, syscall.SIGSTOP)
		t.Cleanup(func() { signalAllQuiet(pids, syscall.SIGCONT) })

		// Move leadership to a follower, which starts recovering.
		recovering := otherNode(c, rs.leader)
		testkit.WaitFor(t, 60*time.Second, "leadership to move to "+recovering.Name, testkit.Cond(func() bool {
			if leads, _ := recovering.Leads(); leads {
				return true
			}
			if _, err := apiClient(t, rs.leader).TransferLeadership(testCtx(t), recovering.Name); err != nil {
				t.Logf("transfer leadership to %s: %v", recovering.Name, err)
			}
			leads, _ := recovering.Leads()
			return leads
		}))
		// Wait until the leader has recovered every session it can and a
		// follower has caught up with it, so that the transfer below finds
		// its target up to date and stays pending until the target's answer
		// times out (raft refuses commands all that while). On a loaded
		// machine leadership may move on its own meanwhile: the node that
		// leads then is the one recovering (it is held up the same way).
		var target *harness.Node
		for target == nil {
			var lastCommit uint64
			testkit.WaitFor(t, 60*time.Second, "the sessions not held up to be recovered and a follower to catch up", testkit.Cond(func() bool {
				l, err := c.Leader(time.Second)
				if err != nil {
					return false
				}
				recovering = l
				api := apiClient(t, l)
				for _, id := range rs.ids[len(held):] {
					st, serr := api.SessionStatus(testCtx(t), id)
					if serr != nil || !st.IsAgentRunning {
						return false // not recovered by this leader yet
					}
					exs, err := api.Executors(testCtx(t), id)
					if err != nil || len(exs) != 1 || exs[0].Node != rs.before[id].Node {
						return false
					}
				}
				// The leader's log stands still (same commit index twice
				// running) and the follower has applied all of it.
				lead, err := api.Status(testCtx(t))
				if err != nil {
					return false
				}
				still := lead.CommitIndex == lastCommit
				lastCommit = lead.CommitIndex
				f := otherNode(c, rs.leader, l)
				if f == nil {
					f = otherNode(c, l)
				}
				follower, err := apiClient(t, f).Status(testCtx(t), client.Stale())
				if err == nil && still && follower.AppliedIndex >= lead.CommitIndex {
					target = f
					return true
				}
				return false
			}))
			// The target is paused: it cannot take over, so the transfer fails.
			if err := target.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			if leads, _ := recovering.Leads(); !leads {
				t.Logf("leadership moved on its own before %s was paused; again", target.Name)
				_ = target.Signal(syscall.SIGCONT)
				target = nil
			}
		}
		t.Cleanup(func() { _ = target.Signal(syscall.SIGCONT) })
		api := apiClient(t, recovering)
		if leader, err := api.TransferLeadership(testCtx(t), target.Name); err == nil {
			t.Fatalf("transfer to a paused node succeeded (leader %q)", leader)
		} else {
			t.Logf("transfer to the paused %s failed as it must: %v", target.Name, err)
		}
		// The held sessions go on recovering while raft may still refuse
		// commands for the transfer; the leader must finish every one.
		signalAll(t, pids, syscall.SIGCONT)
		// It still leads: the transfer failed. (With raft's 300 ms timing a
		// loaded machine can still elect the other running node on its own;
		// that node must then recover every session just the same.)
		final := recovering
		testkit.WaitFor(t, 60*time.Second, "a running node to lead", testkit.Cond(func() bool {
			for _, n := range []*harness.Node{recovering, otherNode(c, recovering, target)} {
				if leads, _ := n.Leads(); leads {
					final = n
					return true
				}
			}
			return false
		}))
		if final != recovering {
			t.Logf("%s was elected on its own after the failed transfer (machine load)", final.Name)
		}
		rs.waitRecoveredOn(t, final)
		recovering = final
		// The run is over with nothing failed or left pending.
		var metrics string
		testkit.WaitFor(t, 60*time.Second, "the recovery run in the metrics", testkit.Cond(func() bool {
			metrics = metricsText(t, recovering)
			return strings.Contains(metrics, fmt.Sprintf("paddock_recovery_last_sessions{outcome=\"continued\"} %d\n", len(rs.ids)))
		}))
		for _, want := range []string{"paddock_recovery_last_failed_sessions 0\n", "paddock_recovery_last_pending_sessions 0\n"} {
			if !strings.Contains(metrics, want) {
				t.Errorf("metrics lack %q", strings.TrimSpace(want))
			}
		}
		for _, l := range strings.Split(metrics, "\n") {
			if strings.HasPrefix(l, "paddock_recovery_last_retr") {
				t.Log(l)
			}
		}
		// Whether raft refused the leader's commands while the transfer was
		// pending depends on how long it stayed pending; say so for the
		// reader (the outcome above must hold either way).
		t.Logf("commands refused during the transfer and retried: %d", strings.Count(recovering.Log(), "command refused while leadership is being transferred"))
	})
}

// recoverySessions are live sessions recorded for a recovery test, with
// each one's executor as it was before.
type recoverySessions struct {
	leader *harness.Node
	ids    []string
	before map[string]wire.Executor
}

// startRecoverySessions starts n demo sessions through c's leader and waits
// until each waits for input.
func startRecoverySessions(t *testing.T, c *harness.Cluster, n int) *recoverySessions {
	t.Helper()
	rs := &recoverySessions{leader: leaderOf(t, c), before: map[string]wire.Executor{}}
	api := apiClient(t, rs.leader)
	task, err := api.CreateTask(testCtx(t), wire.CreateTaskRequest{Title: "transfer during recovery"})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		// All on the first leader's node: the transfers below move
		// leadership between the other nodes, never onto an owner.
		s, err := api.CreateSession(testCtx(t), task.ID, wire.CreateSessionRequest{Agent: "demo", Runtime: "standalone",
			RuntimeOptions: map[string]string{"node": rs.leader.Name}})
		if err != nil {
			t.Fatal(err)
		}
		rs.ids = append(rs.ids, s.ID)
	}
	for _, id := range rs.ids {
		waitState(t, api, id, wire.SessionWaitingForInput)
		exs, err := api.Executors(testCtx(t), id)
		if err != nil || len(exs) != 1 {
			t.Fatalf("executors of %s: %v %v", id, exs, err)
		}
		rs.before[id] = exs[0]
	}
	return rs
}

// waitRecoveredOn waits until leader runs every session again through the
// same agentctl (pid and boot nonce) and executor it had before, now
// recovered by leader, and the last one answers a prompt.
func (rs *recoverySessions) waitRecoveredOn(t *testing.T, leader *harness.Node) {
	t.Helper()
	api := apiClient(t, leader)
	for _, id := range rs.ids {
		testkit.WaitFor(t, 60*time.Second, "session "+id+" to be recovered by "+leader.Name, testkit.Cond(func() bool {
			st, err := api.SessionStatus(testCtx(t), id)
			if err != nil || !st.IsAgentRunning || st.State != wire.SessionWaitingForInput {
				return false
			}
			// The executor stays its owner's: the same agentctl on the
			// node that launched it, whichever node leads.
			exs, err := api.Executors(testCtx(t), id)
			return err == nil && len(exs) == 1 && exs[0].Node == rs.before[id].Node
		}))
		exs, err := api.Executors(testCtx(t), id)
		if err != nil || len(exs) != 1 {
			t.Fatalf("executors of %s after recovery: %v %v", id, exs, err)
		}
		if b := rs.before[id]; exs[0].PID != b.PID || exs[0].Nonce != b.Nonce || exs[0].Status != wire.ExecutorReady {
			t.Fatalf("session %s: executor %+v, want the same agentctl as %+v", id, exs[0], b)
		}
	}
	if got := promptAndWait(t, api, rs.ids[len(rs.ids)-1], "hello"); got != "turn 1: hello" {
		t.Fatalf("reply after recovery: %q", got)
	}
}

// otherNode is the first node of c that is none of not.
func otherNode(c *harness.Cluster, not ...*harness.Node) *harness.Node {
	for _, n := range c.Nodes {
		if !slices.Contains(not, n) {
			return n
		}
	}
	return nil
}

// signalAll sends sig to every pid.
func signalAll(t *testing.T, pids []int, sig syscall.Signal) {
	t.Helper()
	for _, pid := range pids {
		if err := syscall.Kill(pid, sig); err != nil {
			t.Fatalf("signal %v to %d: %v", sig, pid, err)
		}
	}
}

// signalAllQuiet is signalAll for cleanups (the processes may be gone).
func signalAllQuiet(pids []int, sig syscall.Signal) {
	for _, pid := range pids {
		_ = syscall.Kill(pid, sig)
	}
}
