package e2e

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	wire "github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/api/termproto"
	"github.com/paddockhq/paddock/bench/harness"
	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/shared/term/termtest"
	"github.com/paddockhq/paddock/shared/testkit"
)

const (
	termToken  = "e2e-terminal-token"
	termOrigin = "http://ui.local:3000"
)

// termCluster starts one node with the standalone runtime, an ACL token and an allowed
// browser origin, and a session of agent on it.
func termCluster(t *testing.T, agent string, extra ...string) (*harness.Node, string) {
	t.Helper()
	return termClusterOn(t, standaloneConfig(t), agent, extra...)
}

// termClusterOn is termCluster with the given runtime and agent config.
func termClusterOn(t *testing.T, base, agent string, extra ...string) (*harness.Node, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("process test")
	}
	cfg := base + fmt.Sprintf("acl {\n  token = %q\n}\napi {\n  allowed_origins = [%q]\n}\n", termToken, termOrigin) + strings.Join(extra, "\n")
	c := startCluster(t, 1, false, cfg)
	node := c.Nodes[0] // leaderOf reads /v1/status without the token
	api, err := client.New(node.URL(), termToken)
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 20*time.Second, "the node to lead", testkit.Cond(func() bool {
		h, err := api.Health(testCtx(t))
		return err == nil && h.Leader
	}))
	task, err := api.CreateTask(testCtx(t), wire.CreateTaskRequest{Title: "terminals"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := api.CreateSession(testCtx(t), task.ID, wire.CreateSessionRequest{Agent: agent, Runtime: "standalone"})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, api, s.ID, wire.SessionWaitingForInput)
	return node, s.ID
}

func termURL(n *harness.Node, session, name string) string {
	return "ws://" + n.HTTP + "/v1/sessions/" + session + "/terminal?name=" + name
}

// termDial opens a terminal WebSocket with the given headers and sends hello.
func termDial(t *testing.T, url string, hdr http.Header, hello termproto.Hello) (*termtest.Client, *http.Response, error) {
	t.Helper()
	c, resp, err := termtest.Dial(t, url, hdr, termtest.Hello(t, hello))
	if err != nil {
		return nil, resp, err
	}
	c.Timeout = 15 * time.Second
	return c, resp, nil
}

func authHeader() http.Header { return http.Header{"Authorization": {"Bearer " + termToken}} }

// termAttach dials with the token header and waits for attached.
func termAttach(t *testing.T, n *harness.Node, session, name string, hello termproto.Hello) (*termtest.Client, termproto.Attached) {
	t.Helper()
	c, resp, err := termDial(t, termURL(n, session, name), authHeader(), hello)
	if err != nil {
		t.Fatalf("attach %s/%s: %v (%v)", session, name, err, resp)
	}
	return c, c.WaitMsg("attached").(termproto.Attached)
}

func TestTerminalOverSupervisor(t *testing.T) {
	node, sid := termCluster(t, "demo")

	c, a := termAttach(t, node, sid, "shell", termproto.Hello{})
	mark := c.Marker()
	pid := c.ShellPid()
	if pid != a.Pid {
		t.Fatalf("$$ %d, attached says %d", pid, a.Pid)
	}
	c.Input("pwd\r")
	c.WaitOutput(sid) // the shell runs in the session's workspace

	// Disconnect and come back with the position: only the delta, same shell.
	pos := c.Position()
	_ = c.Close()
	c.WaitClosed()
	c2, a2 := termAttach(t, node, sid, "shell", termproto.Hello{Epoch: a.Epoch, Offset: &pos})
	if a2.Epoch != a.Epoch || (a2.Replay != termproto.ReplayDelta && a2.Replay != termproto.ReplayNone) {
		t.Fatalf("reattach %+v", a2)
	}
	if p := c2.ShellPid(); p != pid {
		t.Fatalf("pid after reconnect %d, want %d", p, pid)
	}
	if strings.Contains(c2.Output(), mark) {
		t.Fatal("delta replay repeated the marker")
	}
	_ = c2.Close()
	c2.WaitClosed()

	// A fresh screen gets the marker replayed.
	c3, a3 := termAttach(t, node, sid, "shell", termproto.Hello{})
	if a3.Replay != termproto.ReplayFull {
		t.Fatalf("fresh attach %+v", a3)
	}
	c3.WaitOutput(mark)

	// Two clients: the first is taken over with close 4001.
	c4, _ := termAttach(t, node, sid, "shell", termproto.Hello{})
	c3.WaitMsg("taken_over")
	if code := c3.WaitClosed(); code != termproto.CloseTakenOver {
		t.Fatalf("takeover close code %d", code)
	}

	// Reset: a new pid and a new epoch.
	c4.Send(termproto.Reset{})
	rd := c4.WaitMsg("reset").(termproto.ResetDone)
	if rd.Epoch == a.Epoch {
		t.Fatal("reset kept the epoch")
	}
	if p := c4.ShellPid(); p == pid || p != rd.Pid {
		t.Fatalf("after reset $$ %d (old %d, announced %d)", p, pid, rd.Pid)
	}

	// exit: the next attach starts a fresh shell and says so.
	c4.Input("exit 6\r")
	if ex := c4.WaitMsg("exited").(termproto.Exited); ex.Code != 6 {
		t.Fatalf("exit code %d", ex.Code)
	}
	_ = c4.Close()
	c4.WaitClosed()
	c5, a5 := termAttach(t, node, sid, "shell", termproto.Hello{})
	if a5.Notice == "" || a5.Pid == rd.Pid {
		t.Fatalf("attach after exit %+v", a5)
	}
	c5.WaitOutput("exited with code 6")
	c5.Marker()
}

func TestTerminalAuthAndOrigin(t *testing.T) {
	node, sid := termCluster(t, "demo")
	url := termURL(node, sid, "shell")

	// A wrong header token: 401 before the upgrade.
	_, resp, err := termDial(t, url, http.Header{"Authorization": {"Bearer wrong"}}, termproto.Hello{})
	if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong token: %v %v", err, resp)
	}
	// A foreign Origin: 403 before the upgrade, even with the right token.
	hdr := authHeader()
	hdr.Set("Origin", "http://evil.local")
	_, resp, err = termDial(t, url, hdr, termproto.Hello{})
	if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("foreign origin: %v %v", err, resp)
	}
	// A browser (allowed origin, no header): the token goes in the hello.
	browser := http.Header{"Origin": {termOrigin}}
	bad, _, err := termDial(t, url, browser, termproto.Hello{Token: "wrong"})
	if err != nil {
		t.Fatal(err)
	}
	if e := bad.WaitMsg("error").(termproto.Error); e.Code != termproto.CodeUnauth {
		t.Fatalf("wrong hello token: %+v", e)
	}
	if code := bad.WaitClosed(); code != termproto.CloseUnauthorized {
		t.Fatalf("wrong hello token close %d", code)
	}
	good, _, err := termDial(t, url, browser, termproto.Hello{Token: termToken})
	if err != nil {
		t.Fatal(err)
	}
	good.WaitMsg("attached")
	good.Marker()

	// An unknown session: 404 before the upgrade.
	_, resp, err = termDial(t, termURL(node, "no-such-session", "shell"), authHeader(), termproto.Hello{})
	if err == nil || resp == nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown session: %v %v", err, resp)
	}
}

func TestAgentTerminalOfPtyAgent(t *testing.T) {
	node, sid := termCluster(t, "demo-tty")
	c, a := termAttach(t, node, sid, "agent", termproto.Hello{})
	if a.Pid == 0 || a.Replay != termproto.ReplayFull {
		t.Fatalf("agent attach %+v", a)
	}
	c.WaitOutput("demo> ") // the agent's own screen, from before the attach
	c.Send(termproto.Reset{})
	if e := c.WaitMsg("error").(termproto.Error); !strings.Contains(e.Message, "cannot be reset") {
		t.Fatalf("reset of the agent terminal: %+v", e)
	}
	// The session's shell is a separate terminal.
	sh, sa := termAttach(t, node, sid, "shell", termproto.Hello{})
	if sa.Pid == a.Pid {
		t.Fatal("shell and agent share a pid")
	}
	sh.Marker()
}

func TestAttachCommandPipeMode(t *testing.T) {
	node, sid := termCluster(t, "demo")
	cmd := exec.Command(filepath.Join(binDir, "paddock"), "attach", "-address", node.URL(), "-token", termToken, sid)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr lockedBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("attach stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
		}
	})
	n := rand.IntN(1_000_000)
	if _, err := io.WriteString(stdin, fmt.Sprintf("echo \"MARK$((%d+1))\"\n", n)); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("MARK%d", n+1)
	testkit.WaitFor(t, 15*time.Second, "marker on stdout", testkit.Cond(func() bool { return strings.Contains(stdout.String(), want) }))
	if _, err := stdin.Write([]byte{0x1d}); err != nil { // ctrl-]
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			t.Fatalf("attach after ctrl-]: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("ctrl-] did not detach")
	}
	// The shell outlived the detach: a new client sees the marker replayed.
	c, _ := termAttach(t, node, sid, "shell", termproto.Hello{})
	c.WaitOutput(want)
}

// lockedBuffer is a goroutine-safe buffer for a child's output.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// The server's terminal block reaches the session's agentctl: a terminal
// runs the configured shell argv (which announces itself), not agentctl's
// $SHELL.
func TestTerminalRunsConfiguredShell(t *testing.T) {
	// The marker is assembled by the shell, so it appears in the output only
	// if the configured argv ran (never from an echo of the config text).
	node, sid := termCluster(t, "demo", `
terminal {
  shell        = ["/bin/sh", "-c", "echo SHELL-FROM-$0; exec /bin/sh", "CONFIG"]
  replay_bytes = "64KiB"
  idle_timeout = "10m"
}
`)
	c, a := termAttach(t, node, sid, "shell", termproto.Hello{})
	c.WaitOutput("SHELL-FROM-CONFIG")
	c.Marker() // the exec'd /bin/sh answers
	if pid := c.ShellPid(); pid != a.Pid {
		t.Fatalf("$$ %d, attached says %d (the configured argv should exec the shell)", pid, a.Pid)
	}
	_ = c.Close()
	c.WaitClosed()
}

// TestRestartedNodeAnswersATerminalOnlyWhenCaughtUp: a node serves a
// terminal from its own state, and a node that has just restarted holds only
// its snapshot until a leader tells it what is committed. It must not answer
// "not found" for a session the cluster has: with no leader to catch up with
// it answers 503, and once a quorum is back it relays the terminal.
func TestRestartedNodeAnswersATerminalOnlyWhenCaughtUp(t *testing.T) {
	if testing.Short() {
		t.Skip("process cluster")
	}
	c := startCluster(t, 3, true, standaloneConfig(t))
	leader := leaderOf(t, c)
	api := apiClient(t, leader)
	s := startDemoSession(t, api, "terminal after restart", "demo")
	for _, n := range c.Nodes {
		testkit.WaitFor(t, 10*time.Second, n.Name+" to hold the session", testkit.Cond(func() bool {
			_, err := apiClient(t, n).GetSession(testCtx(t), s.ID, client.Stale())
			return err == nil
		}))
	}

	// Every server dies; one comes back alone: it cannot learn what is
	// committed, so the session is not in its state yet.
	back, other := c.Nodes[0], c.Nodes[1]
	for _, n := range c.Nodes {
		n.Kill()
	}
	if err := back.Start(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 20*time.Second, back.Name+" to serve its API again", testkit.Cond(func() bool {
		_, err := apiClient(t, back).Health(testCtx(t))
		return err == nil
	}))
	_, resp, err := termDial(t, termURL(back, s.ID, "main"), nil, termproto.Hello{})
	if err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("terminal on a node that cannot catch up: %v (%v), want 503", err, resp)
	}

	// With a quorum again the same node relays the terminal; no attempt
	// on the way may answer 404.
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 30*time.Second, back.Name+" to relay the terminal", testkit.Cond(func() bool {
		tc, resp, err := termDial(t, termURL(back, s.ID, "main"), nil, termproto.Hello{})
		if resp != nil && resp.StatusCode == http.StatusNotFound {
			t.Fatalf("%s answered 404 for session %s that the cluster holds", back.Name, s.ID)
		}
		if err != nil {
			return false
		}
		defer tc.Close()
		tc.WaitMsg("attached")
		return true
	}))
}
