package terminal

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/paddockhq/paddock/shared/term"
)

var agentctlBin string

func TestMain(m *testing.M) { os.Exit(runTests(m)) }

func runTests(m *testing.M) int {
	if dir := os.Getenv("PADDOCK_BIN"); dir != "" {
		agentctlBin = filepath.Join(dir, "agentctl")
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "terminal-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	agentctlBin = filepath.Join(dir, "agentctl")
	cmd := exec.Command("go", "build", "-o", agentctlBin, "github.com/paddockhq/paddock/cmd/agentctl")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build agentctl:", err)
		return 1
	}
	return m.Run()
}

const secret = "agentctl-test-secret"

// startAgentctl runs a real `agentctl serve` and returns its URL.
func startAgentctl(t *testing.T, extra ...string) string {
	t.Helper()
	args := append([]string{"serve", "-session", "s1", "-workspace", t.TempDir(), "-listen", "127.0.0.1:0", "-shell", "/bin/sh"}, extra...)
	cmd := exec.Command(agentctlBin, args...)
	cmd.Env = append(os.Environ(), "PADDOCK_AGENTCTL_SECRET="+secret, "PS1=$ ")
	var logs bytes.Buffer
	cmd.Stderr = &logs
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("agentctl log:\n%s", logs.String())
		}
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("agentctl info line: %v", err)
	}
	var info struct {
		URL string `json:"url"`
	}
	if err := json.Unmarshal([]byte(line), &info); err != nil || info.URL == "" {
		t.Fatalf("agentctl info %q: %v", line, err)
	}
	return info.URL
}

// startRelay serves Serve on an httptest server, taking the terminal name from
// ?name= like the API does.
func startRelay(t *testing.T, tgt Target) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tt := tgt
		tt.Name = r.URL.Query().Get("name")
		Serve(w, r, tt)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// client is a paddock.terminal.v1 client that records what it receives.
type client struct {
	t  *testing.T
	ws *websocket.Conn

	mu        sync.Mutex
	out       bytes.Buffer
	pos       int64
	frames    [][2]int64 // offset and length of every output frame
	msgs      []term.Message
	closeCode int
	done      chan struct{}
}

func dial(t *testing.T, srv *httptest.Server, query string, hello []byte) *client {
	t.Helper()
	d := websocket.Dialer{Subprotocols: []string{term.Subprotocol}}
	u := "ws" + strings.TrimPrefix(srv.URL, "http") + "/?" + query
	ws, resp, err := d.Dial(u, nil)
	if err != nil {
		t.Fatalf("dial: %v (%v)", err, resp)
	}
	c := &client{t: t, ws: ws, done: make(chan struct{})}
	t.Cleanup(func() { _ = ws.Close(); <-c.done })
	if err := ws.WriteMessage(websocket.TextMessage, hello); err != nil {
		t.Fatal(err)
	}
	go c.readLoop()
	return c
}

func helloJSON(t *testing.T, h term.Hello) []byte {
	t.Helper()
	if h.Cols == 0 {
		h.Cols, h.Rows = 80, 24
	}
	b, err := term.EncodeMessage(h)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func attach(t *testing.T, srv *httptest.Server, name string, h term.Hello) (*client, term.Attached) {
	t.Helper()
	c := dial(t, srv, "name="+name, helloJSON(t, h))
	return c, c.waitMsg("attached").(term.Attached)
}

func (c *client) readLoop() {
	defer close(c.done)
	for {
		typ, b, err := c.ws.ReadMessage()
		if err != nil {
			c.mu.Lock()
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				c.closeCode = ce.Code
			} else {
				c.closeCode = -1
			}
			c.mu.Unlock()
			return
		}
		c.mu.Lock()
		if typ == websocket.TextMessage {
			m, err := term.DecodeServerMessage(b)
			if err != nil {
				c.t.Errorf("bad server message %s: %v", b, err)
			} else {
				if _, ok := m.(term.ResetDone); ok {
					c.pos = 0
				}
				c.msgs = append(c.msgs, m)
			}
		} else if f, err := term.DecodeFrame(b); err != nil {
			c.t.Errorf("bad frame: %v", err)
		} else {
			c.out.Write(f.Data)
			if f.Type == term.FrameOutput {
				c.pos = f.Offset + int64(len(f.Data))
				c.frames = append(c.frames, [2]int64{f.Offset, int64(len(f.Data))})
			}
		}
		c.mu.Unlock()
	}
}

func (c *client) input(s string) {
	c.t.Helper()
	if err := c.ws.WriteMessage(websocket.BinaryMessage, term.EncodeInput([]byte(s))); err != nil {
		c.t.Fatalf("input: %v", err)
	}
}

func (c *client) send(m term.Message) {
	c.t.Helper()
	b, _ := term.EncodeMessage(m)
	if err := c.ws.WriteMessage(websocket.TextMessage, b); err != nil {
		c.t.Fatalf("send: %v", err)
	}
}

func (c *client) output() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.String()
}

func (c *client) position() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pos
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (c *client) waitOutput(s string) {
	c.t.Helper()
	waitFor(c.t, "output "+s, func() bool { return strings.Contains(c.output(), s) })
}

func (c *client) waitMsg(typ string) term.Message {
	c.t.Helper()
	var got term.Message
	waitFor(c.t, "message "+typ, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for i, m := range c.msgs {
			if m.MessageType() == typ {
				got = m
				c.msgs = append(c.msgs[:i], c.msgs[i+1:]...)
				return true
			}
		}
		return false
	})
	return got
}

func (c *client) waitClosed() int {
	c.t.Helper()
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		c.t.Fatal("connection not closed")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closeCode
}

// marker makes the shell print a random marker the typed command does not contain.
func (c *client) marker() string {
	c.t.Helper()
	n := rand.IntN(1_000_000)
	c.input(fmt.Sprintf("echo \"MK$((%d+1))\"\r", n))
	m := fmt.Sprintf("MK%d", n+1)
	c.waitOutput(m)
	return m
}

var pidRE = regexp.MustCompile(`PID(\d+):`)

func (c *client) shellPid() int {
	c.t.Helper()
	before := len(pidRE.FindAllString(c.output(), -1))
	c.input("echo \"PID$$:\"\r")
	var pid int
	waitFor(c.t, "echo $$", func() bool {
		all := pidRE.FindAllStringSubmatch(c.output(), -1)
		if len(all) <= before {
			return false
		}
		pid, _ = strconv.Atoi(all[len(all)-1][1])
		return true
	})
	return pid
}

func TestRelayReplayResetExitTakeover(t *testing.T) {
	srv := startRelay(t, Target{URL: startAgentctl(t), Secret: secret})

	c, a := attach(t, srv, "shell", term.Hello{})
	if a.Replay != term.ReplayFull || a.Pid == 0 || a.Name != "shell" {
		t.Fatalf("attached %+v", a)
	}
	mark := c.marker()
	pid := c.shellPid()
	if pid != a.Pid {
		t.Fatalf("$$ = %d, attached says %d", pid, a.Pid)
	}

	// Disconnect, print while away, reconnect with the position: only the delta.
	pos := c.position()
	_ = c.ws.Close()
	c.waitClosed()
	c2, a2 := attach(t, srv, "shell", term.Hello{Epoch: a.Epoch, Offset: &pos})
	if a2.Replay != term.ReplayNone && a2.Replay != term.ReplayDelta || a2.Epoch != a.Epoch {
		t.Fatalf("reattach %+v", a2)
	}
	if strings.Contains(c2.output(), mark) {
		t.Fatal("delta replay repeated the marker")
	}
	if p := c2.shellPid(); p != pid {
		t.Fatalf("pid after reconnect %d, want %d", p, pid)
	}
	_ = c2.ws.Close()
	c2.waitClosed()

	// A fresh client gets the marker replayed.
	c3, a3 := attach(t, srv, "shell", term.Hello{})
	if a3.Replay != term.ReplayFull {
		t.Fatalf("fresh attach %+v", a3)
	}
	c3.waitOutput(mark)

	// A second client takes over: the first hears taken_over and close 4001.
	c4, _ := attach(t, srv, "shell", term.Hello{Cols: 100, Rows: 30})
	c3.waitMsg("taken_over")
	if code := c3.waitClosed(); code != term.CloseTakenOver {
		t.Fatalf("close code %d, want %d", code, term.CloseTakenOver)
	}
	c4.input("stty size\r")
	c4.waitOutput("30 100")

	// Reset: new shell, new epoch.
	c4.send(term.Reset{})
	rd := c4.waitMsg("reset").(term.ResetDone)
	if rd.Epoch == a.Epoch {
		t.Fatal("reset kept the epoch")
	}
	if p := c4.shellPid(); p == pid || p != rd.Pid {
		t.Fatalf("after reset $$ = %d (old %d, announced %d)", p, pid, rd.Pid)
	}

	// Exit: the client hears it; the next attach starts a fresh shell with a notice.
	c4.input("exit 5\r")
	if ex := c4.waitMsg("exited").(term.Exited); ex.Code != 5 {
		t.Fatalf("exit code %d", ex.Code)
	}
	_ = c4.ws.Close()
	c4.waitClosed()
	c5, a5 := attach(t, srv, "shell", term.Hello{})
	if a5.Notice == "" || a5.Epoch == rd.Epoch || a5.Pid == rd.Pid {
		t.Fatalf("attach after exit %+v", a5)
	}
	c5.waitOutput("exited with code 5")
	c5.marker()
}

// TestRelayFloodArrivesWhole relays megabytes of output: every byte arrives in order,
// live frames are contiguous and none carries more than term.MaxLiveChunk.
func TestRelayFloodArrivesWhole(t *testing.T) {
	srv := startRelay(t, Target{URL: startAgentctl(t), Secret: secret})
	c, _ := attach(t, srv, "shell", term.Hello{})
	c.marker()
	c.mu.Lock()
	first := len(c.frames)
	c.mu.Unlock()
	const lines = 400000
	c.input(fmt.Sprintf("echo \"B$((1+1))G\"; seq 1 %d; echo \"E$((1+1))D\"\r", lines))
	waitFor(t, "end of the flood", func() bool { return strings.Contains(c.output(), "E2D") })
	out := c.output()
	begin := strings.Index(out, "B2G\r\n")
	end := strings.Index(out, "E2D")
	if begin < 0 || end < begin {
		t.Fatalf("markers at %d and %d", begin, end)
	}
	var want strings.Builder
	for i := 1; i <= lines; i++ {
		fmt.Fprintf(&want, "%d\r\n", i)
	}
	if got := out[begin+len("B2G\r\n") : end]; got != want.String() {
		t.Fatalf("relayed %d bytes of seq output, want %d (first difference near %d)", len(got), want.Len(), firstDiff(got, want.String()))
	}
	c.mu.Lock()
	frames := c.frames[first:]
	c.mu.Unlock()
	for i, f := range frames {
		if f[1] > term.MaxLiveChunk {
			t.Fatalf("frame %d carries %d bytes (max %d)", i, f[1], term.MaxLiveChunk)
		}
		if i > 0 && f[0] != frames[i-1][0]+frames[i-1][1] {
			t.Fatalf("frame %d at %d does not follow the one at %d (+%d)", i, f[0], frames[i-1][0], frames[i-1][1])
		}
	}
}

// firstDiff is the index of the first byte where a and b differ.
func firstDiff(a, b string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func TestRelayHelloTokenAndBadInput(t *testing.T) {
	url := startAgentctl(t)
	srv := startRelay(t, Target{URL: url, Secret: secret, HelloToken: "browser-token"})

	// Wrong or missing token in the hello: error frame and close 4003.
	for _, tok := range []string{"", "wrong"} {
		c := dial(t, srv, "name=shell", helloJSON(t, term.Hello{Token: tok}))
		if e := c.waitMsg("error").(term.Error); e.Code != term.CodeUnauth {
			t.Fatalf("token %q: %+v", tok, e)
		}
		if code := c.waitClosed(); code != CloseUnauthorized {
			t.Fatalf("token %q: close %d", tok, code)
		}
	}
	// The right token attaches; the size may come from the query.
	c := dial(t, srv, "name=shell&cols=101&rows=33", []byte(`{"type":"hello","token":"browser-token"}`))
	c.waitMsg("attached")
	c.input("stty size\r")
	c.waitOutput("33 101")

	// Malformed hellos: error and close 4000; the terminal is unharmed.
	for _, bad := range []string{`{"type":"hello","cols":0,"rows":0,"token":"browser-token"}`, `not json`, `{"type":"ping"}`} {
		b := dial(t, srv, "name=shell", []byte(bad))
		if e := b.waitMsg("error").(term.Error); e.Code != term.CodeBadRequest {
			t.Fatalf("%s: %+v", bad, e)
		}
		if code := b.waitClosed(); code != term.CloseBadHello {
			t.Fatalf("%s: close %d", bad, code)
		}
	}
	c.marker()

	// Frames after the hello pass through untouched, errors come from agentctl.
	c.send(term.Resize{Cols: 100000, Rows: 5})
	if e := c.waitMsg("error").(term.Error); e.Code != term.CodeBadRequest {
		t.Fatalf("bad resize: %+v", e)
	}
	if err := c.ws.WriteMessage(websocket.BinaryMessage, []byte{0x7f, 1, 2}); err != nil {
		t.Fatal(err)
	}
	if e := c.waitMsg("error").(term.Error); !strings.Contains(e.Message, "unknown frame type") {
		t.Fatalf("unknown frame: %+v", e)
	}
	c.marker()

	// An invalid terminal name is agentctl's 400, reported in an error frame.
	b := dial(t, srv, "name="+strings.Repeat("x", 80), helloJSON(t, term.Hello{Token: "browser-token"}))
	if e := b.waitMsg("error").(term.Error); !strings.Contains(e.Message, "invalid terminal name") {
		t.Fatalf("bad name: %+v", e)
	}
	if code := b.waitClosed(); code != CloseUnavailable {
		t.Fatalf("bad name close %d", code)
	}
}

func TestRelayRefusals(t *testing.T) {
	live := startAgentctl(t)
	cases := []struct {
		name string
		tgt  Target
		want string
	}{
		{"wrong secret", Target{URL: live, Secret: "nope"}, "401"},
		{"agentctl down", Target{URL: "http://127.0.0.1:1", Secret: secret}, "cannot reach"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := startRelay(t, tc.tgt)
			c := dial(t, srv, "name=shell", helloJSON(t, term.Hello{}))
			e := c.waitMsg("error").(term.Error)
			if e.Code != "unavailable" || !strings.Contains(e.Message, tc.want) || strings.Contains(e.Message, secret) {
				t.Fatalf("error %+v", e)
			}
			if code := c.waitClosed(); code != CloseUnavailable {
				t.Fatalf("close %d", code)
			}
		})
	}

	// Before the upgrade: not a WebSocket, or without the subprotocol → 400.
	srv := startRelay(t, Target{URL: live, Secret: secret})
	resp, err := http.Get(srv.URL + "/?name=shell")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("plain GET: %d", resp.StatusCode)
	}
	d := websocket.Dialer{}
	_, resp, err = d.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+"/?name=shell", nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("no subprotocol: %v %v", err, resp)
	}
}

func TestTerminalURL(t *testing.T) {
	cases := []struct{ base, want string }{
		{"http://10.0.0.1:7000", "ws://10.0.0.1:7000/v1/terminals/shell"},
		{"https://h:1/prefix/", "wss://h:1/prefix/v1/terminals/shell"},
		{"ftp://h", ""},
		{"", ""},
		{"::bad", ""},
	}
	for _, tc := range cases {
		got, err := terminalURL(tc.base, "shell")
		if (err != nil) != (tc.want == "") || got != tc.want {
			t.Errorf("%q: %q %v", tc.base, got, err)
		}
	}
}

func TestFillSize(t *testing.T) {
	q := url.Values{"cols": {"90"}, "rows": {"20"}}
	cases := []struct{ in, cols string }{
		{`{"type":"hello"}`, "90"},
		{`{"type":"hello","cols":50,"rows":10}`, "50"},
		{`nonsense`, ""},
	}
	for _, tc := range cases {
		b := []byte(tc.in)
		fillSize(&b, q)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		if got := fmt.Sprint(m["cols"]); tc.cols != "" && got != tc.cols {
			t.Errorf("%s → %s", tc.in, b)
		}
		if tc.cols == "" && string(b) != tc.in {
			t.Errorf("%s changed to %s", tc.in, b)
		}
	}
}

func FuzzFillSize(f *testing.F) {
	f.Add([]byte(`{"type":"hello"}`), "80", "24")
	f.Add([]byte(`{"type":"hello","cols":1}`), "x", "")
	f.Fuzz(func(t *testing.T, b []byte, cols, rows string) {
		in := append([]byte(nil), b...)
		fillSize(&b, url.Values{"cols": {cols}, "rows": {rows}})
		if !bytes.Equal(in, b) && !json.Valid(b) {
			t.Fatalf("fillSize produced invalid JSON %q from %q", b, in)
		}
	})
}
