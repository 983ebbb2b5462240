package bench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/creack/pty"
	"github.com/gorilla/websocket"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/api/termproto"
	"github.com/paddockhq/paddock/bench/harness"
	"github.com/paddockhq/paddock/client"
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
	attached termproto.Attached
	wmu      sync.Mutex
	done     chan struct{}
	exited   chan struct{} // closed when the server says the shell exited
	exitOnce sync.Once
	mu       sync.Mutex
	msgs     []string // the last control messages, for errors
}

// String describes the stream's recent control messages (for errors).
func (t *wsTerm) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return fmt.Sprintf("attached %+v, last messages %q", t.attached, t.msgs)
}

// dialTerm connects, sends hello and waits for attached; output frames go
// to sink (first is called once with the time of the first output frame).
func dialTerm(url string, hdr http.Header, hello termproto.Hello, sink outputSink) (*wsTerm, error) {
	return dialTermTLS(url, hdr, hello, sink, nil)
}

// dialTermTLS is dialTerm for a wss:// url whose server tc verifies.
func dialTermTLS(url string, hdr http.Header, hello termproto.Hello, sink outputSink, tc *tls.Config) (*wsTerm, error) {
	d := websocket.Dialer{Subprotocols: []string{termproto.Subprotocol}, HandshakeTimeout: 10 * time.Second, ReadBufferSize: 64 << 10, TLSClientConfig: tc}
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
	b, _ := termproto.EncodeMessage(hello)
	if err := ws.WriteMessage(websocket.TextMessage, b); err != nil {
		ws.Close()
		return nil, fmt.Errorf("hello: %w", err)
	}
	t := &wsTerm{ws: ws, done: make(chan struct{}), exited: make(chan struct{})}
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
		m, err := termproto.DecodeServerMessage(b)
		if err != nil {
			ws.Close()
			return nil, fmt.Errorf("server message %s: %w", b, err)
		}
		if a, ok := m.(termproto.Attached); ok {
			t.attached = a
			break
		}
		if e, ok := m.(termproto.Error); ok {
			ws.Close()
			return nil, fmt.Errorf("terminal error %s: %s", e.Code, e.Message)
		}
	}
	_ = ws.SetReadDeadline(time.Time{})
	go func() {
		defer close(t.done)
		// One reused buffer: the client costs the shared CPU no allocation per frame
		// (ReadMessage would grow a fresh slice for every 64 KiB frame).
		buf := make([]byte, termproto.MaxFrameBytes)
		for {
			typ, r, err := ws.NextReader()
			if err != nil {
				return
			}
			n, err := readMessage(r, buf)
			if err != nil {
				return
			}
			if typ != websocket.BinaryMessage {
				if m, err := termproto.DecodeServerMessage(buf[:n]); err == nil {
					if _, ok := m.(termproto.Exited); ok {
						t.exitOnce.Do(func() { close(t.exited) })
					}
				}
				t.mu.Lock()
				t.msgs = append(t.msgs[max(0, len(t.msgs)-4):], string(buf[:min(n, 200)]))
				t.mu.Unlock()
				continue
			}
			if f, err := termproto.DecodeFrame(buf[:n]); err == nil && f.Type == termproto.FrameOutput {
				sink(f.Data)
			}
		}
	}()
	return t, nil
}

// readMessage reads one whole message from r into buf.
func readMessage(r io.Reader, buf []byte) (int, error) {
	n := 0
	for {
		if n == len(buf) {
			return n, fmt.Errorf("message larger than %d bytes", len(buf))
		}
		m, err := r.Read(buf[n:])
		n += m
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

func (t *wsTerm) Input(b []byte) error {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	return t.ws.WriteMessage(websocket.BinaryMessage, termproto.EncodeInput(b))
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
	chunks int64 // output chunks (frames, or PTY reads) since arm
	found  chan struct{}
	last   []byte // the last lastKeep bytes, for errors
}

const lastKeep = 120

func newMarkerWatch() *markerWatch { return &markerWatch{} }

// arm starts looking for marker; found closes when it appears.
func (m *markerWatch) arm(marker string) <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.marker, m.tail, m.bytes, m.chunks, m.found = []byte(marker), nil, 0, 0, make(chan struct{})
	return m.found
}

func (m *markerWatch) sink(b []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.bytes += int64(len(b))
	m.chunks++
	m.last = append(m.last, b[max(0, len(b)-lastKeep):]...)
	m.last = m.last[max(0, len(m.last)-lastKeep):]
	if m.marker == nil {
		return
	}
	// Only the seam needs a copy: the old tail and the head of b.
	k := len(m.marker)
	seam := append(m.tail, b[:min(len(b), k)]...)
	if bytes.Contains(seam, m.marker) || bytes.Contains(b, m.marker) {
		close(m.found)
		m.marker, m.tail = nil, nil
		return
	}
	if len(b) >= k {
		m.tail = append(m.tail[:0], b[len(b)-k:]...)
	} else {
		m.tail = append([]byte(nil), seam[max(0, len(seam)-k):]...)
	}
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
		w.mu.Lock()
		got, last := w.bytes, string(w.last)
		w.mu.Unlock()
		desc := ""
		if st, ok := s.(fmt.Stringer); ok {
			desc = "; " + st.String()
		}
		return 0, 0, fmt.Errorf("no marker after %q within %s (%d bytes of output, ending %q%s)", cmd, timeout, got, last, desc)
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
	dir           string
	agentctlURL   string // ws://…/v1/terminals/
	agentctlHdr   http.Header
	supervisorWS  func(name string) string
	supervisorTLS *tls.Config // for a wss supervisorWS (tls.go)
}

func (p *termPaths) open(path, name string, sink outputSink) (termStream, error) {
	switch path {
	case "direct":
		return startDirect(p.dir, sink)
	case "agentctl":
		return dialTerm(p.agentctlURL+name, p.agentctlHdr, termproto.Hello{}, sink)
	default:
		return dialTermTLS(p.supervisorWS(name), nil, termproto.Hello{}, sink, p.supervisorTLS)
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
	size, rounds, echoes, reconnects, memReps := 64<<20, 8, 200, 30, 5
	if env.Quick {
		size, rounds, echoes, reconnects, memReps = 16<<20, 3, 60, 10, 3
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
	sh, err := startShellSession(ctx, env, "terminal", "bench terminals")
	if err != nil {
		return nil, err
	}
	defer sh.stop()
	node, api, s := sh.node, sh.api, sh.session
	aurl, apid, astop, err := startAgentctl(env, dir)
	if err != nil {
		return nil, err
	}
	defer astop()
	base, secret, _ := strings.Cut(aurl, "\x00")
	paths := &termPaths{dir: dir, agentctlURL: base, agentctlHdr: http.Header{"Authorization": {"Bearer " + secret}},
		supervisorWS: func(name string) string {
			return "ws://" + node.HTTP + "/v1/sessions/" + s.ID + "/terminal?name=" + name
		}}
	names := []string{"direct", "agentctl", "supervisor"}

	// Throughput: every path trial sits between two direct trials (D A D S D A D S … D),
	// and its ratio is its rate over the mean of those two neighbours, so a change in
	// the machine's load from other users moves both sides of a ratio alike; the
	// figure is the median of these per-pair ratios. One unmeasured warm-up trial of
	// each path first (page cache, heap growth, first-use code paths).
	sapid, err := agentctlPID(ctx, api, s.ID)
	if err != nil {
		return nil, err
	}
	spid := pidWithArg(node.Config)
	env.Logf("terminal pids: supervisor %d, its session's agentctl %d, standalone agentctl %d", spid, sapid, apid)
	procs := map[string]int{"bench": os.Getpid(), "agentctl": apid, "session-agentctl": sapid, "supervisor": spid}
	for _, p := range names {
		if _, err := catTrial(paths, p, file, procs); err != nil {
			return nil, fmt.Errorf("warm-up %s: %w", p, err)
		}
	}
	seq := []string{"direct"}
	for r := 0; r < rounds; r++ {
		seq = append(seq, "agentctl", "direct", "supervisor", "direct")
	}
	trialsOf := make([]catResult, len(seq))
	for i, p := range seq {
		tr, err := catTrial(paths, p, file, procs)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		trialsOf[i] = tr
	}
	rates, ratios, idle := map[string][]float64{}, map[string][]float64{}, map[string][]float64{}
	cpu, mib, chunks := map[string]map[string]time.Duration{}, map[string]float64{}, map[string]int64{}
	for i, p := range seq {
		tr := trialsOf[i]
		rates[p] = append(rates[p], tr.rate)
		idle[p] = append(idle[p], tr.idle)
		mib[p] += tr.mib
		chunks[p] += tr.chunks
		if cpu[p] == nil {
			cpu[p] = map[string]time.Duration{}
		}
		for k, v := range tr.cpu {
			cpu[p][k] += v
		}
		if p != "direct" {
			ratios[p] = append(ratios[p], tr.rate/((trialsOf[i-1].rate+trialsOf[i+1].rate)/2))
		}
	}
	direct := Percentile(rates["direct"], 50)
	perMiB := func(path, proc string) float64 { return ms(cpu[path][proc]) / mib[path] }
	costs := fmt.Sprintf("CPU per MiB (user+system, all threads): direct reader %.1f ms; agentctl path: agentctl %.1f, client %.1f ms; whole path: agentctl %.1f, supervisor %.1f, client %.1f ms",
		perMiB("direct", "bench"), perMiB("agentctl", "agentctl"), perMiB("agentctl", "bench"),
		perMiB("supervisor", "session-agentctl"), perMiB("supervisor", "supervisor"), perMiB("supervisor", "bench"))
	chunkKiB := func(path string) float64 { return mib[path] * 1024 / float64(max(1, chunks[path])) }
	costs += fmt.Sprintf("; mean output chunk the client got: direct PTY read %.1f KiB, agentctl frame %.1f KiB, whole-path frame %.1f KiB",
		chunkKiB("direct"), chunkKiB("agentctl"), chunkKiB("supervisor"))
	env.Logf("terminal cat MiB/s: direct %.0f, agentctl %.0f, supervisor %.0f; pair ratios agentctl %.3f, supervisor %.3f; %s",
		direct, Percentile(rates["agentctl"], 50), Percentile(rates["supervisor"], 50),
		Percentile(ratios["agentctl"], 50), Percentile(ratios["supervisor"], 50), costs)
	var out []Result
	ratio := func(name, path, desc string, goal float64) Result {
		r := Summary(Result{Name: name, Area: areaTerminal, Unit: "ratio", Goal: fmt.Sprintf("≥ %.2f", goal),
			Note: fmt.Sprintf("cat of a pre-generated %d MiB text file (80-column lines) through %s, fresh shell each trial, client reads into one reused buffer and never acks; "+
				"median of %d per-pair ratios, each the trial's MiB/s over the mean of the direct-PTY trials just before and after it (D A D S D …, plus one warm-up of each path); "+
				"p50 %.0f MiB/s vs direct %.0f MiB/s; machine idle during these trials (others' load) p50 %.0f%%; %s",
				size>>20, desc, len(ratios[path]), Percentile(rates[path], 50), direct, 100*Percentile(idle[path], 50), costs)}, ratios[path], true)
		return Verdict(r, r.P50 >= goal)
	}
	out = append(out,
		ratio("terminal_throughput_ratio", "supervisor", "PTY → agentctl → supervisor proxy → WebSocket", 0.75),
		ratio("terminal_throughput_ratio_agentctl", "agentctl", "PTY → agentctl → WebSocket", 0.9))
	out = append(out, Summary(Result{Name: "terminal_direct_mib_s", Area: areaTerminal, Unit: "MiB/s",
		Note: fmt.Sprintf("the baseline: the same cat read directly from the PTY by the bench process (%d trials interleaved with the path trials; machine idle p50 %.0f%%)", len(rates["direct"]), 100*Percentile(idle["direct"], 50))}, rates["direct"], true))

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

	// Memory per idle terminal, in fresh agentctl processes of their own.
	mem, note, err := memPerTerminal(env, dir, memReps)
	if err != nil {
		return out, fmt.Errorf("memory: %w", err)
	}
	out = append(out, mem...)
	env.Logf("terminal memory: %s", note)
	return out, nil
}

// endShell types exit and, on a WebSocket, waits until the server reports the
// shell's exit, so the next attach to the same name starts a fresh shell
// instead of racing the old one's exit; then it closes the stream.
func endShell(st termStream) {
	_ = st.Input([]byte("exit\r"))
	if t, ok := st.(*wsTerm); ok {
		select {
		case <-t.exited:
		case <-time.After(10 * time.Second):
		}
	}
	st.Close()
}

// shellReady bounds a fresh shell's first command: generous, the machine is
// shared and a loaded machine has been seen to take seconds.
const shellReady = 60 * time.Second

// catResult is one throughput trial.
type catResult struct {
	rate, mib float64
	// chunks is how many output frames (PTY reads for direct) carried it.
	chunks int64
	// idle is the machine's idle CPU fraction during the trial (others' load).
	idle float64
	// cpu is each watched process's CPU time during the trial.
	cpu map[string]time.Duration
}

// catTrial opens a fresh shell on path, cats file and measures the output rate
// and the CPU each process of procs spent meanwhile.
func catTrial(paths *termPaths, p, file string, procs map[string]int) (catResult, error) {
	w := newMarkerWatch()
	// One name per path, reused: its shell exits after each trial, so the next
	// attach starts a fresh one (agentctl keeps at most 16 terminals, exited
	// ones included).
	st, err := paths.open(p, "cat", w.sink)
	if err != nil {
		return catResult{}, err
	}
	if _, _, err := runMarked(st, w, "true", shellReady); err != nil {
		st.Close()
		return catResult{}, fmt.Errorf("shell not ready: %w", err)
	}
	if t, ok := st.(*wsTerm); ok {
		want, _ := filepath.EvalSymlinks("/bin/sh")
		if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", t.attached.Pid)); exe != want {
			st.Close()
			return catResult{}, fmt.Errorf("the %s path runs %q, not /bin/sh (%s) like the direct path", p, exe, want)
		}
	}
	cpu0 := map[string]time.Duration{}
	for k, pid := range procs {
		cpu0[k] = procCPU(pid)
	}
	busy0, total0 := machineCPU()
	d, n, err := runMarked(st, w, "cat "+file, 120*time.Second)
	busy1, total1 := machineCPU()
	res := catResult{cpu: map[string]time.Duration{}}
	for k, pid := range procs {
		res.cpu[k] = procCPU(pid) - cpu0[k]
	}
	endShell(st)
	if err != nil {
		return catResult{}, err
	}
	res.mib = float64(n) / (1 << 20)
	w.mu.Lock()
	res.chunks = w.chunks
	w.mu.Unlock()
	res.rate = res.mib / d.Seconds()
	if total1 > total0 {
		res.idle = 1 - float64(busy1-busy0)/float64(total1-total0)
	}
	return res, nil
}

// pidWithArg finds the process whose command line has arg as one argument
// (0 if none).
func pidWithArg(arg string) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		for _, a := range bytes.Split(b, []byte{0}) {
			if string(a) == arg {
				return pid
			}
		}
	}
	return 0
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
	if _, _, err := runMarked(flood, fw, "true", shellReady); err != nil {
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
	if _, _, err := runMarked(et, ew, "true", shellReady); err != nil {
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
		c, err := dialTerm(p.supervisorWS("replay"), nil, termproto.Hello{}, func([]byte) { once.Do(func() { close(first) }) })
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

// idleTerminals is how many idle terminals each memory repetition adds: all
// agentctl allows (16) but the warm-up one.
const idleTerminals = 15

// memPerTerminal measures what an idle terminal costs: reps times, a fresh
// agentctl gets one warm-up terminal (first-use costs: the HTTP server, the
// first PTY, code pages), then idleTerminals more; each repetition gives the
// agentctl's anonymous RSS growth per added terminal, and the figure is the
// median over repetitions. The shells are measured apart.
func memPerTerminal(env Env, dir string, reps int) ([]Result, string, error) {
	var growth, shellAnon, shellPss []float64
	var raw []string
	for rep := 0; rep < reps; rep++ {
		d := filepath.Join(dir, fmt.Sprintf("mem%d", rep))
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, "", err
		}
		aurl, pid, stop, err := startAgentctl(env, d)
		if err != nil {
			return nil, "", err
		}
		base, secret, _ := strings.Cut(aurl, "\x00")
		p := &termPaths{dir: d, agentctlURL: base, agentctlHdr: http.Header{"Authorization": {"Bearer " + secret}}}
		g, anon, pss, err := memRep(p, pid)
		stop()
		if err != nil {
			return nil, "", err
		}
		growth = append(growth, g)
		shellAnon = append(shellAnon, anon)
		shellPss = append(shellPss, pss)
		raw = append(raw, fmt.Sprintf("%.1f", g))
	}
	agent := Percentile(growth, 50)
	anon, pss := Percentile(shellAnon, 50), Percentile(shellPss, 50)
	what := fmt.Sprintf("%d fresh agentctl processes; in each, after one warm-up terminal, %d more idle terminals (each attached, ran one command, detached; /bin/sh on its PTY; each holds a 256 KiB replay ring and a 32 KiB PTY read buffer, whose pages count once touched: written, or zeroed by Go when the memory is reused)", reps, idleTerminals)
	note := fmt.Sprintf("%s: agentctl anonymous RSS (RssAnon: heap, goroutine and thread stacks; not file-backed code pages, not kernel memory such as PTY buffers, kernel stacks or page tables) grew per terminal, by repetition: %s KiB; median %.1f KiB. Each terminal's shell process: RssAnon %.0f KiB, Pss %.0f KiB (its share of shared pages, libc and the shell binary included).",
		what, strings.Join(raw, ", "), agent, anon, pss)
	return []Result{
		Summary(Result{Name: "terminal_idle_kib", Area: areaTerminal, Unit: "KiB", Note: note}, growth, false),
		Summary(Result{Name: "terminal_idle_shell_kib", Area: areaTerminal, Unit: "KiB",
			Note: fmt.Sprintf("Pss of each idle terminal's /bin/sh process (not in terminal_idle_kib), median per repetition; RssAnon alone %.0f KiB; %s", anon, what)}, shellPss, false),
	}, note, nil
}

// memRep opens the warm-up and idle terminals in agentctl pid and returns the
// agentctl's RssAnon growth per idle terminal and the median RssAnon and Pss
// of their shells, in KiB.
func memRep(p *termPaths, pid int) (growth, shellAnon, shellPss float64, err error) {
	open := func(name string) error {
		w := newMarkerWatch()
		st, err := p.open("agentctl", name, w.sink)
		if err != nil {
			return err
		}
		_, _, err = runMarked(st, w, "true", shellReady)
		st.Close()
		return err
	}
	if err := open("warm"); err != nil {
		return 0, 0, 0, err
	}
	before := settledAnon(pid)
	old := map[int]bool{}
	for _, c := range harness.ChildPIDs(pid) {
		old[c] = true
	}
	for i := 0; i < idleTerminals; i++ {
		if err := open(fmt.Sprintf("idle%d", i)); err != nil {
			return 0, 0, 0, err
		}
	}
	after := settledAnon(pid)
	var anon, pss []float64
	for _, c := range harness.ChildPIDs(pid) {
		if !old[c] {
			anon = append(anon, float64(procKiB(c, "status", "RssAnon:")))
			pss = append(pss, float64(procKiB(c, "smaps_rollup", "Pss:")))
		}
	}
	if len(anon) != idleTerminals {
		return 0, 0, 0, fmt.Errorf("found %d new shells under agentctl, want %d", len(anon), idleTerminals)
	}
	return float64(after-before) / idleTerminals, Percentile(anon, 50), Percentile(pss, 50), nil
}

// settledAnon waits for agentctl to go quiet and returns its RssAnon: the
// lowest of several readings over a second and a half, so garbage not yet
// collected (connection buffers) weighs as little as possible.
func settledAnon(pid int) int {
	time.Sleep(500 * time.Millisecond)
	low := procKiB(pid, "status", "RssAnon:")
	for i := 0; i < 5; i++ {
		time.Sleep(200 * time.Millisecond)
		low = min(low, procKiB(pid, "status", "RssAnon:"))
	}
	return low
}

// procKiB reads a "Key: N kB" line of /proc/pid/file (0 if absent).
func procKiB(pid int, file, key string) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, file))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, key); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				n, _ := strconv.Atoi(f[0])
				return n
			}
		}
	}
	return 0
}

// shellSession is a one-node supervisor whose one standalone demo session's
// agentctl runs /bin/sh as its terminal shell.
type shellSession struct {
	node    *harness.Node
	api     *client.Client
	session *api.Session
	dir     string // the cluster's scratch directory
	stop    func() // stops the cluster and restores $SHELL
}

// startShellSession starts a shellSession. The session's agentctl starts
// $SHELL (the config's terminal.shell does not reach it): without this, the
// whole path would run the user's login shell (bash with its rc files, here
// pyenv init forking dozens of processes during the trials) while the direct
// paths run /bin/sh. The server inherits this environment at its start;
// $SHELL stays /bin/sh until stop.
func startShellSession(ctx context.Context, env Env, name, title string) (*shellSession, error) {
	old, had := os.LookupEnv("SHELL")
	restore := func() {
		if had {
			os.Setenv("SHELL", old)
		} else {
			os.Unsetenv("SHELL")
		}
	}
	if err := os.Setenv("SHELL", "/bin/sh"); err != nil {
		return nil, err
	}
	c, dir, stopCluster, err := paddockCluster(env, name, 1, false, "")
	if err != nil {
		restore()
		return nil, err
	}
	sh := &shellSession{dir: dir, stop: func() { stopCluster(); restore() }}
	fail := func(err error) (*shellSession, error) {
		sh.stop()
		return nil, err
	}
	if sh.node, err = c.Leader(30 * time.Second); err != nil {
		return fail(err)
	}
	sh.api = apiOf(sh.node)
	task, err := sh.api.CreateTask(ctx, api.CreateTaskRequest{Title: title})
	if err != nil {
		return fail(err)
	}
	if sh.session, err = sh.api.CreateSession(ctx, task.ID, api.CreateSessionRequest{Agent: "demo", Runtime: "standalone"}); err != nil {
		return fail(err)
	}
	if err := waitSession(ctx, sh.api, sh.session.ID, api.SessionWaitingForInput, 60*time.Second, 20*time.Millisecond); err != nil {
		return fail(err)
	}
	return sh, nil
}
