package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/creack/pty"
	"github.com/gorilla/websocket"

	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/shared/term"
	"github.com/paddockhq/paddock/supervisor/state"
)

const areaTerminal = "Terminals: PTY → agentctl → supervisor → WebSocket"

// termStream is one terminal a benchmark reads: a direct PTY or a
// paddock.terminal.v1 WebSocket. Output is delivered to the sink.
type termStream interface {
	Input(b []byte) error
	Close()
}

// outputSink receives every output chunk of a stream, in order.
type outputSink func(b []byte)

// directPTY runs /bin/sh on a PTY in this process.
type directPTY struct {
	cmd  *exec.Cmd
	f    *os.File
	done chan struct{}
}

func startDirect(dir string, sink outputSink) (*directPTY, error) {
	cmd := exec.Command("/bin/sh")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TERM=xterm-256color", "PS1=$ ")
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: 80, Rows: 24})
	if err != nil {
		return nil, fmt.Errorf("start shell on a pty: %w", err)
	}
	d := &directPTY{cmd: cmd, f: f, done: make(chan struct{})}
	go func() {
		defer close(d.done)
		buf := make([]byte, 32<<10)
		for {
			n, err := f.Read(buf)
			if n > 0 {
				sink(buf[:n])
			}
			if err != nil {
				return
			}
		}
	}()
	return d, nil
}

func (d *directPTY) Input(b []byte) error { _, err := d.f.Write(b); return err }

func (d *directPTY) Close() {
	_ = d.cmd.Process.Kill()
	_ = d.f.Close()
	_ = d.cmd.Wait()
	<-d.done
}

// wsTerm is a paddock.terminal.v1 client.
type wsTerm struct {
	ws       *websocket.Conn
	attached term.Attached
	wmu      sync.Mutex
	done     chan struct{}
}

// dialTerm connects, sends hello and waits for attached; output frames go
// to sink (first is called once with the time of the first output frame).
func dialTerm(url string, hdr http.Header, hello term.Hello, sink outputSink) (*wsTerm, error) {
	d := websocket.Dialer{Subprotocols: []string{term.Subprotocol}, HandshakeTimeout: 10 * time.Second, ReadBufferSize: 64 << 10}
	ws, resp, err := d.Dial(url, hdr)
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("dial %s: %w (%s)", url, err, resp.Status)
		}
		return nil, fmt.Errorf("dial %s: %w", url, err)
	}
	if hello.Cols == 0 {
		hello.Cols, hello.Rows = 80, 24
	}
	b, _ := term.EncodeMessage(hello)
	if err := ws.WriteMessage(websocket.TextMessage, b); err != nil {
		ws.Close()
		return nil, fmt.Errorf("hello: %w", err)
	}
	t := &wsTerm{ws: ws, done: make(chan struct{})}
	_ = ws.SetReadDeadline(time.Now().Add(15 * time.Second))
	for {
		typ, b, err := ws.ReadMessage()
		if err != nil {
			ws.Close()
			return nil, fmt.Errorf("waiting for attached: %w", err)
		}
		if typ != websocket.TextMessage {
			continue
		}
		m, err := term.DecodeServerMessage(b)
		if err != nil {
			ws.Close()
			return nil, fmt.Errorf("server message %s: %w", b, err)
		}
		if a, ok := m.(term.Attached); ok {
			t.attached = a
			break
		}
		if e, ok := m.(term.Error); ok {
			ws.Close()
			return nil, fmt.Errorf("terminal error %s: %s", e.Code, e.Message)
		}
	}
	_ = ws.SetReadDeadline(time.Time{})
	go func() {
		defer close(t.done)
		for {
			typ, b, err := ws.ReadMessage()
			if err != nil {
				return
			}
			if typ != websocket.BinaryMessage {
				continue
			}
			if f, err := term.DecodeFrame(b); err == nil && f.Type == term.FrameOutput {
				sink(f.Data)
			}
		}
	}()
	return t, nil
}

func (t *wsTerm) Input(b []byte) error {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	return t.ws.WriteMessage(websocket.BinaryMessage, term.EncodeInput(b))
}

func (t *wsTerm) Close() {
	_ = t.ws.Close()
	<-t.done
}

// markerWatch finds a marker in a byte stream split in arbitrary chunks.
type markerWatch struct {
	mu     sync.Mutex
	marker []byte
	tail   []byte
	bytes  int64
	found  chan struct{}
}

func newMarkerWatch() *markerWatch { return &markerWatch{} }

// arm starts looking for marker; found closes when it appears.
func (m *markerWatch) arm(marker string) <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.marker, m.tail, m.bytes, m.found = []byte(marker), nil, 0, make(chan struct{})
	return m.found
}

func (m *markerWatch) sink(b []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.bytes += int64(len(b))
	if m.marker == nil {
		return
	}
	w := append(m.tail, b...)
	if bytes.Contains(w, m.marker) {
		close(m.found)
		m.marker = nil
		return
	}
	keep := len(m.marker)
	if len(w) > keep {
		w = w[len(w)-keep:]
	}
	m.tail = append([]byte(nil), w...)
}

// runMarked types cmd followed by an echo of a computed marker (the typed
// line does not contain it) and waits until the marker is printed.
func runMarked(s termStream, w *markerWatch, cmd string, timeout time.Duration) (time.Duration, int64, error) {
	n := rand.IntN(1_000_000)
	found := w.arm(fmt.Sprintf("MK%dKM", n+1))
	t0 := time.Now()
	if err := s.Input(fmt.Appendf(nil, "%s; echo \"MK$((%d+1))KM\"\r", cmd, n)); err != nil {
		return 0, 0, err
	}
	select {
	case <-found:
	case <-time.After(timeout):
		return 0, 0, fmt.Errorf("no marker after %q within %s", cmd, timeout)
	}
	d := time.Since(t0)
	w.mu.Lock()
	b := w.bytes
	w.mu.Unlock()
	return d, b, nil
}

// makeTextFile writes size bytes of printable 80-column lines.
func makeTextFile(path string, size int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	line := []byte(strings.Repeat("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", 2)[:79] + "\n")
	for written := 0; written < size; written += len(line) {
		if _, err := bw.Write(line); err != nil {
			f.Close()
			return err
		}
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// termPaths are the three ways to reach a shell that the suite compares.
type termPaths struct {
	dir          string
	agentctlURL  string // ws://…/v1/terminals/
	agentctlHdr  http.Header
	agentctlPID  int
	supervisorWS func(name string) string
}

func (p *termPaths) open(path, name string, sink outputSink) (termStream, error) {
	switch path {
	case "direct":
		return startDirect(p.dir, sink)
	case "agentctl":
		return dialTerm(p.agentctlURL+name, p.agentctlHdr, term.Hello{}, sink)
	default:
		return dialTerm(p.supervisorWS(name), nil, term.Hello{}, sink)
	}
}

// startAgentctl runs a real `agentctl serve` with a known secret.
func startAgentctl(env Env, dir string) (url string, pid int, stop func(), err error) {
	secret := fmt.Sprintf("bench-%d", rand.Int64())
	secretFile, infoFile := filepath.Join(dir, "secret"), filepath.Join(dir, "info.json")
	ws := filepath.Join(dir, "ws")
	if err := os.MkdirAll(ws, 0o700); err != nil {
		return "", 0, nil, err
	}
	if err := os.WriteFile(secretFile, []byte(secret), 0o600); err != nil {
		return "", 0, nil, err
	}
	cmd := exec.Command(filepath.Join(env.Bin, "agentctl"), "serve", "-session", "bench-terminal", "-workspace", ws,
		"-secret-file", secretFile, "-info-file", infoFile, "-shell", "/bin/sh", "-log-level", "warn", "-log-file", filepath.Join(dir, "agentctl.log"))
	cmd.Dir = dir
	if err := cmd.Start(); err != nil {
		return "", 0, nil, fmt.Errorf("start agentctl: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stop = func() { _ = cmd.Process.Kill(); <-exited }
	var info struct {
		URL string `json:"url"`
	}
	err = waitUntil(context.Background(), 15*time.Second, 10*time.Millisecond, "agentctl's info file", func() bool {
		b, err := os.ReadFile(infoFile)
		return err == nil && json.Unmarshal(b, &info) == nil && info.URL != ""
	})
	if err != nil {
		stop()
		return "", 0, nil, err
	}
	return strings.Replace(info.URL, "http://", "ws://", 1) + "/v1/terminals/" + "\x00" + secret, cmd.Process.Pid, stop, nil
}

// TerminalSuite compares cat throughput and keystroke echo latency of a
// shell read directly from a PTY, through agentctl, and through agentctl and
// the supervisor's relay; measures reconnect replay and memory per terminal.
func TerminalSuite(ctx context.Context, env Env) ([]Result, error) {
	size, trials, echoes, reconnects := 64<<20, 5, 200, 30
	if env.Quick {
		size, trials, echoes, reconnects = 16<<20, 3, 60, 10
	}
	dir, err := os.MkdirTemp(env.Dir, "terminal-")
	if err != nil {
		return nil, err
	}
	file := filepath.Join(dir, "cat.txt")
	if err := makeTextFile(file, size); err != nil {
		return nil, fmt.Errorf("make file: %w", err)
	}
	// The whole path: a one-node supervisor with one standalone session.
	c, _, stop, err := paddockCluster(env, "terminal", 1, false, "")
	if err != nil {
		return nil, err
	}
	defer stop()
	node, err := c.Leader(30 * time.Second)
	if err != nil {
		return nil, err
	}
	api := apiOf(node)
	task, err := api.CreateTask(ctx, client.CreateTaskRequest{Title: "bench terminals"})
	if err != nil {
		return nil, err
	}
	s, err := api.CreateSession(ctx, task.ID, client.CreateSessionRequest{Agent: "demo", Runtime: "standalone"})
	if err != nil {
		return nil, err
	}
	if err := waitSession(ctx, api, s.ID, state.SessionWaitingForInput, 60*time.Second, 20*time.Millisecond); err != nil {
		return nil, err
	}
	aurl, apid, astop, err := startAgentctl(env, dir)
	if err != nil {
		return nil, err
	}
	defer astop()
	base, secret, _ := strings.Cut(aurl, "\x00")
	paths := &termPaths{dir: dir, agentctlURL: base, agentctlHdr: http.Header{"Authorization": {"Bearer " + secret}}, agentctlPID: apid,
		supervisorWS: func(name string) string {
			return "ws://" + node.HTTP + "/v1/sessions/" + s.ID + "/terminal?name=" + name
		}}
	names := []string{"direct", "agentctl", "supervisor"}

	// Throughput: trials alternate the three paths, a fresh shell each.
	rates := map[string][]float64{}
	for t := 0; t < trials; t++ {
		for _, p := range names {
			w := newMarkerWatch()
			// One name per path, reused: its shell exits after each trial, so
			// the next attach starts a fresh one (agentctl keeps at most 16
			// terminals, exited ones included).
			st, err := paths.open(p, "cat", w.sink)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", p, err)
			}
			if _, _, err := runMarked(st, w, "true", 15*time.Second); err != nil {
				st.Close()
				return nil, fmt.Errorf("%s: shell not ready: %w", p, err)
			}
			d, n, err := runMarked(st, w, "cat "+file, 120*time.Second)
			_ = st.Input([]byte("exit\r")) // agentctl holds at most 16 terminals
			time.Sleep(50 * time.Millisecond)
			st.Close()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", p, err)
			}
			rates[p] = append(rates[p], float64(n)/(1<<20)/d.Seconds())
		}
	}
	direct := Percentile(rates["direct"], 50)
	env.Logf("terminal cat MiB/s: direct %.0f, agentctl %.0f, supervisor %.0f", direct, Percentile(rates["agentctl"], 50), Percentile(rates["supervisor"], 50))
	var out []Result
	ratio := func(name, path, desc string, goal float64) Result {
		var rs []float64
		for _, r := range rates[path] {
			rs = append(rs, r/direct)
		}
		r := Summary(Result{Name: name, Area: areaTerminal, Unit: "ratio", Goal: fmt.Sprintf("≥ %.2f", goal),
			Note: fmt.Sprintf("cat of a pre-generated %d MiB text file (80-column lines) through %s, MiB/s of output relative to the median of reading the same shell's PTY directly (%.0f MiB/s) in the same run; %d trials alternating paths, fresh shell each; p50 %.0f MiB/s", size>>20, desc, direct, trials, Percentile(rates[path], 50))}, rs, true)
		return Verdict(r, r.P50 >= goal)
	}
	out = append(out,
		ratio("terminal_throughput_ratio", "supervisor", "PTY → agentctl → supervisor proxy → WebSocket", 0.75),
		ratio("terminal_throughput_ratio_agentctl", "agentctl", "PTY → agentctl → WebSocket", 0.9))
	out = append(out, Summary(Result{Name: "terminal_direct_mib_s", Area: areaTerminal, Unit: "MiB/s",
		Note: "the baseline: the same cat read directly from the PTY by the bench process"}, rates["direct"], true))

	// Echo latency under flood.
	echo := map[string][]float64{}
	for _, p := range names {
		e, err := echoUnderFlood(paths, p, file, echoes)
		if err != nil {
			return out, fmt.Errorf("echo %s: %w", p, err)
		}
		echo[p] = e
	}
	base50 := Percentile(echo["direct"], 50)
	added := func(name, path string) Result {
		var xs []float64
		for _, v := range echo[path] {
			xs = append(xs, max(0, v-base50))
		}
		r := Summary(Result{Name: name, Area: areaTerminal, Unit: "ms", Goal: "p99 ≤ 10",
			Note: fmt.Sprintf("keystroke → its echo through %s while another terminal of the same agentctl floods (cat of the file in a loop, read as fast as possible), minus the direct-PTY median under the same flood (%.2f ms); %d keystrokes; raw p50/p99 %.2f/%.2f ms", path, base50, len(xs), Percentile(echo[path], 50), Percentile(echo[path], 99))}, xs, false)
		return Verdict(r, r.P99 <= 10)
	}
	out = append(out, added("echo_added_ms", "supervisor"), added("echo_added_ms_agentctl", "agentctl"))
	env.Logf("echo added p99: supervisor %.2fms", out[len(out)-2].P99)

	// Reconnect replay.
	rec, err := reconnectReplay(paths, reconnects)
	if err != nil {
		return out, fmt.Errorf("reconnect: %w", err)
	}
	rr := Summary(Result{Name: "reconnect_replay_ms", Area: areaTerminal, Unit: "ms", Goal: "≤ 50",
		Note: fmt.Sprintf("WebSocket dial through the supervisor (fresh screen, no offset) until the first replayed output byte; the terminal holds a full 256 KiB replay ring; %d reconnects", reconnects)}, rec, false)
	out = append(out, Verdict(rr, rr.P99 <= 50))

	// Memory per idle terminal in the standalone agentctl.
	mem, note, err := memPerTerminal(paths, 8)
	if err != nil {
		return out, fmt.Errorf("memory: %w", err)
	}
	out = append(out, Summary(Result{Name: "terminal_idle_kib", Area: areaTerminal, Unit: "KiB", Note: note}, []float64{mem}, false))
	return out, nil
}

// echoUnderFlood measures keystroke echo on one terminal while another one
// of the same path floods.
func echoUnderFlood(p *termPaths, path, file string, n int) ([]float64, error) {
	fw := newMarkerWatch()
	flood, err := p.open(path, "flood", fw.sink)
	if err != nil {
		return nil, err
	}
	defer flood.Close()
	if _, _, err := runMarked(flood, fw, "true", 15*time.Second); err != nil {
		return nil, err
	}
	frames := make(chan []byte, 1024)
	ew := newMarkerWatch()
	et, err := p.open(path, "echo", func(b []byte) {
		ew.sink(b)
		select {
		case frames <- append([]byte(nil), b...):
		default:
		}
	})
	if err != nil {
		return nil, err
	}
	defer et.Close()
	if _, _, err := runMarked(et, ew, "true", 15*time.Second); err != nil {
		return nil, err
	}
	if err := et.Input([]byte("cat >/dev/null\r")); err != nil {
		return nil, err
	}
	time.Sleep(200 * time.Millisecond)
	if err := flood.Input(fmt.Appendf(nil, "while :; do cat %s; done\r", file)); err != nil {
		return nil, err
	}
	time.Sleep(500 * time.Millisecond)
	drain := func() {
		for {
			select {
			case <-frames:
			default:
				return
			}
		}
	}
	var out []float64
	for i := 0; i < n; i++ {
		drain()
		t0 := time.Now()
		if err := et.Input([]byte("x")); err != nil {
			return out, err
		}
		timeout := time.After(10 * time.Second)
	wait:
		for {
			select {
			case b := <-frames:
				if bytes.IndexByte(b, 'x') >= 0 {
					break wait
				}
			case <-timeout:
				return out, fmt.Errorf("no echo within 10s")
			}
		}
		out = append(out, ms(time.Since(t0)))
		if i%40 == 39 {
			_ = et.Input([]byte("\r"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = flood.Input([]byte("\x03exit\r")) // ctrl-c the loop, end the shell
	_ = et.Input([]byte("\x03exit\r"))
	time.Sleep(100 * time.Millisecond)
	return out, nil
}

// reconnectReplay fills a terminal's replay ring and measures fresh
// reconnects until the first replayed byte.
func reconnectReplay(p *termPaths, n int) ([]float64, error) {
	w := newMarkerWatch()
	st, err := p.open("supervisor", "replay", w.sink)
	if err != nil {
		return nil, err
	}
	if _, _, err := runMarked(st, w, "head -c 400000 /dev/zero | tr '\\0' 'r'", 30*time.Second); err != nil {
		st.Close()
		return nil, err
	}
	st.Close()
	var out []float64
	for i := 0; i < n; i++ {
		first := make(chan struct{})
		var once sync.Once
		t0 := time.Now()
		c, err := dialTerm(p.supervisorWS("replay"), nil, term.Hello{}, func([]byte) { once.Do(func() { close(first) }) })
		if err != nil {
			return out, err
		}
		select {
		case <-first:
			out = append(out, ms(time.Since(t0)))
		case <-time.After(10 * time.Second):
			c.Close()
			return out, fmt.Errorf("no replay within 10s (attached %+v)", c.attached)
		}
		c.Close()
	}
	return out, nil
}

// memPerTerminal opens n idle shells in the standalone agentctl and
// returns the memory they cost per terminal (agentctl growth plus shells).
func memPerTerminal(p *termPaths, n int) (float64, string, error) {
	before := rssKiB(p.agentctlPID)
	shellsBefore := map[int]bool{}
	for _, c := range childPIDs(p.agentctlPID) {
		shellsBefore[c] = true
	}
	for i := 0; i < n; i++ {
		w := newMarkerWatch()
		st, err := p.open("agentctl", fmt.Sprintf("idle%d", i), w.sink)
		if err != nil {
			return 0, "", err
		}
		_, _, err = runMarked(st, w, "true", 15*time.Second)
		st.Close()
		if err != nil {
			return 0, "", err
		}
	}
	time.Sleep(500 * time.Millisecond)
	after := rssKiB(p.agentctlPID)
	shells := 0
	for _, c := range childPIDs(p.agentctlPID) {
		if !shellsBefore[c] {
			shells += rssKiB(c)
		}
	}
	per := float64(after-before+shells) / float64(n)
	return per, fmt.Sprintf("%d idle terminals (each attached once, ran one command, detached) in one agentctl: agentctl RSS grew %d KiB (%.0f KiB each), their /bin/sh processes hold %d KiB RSS (%.0f KiB each, shared pages counted in full)",
		n, after-before, float64(after-before)/float64(n), shells, float64(shells)/float64(n)), nil
}
