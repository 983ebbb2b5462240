package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/chromedp/cdproto/input"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

const areaUI = "Web UI: headless Chromium on localhost"

// UISuite measures the web UI in Debian's headless Chromium against a
// one-node server: how long the session page takes to show its transcript
// and its terminal, and how fast xterm.js renders a `cat` compared with
// `paddock attach` reading the same file in the same run.
func UISuite(ctx context.Context, env Env) ([]Result, error) {
	loads, size, rounds := 30, 16<<20, 5
	if env.Quick {
		loads, rounds = 8, 2
	}
	browserPath, err := chromium()
	if err != nil {
		return nil, err
	}
	sh, err := startShellSession(ctx, env, "ui", "bench ui")
	if err != nil {
		return nil, err
	}
	defer sh.stop()
	node, api, s, dir := sh.node, sh.api, sh.session, sh.dir
	// A transcript to show: three turns, six messages.
	for i := 0; i < 3; i++ {
		if err := api.Prompt(ctx, s.ID, fmt.Sprintf("remember item%d", i)); err != nil {
			return nil, err
		}
		err := waitUntil(ctx, 60*time.Second, 20*time.Millisecond, "the demo agent's reply", func() bool {
			ms, err := api.Messages(ctx, s.ID)
			return err == nil && len(ms) == 2*(i+1) && ms[len(ms)-1].Complete
		})
		if err != nil {
			return nil, err
		}
	}
	file := filepath.Join(dir, "cat.txt")
	if err := makeTextFile(file, size); err != nil {
		return nil, fmt.Errorf("make file: %w", err)
	}

	bctx, closeBrowser, err := startChromium(ctx, browserPath, filepath.Join(dir, "chromium"))
	if err != nil {
		return nil, err
	}
	defer closeBrowser()
	url := node.URL() + "/ui/sessions/" + s.ID

	// Page load: a fresh document each time (about:blank in between), timed by
	// the page's own clock from the navigation's start to the later of its two
	// marks: the transcript shown, the terminal's replayed screen drawn.
	var pageMS []float64
	for i := 0; i < loads+1; i++ {
		d, err := sessionPageLoad(bctx, url)
		if err != nil {
			return nil, fmt.Errorf("session page load %d: %w", i, err)
		}
		if i > 0 { // the first load warms the browser's caches and the server's paths
			pageMS = append(pageMS, d)
		}
	}
	env.Logf("ui session page: p50 %.0f ms, p99 %.0f ms", Percentile(pageMS, 50), Percentile(pageMS, 99))
	out := []Result{Summary(Result{Name: "ui_session_page_ms", Area: areaUI, Unit: "ms",
		Note: fmt.Sprintf("navigation of a fresh document to /ui/sessions/{id} (a session with 6 messages and a shell screen to replay) until the transcript is shown and the terminal's replay is drawn (the later of the page's two User Timing marks, from navigation start), %d loads after one warm-up; one node, no token", len(pageMS))}, pageMS, false)}

	// Throughput: the page's terminal ("shell") against `paddock attach` on
	// another terminal of the same session, alternating A B A B … A; each
	// browser trial's ratio is against the mean of its two attach neighbours.
	if _, err := sessionPageLoad(bctx, url); err != nil {
		return out, err
	}
	attach, err := startAttach(env, node.URL(), s.ID)
	if err != nil {
		return out, err
	}
	defer attach.Close()
	if _, _, err := runMarked(attach, attach.watch, "true", shellReady); err != nil {
		return out, fmt.Errorf("attach shell: %w", err)
	}
	if _, err := browserCat(bctx, "true"); err != nil {
		return out, fmt.Errorf("browser shell: %w", err)
	}
	mib := float64(size) / (1 << 20)
	attachTrial := func() (float64, error) {
		d, _, err := runMarked(attach, attach.watch, "cat "+file, 120*time.Second)
		return mib / d.Seconds(), err
	}
	var browserRates, attachRates, ratios []float64
	prev, err := attachTrial() // also the warm-up of the page cache
	if err != nil {
		return out, fmt.Errorf("attach cat: %w", err)
	}
	if _, err := browserCat(bctx, "cat "+file); err != nil { // warm-up
		return out, fmt.Errorf("browser cat: %w", err)
	}
	for r := 0; r < rounds; r++ {
		d, err := browserCat(bctx, "cat "+file)
		if err != nil {
			return out, fmt.Errorf("browser cat: %w", err)
		}
		next, err := attachTrial()
		if err != nil {
			return out, fmt.Errorf("attach cat: %w", err)
		}
		rate := mib / d.Seconds()
		browserRates = append(browserRates, rate)
		attachRates = append(attachRates, prev, next)
		ratios = append(ratios, rate/((prev+next)/2))
		prev = next
	}
	tr := Summary(Result{Name: "ui_terminal_mib_s", Area: areaUI, Unit: "MiB/s", Peer: "paddock attach",
		Note: fmt.Sprintf("`cat` of a %d MiB text file (80-column lines) in the session page's terminal until xterm.js has drawn the marker echoed after it (DOM renderer, 1400×900 window), against `paddock attach` (pipe mode, output read by this process) on another shell of the same session reading the same file; %d browser trials, each between two attach trials; ratio = median of browser rate / mean of its neighbours (higher is better); both clients ack", size>>20, rounds)}, browserRates, true)
	tr.PeerP50 = Percentile(attachRates, 50)
	tr.Ratio = Percentile(ratios, 50)
	env.Logf("ui terminal: browser %.1f MiB/s, attach %.1f MiB/s, ratio %.3f", tr.P50, tr.PeerP50, tr.Ratio)
	return append(out, tr), nil
}

// chromium finds Debian's chromium.
func chromium() (string, error) {
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("chromium is not installed (apt-get install -y chromium)")
}

// startChromium starts a headless browser with a profile in dir.
func startChromium(ctx context.Context, path, dir string) (context.Context, func(), error) {
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(dir),
		chromedp.WindowSize(1400, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancel := chromedp.NewContext(actx)
	if err := chromedp.Run(bctx); err != nil {
		cancel()
		cancelAlloc()
		return nil, nil, fmt.Errorf("start chromium: %w", err)
	}
	return bctx, func() { cancel(); cancelAlloc() }, nil
}

// readyMarks is the page's own measure of its load: the later of its two
// User Timing marks, in ms from navigation start (0 until both are set).
const readyMarks = `(() => {
	const t = performance.getEntriesByName("paddock:transcript-ready")[0];
	const s = performance.getEntriesByName("paddock:terminal-ready")[0];
	return t && s ? Math.max(t.startTime, s.startTime) : 0;
})()`

func sessionPageLoad(bctx context.Context, url string) (float64, error) {
	ctx, cancel := context.WithTimeout(bctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Run(ctx, chromedp.Navigate("about:blank"), chromedp.Navigate(url)); err != nil {
		return 0, err
	}
	var d float64
	err := waitUntil(ctx, 30*time.Second, 20*time.Millisecond, "the session page's transcript and terminal", func() bool {
		return chromedp.Run(ctx, chromedp.Evaluate(readyMarks, &d)) == nil && d > 0
	})
	return d, err
}

// browserCat types cmd and an echo of a computed marker into the page's
// terminal and returns how long until xterm.js has drawn the marker. The
// marker is found by watching the rendered rows, as a person would see it.
func browserCat(bctx context.Context, cmd string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(bctx, 180*time.Second)
	defer cancel()
	n := rand.IntN(1_000_000)
	marker := fmt.Sprintf("MK%dKM", n+1)
	watch := fmt.Sprintf(`window.benchMarker = new Promise((resolve) => {
		const rows = document.querySelector('[aria-label="Terminal"] .xterm-rows');
		const seen = () => rows.textContent.includes(%q);
		if (seen()) { resolve(true); return; }
		const o = new MutationObserver(() => { if (seen()) { o.disconnect(); resolve(true); } });
		o.observe(rows, {subtree: true, childList: true, characterData: true});
	}); 0`, marker)
	var box []float64
	err := chromedp.Run(ctx,
		chromedp.Evaluate(watch, nil),
		chromedp.Evaluate(`(() => { const r = document.querySelector('[aria-label="Terminal"] .term-screen').getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()`, &box))
	if err != nil {
		return 0, err
	}
	if err := chromedp.Run(ctx, chromedp.MouseClickXY(box[0], box[1])); err != nil {
		return 0, err
	}
	enter := func(t input.KeyType) chromedp.Action {
		return input.DispatchKeyEvent(t).WithKey("Enter").WithCode("Enter").WithWindowsVirtualKeyCode(13).WithNativeVirtualKeyCode(13)
	}
	t0 := time.Now()
	var ok bool
	err = chromedp.Run(ctx,
		input.InsertText(fmt.Sprintf("%s; echo \"MK$((%d+1))KM\"", cmd, n)), enter(input.KeyRawDown), enter(input.KeyUp),
		chromedp.Evaluate(`window.benchMarker`, &ok, func(p *cdpruntime.EvaluateParams) *cdpruntime.EvaluateParams { return p.WithAwaitPromise(true) }))
	if err != nil {
		return 0, fmt.Errorf("waiting for %s on the page: %w", marker, err)
	}
	return time.Since(t0), nil
}

// attachStream is a `paddock attach` process in pipe mode: input to its
// stdin, its stdout to a marker watch.
type attachStream struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	watch  *markerWatch
	exited chan struct{}
}

func startAttach(env Env, address, session string) (*attachStream, error) {
	a := &attachStream{watch: newMarkerWatch(), exited: make(chan struct{})}
	a.cmd = exec.Command(filepath.Join(env.Bin, "paddock"), "attach", "-address", address, "-name", "bench-attach", session)
	var err error
	if a.stdin, err = a.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := a.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := a.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start paddock attach: %w", err)
	}
	go func() {
		defer close(a.exited)
		buf := make([]byte, 64<<10)
		for {
			n, err := stdout.Read(buf)
			if n > 0 {
				a.watch.sink(buf[:n])
			}
			if err != nil {
				_ = a.cmd.Wait()
				return
			}
		}
	}()
	return a, nil
}

func (a *attachStream) Input(b []byte) error { _, err := a.stdin.Write(b); return err }

func (a *attachStream) Close() {
	_ = a.cmd.Process.Kill()
	<-a.exited
}
