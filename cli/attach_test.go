package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	xterm "golang.org/x/term"

	"github.com/paddockhq/paddock/shared/term"
	"github.com/paddockhq/paddock/shared/testkit"
)

// syncBuffer is a goroutine-safe bytes.Buffer.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// dropProxy forwards TCP connections to target and can sever them all, like a network
// drop or a supervisor that died.
type dropProxy struct {
	l     net.Listener
	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

func newDropProxy(t *testing.T, target string) *dropProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &dropProxy{l: l}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			p.wg.Add(2)
			go func() { defer p.wg.Done(); _, _ = io.Copy(u, c); _ = u.Close() }()
			go func() { defer p.wg.Done(); _, _ = io.Copy(c, u); _ = c.Close() }()
		}
	}()
	t.Cleanup(func() { _ = l.Close(); p.drop(); p.wg.Wait() })
	return p
}

func (p *dropProxy) drop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

// runningAttach is an attacher in pipe mode running in the background.
type runningAttach struct {
	stdin  *io.PipeWriter
	out    *syncBuffer
	errOut *syncBuffer
	done   chan error
}

func startAttach(t *testing.T, url string) *runningAttach {
	t.Helper()
	r, w := io.Pipe()
	ra := &runningAttach{stdin: w, out: &syncBuffer{}, errOut: &syncBuffer{}, done: make(chan error, 1)}
	a := &attacher{url: url, in: r, out: ra.out, errOut: ra.errOut, fd: -1}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { ra.done <- a.run(ctx) }()
	t.Cleanup(func() {
		cancel()
		_ = w.Close()
		select {
		case <-ra.done:
		case <-time.After(10 * time.Second):
			t.Error("attach did not end")
		}
	})
	return ra
}

func (ra *runningAttach) typeText(t *testing.T, s string) {
	t.Helper()
	if _, err := ra.stdin.Write([]byte(s)); err != nil {
		t.Fatalf("type %q: %v", s, err)
	}
}

func (ra *runningAttach) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-ra.done:
		ra.done <- err // for the cleanup
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("attach did not end")
		return nil
	}
}

// marker makes the shell print a random marker that the typed line does not contain.
func (ra *runningAttach) marker(t *testing.T) string {
	t.Helper()
	n := rand.IntN(1_000_000)
	ra.typeText(t, fmt.Sprintf("echo \"MK$((%d+1))\"\n", n))
	m := fmt.Sprintf("MK%d", n+1)
	testkit.WaitFor(t, 10*time.Second, "marker "+m, testkit.Cond(func() bool { return strings.Contains(ra.out.String(), m) }))
	return m
}

var pidLine = regexp.MustCompile(`PID(\d+):`)

func (ra *runningAttach) pid(t *testing.T) string {
	t.Helper()
	before := len(pidLine.FindAllString(ra.out.String(), -1))
	ra.typeText(t, "echo \"PID$$:\"\n")
	var pid string
	testkit.WaitFor(t, 10*time.Second, "echo $$", testkit.Cond(func() bool {
		all := pidLine.FindAllStringSubmatch(ra.out.String(), -1)
		if len(all) <= before {
			return false
		}
		pid = all[len(all)-1][1]
		return true
	}))
	return pid
}

// startTerminals serves a real term.Manager (real PTYs) behind a proxy that can drop
// connections.
func startTerminals(t *testing.T) (*term.Manager, *dropProxy, string) {
	t.Helper()
	m := term.NewManager(term.Options{Shell: []string{"/bin/sh"}, Dir: t.TempDir(), Env: append(os.Environ(), "PS1=$ ")})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.ServeTerminal(w, r, r.URL.Query().Get("name"))
	}))
	t.Cleanup(func() { srv.Close(); _ = m.Close() })
	p := newDropProxy(t, strings.TrimPrefix(srv.URL, "http://"))
	return m, p, "ws://" + p.l.Addr().String() + "/v1/sessions/s1/terminal?name=shell"
}

func TestAttachReconnectsWithDeltaAndDetaches(t *testing.T) {
	m, proxy, url := startTerminals(t)
	ra := startAttach(t, url)
	mark := ra.marker(t)
	pid := ra.pid(t)

	// The connection drops: attach reconnects by itself with only what it missed.
	proxy.drop()
	testkit.WaitFor(t, 10*time.Second, "reconnect notice", testkit.Cond(func() bool { return strings.Contains(ra.errOut.String(), "reconnecting") }))
	testkit.WaitFor(t, 10*time.Second, "shell answers after reconnect", testkit.Cond(func() bool {
		ra.typeText(t, "\n")
		return strings.Count(ra.out.String(), "$ ") > 4
	}))
	if p := ra.pid(t); p != pid {
		t.Fatalf("pid after reconnect %s, want %s", p, pid)
	}
	if n := strings.Count(ra.out.String(), mark); n != 1 {
		t.Fatalf("marker printed %d times: the reconnect replayed more than the delta", n)
	}

	// ctrl-] detaches; the shell keeps running.
	ra.typeText(t, "echo bye\n\x1d")
	if err := ra.wait(t); err != nil {
		t.Fatalf("detach: %v", err)
	}
	sh, ok := m.Terminal("shell")
	if !ok || fmt.Sprint(sh.Pid()) != pid {
		t.Fatal("detach ended the shell")
	}

	// A new attach (fresh screen) gets the full replay with the marker.
	rb := startAttach(t, url)
	testkit.WaitFor(t, 10*time.Second, "replayed marker", testkit.Cond(func() bool { return strings.Contains(rb.out.String(), mark) }))

	// A second client takes over: the first says so and ends without an error.
	rc := startAttach(t, url)
	rc.marker(t)
	if err := rb.wait(t); err != nil {
		t.Fatalf("taken over: %v", err)
	}
	if !strings.Contains(rb.errOut.String(), "took over") {
		t.Fatalf("no takeover notice: %q", rb.errOut.String())
	}

	// The shell exits: the notice says the next attach starts a new one.
	rc.typeText(t, "exit 3\n")
	if err := rc.wait(t); err != nil {
		t.Fatalf("after exit: %v", err)
	}
	if !strings.Contains(rc.errOut.String(), "exited with code 3") {
		t.Fatalf("no exit notice: %q", rc.errOut.String())
	}
	rd := startAttach(t, url)
	testkit.WaitFor(t, 10*time.Second, "new shell notice", testkit.Cond(func() bool { return strings.Contains(rd.out.String(), "previous shell exited with code 3") }))
	if p := rd.pid(t); p == pid {
		t.Fatal("exited shell was not replaced")
	}
}

// ctrl-] r asks before resetting the terminal; a reconnect says so and
// makes the program redraw (a window size change); a detach ends its line.
func TestAttachResetKeyReconnectAndDetach(t *testing.T) {
	_, proxy, url := startTerminals(t)
	ra := startAttach(t, url)
	pid := ra.pid(t)

	ra.typeText(t, "\x1dr")
	testkit.WaitFor(t, 10*time.Second, "the reset question", testkit.Cond(func() bool { return strings.Contains(ra.errOut.String(), "reset the terminal?") }))
	ra.typeText(t, "n")
	testkit.WaitFor(t, 10*time.Second, "the answer", testkit.Cond(func() bool { return strings.Contains(ra.errOut.String(), "not reset") }))
	if p := ra.pid(t); p != pid {
		t.Fatalf("the shell changed after answering no: %s, want %s", p, pid)
	}
	ra.typeText(t, "\x1dry")
	testkit.WaitFor(t, 10*time.Second, "the reset", testkit.Cond(func() bool { return strings.Contains(ra.errOut.String(), "the terminal was reset") }))
	newPID := ra.pid(t)
	if newPID == pid {
		t.Fatal("the shell was not replaced")
	}

	ra.typeText(t, "trap 'echo WIN\"CHED\"' WINCH\n")
	ra.marker(t)
	proxy.drop()
	testkit.WaitFor(t, 10*time.Second, "the reconnected line", testkit.Cond(func() bool { return strings.Contains(ra.errOut.String(), "[paddock] reconnected") }))
	// The shell runs its trap once it reads a line.
	testkit.WaitFor(t, 10*time.Second, "the redraw", testkit.Cond(func() bool {
		ra.typeText(t, "\n")
		time.Sleep(20 * time.Millisecond)
		return strings.Contains(ra.out.String(), "WINCHED")
	}))
	if p := ra.pid(t); p != newPID {
		t.Fatalf("the shell changed across the reconnect: %s, want %s", p, newPID)
	}

	ra.typeText(t, "\x1d")
	if err := ra.wait(t); err != nil {
		t.Fatalf("detach: %v", err)
	}
	if out := ra.out.String(); !strings.HasSuffix(out, "\r\n") {
		t.Fatalf("the output does not end its line after the detach: %q", out[max(0, len(out)-40):])
	}
}

// ctrl-] detaches while attach is reconnecting, even after typing that no
// connection took.
func TestAttachDetachesWhileReconnecting(t *testing.T) {
	_, proxy, url := startTerminals(t)
	ra := startAttach(t, url)
	ra.marker(t)
	_ = proxy.l.Close() // the server is gone: every reconnect fails
	proxy.drop()
	testkit.WaitFor(t, 10*time.Second, "the reconnect notice", testkit.Cond(func() bool { return strings.Contains(ra.errOut.String(), "reconnecting") }))
	ra.typeText(t, "typed into the void\n")
	ra.typeText(t, "\x1d")
	if err := ra.wait(t); err != nil {
		t.Fatalf("detach while reconnecting: %v", err)
	}
}

func TestAttachRefusals(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"error":{"code":"not_found","message":"session nope not found"}}`)
	}))
	defer srv.Close()
	ra := startAttach(t, "ws"+strings.TrimPrefix(srv.URL, "http")+"/v1/sessions/nope/terminal")
	err := ra.wait(t)
	if err == nil || !strings.Contains(err.Error(), "session nope not found (not_found)") {
		t.Fatalf("refusal: %v", err)
	}

	// Nothing listening: the first connection must succeed, so it fails at once.
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	_ = l.Close()
	rb := startAttach(t, "ws://"+addr+"/v1/sessions/s1/terminal")
	if err := rb.wait(t); err == nil || !strings.Contains(err.Error(), "dial") {
		t.Fatalf("no server: %v", err)
	}
}

// TestAttachRawModeFollowsWindowSize runs attach on a real terminal (a PTY): raw mode,
// the window size on start and after SIGWINCH, the terminal restored on detach.
func TestAttachRawModeFollowsWindowSize(t *testing.T) {
	_, _, url := startTerminals(t)
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	defer tty.Close()
	if err := pty.Setsize(ptmx, &pty.Winsize{Cols: 97, Rows: 29}); err != nil {
		t.Fatal(err)
	}
	before, err := xterm.GetState(int(tty.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	screen := &syncBuffer{}
	go func() { _, _ = io.Copy(screen, ptmx) }()
	a := &attacher{url: url, in: tty, out: tty, errOut: tty, fd: int(tty.Fd())}
	done := make(chan error, 1)
	go func() { done <- a.run(context.Background()) }()

	_, _ = ptmx.Write([]byte("stty size\r"))
	testkit.WaitFor(t, 10*time.Second, "initial size", testkit.Cond(func() bool { return strings.Contains(screen.String(), "29 97") }))
	if err := pty.Setsize(ptmx, &pty.Winsize{Cols: 111, Rows: 33}); err != nil {
		t.Fatal(err)
	}
	_ = syscall.Kill(os.Getpid(), syscall.SIGWINCH)
	testkit.WaitFor(t, 10*time.Second, "size after SIGWINCH", testkit.Cond(func() bool {
		_, _ = ptmx.Write([]byte("stty size\r"))
		time.Sleep(50 * time.Millisecond)
		return strings.Contains(screen.String(), "33 111")
	}))
	_, _ = ptmx.Write([]byte{0x1d})
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ctrl-] did not detach")
	}
	after, err := xterm.GetState(int(tty.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(*before) != fmt.Sprint(*after) {
		t.Fatal("terminal mode not restored")
	}
}

// TestAttachAsksBeforeTakingOver: attaching to an agent terminal that
// another live client controls asks first; without a terminal to ask on
// it refuses and names -force.
func TestAttachAsksBeforeTakingOver(t *testing.T) {
	f, addr := startFake(t)
	f.routes["GET /v1/sessions/s1"] = route{200, sessionS1}
	f.routes["GET /v1/sessions/s1/status"] = route{200, strings.Replace(resumableStatus, `"worktree_branch":null`, `"worktree_branch":null,"controller":{"host":"elsewhere","pid":4242,"nonce":"","since":"2025-01-02T03:04:05Z"}`, 1)}
	code, _, errOut := runCLI(addr, "attach", "s1", "-name", "agent")
	if code != 1 || !strings.Contains(errOut, "another client (elsewhere, pid 4242) controls this terminal; -force takes it over") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	// -force skips the question (and then meets the fake's missing route).
	code, _, errOut = runCLI(addr, "attach", "s1", "-name", "agent", "-force")
	if code != 1 || strings.Contains(errOut, "controls this terminal") {
		t.Fatalf("-force: exit %d, stderr %q", code, errOut)
	}
	if strings.Contains(errOut, "ws://") {
		t.Errorf("the error names a ws:// URL: %q", errOut)
	}
	// A chat that holds the session is named as one.
	f.routes["GET /v1/sessions/s1/status"] = route{200, strings.Replace(resumableStatus, `"worktree_branch":null`, `"worktree_branch":null,"controller":{"host":"elsewhere","pid":4242,"nonce":"n","via":"chat","since":"2025-01-02T03:04:05Z"}`, 1)}
	code, _, errOut = runCLI(addr, "attach", "s1", "-name", "agent")
	if code != 1 || !strings.Contains(errOut, "this session is in chat on elsewhere (pid 4242) since") || !strings.Contains(errOut, "-force takes it over") {
		t.Fatalf("held by a chat: exit %d, stderr %q", code, errOut)
	}
}
