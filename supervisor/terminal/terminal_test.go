package terminal

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/paddockhq/paddock/api/termproto"
	"github.com/paddockhq/paddock/shared/term"
	"github.com/paddockhq/paddock/shared/term/termtest"
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

// dial opens a terminal WebSocket on the relay with the given query and hello.
func dial(t *testing.T, srv *httptest.Server, query string, hello []byte) *termtest.Client {
	t.Helper()
	c, resp, err := termtest.Dial(t, "ws"+strings.TrimPrefix(srv.URL, "http")+"/?"+query, nil, hello)
	if err != nil {
		t.Fatalf("dial: %v (%v)", err, resp)
	}
	return c
}

func attach(t *testing.T, srv *httptest.Server, name string, h termproto.Hello) (*termtest.Client, termproto.Attached) {
	t.Helper()
	c := dial(t, srv, "name="+name, termtest.Hello(t, h))
	return c, c.WaitMsg("attached").(termproto.Attached)
}

func TestRelayReplayResetExitTakeover(t *testing.T) {
	srv := startRelay(t, Target{URL: startAgentctl(t), Secret: secret})

	c, a := attach(t, srv, "shell", termproto.Hello{})
	if a.Replay != termproto.ReplayFull || a.Pid == 0 || a.Name != "shell" {
		t.Fatalf("attached %+v", a)
	}
	mark := c.Marker()
	pid := c.ShellPid()
	if pid != a.Pid {
		t.Fatalf("$$ = %d, attached says %d", pid, a.Pid)
	}

	// Disconnect, print while away, reconnect with the position: only the delta.
	pos := c.Position()
	_ = c.Close()
	c.WaitClosed()
	c2, a2 := attach(t, srv, "shell", termproto.Hello{Epoch: a.Epoch, Offset: &pos})
	if a2.Replay != termproto.ReplayNone && a2.Replay != termproto.ReplayDelta || a2.Epoch != a.Epoch {
		t.Fatalf("reattach %+v", a2)
	}
	if strings.Contains(c2.Output(), mark) {
		t.Fatal("delta replay repeated the marker")
	}
	if p := c2.ShellPid(); p != pid {
		t.Fatalf("pid after reconnect %d, want %d", p, pid)
	}
	_ = c2.Close()
	c2.WaitClosed()

	// A fresh client gets the marker replayed.
	c3, a3 := attach(t, srv, "shell", termproto.Hello{})
	if a3.Replay != termproto.ReplayFull {
		t.Fatalf("fresh attach %+v", a3)
	}
	c3.WaitOutput(mark)

	// A second client takes over: the first hears taken_over and close 4001.
	c4, _ := attach(t, srv, "shell", termproto.Hello{Cols: 100, Rows: 30})
	c3.WaitMsg("taken_over")
	if code := c3.WaitClosed(); code != termproto.CloseTakenOver {
		t.Fatalf("close code %d, want %d", code, termproto.CloseTakenOver)
	}
	c4.Input("stty size\r")
	c4.WaitOutput("30 100")

	// Reset: new shell, new epoch.
	c4.Send(termproto.Reset{})
	rd := c4.WaitMsg("reset").(termproto.ResetDone)
	if rd.Epoch == a.Epoch {
		t.Fatal("reset kept the epoch")
	}
	if p := c4.ShellPid(); p == pid || p != rd.Pid {
		t.Fatalf("after reset $$ = %d (old %d, announced %d)", p, pid, rd.Pid)
	}

	// Exit: the client hears it; the next attach starts a fresh shell with a notice.
	c4.Input("exit 5\r")
	if ex := c4.WaitMsg("exited").(termproto.Exited); ex.Code != 5 {
		t.Fatalf("exit code %d", ex.Code)
	}
	_ = c4.Close()
	c4.WaitClosed()
	c5, a5 := attach(t, srv, "shell", termproto.Hello{})
	if a5.Notice == "" || a5.Epoch == rd.Epoch || a5.Pid == rd.Pid {
		t.Fatalf("attach after exit %+v", a5)
	}
	c5.WaitOutput("exited with code 5")
	c5.Marker()
}

// TestRelayFloodArrivesWhole relays megabytes of output: every byte arrives in order,
// live frames are contiguous and none carries more than term.MaxLiveChunk.
func TestRelayFloodArrivesWhole(t *testing.T) {
	srv := startRelay(t, Target{URL: startAgentctl(t), Secret: secret})
	c, _ := attach(t, srv, "shell", termproto.Hello{})
	c.Marker()
	first := len(c.Frames())
	const lines = 400000
	c.Input(fmt.Sprintf("echo \"B$((1+1))G\"; seq 1 %d; echo \"E$((1+1))D\"\r", lines))
	c.WaitFor("end of the flood", func() bool { return strings.Contains(c.Output(), "E2D") })
	out := c.Output()
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
	frames := c.Frames()[first:]
	for i, f := range frames {
		if f.Len > term.MaxLiveChunk {
			t.Fatalf("frame %d carries %d bytes (max %d)", i, f.Len, term.MaxLiveChunk)
		}
		if i > 0 && f.Offset != frames[i-1].Offset+frames[i-1].Len {
			t.Fatalf("frame %d at %d does not follow the one at %d (+%d)", i, f.Offset, frames[i-1].Offset, frames[i-1].Len)
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
		c := dial(t, srv, "name=shell", termtest.Hello(t, termproto.Hello{Token: tok}))
		if e := c.WaitMsg("error").(termproto.Error); e.Code != termproto.CodeUnauth {
			t.Fatalf("token %q: %+v", tok, e)
		}
		if code := c.WaitClosed(); code != CloseUnauthorized {
			t.Fatalf("token %q: close %d", tok, code)
		}
	}
	// The right token attaches; the size may come from the query.
	c := dial(t, srv, "name=shell&cols=101&rows=33", []byte(`{"type":"hello","token":"browser-token"}`))
	c.WaitMsg("attached")
	c.Input("stty size\r")
	c.WaitOutput("33 101")

	// Malformed hellos: error and close 4000; the terminal is unharmed.
	for _, bad := range []string{`{"type":"hello","cols":0,"rows":0,"token":"browser-token"}`, `not json`, `{"type":"ping"}`} {
		b := dial(t, srv, "name=shell", []byte(bad))
		if e := b.WaitMsg("error").(termproto.Error); e.Code != termproto.CodeBadRequest {
			t.Fatalf("%s: %+v", bad, e)
		}
		if code := b.WaitClosed(); code != termproto.CloseBadHello {
			t.Fatalf("%s: close %d", bad, code)
		}
	}
	c.Marker()

	// Frames after the hello pass through untouched, errors come from agentctl.
	c.Send(termproto.Resize{Cols: 100000, Rows: 5})
	if e := c.WaitMsg("error").(termproto.Error); e.Code != termproto.CodeBadRequest {
		t.Fatalf("bad resize: %+v", e)
	}
	if err := c.Conn.WriteMessage(websocket.BinaryMessage, []byte{0x7f, 1, 2}); err != nil {
		t.Fatal(err)
	}
	if e := c.WaitMsg("error").(termproto.Error); !strings.Contains(e.Message, "unknown frame type") {
		t.Fatalf("unknown frame: %+v", e)
	}
	c.Marker()

	// An invalid terminal name is agentctl's 400, reported in an error frame.
	b := dial(t, srv, "name="+strings.Repeat("x", 80), termtest.Hello(t, termproto.Hello{Token: "browser-token"}))
	if e := b.WaitMsg("error").(termproto.Error); !strings.Contains(e.Message, "invalid terminal name") {
		t.Fatalf("bad name: %+v", e)
	}
	if code := b.WaitClosed(); code != CloseUnavailable {
		t.Fatalf("bad name close %d", code)
	}
}

func TestRelayRefusals(t *testing.T) {
	live := startAgentctl(t)
	// An address that is not an agentctl (a forged executor row pointing at
	// another server): its answer must not reach the client.
	const private = "internal-only-response-body"
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, private, http.StatusNotFound)
	}))
	t.Cleanup(other.Close)
	cases := []struct {
		name string
		tgt  Target
		want string
	}{
		{"wrong secret", Target{URL: live, Secret: "nope"}, "401"},
		{"agentctl down", Target{URL: "http://127.0.0.1:1", Secret: secret}, "cannot reach"},
		{"not an agentctl", Target{URL: other.URL, Secret: secret}, "404"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := startRelay(t, tc.tgt)
			c := dial(t, srv, "name=shell", termtest.Hello(t, termproto.Hello{}))
			e := c.WaitMsg("error").(termproto.Error)
			if e.Code != "unavailable" || !strings.Contains(e.Message, tc.want) || strings.Contains(e.Message, secret) || strings.Contains(e.Message, private) {
				t.Fatalf("error %+v", e)
			}
			if code := c.WaitClosed(); code != CloseUnavailable {
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

// TestRelayHelloTimeout: a client that sends no hello is closed once
// Target.HelloTimeout has passed: unauthorized when a hello token is
// expected, a bad hello otherwise.
func TestRelayHelloTimeout(t *testing.T) {
	const timeout = 200 * time.Millisecond
	for _, tc := range []struct {
		name  string
		tgt   Target
		code  string
		close int
	}{
		{"hello token expected", Target{URL: "http://127.0.0.1:1", HelloToken: "browser-token", HelloTimeout: timeout}, termproto.CodeUnauth, CloseUnauthorized},
		{"no hello token", Target{URL: "http://127.0.0.1:1", HelloTimeout: timeout}, termproto.CodeBadRequest, termproto.CloseBadHello},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := startRelay(t, tc.tgt)
			d := websocket.Dialer{Subprotocols: []string{termproto.Subprotocol}}
			conn, resp, err := d.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+"/?name=shell", nil)
			if err != nil {
				t.Fatalf("dial: %v (%v)", err, resp)
			}
			defer conn.Close()
			start := time.Now()
			_ = conn.SetReadDeadline(start.Add(10 * time.Second))
			_, data, err := conn.ReadMessage()
			if err != nil {
				t.Fatalf("no error frame: %v", err)
			}
			if m, err := termproto.DecodeServerMessage(data); err != nil || m.(termproto.Error).Code != tc.code {
				t.Fatalf("first message %s (%v), want an error %q", data, err, tc.code)
			}
			_, _, err = conn.ReadMessage()
			if !websocket.IsCloseError(err, tc.close) || time.Since(start) > 5*time.Second {
				t.Fatalf("%v after %s, want close %d soon after %s", err, time.Since(start), tc.close, timeout)
			}
		})
	}
}
