package e2e

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/api/termproto"
	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/shared/testkit"
)

// TestAgentTerminalControllerInStatus: the status object names the client
// attached to a pty agent's terminal, as its hello gave it (via
// "terminal", before a chat registered at the same time), while it is
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
	if got.Via != api.ViaTerminal {
		t.Fatalf("controller %+v, want via terminal", got)
	}
	// A chat registered meanwhile does not hide the terminal's client (it
	// owns the keystrokes); it shows once the terminal is left.
	chat := api.ClientID{Host: "desk", PID: 77, Nonce: "nonce-desk"}
	if _, err := c.ClaimController(testCtx(t), sid, chat, false); err != nil {
		t.Fatal(err)
	}
	if got := controller(); got == nil || got.Via != api.ViaTerminal || got.Nonce != id.Nonce {
		t.Fatalf("with a chat registered too: controller %+v, want the terminal's", got)
	}
	conn.Close()
	testkit.WaitFor(t, 15*time.Second, "the chat to show after the detach", testkit.Cond(func() bool {
		got := controller()
		return got != nil && got.Via == api.ViaChat && got.Nonce == chat.Nonce
	}))
	if err := c.ReleaseController(testCtx(t), sid, chat.Nonce); err != nil {
		t.Fatal(err)
	}
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

// TestChatControllerThroughTheAPI: a chat's registration (PUT
// /v1/sessions/{id}/controller) makes the status object's controller name
// it with via "chat"; another client is refused unless it takes over, a
// release by a nonce that does not hold it is refused, the holder's ends
// it; the read-only token cannot register; malformed bodies are refused.
func TestChatControllerThroughTheAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	c := startCluster(t, 1, false, workConfig(t))
	node := c.Nodes[0]
	cl := tokenClient(t, node, workToken)
	testkit.WaitFor(t, 20*time.Second, "the node to lead", testkit.Cond(func() bool {
		h, err := cl.Health(testCtx(t))
		return err == nil && h.Leader
	}))
	task, err := cl.CreateTask(testCtx(t), api.CreateTaskRequest{Title: "chat controller"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := cl.CreateSession(testCtx(t), task.ID, api.CreateSessionRequest{Agent: "demo", Runtime: "standalone"})
	if err != nil {
		t.Fatal(err)
	}
	sid := s.ID
	waitState(t, cl, sid, api.SessionWaitingForInput)
	controller := func() *api.Controller {
		t.Helper()
		st, err := cl.SessionStatus(testCtx(t), sid)
		if err != nil {
			t.Fatal(err)
		}
		return st.Controller
	}
	if ctl := controller(); ctl != nil {
		t.Fatalf("controller before any chat: %+v", ctl)
	}

	laptop := api.ClientID{Host: "laptop", PID: 4242, Nonce: "nonce-laptop"}
	desk := api.ClientID{Host: "desk", PID: 77, Nonce: "nonce-desk"}
	before := time.Now().Add(-time.Second)
	if _, err := cl.ClaimController(testCtx(t), sid, laptop, false); err != nil {
		t.Fatal(err)
	}
	got := controller()
	if got == nil || got.Via != api.ViaChat || got.Host != laptop.Host || got.PID != laptop.PID || got.Nonce != laptop.Nonce ||
		got.Since.Before(before) || got.Since.After(time.Now()) {
		t.Fatalf("controller after the registration: %+v, want %+v via chat since about now", got, laptop)
	}

	// Another client is refused (and told who holds it) unless it takes over.
	_, err = cl.ClaimController(testCtx(t), sid, desk, false)
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusConflict || !strings.Contains(ae.Message, "in chat on laptop (pid 4242)") {
		t.Fatalf("a second chat without takeover: %v", err)
	}
	if err := cl.ReleaseController(testCtx(t), sid, desk.Nonce); !errors.As(err, &ae) || ae.Status != http.StatusConflict {
		t.Fatalf("a release by another nonce: %v", err)
	}
	if got := controller(); got == nil || got.Nonce != laptop.Nonce {
		t.Fatalf("after refused claims: %+v", got)
	}

	// The read-only token cannot register or release.
	reader := tokenClient(t, node, workReadToken)
	if _, err := reader.ClaimController(testCtx(t), sid, desk, true); !errors.As(err, &ae) || ae.Status != http.StatusForbidden {
		t.Fatalf("a registration with the read-only token: %v", err)
	}
	if err := reader.ReleaseController(testCtx(t), sid, laptop.Nonce); !errors.As(err, &ae) || ae.Status != http.StatusForbidden {
		t.Fatalf("a release with the read-only token: %v", err)
	}

	// Malformed requests are refused with the reason.
	put := func(body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPut, node.URL()+"/v1/sessions/"+sid+"/controller", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+workToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for body, why := range map[string]string{
		`{"client":{"host":"h","pid":1,"nonce":"n"},"extra":1}`: "extra",
		`{"client":{"host":"h","pid":1}}`:                       "nonce is empty",
		`{"client":{"host":"","pid":1,"nonce":"n"}}`:            "client host",
		`{"client":{"host":"h","pid":-1,"nonce":"n"}}`:          "client pid",
	} {
		if code, out := put(body); code != http.StatusBadRequest || !strings.Contains(out, why) {
			t.Errorf("PUT %s: %d %s, want 400 naming %q", body, code, out, why)
		}
	}
	if err := cl.ReleaseController(testCtx(t), sid, ""); err == nil {
		t.Error("a release without a nonce was sent")
	}
	req, _ := http.NewRequest(http.MethodDelete, node.URL()+"/v1/sessions/"+sid+"/controller", nil)
	req.Header.Set("Authorization", "Bearer "+workToken)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Errorf("DELETE without a nonce: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}

	// A takeover replaces the holder; the holder's release frees the session.
	if _, err := cl.ClaimController(testCtx(t), sid, desk, true); err != nil {
		t.Fatal(err)
	}
	if got := controller(); got == nil || got.Nonce != desk.Nonce || got.Via != api.ViaChat {
		t.Fatalf("after the takeover: %+v", got)
	}
	if err := cl.ReleaseController(testCtx(t), sid, desk.Nonce); err != nil {
		t.Fatal(err)
	}
	if got := controller(); got != nil {
		t.Fatalf("after the release: %+v", got)
	}
	// Nothing to release is not an error (a registration may have lapsed).
	if err := cl.ReleaseController(testCtx(t), sid, desk.Nonce); err != nil {
		t.Fatalf("a second release: %v", err)
	}
}

// TestChatHoldsTheSession runs `paddock chat` in tmux: a running chat is
// the session's controller (its host and pid, via chat); a second chat
// says who holds the session and asks, n leaves it alone and y takes it
// over, and the chat taken over says so; when the second leaves, the first
// holds the session again. Without a terminal a second chat refuses unless
// -force. A chat killed with SIGKILL stops counting once its registration
// lapses.
func TestChatHoldsTheSession(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	x := newTmux(t)
	c := startCluster(t, 1, false, standaloneConfig(t))
	node := leaderOf(t, c)
	cl := apiClient(t, node)
	s := startDemoSession(t, cl, "chat holds", "demo")
	id := s.ID
	controller := func() *api.Controller {
		t.Helper()
		st, err := cl.SessionStatus(testCtx(t), id)
		if err != nil {
			t.Fatal(err)
		}
		return st.Controller
	}
	host, _ := os.Hostname()
	// waitHolder waits for the status to name a chat of this host other
	// than not (0: any), and returns its pid.
	waitHolder := func(what string, not int) int {
		t.Helper()
		var got *api.Controller
		testkit.WaitFor(t, 30*time.Second, what, testkit.Cond(func() bool {
			got = controller()
			return got != nil && got.PID != not
		}))
		if got.Via != api.ViaChat || got.Host != host || len(got.Nonce) != 32 {
			t.Fatalf("%s: controller %+v, want a chat of %s", what, got, host)
		}
		// The pid is a paddock chat's.
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", got.PID)); err != nil || !strings.Contains(string(b), "chat\x00"+id) {
			t.Fatalf("%s: pid %d is not a paddock chat: %q %v", what, got.PID, b, err)
		}
		return got.PID
	}
	paddock := filepath.Join(binDir, "paddock")
	env := []string{"PADDOCK_ADDR=" + node.URL(), "TERM=xterm-256color"}
	t.Cleanup(func() {
		if t.Failed() {
			for _, w := range []string{"first", "no", "second"} {
				if out, err := exec.Command("tmux", "-S", x.socket, "capture-pane", "-p", "-t", w).CombinedOutput(); err == nil {
					t.Logf("window %s:\n%s", w, out)
				}
			}
		}
	})

	x.start("first", t.TempDir(), paddock+" chat "+id, env...)
	x.waitScreen("first", "Chat with session "+id)
	first := waitHolder("the first chat to hold the session", 0)

	// A second chat asks; n leaves the session to the first.
	x.start("no", t.TempDir(), paddock+" chat "+id, env...)
	x.waitScreen("no", fmt.Sprintf("this session is in chat on %s (pid %d) since", host, first), "take it over? [y/N]")
	x.keys("no", "n", "Enter")
	x.waitScreen("no", "not opened; the other client keeps the session", "EXIT=1")
	if got := controller(); got == nil || got.PID != first {
		t.Fatalf("after n: controller %+v, want the first chat (pid %d)", got, first)
	}

	// y takes it over; the first chat is told at its next renewal.
	x.start("second", t.TempDir(), paddock+" chat "+id, env...)
	x.waitScreen("second", fmt.Sprintf("this session is in chat on %s (pid %d) since", host, first))
	x.keys("second", "y", "Enter")
	x.waitScreen("second", "Chat with session "+id)
	second := waitHolder("the second chat to hold the session", first)
	x.waitScreen("first", fmt.Sprintf("[paddock] the session is now in chat on %s (pid %d)", host, second), "this chat carries on without holding it")

	// The second leaves (its registration is released); the first holds
	// the session again at its next renewal.
	x.keys("second", "C-d")
	x.waitScreen("second", "EXIT=0")
	x.waitScreen("first", "[paddock] this chat holds the session again")
	if got := waitHolder("the first chat to hold the session again", second); got != first {
		t.Fatalf("after the second left: pid %d holds the session, want %d", got, first)
	}

	// Without a terminal to ask on, a second chat refuses; -force takes
	// over without asking (and, its input empty, leaves at once).
	r := cliRunner{t: t, addr: node.URL()}
	if code, _, errOut := r.run("chat", id); code != 1 || !strings.Contains(errOut, fmt.Sprintf("in chat on %s (pid %d)", host, first)) || !strings.Contains(errOut, "-force takes it over") {
		t.Fatalf("a piped chat while another holds the session: exit %d: %s", code, errOut)
	}
	held := controller()
	if code, out, errOut := r.run("chat", "-force", id); code != 0 || !strings.Contains(out, "Chat with session "+id) {
		t.Fatalf("chat -force: exit %d: %s %s", code, out, errOut)
	}
	// The forced chat replaced the first's registration and released
	// its own: the first registers anew, with a later since.
	testkit.WaitFor(t, 30*time.Second, "the first chat to register anew after the forced one", testkit.Cond(func() bool {
		got := controller()
		return got != nil && got.PID == first && got.Since.After(held.Since)
	}))

	// SIGKILL: nothing is released; the registration lapses (15 s after
	// the last renewal, at most 5 s before the kill).
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	x.waitScreen("first", "EXIT=137")
	killed := time.Now()
	if got := controller(); got == nil || got.PID != first {
		t.Fatalf("right after the kill: controller %+v, want the killed chat until its registration lapses", got)
	}
	testkit.WaitFor(t, 30*time.Second, "the killed chat's registration to lapse", testkit.Cond(func() bool { return controller() == nil }))
	if lapsed := time.Since(killed); lapsed < 9*time.Second {
		t.Fatalf("the registration went %s after the kill, before it could have lapsed", lapsed)
	}
}

// TestSessionPageShowsTheController: the session page's header says who
// controls the session ("In chat on HOST", the pid in its title) and
// follows a registration and its release without a reload.
func TestSessionPageShowsTheController(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	ctx := browser(t)
	c, cl := uiNode(t, 1, false)
	s := startDemoSession(t, cl, "controller page", "demo")
	p := page{t: t, ctx: ctx}
	p.open(c.Nodes[0].URL() + "/ui/sessions/" + s.ID)
	p.waitText("dl.status", "Controller—")

	laptop := api.ClientID{Host: "laptop", PID: 4242, Nonce: "nonce-laptop"}
	if _, err := cl.ClaimController(testCtx(t), s.ID, laptop, false); err != nil {
		t.Fatal(err)
	}
	p.waitText("dl.status", "ControllerIn chat on laptop")
	var title string
	p.run("read the controller's title", chromedp.Evaluate(`document.querySelector("dl.status .controller")?.title ?? ""`, &title))
	if !strings.Contains(title, "pid 4242") || !strings.Contains(title, "since") {
		t.Fatalf("the controller's title is %q, want its pid and since", title)
	}
	if err := cl.ReleaseController(testCtx(t), s.ID, laptop.Nonce); err != nil {
		t.Fatal(err)
	}
	p.waitText("dl.status", "Controller—")
}
