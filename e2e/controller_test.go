package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/api/termproto"
	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/shared/testkit"
)

// TestAgentTerminalControllerInStatus: the status object names the client
// attached to a pty agent's terminal, as its hello gave it, while it is
// attached and null after; `paddock attach` sends this host, its pid and a
// nonce; a hello with a malformed identity is refused with 4000.
func TestAgentTerminalControllerInStatus(t *testing.T) {
	node, sid := termCluster(t, "demo-tty")
	c, err := client.New(node.URL(), termToken)
	if err != nil {
		t.Fatal(err)
	}
	controller := func() *api.Controller {
		t.Helper()
		st, err := c.SessionStatus(testCtx(t), sid)
		if err != nil {
			t.Fatal(err)
		}
		return st.Controller
	}
	if ctl := controller(); ctl != nil {
		t.Fatalf("controller before any attach: %+v", ctl)
	}

	before := time.Now().Add(-time.Second)
	id := termproto.ClientID{Host: "laptop", PID: 4242, Nonce: "n-1"}
	conn, _ := termAttach(t, node, sid, "agent", termproto.Hello{Client: &id})
	var got *api.Controller
	testkit.WaitFor(t, 15*time.Second, "the status to name the controller", testkit.Cond(func() bool {
		got = controller()
		return got != nil
	}))
	if got.Host != id.Host || got.PID != id.PID || got.Nonce != id.Nonce || got.Since.Before(before) || got.Since.After(time.Now()) {
		t.Fatalf("controller %+v, want %+v since about now", got, id)
	}
	conn.Close()
	testkit.WaitFor(t, 15*time.Second, "the controller to go after the detach", testkit.Cond(func() bool { return controller() == nil }))

	// The shell terminal is not the agent's: attaching it names no controller.
	sh, _ := termAttach(t, node, sid, "shell", termproto.Hello{Client: &id})
	sh.Marker()
	if ctl := controller(); ctl != nil {
		t.Fatalf("a shell attach made a controller: %+v", ctl)
	}
	sh.Close()

	// paddock attach identifies itself.
	cmd := exec.Command(filepath.Join(binDir, "paddock"), "attach", "-address", node.URL(), "-token", termToken, "-name", "agent", sid)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	testkit.WaitFor(t, 15*time.Second, "paddock attach to show as the controller", testkit.Cond(func() bool {
		got = controller()
		return got != nil
	}))
	host, _ := os.Hostname()
	if got.Host != host || got.PID != cmd.Process.Pid || len(got.Nonce) != 32 {
		t.Fatalf("paddock attach's identity %+v, want host %s pid %d and a nonce", got, host, cmd.Process.Pid)
	}
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
	testkit.WaitFor(t, 15*time.Second, "the controller to go after paddock attach left", testkit.Cond(func() bool { return controller() == nil }))

	// A malformed identity is refused, and nobody becomes the controller.
	bad, resp, err := termDial(t, termURL(node, sid, "agent"), authHeader(), termproto.Hello{Client: &termproto.ClientID{Host: "evil\x1b[2J", PID: 1, Nonce: "x"}})
	if err != nil {
		t.Fatalf("dial: %v (%v)", err, resp)
	}
	if e := bad.WaitMsg("error").(termproto.Error); e.Code != termproto.CodeBadRequest {
		t.Fatalf("bad identity answered %+v", e)
	}
	if code := bad.WaitClosed(); code != termproto.CloseBadHello {
		t.Fatalf("bad identity closed with %d, want %d", code, termproto.CloseBadHello)
	}
	if ctl := controller(); ctl != nil {
		t.Fatalf("a refused hello made a controller: %+v", ctl)
	}
}
