package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	wire "github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/shared/testkit"
)

// standaloneConfig is HCL for the standalone runtime and the demo agents,
// with plugins from the built binaries. Task workspaces may be any test's
// temporary directory.
//
// The agents keep the server's CPU priority here (nice = 0). The plugin's
// default, nice 19 in a scheduling group of its own, gets about 1.5% of a
// core against one busy process at nice 0; with the other packages' tests
// running beside these, an agent then can take longer than agentctl's
// 10-second bound on initialize (seen in CI: a resume failing, a page's
// prompt waiting a minute). The default itself is tested by
// TestTheServerRunsAboveItsSessions, which asks for it (defaultNice).
func standaloneConfig(t *testing.T) string {
	return fmt.Sprintf(`
plugin_dir = %q
plugin "standalone" {
  config {
    workspace_root        = %q
    task_workspace_root   = %q
    shared_workspace_root = true # every node of these clusters shares it
    nice                  = 0
  }
}
agent "demo" {
  protocol = "acp"
  command  = ["paddock-demo-agent"]
}
agent "demo-tty" {
  protocol                = "pty"
  command                 = ["paddock-demo-agent", "--tty"]
  new_args                = ["--session-id", "{{resume_token}}"]
  resume_args             = ["--resume", "{{resume_token}}"]
  supports_session_resume = true
}
agent "demo-noresume" {
  protocol = "acp"
  command  = ["paddock-demo-agent", "--no-resume"]
}
agent "demo-slow" {
  protocol = "acp"
  command  = ["paddock-demo-agent", "--chunk-delay", "150ms"]
}
`, filepath.Join(binDir, "plugins"), t.TempDir(), os.TempDir())
}

// waitState waits until a session reaches want (failing fast on ERROR).
func waitState(t *testing.T, c *client.Client, id string, want wire.SessionState) wire.Session {
	t.Helper()
	var s *wire.Session
	testkit.WaitFor(t, 60*time.Second, fmt.Sprintf("session %s to be %s", id, want), testkit.Cond(func() bool {
		var err error
		s, err = c.GetSession(testCtx(t), id)
		if err == nil && s.State == wire.SessionError && want != wire.SessionError {
			t.Fatalf("session %s is ERROR: %s", id, s.ErrorMessage)
		}
		return err == nil && s.State == want
	}))
	return *s
}

// lastAgentText returns the text of the last complete agent message.
func lastAgentText(t *testing.T, c *client.Client, id string) string {
	t.Helper()
	msgs, err := c.Messages(testCtx(t), id)
	if err != nil {
		t.Fatal(err)
	}
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == wire.RoleAgent && msgs[i].Complete {
			return msgs[i].Text
		}
	}
	return ""
}

// promptAndWait prompts a waiting session and returns the agent's reply.
func promptAndWait(t *testing.T, c *client.Client, id, text string) string {
	t.Helper()
	if err := c.Prompt(testCtx(t), id, text); err != nil {
		t.Fatalf("prompt %q: %v", text, err)
	}
	var reply string
	testkit.WaitFor(t, 60*time.Second, "the reply to "+text, testkit.Cond(func() bool {
		s, err := c.GetSession(testCtx(t), id)
		if err != nil || s.State != wire.SessionWaitingForInput {
			return false
		}
		reply = lastAgentText(t, c, id)
		return reply != ""
	}))
	return reply
}

func TestSessionsOnStandaloneRuntime(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	c := startCluster(t, 1, false, standaloneConfig(t))
	api := apiClient(t, leaderOf(t, c))
	task, err := api.CreateTask(testCtx(t), wire.CreateTaskRequest{Title: "two sessions"})
	if err != nil {
		t.Fatal(err)
	}
	// demo-slow streams its chunks 150ms apart, so a reply spans several
	// coalescing windows: one message.added, then message.updated events.
	a, err := api.CreateSession(testCtx(t), task.ID, wire.CreateSessionRequest{Agent: "demo-slow", Runtime: "standalone"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := api.CreateSession(testCtx(t), task.ID, wire.CreateSessionRequest{Agent: "demo", Runtime: "standalone"})
	if err != nil {
		t.Fatal(err)
	}
	// Each session's subscriber sees only its own events.
	evCtx, stopEvents := context.WithTimeout(context.Background(), 2*time.Minute)
	defer stopEvents()
	streamA, err := api.Events(evCtx, client.EventFilter{SessionID: a.ID}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer streamA.Close()
	waitState(t, api, a.ID, wire.SessionWaitingForInput)
	waitState(t, api, b.ID, wire.SessionWaitingForInput)

	if got := promptAndWait(t, api, a.ID, "remember apple banana"); got != "ok, remembering apple banana" {
		t.Fatalf("reply %q", got)
	}
	if got := promptAndWait(t, api, b.ID, "hello b"); got != "turn 1: hello b" {
		t.Fatalf("reply %q", got)
	}
	// Session a's stream carried its streamed message (added, then updated)
	// and none of b's.
	var added, updated bool
	for !(added && updated) {
		e, err := streamA.Next()
		if err != nil {
			t.Fatalf("events: %v", err)
		}
		if e.SessionID != a.ID {
			t.Fatalf("session a's stream got %+v", e)
		}
		added = added || e.Type == wire.EventMessageAdded
		updated = updated || e.Type == wire.EventMessageUpdated
	}

	// A prompt while a turn runs is a conflict.
	if err := api.Prompt(testCtx(t), b.ID, "sleep 3"); err != nil {
		t.Fatal(err)
	}
	if err := api.Prompt(testCtx(t), b.ID, "again"); !client.IsCode(err, "conflict") {
		t.Fatalf("prompt during a turn: %v, want conflict", err)
	}
	if err := api.Cancel(testCtx(t), b.ID); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	waitState(t, api, b.ID, wire.SessionWaitingForInput)

	// Stop a, then resume it: the agent remembers the conversation.
	if _, err := api.Stop(testCtx(t), a.ID); err != nil {
		t.Fatal(err)
	}
	waitState(t, api, a.ID, wire.SessionStopped)
	if l, err := api.Lease(testCtx(t), a.ID); err != nil || l.State != wire.LeaseReleased {
		t.Fatalf("lease after stop: %+v %v, want released", l, err)
	}
	st, err := api.SessionStatus(testCtx(t), a.ID)
	if err != nil || !st.NeedsResume || st.IsAgentRunning {
		t.Fatalf("status after stop: %+v %v", st, err)
	}
	if _, err := api.Resume(testCtx(t), a.ID); err != nil {
		t.Fatalf("resume: %v", err)
	}
	waitState(t, api, a.ID, wire.SessionWaitingForInput)
	if got := promptAndWait(t, api, a.ID, "recall"); got != "you asked me to remember: apple, banana" {
		t.Fatalf("after resume, recall = %q", got)
	}
	if tk, _ := api.GetTask(testCtx(t), task.ID); tk.State != wire.TaskReview {
		t.Fatalf("task state after resume: %s, want REVIEW", tk.State)
	}
}

func TestWorkspaceAccessWithAgentStopped(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	c := startCluster(t, 1, false, standaloneConfig(t))
	api := apiClient(t, leaderOf(t, c))
	repo := t.TempDir()
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"-c", "user.email=t@e", "-c", "user.name=t", "commit", "-q", "--allow-empty", "-m", "init"}} {
		if out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	task, err := api.CreateTask(testCtx(t), wire.CreateTaskRequest{Title: "ws", Workspace: wire.Workspace{Path: repo}})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := api.CreateSession(testCtx(t), task.ID, wire.CreateSessionRequest{Agent: "demo", Runtime: "standalone"})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, api, sess.ID, wire.SessionWaitingForInput)
	if _, err := api.Stop(testCtx(t), sess.ID); err != nil {
		t.Fatal(err)
	}
	waitState(t, api, sess.ID, wire.SessionStopped)
	// The stop ended the agent, not the workspace: everything below runs
	// on the STOPPED session, with no agent.
	st, err := api.SessionStatus(testCtx(t), sess.ID)
	if err != nil || st.WorktreeBranch == nil || st.WorktreePath == nil || st.IsAgentRunning || st.State != wire.SessionStopped {
		t.Fatalf("status of a stopped git task: %+v %v", st, err)
	}

	if err := api.WriteFile(testCtx(t), sess.ID, "notes/hello.txt", strings.NewReader("hi there\n")); err != nil {
		t.Fatalf("write: %v", err)
	}
	data, err := api.ReadFile(testCtx(t), sess.ID, "notes/hello.txt")
	if err != nil || string(data) != "hi there\n" {
		t.Fatalf("read: %q %v", data, err)
	}
	entries, err := api.Files(testCtx(t), sess.ID, "notes")
	if err != nil || len(entries) != 1 {
		t.Fatalf("list: %+v %v", entries, err)
	}
	gs, err := api.GitStatus(testCtx(t), sess.ID)
	if err != nil || !strings.Contains(string(gs), "notes/") {
		t.Fatalf("git status: %s %v", gs, err)
	}
	if _, err := api.GitDiff(testCtx(t), sess.ID); err != nil {
		t.Fatalf("git diff: %v", err)
	}
	for _, bad := range []string{"../escape", "/etc/passwd"} {
		if _, err := api.ReadFile(testCtx(t), sess.ID, bad); !client.IsCode(err, "bad_request") {
			t.Fatalf("read %q: %v, want bad_request", bad, err)
		}
	}
	if _, err := os.Stat(filepath.Join(repo, "notes")); !os.IsNotExist(err) {
		t.Fatalf("the session wrote into the task's repository instead of its worktree")
	}
	// The workspace is still there for the agent: a resume continues in it.
	if _, err := api.Resume(testCtx(t), sess.ID); err != nil {
		t.Fatal(err)
	}
	waitState(t, api, sess.ID, wire.SessionWaitingForInput)
	if data, err := api.ReadFile(testCtx(t), sess.ID, "notes/hello.txt"); err != nil || string(data) != "hi there\n" {
		t.Fatalf("the file written while stopped, after the resume: %q %v", data, err)
	}
}

func stringsReader(s string) *strings.Reader { return strings.NewReader(s) }

// A prompt whose caller gives up after the session went RUNNING is still
// delivered: the session finishes the turn. agentctl is frozen so the
// supervisor's call to it outlasts the caller's 1-second timeout. Limit: the
// request already sits in agentctl's socket when the caller leaves, so this
// also passes when the supervisor's call follows the caller's context; the
// race fixed with it (the caller gone between the RUNNING commit and the
// call, so the call and the undo were both skipped) cannot be timed from
// outside the process.
func TestPromptOutlivesItsCaller(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	n := leaderOf(t, startCluster(t, 1, false, standaloneConfig(t)))
	api := apiClient(t, n)
	s := startDemoSession(t, api, "impatient caller", "demo")
	pid := agentctlPID(t, api, s.ID)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}()
	impatient, cancel := context.WithTimeout(testCtx(t), time.Second)
	err := api.Prompt(impatient, s.ID, "still there")
	cancel()
	if err == nil {
		t.Fatal("prompt to a frozen agentctl answered within 1s")
	}
	if got, err := api.GetSession(testCtx(t), s.ID); err != nil || got.State != wire.SessionRunning {
		t.Fatalf("after the caller gave up: %+v %v, want RUNNING (the turn is under way)", got, err)
	}
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed = true
	waitState(t, api, s.ID, wire.SessionWaitingForInput)
	if got := lastAgentText(t, api, s.ID); got != "turn 1: still there" {
		t.Fatalf("reply %q, want the prompt delivered after the caller left", got)
	}
}
