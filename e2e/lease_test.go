package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	wire "github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/bench/chaos"
	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/shared/agentctl"
	"github.com/paddockhq/paddock/shared/testkit"
)

// leaseConfig is standaloneConfig with a short lease TTL.
func leaseConfig(t *testing.T, ttl time.Duration) string {
	return standaloneConfig(t) + fmt.Sprintf("lease {\n  ttl = %q\n}\n", ttl.String())
}

// sessionStateDir is the standalone runtime's state dir of a session.
func sessionStateDir(t *testing.T, api *client.Client, sessionID string) string {
	t.Helper()
	exs, err := api.Executors(testCtx(t), sessionID)
	if err != nil || len(exs) == 0 || exs[0].WorkspacePath == "" {
		t.Fatalf("executor of %s: %+v %v", sessionID, exs, err)
	}
	return filepath.Join(filepath.Dir(exs[0].WorkspacePath), "state")
}

// watchExecutions follows the journals of the sessions under the standalone
// workspace root that holds stateDir, and watches agents whose agentctl died
// (no stop journaled), until the test ends.
func watchExecutions(t *testing.T, stateDir string) *chaos.Watcher {
	w := chaos.NewWatcher(filepath.Dir(filepath.Dir(stateDir)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx, 20*time.Millisecond) }()
	t.Cleanup(func() { cancel(); <-done })
	return w
}

// executions returns a session's agent executions from agentctl's journal.
func executions(t *testing.T, w *chaos.Watcher, sessionID string) []chaos.Execution {
	t.Helper()
	all, err := w.Executions()
	if err != nil {
		t.Fatal(err)
	}
	var out []chaos.Execution
	for _, e := range all {
		if e.SessionID == sessionID {
			out = append(out, e)
		}
	}
	return out
}

func TestConcurrentResumeOnTwoNodesOneWins(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	c := startCluster(t, 3, true, leaseConfig(t, 5*time.Second))
	leader := leaderOf(t, c)
	api := apiClient(t, leader)
	var others []*client.Client
	for _, n := range c.Nodes {
		if n != leader {
			others = append(others, apiClient(t, n))
		}
	}
	task, err := api.CreateTask(testCtx(t), wire.CreateTaskRequest{Title: "race"})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := api.CreateSession(testCtx(t), task.ID, wire.CreateSessionRequest{Agent: "demo", Runtime: "standalone"})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, api, sess.ID, wire.SessionWaitingForInput)
	watch := watchExecutions(t, sessionStateDir(t, api, sess.ID))
	// Several rounds, alternating which pair of nodes races (two followers,
	// then a follower and the leader).
	pairs := [][2]*client.Client{{others[0], others[1]}, {others[1], api}, {api, others[0]}}
	var lastToken uint64
	for round, pair := range pairs {
		// A stop interrupted by a leader change (this machine is loaded)
		// is recovered, not finished, by the next leader: stop again.
		testkit.WaitFor(t, 90*time.Second, "the session to be STOPPED", testkit.Cond(func() bool {
			s, err := api.GetSession(testCtx(t), sess.ID)
			if err == nil && s.State == wire.SessionStopped {
				return true
			}
			if err == nil && s.State != wire.SessionStarting {
				_, _ = api.Stop(testCtx(t), sess.ID)
			}
			deadline := time.Now().Add(15 * time.Second)
			for time.Now().Before(deadline) {
				if s, err := api.GetSession(testCtx(t), sess.ID); err == nil && s.State == wire.SessionStopped {
					return true
				}
				time.Sleep(50 * time.Millisecond)
			}
			return false
		}))
		l, err := api.Lease(testCtx(t), sess.ID)
		if err != nil || l.State != wire.LeaseReleased {
			t.Fatalf("round %d: lease after stop: %+v %v", round, l, err)
		}
		before := len(executions(t, watch, sess.ID))
		var wg sync.WaitGroup
		errs := make([]error, 2)
		startLine := make(chan struct{})
		for i, cl := range pair {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-startLine
				_, errs[i] = cl.Resume(testCtx(t), sess.ID)
			}()
		}
		close(startLine)
		wg.Wait()
		wins, conflicts := 0, 0
		for _, err := range errs {
			var ae *client.APIError
			switch {
			case err == nil:
				wins++
			case errors.As(err, &ae) && ae.Status == 409 && ae.Code == "conflict":
				conflicts++
			default:
				t.Fatalf("round %d: resume: %v", round, err)
			}
		}
		if wins != 1 || conflicts != 1 {
			t.Fatalf("round %d: %d resumes won and %d got 409 (%v); want exactly one of each", round, wins, conflicts, errs)
		}
		waitState(t, api, sess.ID, wire.SessionWaitingForInput)
		l, err = api.Lease(testCtx(t), sess.ID)
		if err != nil || l.State != wire.LeaseHeld || l.FencingToken <= lastToken {
			t.Fatalf("round %d: lease after resume %+v %v; want held with a token above %d", round, l, err, lastToken)
		}
		lastToken = l.FencingToken
		// Exactly one new agent execution, under the granted token.
		execs := executions(t, watch, sess.ID)
		if len(execs) != before+1 {
			t.Fatalf("round %d: %d agent executions started by two resumes; want 1", round, len(execs)-before)
		}
		if e := execs[len(execs)-1]; e.Token != l.FencingToken || !e.Alive {
			t.Fatalf("round %d: new execution %+v; want alive under token %d", round, e, l.FencingToken)
		}
	}
}

// agentctlSecret reads the secret an agentctl process was started with from
// its initial environment (/proc/PID/environ: os.Unsetenv does not scrub
// it). The test plays a stale leader, which holds the same executor secret
// in its replicated state; the API never returns secrets.

// executorSecret reads the secret of a session's current executor from an
// operator snapshot (GET /v1/operator/snapshot carries the replicated state,
// private fields included, like a Consul snapshot carries ACL tokens): it is
// what a stale leader would still hold. agentctl never exposes it.
func executorSecret(t *testing.T, api *client.Client, sessionID string) (string, bool) {
	t.Helper()
	var buf bytes.Buffer
	if _, err := api.SnapshotSave(testCtx(t), &buf); err != nil {
		t.Logf("snapshot: %v", err)
		return "", false
	}
	var snap struct {
		Sessions map[string]struct {
			ExecutorID string `json:"executor_id"`
		} `json:"sessions"`
		Private map[string]struct {
			Secret string `json:"secret"`
		} `json:"private"`
	}
	if err := json.Unmarshal(buf.Bytes(), &snap); err != nil {
		t.Logf("decode snapshot: %v", err)
		return "", false
	}
	sec := snap.Private[snap.Sessions[sessionID].ExecutorID].Secret
	return sec, sec != ""
}

func TestKilledAgentctlLeaseReclaimedAndFenced(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	const ttl = 3 * time.Second
	c := startCluster(t, 1, false, leaseConfig(t, ttl))
	api := apiClient(t, leaderOf(t, c))
	task, err := api.CreateTask(testCtx(t), wire.CreateTaskRequest{Title: "fencing"})
	if err != nil {
		t.Fatal(err)
	}
	s := startSessions(t, api, task.ID, 1, "demo")[0]
	old, err := api.Lease(testCtx(t), s.id)
	if err != nil || old.State != wire.LeaseHeld {
		t.Fatalf("lease of a running session: %+v %v", old, err)
	}
	stateDir := sessionStateDir(t, api, s.id)
	watch := watchExecutions(t, stateDir)
	oldPID := agentctlPID(t, api, s.id)
	oldExecs := executions(t, watch, s.id)

	killed := time.Now()
	killPID(t, oldPID)
	// The holder is dead: its lease ends (expired by reclaim, or already
	// re-granted by the auto-resume) at once when detected, TTL at the latest.
	var reclaimedAfter time.Duration
	testkit.WaitFor(t, 2*ttl+5*time.Second, "the dead holder's lease to be reclaimed", testkit.Cond(func() bool {
		l, err := api.Lease(testCtx(t), s.id)
		if err == nil && (l.State != wire.LeaseHeld || l.FencingToken != old.FencingToken) {
			reclaimedAfter = time.Since(killed)
			return true
		}
		return false
	}))
	t.Logf("lease reclaimed %s after the kill (ttl %s)", reclaimedAfter.Round(time.Millisecond), ttl)
	if reclaimedAfter > ttl+time.Second {
		t.Errorf("reclaimed %s after the kill; want at TTL (%s) at the latest", reclaimedAfter, ttl)
	}
	// The auto-resume (or a resume) holds a strictly higher token.
	var cur *wire.Lease
	testkit.WaitFor(t, 60*time.Second, "the session to run again under a new lease", testkit.Cond(func() bool {
		st, err := api.SessionStatus(testCtx(t), s.id)
		if err == nil && st.State == wire.SessionError {
			_, _ = api.Resume(testCtx(t), s.id)
		}
		cur, err = api.Lease(testCtx(t), s.id)
		return err == nil && cur.State == wire.LeaseHeld && cur.FencingToken != old.FencingToken && st != nil && st.IsAgentRunning && st.State == wire.SessionWaitingForInput
	}))
	if cur.FencingToken <= old.FencingToken {
		t.Fatalf("new token %d is not above the dead holder's %d", cur.FencingToken, old.FencingToken)
	}
	if got := promptAndWait(t, api, s.id, "recall"); got != "you asked me to remember: "+s.word {
		t.Fatalf("after the resume: %q", got)
	}
	// The journal: the old agent is gone, the one new agent runs under
	// the new token, and they never overlapped.
	execs := executions(t, watch, s.id)
	if len(execs) != len(oldExecs)+1 {
		t.Fatalf("%d agent executions after one resume (was %d): %+v", len(execs), len(oldExecs), execs)
	}
	if vs := chaos.Check(execs, nil, time.Now()); len(vs) > 0 {
		t.Fatalf("executions: %v", vs)
	}
	if e := execs[len(execs)-1]; !e.Alive || e.Token != cur.FencingToken {
		t.Fatalf("new execution %+v; want alive under token %d", e, cur.FencingToken)
	}

	// The new agentctl rejects the old token. The test sends what a stale
	// leader would: the executor's secret and the dead holder's token.
	exs, err := api.Executors(testCtx(t), s.id)
	if err != nil || len(exs) == 0 {
		t.Fatal(err)
	}
	newPID := exs[0].PID
	if newPID == oldPID {
		t.Fatalf("agentctl pid %d did not change", newPID)
	}
	secret, ok := executorSecret(t, api, s.id)
	if !ok {
		// Without the secret only the durable fence can be checked.
		b, err := os.ReadFile(filepath.Join(stateDir, "fencing.json"))
		if err != nil || !strings.Contains(string(b), fmt.Sprintf(`"highest":%d`, cur.FencingToken)) {
			t.Fatalf("durable fence %s %v; want highest %d", b, err, cur.FencingToken)
		}
		t.Skip("the agentctl secret is not readable; checked the durable fence only")
	}
	ac := agentctl.NewClient(exs[0].AgentctlURL, secret, 5*time.Second)
	ac.SetFencingToken(old.FencingToken)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for name, call := range map[string]func() error{
		"prompt": func() error { _, err := ac.Prompt(ctx, "remember stale"); return err },
		"stop":   func() error { _, err := ac.StopAgent(ctx); return err },
		"renew":  func() error { _, err := ac.RenewLease(ctx, ttl); return err },
	} {
		var ae *agentctl.APIError
		if err := call(); !errors.As(err, &ae) || ae.Status != 409 || !strings.Contains(ae.Message, "lower than") {
			t.Fatalf("%s with the old token %d: %v; want 409 stale token", name, old.FencingToken, err)
		}
	}
	// The current token is admitted (a fenced no-op).
	ac.SetFencingToken(cur.FencingToken)
	if h, err := ac.Health(ctx); err != nil || h.Fencing != cur.FencingToken {
		t.Fatalf("agentctl health %+v %v; want fencing %d", h, err, cur.FencingToken)
	}
	waitState(t, api, s.id, wire.SessionWaitingForInput)
	if got := promptAndWait(t, api, s.id, "recall"); got != "you asked me to remember: "+s.word {
		t.Fatalf("the stale requests disturbed the agent: %q", got)
	}
}
