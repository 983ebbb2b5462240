package term

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/paddockhq/paddock/api/termproto"
	"github.com/paddockhq/paddock/shared/testkit"
)

var pidRE = regexp.MustCompile(`PID(\d+):`)

// shellPid asks the shell for $$ and returns the answer.
func (c *testClient) shellPid() int {
	c.t.Helper()
	before := len(pidRE.FindAllString(c.output(), -1))
	c.input("echo \"PID$$:\"\r")
	var pid int
	testkit.WaitFor(c.t, 10*time.Second, "echo $$", testkit.Cond(func() bool {
		all := pidRE.FindAllStringSubmatch(c.output(), -1)
		if len(all) <= before {
			return false
		}
		pid, _ = strconv.Atoi(all[len(all)-1][1])
		return true
	}))
	return pid
}

// marker makes the shell print a random marker that the typed command does not contain.
func (c *testClient) marker() string {
	c.t.Helper()
	n := rand.IntN(1_000_000)
	c.input(fmt.Sprintf("echo \"MK$((%d+1))\"\r", n))
	m := fmt.Sprintf("MK%d", n+1)
	c.waitOutput(m)
	return m
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

func TestReconnectReplaysAndKeepsShell(t *testing.T) {
	_, srv := newTestServer(t, Options{})
	c1, a1 := attach(t, srv, "shell", termproto.Hello{})
	if a1.Name != "shell" || a1.Epoch == "" || a1.Pid <= 0 || a1.Replay != termproto.ReplayFull {
		t.Fatalf("attached %+v", a1)
	}
	mark := c1.marker()
	if pid := c1.shellPid(); pid != a1.Pid {
		t.Fatalf("$$ = %d, attached pid %d", pid, a1.Pid)
	}
	_ = c1.ws.Close()
	c1.waitClosed()

	// A fresh client gets a reset and the full replay, with the marker.
	c2, a2 := attach(t, srv, "shell", termproto.Hello{})
	if a2.Epoch != a1.Epoch || a2.Pid != a1.Pid || a2.Replay != termproto.ReplayFull {
		t.Fatalf("reattach %+v, first %+v", a2, a1)
	}
	c2.waitOutput(mark)
	if !strings.HasPrefix(c2.output(), string(ResetSequence)) {
		t.Fatalf("full replay not preceded by a reset: %q", c2.output()[:min(20, len(c2.output()))])
	}
	if pid := c2.shellPid(); pid != a1.Pid {
		t.Fatalf("after reconnect $$ = %d, want %d", pid, a1.Pid)
	}
	pos := c2.position()
	_ = c2.ws.Close()
	c2.waitClosed()

	// A client that kept its screen gets only what it missed.
	c3, a3 := attach(t, srv, "shell", termproto.Hello{Epoch: a1.Epoch, Offset: &pos})
	if a3.Replay != termproto.ReplayNone && a3.Replay != termproto.ReplayDelta {
		t.Fatalf("reattach with offset: replay %v", a3.Replay)
	}
	if strings.Contains(c3.output(), mark) {
		t.Fatal("delta replay repeated old output")
	}
	mark2 := c3.marker()
	pos = c3.position()
	_ = c3.ws.Close()
	c3.waitClosed()

	// Output produced while nobody is attached arrives as a delta.
	old := pos - int64(len(mark2)) - 10
	c4, a4 := attach(t, srv, "shell", termproto.Hello{Epoch: a1.Epoch, Offset: &old})
	if a4.Replay != termproto.ReplayDelta {
		t.Fatalf("replay %v, want delta", a4.Replay)
	}
	c4.waitOutput(mark2)
	if strings.Contains(c4.output(), string(ResetSequence)) {
		t.Fatal("a delta replay must not reset the screen")
	}

	// A stale epoch gets a full replay.
	c4.ws.Close()
	c4.waitClosed()
	zero := int64(0)
	_, a5 := attach(t, srv, "shell", termproto.Hello{Epoch: "not-the-epoch", Offset: &zero})
	if a5.Replay != termproto.ReplayFull {
		t.Fatalf("stale epoch: replay %v", a5.Replay)
	}
}

func TestResetGivesNewShellAndEpoch(t *testing.T) {
	_, srv := newTestServer(t, Options{})
	c, a := attach(t, srv, "shell", termproto.Hello{})
	pid := c.shellPid()
	c.sendJSON(termproto.Reset{})
	rd := c.waitMsg("reset").(termproto.ResetDone)
	if rd.Epoch == a.Epoch || rd.Epoch == "" {
		t.Fatalf("reset epoch %q, old %q", rd.Epoch, a.Epoch)
	}
	testkit.WaitFor(t, 5*time.Second, "old shell gone", testkit.Cond(func() bool { return !alive(pid) }))
	if p := c.shellPid(); p == pid || p != rd.Pid {
		t.Fatalf("after reset $$ = %d (old %d, announced %d)", p, pid, rd.Pid)
	}
	if c.position() == 0 {
		t.Fatal("no output offsets in the new epoch")
	}
	if m := c.messages(); strings.Contains(m, "exited") {
		t.Fatalf("the killed shell's exit was announced: %s", m)
	}
}

func TestExitedShellIsReplacedWithNotice(t *testing.T) {
	_, srv := newTestServer(t, Options{})
	c, a := attach(t, srv, "shell", termproto.Hello{})
	c.marker()
	c.input("exit 3\r")
	if ex := c.waitMsg("exited").(termproto.Exited); ex.Code != 3 {
		t.Fatalf("exit code %d, want 3", ex.Code)
	}
	c.input("echo too late\r")
	if e := c.waitMsg("error").(termproto.Error); e.Code != termproto.CodeExited {
		t.Fatalf("input after exit: %+v", e)
	}
	_ = c.ws.Close()
	c.waitClosed()

	c2, a2 := attach(t, srv, "shell", termproto.Hello{Epoch: a.Epoch})
	if a2.Notice == "" || a2.Epoch == a.Epoch || a2.Pid == a.Pid {
		t.Fatalf("attach after exit: %+v (before %+v)", a2, a)
	}
	c2.waitOutput("previous shell exited with code 3")
	if p := c2.shellPid(); p != a2.Pid {
		t.Fatalf("new shell pid %d, attached says %d", p, a2.Pid)
	}
}

// The manager knows who controls a terminal: the identity of the hello of
// the connection attached last, until it detaches.
func TestControllerIsTheAttachedClient(t *testing.T) {
	m, srv := newTestServer(t, Options{})
	if _, ok := m.Controller("shell"); ok {
		t.Fatal("a controller before any attach")
	}
	first := termproto.ClientID{Host: "laptop", PID: 42, Nonce: "n1"}
	c1, _ := attach(t, srv, "shell", termproto.Hello{Client: &first})
	if got, ok := m.Controller("shell"); !ok || got.ClientID != first || time.Since(got.Since) > time.Minute {
		t.Fatalf("controller %+v %v, want %+v", got, ok, first)
	}
	c2, _ := attach(t, srv, "shell", termproto.Hello{})
	c1.waitClosed()
	if got, ok := m.Controller("shell"); !ok || got.ClientID != (termproto.ClientID{}) {
		t.Fatalf("after an anonymous takeover: %+v %v", got, ok)
	}
	_ = c2.ws.Close()
	testkit.WaitFor(t, 10*time.Second, "the controller to go", testkit.Cond(func() bool {
		_, ok := m.Controller("shell")
		return !ok
	}))
}

func TestSecondClientTakesOver(t *testing.T) {
	_, srv := newTestServer(t, Options{})
	c1, a1 := attach(t, srv, "shell", termproto.Hello{})
	c1.marker()
	c2, a2 := attach(t, srv, "shell", termproto.Hello{Cols: 100, Rows: 30})
	c1.waitMsg("taken_over")
	if code := c1.waitClosed(); code != termproto.CloseTakenOver {
		t.Fatalf("close code %d, want %d", code, termproto.CloseTakenOver)
	}
	if a2.Pid != a1.Pid {
		t.Fatalf("takeover changed the shell: %d vs %d", a2.Pid, a1.Pid)
	}
	c2.input("stty size\r")
	c2.waitOutput("30 100")
}

func TestIdleTimeoutEndsTerminal(t *testing.T) {
	m, srv := newTestServer(t, Options{IdleTimeout: 300 * time.Millisecond})
	c, a := attach(t, srv, "shell", termproto.Hello{})
	c.marker()
	// While attached the terminal stays, however long.
	time.Sleep(500 * time.Millisecond) // longer than the idle timeout, on purpose
	if _, ok := m.Terminal("shell"); !ok {
		t.Fatal("attached terminal was ended")
	}
	_ = c.ws.Close()
	c.waitClosed()
	testkit.WaitFor(t, 5*time.Second, "terminal ended", testkit.Cond(func() bool { _, ok := m.Terminal("shell"); return !ok }))
	testkit.WaitFor(t, 5*time.Second, "shell killed", testkit.Cond(func() bool { return !alive(a.Pid) }))
	// The next attach starts a new shell.
	_, a2 := attach(t, srv, "shell", termproto.Hello{})
	if a2.Pid == a.Pid || a2.Epoch == a.Epoch {
		t.Fatalf("after idle end: %+v", a2)
	}
}

func TestNoClientFloodKeepsRingBoundedAndShellRunning(t *testing.T) {
	const ringBytes = 64 << 10
	m, srv := newTestServer(t, Options{ReplayBytes: ringBytes})
	c, _ := attach(t, srv, "shell", termproto.Hello{})
	c.marker()
	c.input("head -c 20000000 /dev/zero | tr '\\0' 'x'; echo \"DONE$((1+1))\"\r")
	_ = c.ws.Close()
	c.waitClosed()
	term, _ := m.Terminal("shell")
	ring := term.Ring()
	testkit.WaitFor(t, 60*time.Second, "flood done with nobody attached", testkit.Cond(func() bool { return ring.Next() > 20_000_000 && ringHas(ring, "DONE2") }))
	if ring.Next()-ring.Oldest() != ringBytes || ring.Size() != ringBytes {
		t.Fatalf("ring holds %d bytes, size %d", ring.Next()-ring.Oldest(), ring.Size())
	}
	c2, a2 := attach(t, srv, "shell", termproto.Hello{})
	c2.waitOutput("DONE2")
	testkit.WaitFor(t, 5*time.Second, "replay", testkit.Cond(func() bool { return c2.position() == a2.Offset }))
	c2.mu.Lock()
	got := c2.streamLen
	c2.mu.Unlock()
	if got > ringBytes {
		t.Fatalf("replayed %d bytes, ring is %d", got, ringBytes)
	}
	c2.marker()
}

func ringHas(r *Ring, s string) bool {
	buf := make([]byte, r.Size())
	n, _ := r.ReadAt(buf, r.Oldest())
	return strings.Contains(string(buf[:n]), s)
}

func TestCreditFlowControl(t *testing.T) {
	const window = 64 << 10
	_, srv := newTestServer(t, Options{CreditWindow: window})
	c, a := attach(t, srv, "shell", termproto.Hello{})
	c.marker()
	c.sendJSON(termproto.Ack{Offset: c.position()})
	acked := c.position()
	c.input("while :; do echo flooding-the-terminal-with-lines; done\r")
	// Without further acks the server stops at the window.
	testkit.WaitFor(t, 10*time.Second, "window filled", testkit.Cond(func() bool { return c.position() >= acked+window-MaxChunk }))
	pos := c.position()
	time.Sleep(300 * time.Millisecond) // give an unbounded sender time to overrun
	if got := c.position(); got > acked+window {
		t.Fatalf("sent up to %d with ack %d and window %d", got, acked, window)
	}
	_ = pos
	// Acking moves the window; Ctrl-C stays responsive during the flood.
	for range 5 {
		// Ack exactly the position we then wait to pass: reading the position
		// again after the ack could already be a full window past the ack.
		p := c.position()
		c.sendJSON(termproto.Ack{Offset: p})
		testkit.WaitFor(t, 10*time.Second, "more output after ack", testkit.Cond(func() bool { return c.position() > p }))
	}
	// An acking client gets frames of at most a quarter of its window (MaxChunk at
	// least), so several stay in flight while its acks travel.
	c.mu.Lock()
	biggest := c.maxFrame
	c.mu.Unlock()
	if limit := max(MaxChunk, window/4); biggest > limit {
		t.Fatalf("an output frame carried %d bytes to an acking client (max %d)", biggest, limit)
	}
	c.input("\x03")
	stop := time.Now().Add(20 * time.Second)
	marker := fmt.Sprintf("MK%d", 4242)
	sent := false
	for !strings.Contains(c.output()[max(0, len(c.output())-4096):], marker) {
		if time.Now().After(stop) {
			t.Fatal("shell did not come back after Ctrl-C")
		}
		c.sendJSON(termproto.Ack{Offset: c.position()})
		if !sent {
			c.input("echo \"MK$((4241+1))\"\r")
			sent = true
		}
		time.Sleep(20 * time.Millisecond)
	}
	if pid := c.shellPid(); pid != a.Pid {
		t.Fatalf("shell changed: %d", pid)
	}
}

func TestBadInput(t *testing.T) {
	m, srv := newTestServer(t, Options{})
	c, a := attach(t, srv, "shell", termproto.Hello{})
	cases := []struct {
		name string
		typ  int
		data []byte
		code string
	}{
		{"unknown binary frame type", websocket.BinaryMessage, []byte{0x07, 'x'}, termproto.CodeBadRequest},
		{"empty binary frame", websocket.BinaryMessage, nil, termproto.CodeBadRequest},
		{"output frame from a client", websocket.BinaryMessage, EncodeOutput(Chunk{Offset: 0, Data: []byte("x")}), termproto.CodeBadRequest},
		{"oversize input", websocket.BinaryMessage, termproto.EncodeInput(make([]byte, termproto.MaxInputBytes+1)), termproto.CodeTooLarge},
		{"invalid JSON", websocket.TextMessage, []byte(`{"type":`), termproto.CodeBadRequest},
		{"not an object", websocket.TextMessage, []byte(`[1,2]`), termproto.CodeBadRequest},
		{"unknown control type", websocket.TextMessage, []byte(`{"type":"format_disk"}`), termproto.CodeBadRequest},
		{"resize to 0 cols", websocket.TextMessage, []byte(`{"type":"resize","cols":0,"rows":24}`), termproto.CodeBadRequest},
		{"resize to 100000 cols", websocket.TextMessage, []byte(`{"type":"resize","cols":100000,"rows":24}`), termproto.CodeBadRequest},
		{"resize with strings", websocket.TextMessage, []byte(`{"type":"resize","cols":"80","rows":"24"}`), termproto.CodeBadRequest},
		{"negative ack", websocket.TextMessage, []byte(`{"type":"ack","offset":-1}`), termproto.CodeBadRequest},
		{"second hello", websocket.TextMessage, []byte(`{"type":"hello","cols":80,"rows":24}`), termproto.CodeBadRequest},
		{"oversize control", websocket.TextMessage, []byte(`{"type":"ping","x":"` + strings.Repeat("a", termproto.MaxControlBytes) + `"}`), termproto.CodeTooLarge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c.sendRaw(tc.typ, tc.data)
			e := c.waitMsg("error").(termproto.Error)
			if e.Code != tc.code || e.Message == "" {
				t.Fatalf("error %+v, want code %s", e, tc.code)
			}
		})
	}
	// The terminal is unharmed: same shell, same size, still answering.
	c.input("stty size\r")
	c.waitOutput("24 80")
	if pid := c.shellPid(); pid != a.Pid {
		t.Fatalf("shell changed to %d", pid)
	}
	c.sendJSON(termproto.Ping{})
	c.waitMsg("pong")

	// A frame beyond the read limit closes the connection with 1009; the shell lives.
	c.sendRaw(websocket.BinaryMessage, make([]byte, termproto.MaxFrameBytes+10))
	if code := c.waitClosed(); code != websocket.CloseMessageTooBig {
		t.Fatalf("close code %d, want 1009", code)
	}
	if term, ok := m.Terminal("shell"); !ok || term.Pid() != a.Pid || !alive(a.Pid) {
		t.Fatal("terminal harmed by an oversize frame")
	}
}

func TestBadHelloAndRequests(t *testing.T) {
	m, srv := newTestServer(t, Options{Names: []string{"shell", "agent"}, Authorize: func(_ *http.Request, tok string) error {
		if tok != "" && tok != "good" {
			return fmt.Errorf("bad token")
		}
		return nil
	}})
	for _, tc := range []struct {
		name   string
		status int
	}{{"nope", http.StatusNotFound}, {"../etc", http.StatusBadRequest}, {"", http.StatusBadRequest}, {strings.Repeat("a", 65), http.StatusBadRequest}} {
		d := websocket.Dialer{Subprotocols: []string{termproto.Subprotocol}}
		_, resp, err := d.Dial(wsURL(srv, tc.name), nil)
		if err == nil || resp == nil || resp.StatusCode != tc.status {
			t.Errorf("name %q: err %v, resp %v; want status %d", tc.name, err, resp, tc.status)
		}
	}
	// No subprotocol.
	if _, resp, err := websocket.DefaultDialer.Dial(wsURL(srv, "shell"), nil); err == nil || resp.StatusCode != http.StatusBadRequest {
		t.Errorf("no subprotocol: %v %v", err, resp)
	}
	hellos := []struct {
		name  string
		typ   int
		data  string
		close int
	}{
		{"binary first", websocket.BinaryMessage, "\x00ls", termproto.CloseBadHello},
		{"invalid JSON", websocket.TextMessage, "{", termproto.CloseBadHello},
		{"not a hello", websocket.TextMessage, `{"type":"ping"}`, termproto.CloseBadHello},
		{"zero size", websocket.TextMessage, `{"type":"hello","cols":0,"rows":24}`, termproto.CloseBadHello},
		{"huge size", websocket.TextMessage, `{"type":"hello","cols":100000,"rows":24}`, termproto.CloseBadHello},
		{"wrong token", websocket.TextMessage, `{"type":"hello","cols":80,"rows":24,"token":"bad"}`, termproto.CloseUnauthorized},
	}
	for _, tc := range hellos {
		t.Run(tc.name, func(t *testing.T) {
			d := websocket.Dialer{Subprotocols: []string{termproto.Subprotocol}}
			ws, _, err := d.Dial(wsURL(srv, "shell"), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer ws.Close()
			_ = ws.WriteMessage(tc.typ, []byte(tc.data))
			_, b, err := ws.ReadMessage()
			if err != nil {
				t.Fatalf("no error frame: %v", err)
			}
			if msg, err := termproto.DecodeServerMessage(b); err != nil || msg.MessageType() != "error" {
				t.Fatalf("got %s (%v), want an error", b, err)
			}
			_, _, err = ws.ReadMessage()
			if ce, ok := err.(*websocket.CloseError); !ok || ce.Code != tc.close {
				t.Fatalf("close %v, want %d", err, tc.close)
			}
		})
	}
	if len(m.Names()) != 0 {
		t.Fatalf("bad hellos started terminals: %v", m.Names())
	}
	c, _ := attach(t, srv, "agent", termproto.Hello{Token: "good"})
	c.marker()
}

func TestManagerCloseEndsEverything(t *testing.T) {
	m, srv := newTestServer(t, Options{})
	c, a := attach(t, srv, "shell", termproto.Hello{})
	c.marker()
	_ = m.Close()
	if code := c.waitClosed(); code != termproto.CloseTerminalGone && code != -1 && code != websocket.CloseAbnormalClosure {
		t.Logf("close code %d", code)
	}
	testkit.WaitFor(t, 5*time.Second, "shell killed", testkit.Cond(func() bool { return !alive(a.Pid) }))
	d := websocket.Dialer{Subprotocols: []string{termproto.Subprotocol}}
	if _, resp, err := d.Dial(wsURL(srv, "shell"), nil); err == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("attach after Close: %v %v", err, resp)
	}
}

// OnAttached hears how many terminals have a connection each time it
// changes: a takeover changes nothing, a connection that goes ends its
// terminal's count.
func TestOnAttachedCountsConnectedTerminals(t *testing.T) {
	var mu sync.Mutex
	var counts []int
	_, srv := newTestServer(t, Options{OnAttached: func(n int) {
		mu.Lock()
		counts = append(counts, n)
		mu.Unlock()
	}})
	heard := func() []int {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(counts)
	}
	a, _ := attach(t, srv, "shell", termproto.Hello{})
	b, _ := attach(t, srv, "two", termproto.Hello{})
	taker, _ := attach(t, srv, "two", termproto.Hello{})
	b.waitClosed()
	if got := heard(); !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("heard %v after two attaches and a takeover, want [1 2]", got)
	}
	_ = taker.ws.Close()
	testkit.WaitFor(t, 10*time.Second, "the count to drop", testkit.Cond(func() bool { return slices.Equal(heard(), []int{1, 2, 1}) }))
	_ = a.ws.Close()
	testkit.WaitFor(t, 10*time.Second, "no terminal attached", testkit.Cond(func() bool { return slices.Equal(heard(), []int{1, 2, 1, 0}) }))
}
