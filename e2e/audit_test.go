package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	wire "github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/api/termproto"
	"github.com/paddockhq/paddock/bench/harness"
	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/shared/term/termtest"
	"github.com/paddockhq/paddock/shared/testkit"
)

// TestAStoppedSessionWhoseWorkspaceIsGoneIsNotOfferedForResume: the
// workspace of a stopped session is removed behind the server's back. Its
// status must say workspace_missing (not resumable, no resume needed, the
// path in the message) instead of offering a resume that can only fail,
// and a resume is refused with 409 naming the workspace.
func TestAStoppedSessionWhoseWorkspaceIsGoneIsNotOfferedForResume(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	c := startCluster(t, 1, false, standaloneConfig(t))
	api := apiClient(t, leaderOf(t, c))
	task, err := api.CreateTask(testCtx(t), wire.CreateTaskRequest{Title: "workspace goes"})
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
	stopped := waitState(t, api, sess.ID, wire.SessionStopped)

	// With its workspace in place the stopped session is resumable: the
	// check below must not fire on every stopped session.
	st, err := api.SessionStatus(testCtx(t), sess.ID)
	if err != nil || !st.IsResumable || !st.NeedsResume || st.ResumeReason == nil || *st.ResumeReason != wire.ReasonAgentNotRunning {
		t.Fatalf("status of a stopped session with its workspace: %+v %v", st, err)
	}

	ex, err := api.Executor(testCtx(t), stopped.ExecutorID)
	if err != nil || ex.WorkspacePath == "" {
		t.Fatalf("executor of the session: %+v %v", ex, err)
	}
	if err := os.RemoveAll(ex.WorkspacePath); err != nil {
		t.Fatal(err)
	}

	st, err = api.SessionStatus(testCtx(t), sess.ID)
	if err != nil {
		t.Fatal(err)
	}
	if st.ResumeReason == nil || *st.ResumeReason != wire.ReasonWorkspaceMissing || st.IsResumable || st.NeedsResume {
		t.Fatalf("status after the workspace was removed: reason %v resumable %v needs_resume %v; want workspace_missing, false, false",
			strOf(st.ResumeReason), st.IsResumable, st.NeedsResume)
	}
	if st.ResumeMessage == nil || !strings.Contains(*st.ResumeMessage, ex.WorkspacePath) {
		t.Fatalf("resume_message %q does not name the workspace %s", strOf(st.ResumeMessage), ex.WorkspacePath)
	}

	_, err = api.Resume(testCtx(t), sess.ID)
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != 409 || !strings.Contains(ae.Message, ex.WorkspacePath) {
		t.Fatalf("resume of a session whose workspace is gone: %v; want 409 naming %s", err, ex.WorkspacePath)
	}
	if s, err := api.GetSession(testCtx(t), sess.ID); err != nil || s.State != wire.SessionStopped {
		t.Fatalf("the refused resume changed the session: %+v %v", s, err)
	}
}

func strOf(p *string) string {
	if p == nil {
		return "<null>"
	}
	return *p
}

// TestARestartedNodeServesATerminalOnlyFromCaughtUpState: a node relays a
// terminal from its own state, and right after a start that state is its
// latest snapshot. Here the snapshot holds the session STOPPED, and the
// log after it the resume that made it run again. The node comes back
// alone (no quorum to learn what is committed): the terminal route must
// answer 503 "starting", on both of its paths (a token header, refused
// before the upgrade; a browser's token in the hello, refused by a close
// code), never 404 or 409 from the stale state; once a quorum is back it
// relays the terminal.
func TestARestartedNodeServesATerminalOnlyFromCaughtUpState(t *testing.T) {
	if testing.Short() {
		t.Skip("process cluster")
	}
	c := startClusterWith(t, harness.Options{Size: 3, SeparateIPs: true, Token: termToken,
		Extra: standaloneConfig(t) + fmt.Sprintf("acl {\n  token = %q\n}\n", termToken)})
	leader := leaderOf(t, c)
	api := tokenClient(t, leader, termToken)
	s := startDemoSession(t, api, "terminal from a snapshot", "demo")
	if _, err := api.Stop(testCtx(t), s.ID); err != nil {
		t.Fatal(err)
	}
	waitState(t, api, s.ID, wire.SessionStopped)

	// Enough writes for every server to snapshot once they go quiet
	// (1,024 entries, then 2 s without one): the snapshot holds the
	// session STOPPED.
	back, other := c.Nodes[0], c.Nodes[1]
	before := latestSnapshotIndex(back)
	writeTasks(t, api, 1100)
	testkit.WaitFor(t, 60*time.Second, back.Name+" to snapshot the stopped session", testkit.Cond(func() bool {
		return latestSnapshotIndex(back) > before+1000
	}))

	if _, err := api.Resume(testCtx(t), s.ID); err != nil {
		t.Fatal(err)
	}
	waitState(t, api, s.ID, wire.SessionWaitingForInput)
	for _, n := range c.Nodes {
		testkit.WaitFor(t, 10*time.Second, n.Name+" to hold the resumed session", testkit.Cond(func() bool {
			ns, err := tokenClient(t, n, termToken).GetSession(testCtx(t), s.ID, client.Stale())
			return err == nil && ns.State == wire.SessionWaitingForInput
		}))
	}

	for _, n := range c.Nodes {
		n.Kill()
	}
	if err := back.Start(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 20*time.Second, back.Name+" to serve its API again", testkit.Cond(func() bool {
		_, err := tokenClient(t, back, termToken).Health(testCtx(t))
		return err == nil
	}))
	// The restarted node's own state says STOPPED: proof that it answers
	// from its snapshot, which the terminal route must not trust.
	if ns, err := tokenClient(t, back, termToken).GetSession(testCtx(t), s.ID, client.Stale()); err != nil || ns.State != wire.SessionStopped {
		t.Fatalf("%s's own state after the restart: %+v %v; the test needs the snapshot's STOPPED", back.Name, ns, err)
	}
	url := termURL(back, s.ID, "shell")
	if _, resp, err := termDial(t, url, authHeader(), termproto.Hello{}); err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("terminal (token header) on a node that cannot catch up: %v (%s), want 503", err, respStatus(resp))
	}
	if code, msg := helloTerminal(t, url); code != websocket.CloseTryAgainLater || !strings.Contains(msg, "starting") {
		t.Fatalf("terminal (token in the hello) on a node that cannot catch up: close %d %q, want %d saying starting", code, msg, websocket.CloseTryAgainLater)
	}

	// With a quorum again the node relays the terminal; no attempt on the
	// way answers from the stale state.
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 60*time.Second, back.Name+" to relay the terminal", testkit.Cond(func() bool {
		tc, resp, err := termDial(t, url, authHeader(), termproto.Hello{})
		if resp != nil && (resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusConflict) {
			t.Fatalf("%s answered %s for session %s, which runs", back.Name, resp.Status, s.ID)
		}
		if code, msg := helloTerminal(t, url); code == 4404 || code == 4409 {
			t.Fatalf("%s closed a browser's terminal with %d (%s) for session %s, which runs", back.Name, code, msg, s.ID)
		}
		if err != nil {
			return false
		}
		defer tc.Close()
		tc.WaitMsg("attached")
		return true
	}))
}

// writeTasks creates n tasks, 16 at a time: n raft writes.
func writeTasks(t *testing.T, api *client.Client, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	work := make(chan int)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if _, err := api.CreateTask(testCtx(t), wire.CreateTaskRequest{Title: fmt.Sprintf("filler %d", i)}); err != nil {
					errs <- err
				}
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("create a filler task: %v", err)
	}
}

// latestSnapshotIndex is the raft index of n's latest snapshot on disk
// (0: none), from hashicorp/raft's data/raft/snapshots/*/meta.json.
func latestSnapshotIndex(n *harness.Node) uint64 {
	metas, _ := filepath.Glob(filepath.Join(n.Dir, "data", "raft", "snapshots", "*", "meta.json"))
	var latest uint64
	for _, m := range metas {
		b, err := os.ReadFile(m)
		if err != nil {
			continue
		}
		var meta struct{ Index uint64 }
		if json.Unmarshal(b, &meta) == nil && meta.Index > latest {
			latest = meta.Index
		}
	}
	return latest
}

// helloTerminal dials url as a browser does (the token in the hello, no
// header) and returns the close code and the error frame's message of a
// refusal, or 0 and "" when the terminal attached.
func helloTerminal(t *testing.T, url string) (int, string) {
	t.Helper()
	d := websocket.Dialer{Subprotocols: []string{termproto.Subprotocol}, HandshakeTimeout: 10 * time.Second}
	ws, resp, err := d.Dial(url, nil)
	if err != nil {
		t.Fatalf("a browser's terminal is upgraded before its hello is read: %v (%s)", err, respStatus(resp))
	}
	defer ws.Close()
	if err := ws.WriteMessage(websocket.TextMessage, termtest.Hello(t, termproto.Hello{Token: termToken})); err != nil {
		t.Fatalf("send hello: %v", err)
	}
	_ = ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	var msg string
	for {
		typ, b, err := ws.ReadMessage()
		var ce *websocket.CloseError
		if errors.As(err, &ce) {
			return ce.Code, msg
		}
		if err != nil {
			t.Fatalf("read the terminal's answer: %v", err)
		}
		if typ != websocket.TextMessage {
			continue
		}
		m, err := termproto.DecodeServerMessage(b)
		if err != nil {
			t.Fatalf("bad server message %s: %v", b, err)
		}
		switch m := m.(type) {
		case termproto.Attached:
			return 0, ""
		case termproto.Error:
			msg = m.Message
		}
	}
}

func respStatus(resp *http.Response) string {
	if resp == nil {
		return "no response"
	}
	return resp.Status
}

// TestATaskWorkspaceOutsideTheRuntimesRootIsRefusedAtCreate: the
// standalone runtime runs a task's sessions only in a workspace inside its
// task_workspace_root. A task whose workspace lies outside (as written, or
// through a symlink inside the root) is refused when it is created, 400
// naming the root, instead of its first session failing at launch; one
// inside (even a directory not made yet) is created.
func TestATaskWorkspaceOutsideTheRuntimesRootIsRefusedAtCreate(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	// Short paths: the client keeps 200 characters of an error message.
	root, outside := shortTempDir(t), shortTempDir(t)
	cfg := strings.Replace(standaloneConfig(t), fmt.Sprintf("task_workspace_root   = %q", os.TempDir()), fmt.Sprintf("task_workspace_root   = %q", root), 1)
	if !strings.Contains(cfg, root) {
		t.Fatal("the test's config does not set task_workspace_root")
	}
	c := startCluster(t, 1, false, cfg)
	api := apiClient(t, leaderOf(t, c))
	if err := os.Symlink(outside, filepath.Join(root, "escape")); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{outside, filepath.Join(root, "escape"), filepath.Join(root, "escape", "new")} {
		_, err := api.CreateTask(testCtx(t), wire.CreateTaskRequest{Title: "outside", Workspace: wire.Workspace{Path: path}})
		var ae *client.APIError
		if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || !strings.Contains(ae.Message, "task_workspace_root "+root) {
			t.Fatalf("task with workspace %s outside task_workspace_root %s: %v; want 400 naming the root", path, root, err)
		}
	}
	tasks, err := api.ListTasks(testCtx(t))
	if err != nil || len(tasks) != 0 {
		t.Fatalf("refused tasks were recorded: %+v %v", tasks, err)
	}

	inside := filepath.Join(root, "proj")
	if err := os.Mkdir(inside, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{inside, filepath.Join(root, "not-made-yet")} {
		if _, err := api.CreateTask(testCtx(t), wire.CreateTaskRequest{Title: "inside", Workspace: wire.Workspace{Path: path}}); err != nil {
			t.Fatalf("task with workspace %s inside task_workspace_root: %v; want 201", path, err)
		}
	}
	// The accepted task's session runs in it.
	task, err := api.CreateTask(testCtx(t), wire.CreateTaskRequest{Title: "runs inside", Workspace: wire.Workspace{Path: inside}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := api.CreateSession(testCtx(t), task.ID, wire.CreateSessionRequest{Agent: "demo", Runtime: "standalone"})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, api, s.ID, wire.SessionWaitingForInput)
}

// shortTempDir is a new directory right under the temporary directory,
// removed when the test ends.
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "w")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}
