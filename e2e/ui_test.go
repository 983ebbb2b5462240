package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/accessibility"
	"github.com/chromedp/cdproto/dom"
	"github.com/chromedp/cdproto/input"
	cdplog "github.com/chromedp/cdproto/log"
	cdppage "github.com/chromedp/cdproto/page"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	wire "github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/bench/harness"
	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/shared/testkit"
)

const uiToken = "e2e-ui-token"

// chromiumPath finds Debian's chromium. Under CI (CI=true) a missing browser
// fails the test: .ci/run installs it, so its absence is a broken CI.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium is not installed; .ci/run installs it (apt-get install chromium)")
	}
	t.Skip("SKIPPING the browser test: chromium is not installed (apt-get install -y chromium)")
	return ""
}

// browser starts a headless Chromium with the flags this machine needs and
// a fresh profile; it is closed when the test ends.
func browser(t *testing.T) context.Context {
	t.Helper()
	// The profile is not a TempDir: the browser's helpers may still write to
	// it for a moment after it is closed, which a TempDir's removal reports
	// as a failure. It is removed once they have stopped.
	profile, err := os.MkdirTemp("", "paddock-e2e-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1400, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
		testkit.WaitFor(t, 10*time.Second, "the browser profile to be removed", testkit.Cond(func() bool { return os.RemoveAll(profile) == nil }))
	})
	if err := chromedp.Run(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// page drives one browser tab the way a person does: it finds controls by
// their role and accessible name (the accessibility tree), clicks them with
// the mouse and types with the keyboard.
type page struct {
	t   *testing.T
	ctx context.Context
}

func (p page) run(what string, actions ...chromedp.Action) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	// A background tab does not lay itself out, so its accessibility tree
	// never answers: every step brings its tab to the front first.
	if err := chromedp.Run(ctx, append([]chromedp.Action{cdppage.BringToFront()}, actions...)...); err != nil {
		p.t.Fatalf("%s: %v", what, err)
	}
}

// query returns the unignored accessibility nodes with this role and name.
func (p page) query(role, name string) []*accessibility.Node {
	p.t.Helper()
	var found []*accessibility.Node
	p.run(fmt.Sprintf("query %s %q", role, name), chromedp.ActionFunc(func(ctx context.Context) error {
		doc, err := dom.GetDocument().Do(ctx)
		if err != nil {
			return err
		}
		nodes, err := accessibility.QueryAXTree().WithBackendNodeID(doc.BackendNodeID).WithRole(role).WithAccessibleName(name).Do(ctx)
		if err != nil {
			return err
		}
		for _, n := range nodes {
			if !n.Ignored {
				found = append(found, n)
			}
		}
		return nil
	}))
	return found
}

// find waits for a control with this role and accessible name.
func (p page) find(role, name string) *accessibility.Node {
	p.t.Helper()
	var n *accessibility.Node
	testkit.WaitFor(p.t, 60*time.Second, fmt.Sprintf("a %s named %q", role, name), testkit.Cond(func() bool {
		if found := p.query(role, name); len(found) > 0 {
			n = found[0]
			return true
		}
		return false
	}))
	return n
}

// click clicks the middle of a control with the mouse.
func (p page) click(role, name string) {
	p.t.Helper()
	// A page may re-render a control between finding and clicking it (a
	// list that reloads): then the node is gone, and the control is found
	// again.
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		// As a person does, wait for a disabled control to be enabled.
		var n *accessibility.Node
		testkit.WaitFor(p.t, 60*time.Second, fmt.Sprintf("the %s %q to be enabled", role, name), testkit.Cond(func() bool {
			n = p.find(role, name)
			return !axDisabled(n)
		}))
		ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
		err = chromedp.Run(ctx, cdppage.BringToFront(), chromedp.ActionFunc(func(ctx context.Context) error {
			if err := dom.ScrollIntoViewIfNeeded().WithBackendNodeID(n.BackendDOMNodeID).Do(ctx); err != nil {
				return err
			}
			// Content quads are in the viewport's coordinates, as the mouse
			// and the hit test are (the box model's are the document's).
			quads, err := dom.GetContentQuads().WithBackendNodeID(n.BackendDOMNodeID).Do(ctx)
			if err != nil {
				return err
			}
			if len(quads) == 0 {
				return fmt.Errorf("the control has no box")
			}
			q := quads[0]
			x, y := (q[0]+q[4])/2, (q[1]+q[5])/2
			// The page may have moved under the pointer (a banner that went):
			// click only where the control is now.
			hit, _, _, err := dom.GetNodeForLocation(int64(x), int64(y)).Do(ctx)
			if err != nil {
				return err
			}
			if hit != n.BackendDOMNodeID {
				what := "?"
				if d, err := dom.DescribeNode().WithBackendNodeID(hit).Do(ctx); err == nil {
					what = fmt.Sprintf("<%s %v>", d.LocalName, d.Attributes)
				}
				return fmt.Errorf("the control moved from (%.0f, %.0f), where %s is now", x, y, what)
			}
			return chromedp.MouseClickXY(x, y).Do(ctx)
		}))
		cancel()
		if err == nil {
			return
		}
		p.t.Logf("click %s %q: %v; finding it again", role, name, err)
	}
	p.screenshot(strings.NewReplacer("/", "-", " ", "_").Replace(p.t.Name()) + "-failure.png")
	p.t.Fatalf("click %s %q: %v", role, name, err)
}

// axDisabled is whether an accessibility node is disabled.
func axDisabled(n *accessibility.Node) bool {
	for _, prop := range n.Properties {
		if prop.Name == accessibility.PropertyNameDisabled && prop.Value != nil && string(prop.Value.Value) == "true" {
			return true
		}
	}
	return false
}

// fill focuses a control and types text into it.
func (p page) fill(role, name, text string) {
	p.t.Helper()
	n := p.find(role, name)
	p.run(fmt.Sprintf("type into %s %q", role, name), chromedp.ActionFunc(func(ctx context.Context) error {
		if err := dom.Focus().WithBackendNodeID(n.BackendDOMNodeID).Do(ctx); err != nil {
			return err
		}
		return chromedp.KeyEvent(text).Do(ctx)
	}))
	// Every key reached the control (nothing took the focus meanwhile).
	var value string
	p.run("read "+name, chromedp.Evaluate(`document.activeElement?.value ?? ""`, &value))
	if !strings.HasSuffix(value, text) {
		p.t.Fatalf("typed %q into %s %q, which holds %q (the focus moved?)", text, role, name, value)
	}
}

// text is the visible text of the first element matching a CSS selector
// ("" while there is none).
func (p page) text(sel string) string {
	p.t.Helper()
	var s string
	p.run("read "+sel, chromedp.Evaluate(fmt.Sprintf(`(document.querySelector(%q)?.textContent ?? "").replaceAll("\u00a0", " ")`, sel), &s))
	return s
}

func (p page) waitText(sel, want string) {
	p.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(p.text(sel), want) {
		if time.Now().After(deadline) {
			p.screenshot(strings.NewReplacer("/", "-", " ", "_").Replace(p.t.Name()) + "-failure.png")
			p.t.Fatalf("timed out waiting for %q in %s, which holds %q", want, sel, p.text(sel))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// artifactDir is where the browser tests write their screenshots:
// $PADDOCK_TEST_ARTIFACTS/ui, else paddock-test-artifacts/ui in the system's
// temporary directory. It outlives the test so that a person (or CI) can
// look at the pages.
func artifactDir(t *testing.T) string {
	t.Helper()
	root := os.Getenv("PADDOCK_TEST_ARTIFACTS")
	if root == "" {
		root = filepath.Join(os.TempDir(), "paddock-test-artifacts")
	}
	dir := filepath.Join(root, "ui")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// screenshot writes the whole page as name (a PNG) into the artifact directory.
func (p page) screenshot(name string) {
	p.t.Helper()
	var png []byte
	p.run("screenshot", chromedp.FullScreenshot(&png, 100))
	path := filepath.Join(artifactDir(p.t), name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		p.t.Fatal(err)
	}
	p.t.Logf("screenshot: %s", path)
}

// choose picks an option of the select labelled label.
func (p page) choose(label, value string) {
	p.t.Helper()
	n := p.find("combobox", label)
	p.run("choose "+label, chromedp.ActionFunc(func(ctx context.Context) error {
		obj, err := dom.ResolveNode().WithBackendNodeID(n.BackendDOMNodeID).Do(ctx)
		if err != nil {
			return err
		}
		_, exc, err := cdpruntime.CallFunctionOn(`function(v) {
			if (![...this.options].some(o => o.value === v)) throw new Error("no option " + v);
			this.value = v; this.dispatchEvent(new Event("change", {bubbles: true}));
		}`).WithObjectID(obj.ObjectID).WithArguments([]*cdpruntime.CallArgument{{Value: []byte(strconv.Quote(value))}}).Do(ctx)
		if err == nil && exc != nil {
			err = exc
		}
		return err
	}))
}

// termType types a line into the terminal as a person does: click its
// screen, type (as text input: xterm.js reads both key and input events, and
// a synthetic key press would reach it twice), press Enter.
func (p page) termType(line string) {
	p.t.Helper()
	p.find("region", "Terminal")
	p.termTypeIn(`[aria-label="Terminal"]`, line)
}

// termTypeIn types a line into the terminal region matching sel.
func (p page) termTypeIn(sel, line string) {
	p.t.Helper()
	// As a person does: wait until the terminal is attached (its screen is
	// live, not dimmed while reconnecting) and the workspace usable (it is
	// inert while the executor is not ready, as after a failover until the
	// new leader has found it), click into the screen, and type once the
	// cursor is there. A click that missed (the page moved under it, or the
	// connection dropped again meanwhile) is made again.
	usable := fmt.Sprintf(`(() => { const el = document.querySelector(%q);
		return !!el?.dataset.pid && el.dataset.connection === "attached" && !document.querySelector("section.workspace").inert; })()`, sel)
	focused := fmt.Sprintf(`!!document.activeElement?.closest(%q)`, sel+" .term-screen")
	testkit.WaitFor(p.t, 60*time.Second, "the terminal to attach, be usable and take the focus", testkit.Cond(func() bool {
		var ok bool
		p.run("read the terminal's state", chromedp.Evaluate(usable, &ok))
		if !ok {
			return false
		}
		var box []float64
		p.run("find the terminal screen", chromedp.Evaluate(fmt.Sprintf(`(() => { const el = document.querySelector(%q); el.scrollIntoView({block: "center"}); const r = el.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()`, sel+" .term-screen"), &box))
		p.run("focus the terminal", chromedp.MouseClickXY(box[0], box[1]))
		p.run("read the focus", chromedp.Evaluate(focused, &ok))
		return ok
	}))
	// Enter as a raw key press: a full key event also sends a character,
	// which xterm.js would read as a second Enter.
	enter := func(t input.KeyType) chromedp.Action {
		return input.DispatchKeyEvent(t).WithKey("Enter").WithCode("Enter").WithWindowsVirtualKeyCode(13).WithNativeVirtualKeyCode(13)
	}
	p.run("type into the terminal", input.InsertText(line), enter(input.KeyRawDown), enter(input.KeyUp))
}

// termPID types `echo MARK-$$` into the terminal and returns the shell pid it prints.
func (p page) termPID(mark string) string {
	p.t.Helper()
	p.termType("echo " + mark + "-$$")
	p.waitText(".xterm-rows", mark+"-") // the typed line (a failure leaves a screenshot)
	re := regexp.MustCompile(regexp.QuoteMeta(mark) + `-(\d+)`)
	var pid string
	testkit.WaitFor(p.t, 60*time.Second, "the shell pid after "+mark, testkit.Cond(func() bool {
		if m := re.FindStringSubmatch(p.text(".xterm-rows")); m != nil {
			pid = m[1]
			return true
		}
		return false
	}))
	return pid
}

// location is the page's address.
func (p page) location() string {
	p.t.Helper()
	var url string
	p.run("read the location", chromedp.Evaluate(`location.href`, &url))
	return url
}

// sessionOnPage is the id of the session whose page is shown.
func (p page) sessionOnPage() string {
	p.t.Helper()
	url := p.location()
	m := regexp.MustCompile(`/ui/sessions/([^/]+)$`).FindStringSubmatch(url)
	if m == nil {
		p.t.Fatalf("not a session page: %s", url)
	}
	return m[1]
}

// acceptDialogs answers yes to every confirm() the tab shows (Reset terminal asks).
func acceptDialogs(ctx context.Context) {
	chromedp.ListenTarget(ctx, func(ev any) {
		if _, ok := ev.(*cdppage.EventJavascriptDialogOpening); ok {
			go func() { _ = chromedp.Run(ctx, cdppage.HandleJavaScriptDialog(true)) }()
		}
	})
}

// uiNode starts n servers with the UI's token, the demo agents and a plain
// shell, with auto-resume off (so that an ERROR stays for the user to see),
// and returns the cluster and a client of its first node.
func uiNode(t *testing.T, n int, separateIPs bool) (*harness.Cluster, *client.Client) {
	t.Helper()
	cfg := standaloneConfig(t) + fmt.Sprintf("acl {\n  token = %q\n}\nterminal {\n  shell = [\"/bin/sh\"]\n}\nrecovery {\n  auto_resume = \"none\"\n}\n", uiToken)
	c := startCluster(t, n, separateIPs, cfg)
	for _, node := range c.Nodes {
		node.Token = uiToken // for the harness's own reads (Leader)
	}
	api, err := client.New(c.Nodes[0].URL(), uiToken)
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 20*time.Second, "a leader", testkit.Cond(func() bool {
		st, err := api.Status(testCtx(t))
		return err == nil && st.LeaderID != ""
	}))
	return c, api
}

// startDemoSession creates a task and a session of agent on the standalone
// runtime through the API, and waits for it to be ready.
func startDemoSession(t *testing.T, api *client.Client, title, agent string) *wire.Session {
	t.Helper()
	task, err := api.CreateTask(testCtx(t), wire.CreateTaskRequest{Title: title})
	if err != nil {
		t.Fatal(err)
	}
	s, err := api.CreateSession(testCtx(t), task.ID, wire.CreateSessionRequest{Agent: agent, Runtime: "standalone"})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, api, s.ID, wire.SessionWaitingForInput)
	return s
}

// open goes to a page of the UI and logs in if it asks for the token.
func (p page) open(url string) {
	p.t.Helper()
	p.run("open "+url, chromedp.Navigate(url))
	var shown string
	testkit.WaitFor(p.t, 30*time.Second, "the page or the login form", testkit.Cond(func() bool {
		p.run("look at the page", chromedp.Evaluate(`document.querySelector("#login-token") ? "login" : document.querySelector("#app h1") ? "page" : ""`, &shown))
		return shown != ""
	}))
	if shown == "login" {
		p.login()
	}
}

// login fills in the token when the page asks for it.
func (p page) login() {
	p.t.Helper()
	p.fill("textbox", "Token", uiToken)
	p.click("button", "Log in")
}

// scriptErrors records the uncaught exceptions of a browser's tabs and what
// their Content-Security-Policy refused.
type scriptErrors struct {
	mu   sync.Mutex
	errs []string
}

// watch listens to one tab.
func (s *scriptErrors) watch(ctx context.Context) {
	chromedp.ListenTarget(ctx, func(ev any) {
		var msg string
		switch e := ev.(type) {
		case *cdpruntime.EventExceptionThrown:
			msg = "exception: " + e.ExceptionDetails.Text
			if e.ExceptionDetails.Exception != nil {
				msg += " " + e.ExceptionDetails.Exception.Description
			}
		case *cdplog.EventEntryAdded:
			if strings.Contains(e.Entry.Text, "Content Security Policy") {
				msg = "refused: " + e.Entry.Text
			}
		}
		if msg != "" {
			s.mu.Lock()
			s.errs = append(s.errs, msg)
			s.mu.Unlock()
		}
	})
}

func (s *scriptErrors) list() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.errs...)
}

// TestWebUI is the web UI as a person uses it, in headless Chromium against
// a real server process. The subtests share one server and one browser.
func TestWebUI(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	ctx := browser(t)
	acceptDialogs(ctx)
	c, api := uiNode(t, 1, false)
	node := c.Nodes[0]
	p := func(t *testing.T) page { return page{t: t, ctx: ctx} }
	var scripts scriptErrors
	scripts.watch(ctx)
	t.Cleanup(func() {
		if errs := scripts.list(); len(errs) > 0 {
			t.Errorf("the pages had script errors or refused content:\n%s", strings.Join(errs, "\n"))
		}
	})

	// The UI is served without the token, with a strict CSP; app routes
	// load index.html, a missing file is 404, / redirects.
	t.Run("Serving", func(t *testing.T) {
		noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Timeout: 10 * time.Second}
		get := func(path string) (*http.Response, string) {
			resp, err := noRedirect.Get(node.URL() + path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp, string(b)
		}
		if resp, _ := get("/"); resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/ui/" {
			t.Fatalf("GET /: %s to %q, want a redirect to /ui/", resp.Status, resp.Header.Get("Location"))
		}
		for _, path := range []string{"/ui/", "/ui/tasks/some-task", "/ui/sessions/some-session"} {
			resp, body := get(path)
			csp := resp.Header.Get("Content-Security-Policy")
			if resp.StatusCode != http.StatusOK || !strings.Contains(body, `<script type="module" src="/ui/app.js">`) ||
				!strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-eval") || resp.Header.Get("X-Frame-Options") != "DENY" {
				t.Fatalf("GET %s: %s, CSP %q, body %.80q", path, resp.Status, csp, body)
			}
		}
		if resp, body := get("/ui/app.js"); resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("Content-Type"), "javascript") || len(body) < 1000 {
			t.Fatalf("GET /ui/app.js: %s %q", resp.Status, resp.Header.Get("Content-Type"))
		}
		for _, path := range []string{"/ui/nope.js", "/ui/sub/nope.css"} {
			if resp, _ := get(path); resp.StatusCode != http.StatusNotFound {
				t.Fatalf("GET %s: %s, want 404", path, resp.Status)
			}
		}
		if resp, _ := get("/v1/tasks"); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("GET /v1/tasks without the token: %s, want 401", resp.Status)
		}
	})

	// Log in, create a task and a demo session, prompt, use the terminal,
	// reload, stop and resume.
	t.Run("PromptTerminalReloadResume", func(t *testing.T) {
		p := p(t)
		// / redirects to the UI; the API's 401 asks for the token.
		p.run("open the UI", chromedp.Navigate(node.URL()+"/"))
		p.fill("textbox", "Token", uiToken) // a password field, named by its label
		var inputType string
		p.run("read the token field", chromedp.Evaluate(`document.activeElement.type`, &inputType))
		if url := p.location(); inputType != "password" || !strings.HasSuffix(url, "/ui/") {
			t.Fatalf("token field type %q at %s, want a password field at /ui/", inputType, url)
		}
		p.click("button", "Log in")

		p.fill("textbox", "Title", "ui walkthrough")
		p.click("button", "Create task")
		p.click("link", "ui walkthrough")

		p.choose("Agent", "demo")
		p.choose("Runtime", "standalone")
		p.click("button", "New session")
		p.find("region", "Terminal") // shown once the executor is ready
		sessionID := p.sessionOnPage()
		for _, name := range []string{"Send", "Cancel turn", "Reset terminal", "Stop session"} {
			p.find("button", name)
		}

		// A prompt's reply streams into the transcript.
		p.fill("textbox", "Prompt", "remember apples")
		p.click("button", "Send")
		p.waitText("ol.messages", "ok, remembering apples")

		p.termType("echo hi-$((6*7)) pid-$$")
		p.waitText(".xterm-rows", "hi-42 pid-")
		pid := regexp.MustCompile(`hi-42 pid-(\d+)`).FindStringSubmatch(p.text(".xterm-rows"))
		if pid == nil {
			t.Fatalf("no pid on the screen: %q", p.text(".xterm-rows"))
		}
		p.screenshot("session.png")

		// Reload: the same session (the token is kept for the tab), the screen
		// replayed, the same shell.
		p.run("reload", chromedp.Reload())
		p.find("region", "Terminal")
		p.waitText(".xterm-rows", "hi-42 pid-"+pid[1])
		p.waitText("ol.messages", "ok, remembering apples")
		if n := len(p.query("textbox", "Token")); n != 0 {
			t.Fatal("the page asked for the token again after a reload")
		}
		if got := p.termPID("again"); got != pid[1] {
			t.Fatalf("shell pid %s after a reload, want %s", got, pid[1])
		}

		// Stop from the page: it offers "Resume session". While the resumed
		// executor starts, the page shows a spinner and the workspace
		// (terminals, files) is inert; then it is usable again.
		p.click("button", "Stop session")
		waitState(t, api, sessionID, wire.SessionStopped)
		p.find("button", "Resume session")
		p.run("watch the workspace", chromedp.Evaluate(`window.seen = [];
			new MutationObserver(() => {
				const header = document.querySelector('dl.status'), workspace = document.querySelector('section.workspace');
				if (!header || !workspace) return; // another page
				const spinner = !!document.querySelector('[role=progressbar][aria-label=Starting]');
				const executor = header.dataset.executor;
				const inert = workspace.inert;
				window.seen.push({spinner, executor, inert});
			}).observe(document.body, {subtree: true, childList: true, attributes: true}); 0`, nil))
		p.click("button", "Resume session")
		waitState(t, api, sessionID, wire.SessionWaitingForInput)
		p.find("region", "Terminal")
		type seenState struct {
			Spinner  bool   `json:"spinner"`
			Executor string `json:"executor"`
			Inert    bool   `json:"inert"`
		}
		var seen []seenState
		testkit.WaitFor(t, 20*time.Second, "the spinner to go once the executor is ready", testkit.Cond(func() bool {
			var busy bool
			p.run("read the workspace", chromedp.Evaluate(`window.seen`, &seen),
				chromedp.Evaluate(`document.querySelector('section.workspace').inert || !!document.querySelector('[role=progressbar]')`, &busy))
			return !busy
		}))
		sawStarting := false
		for _, s := range seen {
			if s.Executor == "starting" && (!s.Spinner || !s.Inert) {
				t.Fatalf("while the executor started the page showed spinner=%v, workspace inert=%v; want a spinner and an inert workspace", s.Spinner, s.Inert)
			}
			sawStarting = sawStarting || (s.Spinner && s.Inert)
		}
		if !sawStarting {
			t.Fatalf("the page never showed the Starting spinner with the workspace disabled while the session resumed (%d changes seen)", len(seen))
		}
		p.fill("textbox", "Prompt", "recall")
		p.click("button", "Send")
		p.waitText("ol.messages", "you asked me to remember: apples")
		p.screenshot("session-resumed.png") // the README's picture (docs/ui.png)

		// The task's page lists the session with its live state.
		p.click("link", "Task")
		p.find("link", "demo · standalone")
		p.waitText("ul.sessions", "Waiting for input")
		p.screenshot("task.png")
	})

	// Two tabs on one terminal: the second takes it over, the first offers
	// "Take back"; Reset terminal gives a new shell. The second tab opens the
	// session's address directly: after logging in it is on that page.
	t.Run("TakeBackAndReset", func(t *testing.T) {
		s := startDemoSession(t, api, "two tabs", "demo")
		first := p(t)
		first.open(node.URL() + "/ui/sessions/" + s.ID)
		first.find("region", "Terminal")
		pid := first.termPID("first")

		tab, cancel := chromedp.NewContext(ctx)
		defer cancel()
		// The first Run opens the tab, and cancelling its context would close it.
		if err := chromedp.Run(tab); err != nil {
			t.Fatal(err)
		}
		acceptDialogs(tab)
		scripts.watch(tab)
		second := page{t: t, ctx: tab}
		second.run("open the session in a second tab", chromedp.Navigate(node.URL()+"/ui/sessions/"+s.ID))
		second.login() // a new tab has its own sessionStorage
		second.find("region", "Terminal")
		if got := second.sessionOnPage(); got != s.ID {
			t.Fatalf("after logging in the second tab shows %s, want the session %s", got, s.ID)
		}
		second.waitText(".xterm-rows", "first-"+pid) // the same screen, replayed
		first.waitText(".term-notice", "This terminal was opened elsewhere.")
		first.click("button", "Take back")
		second.waitText(".term-notice", "This terminal was opened elsewhere.")
		second.find("button", "Take back")
		if got := first.termPID("back"); got != pid {
			t.Fatalf("shell pid %s after Take back, want %s", got, pid)
		}

		first.click("button", "Reset terminal")
		testkit. // confirmed by acceptDialogs
				WaitFor(t, 30*time.Second, "a clean screen after the reset", testkit.Cond(func() bool {
				return !strings.Contains(first.text(".xterm-rows"), "back-"+pid)
			}))
		reset := first.termPID("reset")
		if reset == pid {
			t.Fatalf("shell pid %s after Reset terminal, want a new shell", reset)
		}

		// The shell exits: the panel says so; Reset terminal starts another.
		first.termType("exit 3")
		first.waitText(".term-notice", "Shell exited (code 3)")
		first.click("button", "Reset terminal")
		if got := first.termPID("again"); got == reset || got == pid {
			t.Fatalf("shell pid %s after the exit and a reset, want a new shell", got)
		}
	})

	// A pty agent's own terminal is a tab of its own, beside the shell; "New
	// shell" opens another shell, a separate process.
	t.Run("AgentTerminalAndShellTabs", func(t *testing.T) {
		s := startDemoSession(t, api, "pty agent", "demo-tty")
		p := p(t)
		p.open(node.URL() + "/ui/sessions/" + s.ID)
		// The page opens on the agent's own terminal.
		p.find("region", "Terminal agent")
		p.waitText(`[aria-label="Terminal agent"] .xterm-rows`, "demo>")
		p.click("tab", "Shell")
		p.find("region", "Terminal")
		shell := p.termPID("main")
		p.click("tab", "Agent")
		p.find("region", "Terminal agent")
		p.click("button", "New shell")
		p.find("region", "Terminal shell-2")
		var other string
		testkit.WaitFor(t, 30*time.Second, "the second shell's prompt", testkit.Cond(func() bool {
			return strings.TrimSpace(p.text(`[aria-label="Terminal shell-2"] .xterm-rows`)) != ""
		}))
		p.termTypeIn(`[aria-label="Terminal shell-2"]`, "echo second-$$")
		testkit.WaitFor(t, 30*time.Second, "the second shell's pid", testkit.Cond(func() bool {
			m := regexp.MustCompile(`second-(\d+)`).FindStringSubmatch(p.text(`[aria-label="Terminal shell-2"] .xterm-rows`))
			if m != nil {
				other = m[1]
			}
			return m != nil
		}))
		if other == shell {
			t.Fatalf("New shell opened the same shell (pid %s)", shell)
		}
	})

	// The files panel lists the workspace and shows a file; the git panel
	// shows the status and the diff.
	t.Run("FilesAndGit", func(t *testing.T) {
		s := startDemoSession(t, api, "files", "demo")
		p := p(t)
		p.open(node.URL() + "/ui/sessions/" + s.ID)
		p.find("region", "Terminal")
		p.termType("mkdir -p src && printf 'one\\n' > src/notes.txt && git init -q && git add src && printf 'two\\n' >> src/notes.txt && echo made-$((1+1))")
		p.waitText(".xterm-rows", "made-2")
		p.click("tab", "Files")
		p.find("region", "Files")
		p.click("treeitem", "src")
		p.click("treeitem", "notes.txt")
		p.waitText("pre.viewer", "one\ntwo")
		p.click("tab", "Git")
		p.waitText("ul.changes", "src/notes.txt")
		p.waitText("pre.diff", "+two")
		p.click("tab", "Shell")
		p.find("region", "Terminal")
	})

	// A session of an agent that cannot resume, stopped: the banner (a live
	// region carrying the server's resume_message) and "New session", which
	// starts a new session of the same agent.
	t.Run("NonResumableBanner", func(t *testing.T) {
		s := startDemoSession(t, api, "no resume", "demo-noresume")
		p := p(t)
		p.open(node.URL() + "/ui/sessions/" + s.ID)
		p.find("region", "Terminal")
		p.click("button", "Stop session")
		waitState(t, api, s.ID, wire.SessionStopped)
		st, err := api.SessionStatus(testCtx(t), s.ID)
		if err != nil || st.ResumeMessage == nil {
			t.Fatalf("status of the stopped session: %+v %v", st, err)
		}
		// The banner says it once: the server's resume_message.
		p.waitText(".banner[role=status]:not([hidden])", *st.ResumeMessage)
		if got := strings.TrimSpace(p.text(".banner[role=status]")); got != *st.ResumeMessage {
			t.Fatalf("the banner says %q, want the resume message %q once", got, *st.ResumeMessage)
		}
		if n := len(p.query("button", "Resume session")); n != 0 {
			t.Fatal("a session that cannot resume offers Resume session")
		}
		p.screenshot("not-resumable.png")
		p.click("button", "New session")
		testkit.WaitFor(t, 30*time.Second, "the new session's page", testkit.Cond(func() bool {
			return !strings.HasSuffix(p.location(), s.ID)
		}))
		p.find("region", "Terminal")
		ns, err := api.GetSession(testCtx(t), p.sessionOnPage())
		if err != nil || ns.Agent != "demo-noresume" || ns.TaskID != s.TaskID {
			t.Fatalf("the new session: %+v %v, want demo-noresume in task %s", ns, err, s.TaskID)
		}

		// The task list closes the task.
		p.open(node.URL() + "/ui/")
		p.click("button", "Close no resume")
		p.waitText(fmt.Sprintf(`li[data-task=%q]`, s.TaskID), "Done")
		if task, err := api.GetTask(testCtx(t), s.TaskID); err != nil || task.State != wire.TaskDone {
			t.Fatalf("the closed task: %+v %v", task, err)
		}
	})

	// With the Auto-resume toggle on, a page whose session stopped resumes
	// it by itself; the toggle is kept for the next page.
	t.Run("AutoResumeToggle", func(t *testing.T) {
		s := startDemoSession(t, api, "auto", "demo")
		promptAndWait(t, api, s.ID, "remember figs")
		p := p(t)
		p.open(node.URL() + "/ui/sessions/" + s.ID)
		p.find("region", "Terminal")
		p.click("checkbox", "Auto-resume")
		// Off again for the tests after this one even when this one fails
		// (a page left resuming by itself hides their error badges).
		t.Cleanup(func() {
			p.run("turn auto-resume off", chromedp.Evaluate(`localStorage.setItem("paddock.autoResume", "0")`, nil))
		})
		before, err := api.SessionStatus(testCtx(t), s.ID)
		if err != nil || before.AgentExecutionID == nil {
			t.Fatalf("status: %+v %v", before, err)
		}
		if _, err := api.Stop(testCtx(t), s.ID); err != nil {
			t.Fatal(err)
		}
		// A new agent execution: the page resumed the session.
		testkit.WaitFor(t, 60*time.Second, "the page to resume the stopped session", testkit.Cond(func() bool {
			st, err := api.SessionStatus(testCtx(t), s.ID)
			return err == nil && st.IsAgentRunning && st.State == wire.SessionWaitingForInput &&
				st.AgentExecutionID != nil && *st.AgentExecutionID != *before.AgentExecutionID
		}))
		p.fill("textbox", "Prompt", "recall")
		p.click("button", "Send")
		p.waitText("ol.messages", "you asked me to remember: figs")
		p.click("checkbox", "Auto-resume") // off again, for the tests after this one
		var on string
		p.run("read the toggle", chromedp.Evaluate(`localStorage.getItem("paddock.autoResume")`, &on))
		if on != "0" {
			t.Fatalf("the toggle stored %q, want 0 once turned off", on)
		}
	})

	// The terminal's size follows its panel: a smaller window, a smaller tty.
	t.Run("TerminalSizeFollowsPanel", func(t *testing.T) {
		s := startDemoSession(t, api, "size", "demo")
		p := p(t)
		p.open(node.URL() + "/ui/sessions/" + s.ID)
		p.find("region", "Terminal")
		size := func(mark string) (rows, cols int) {
			p.termType("echo " + mark + "-$(stty size | tr ' ' x)")
			re := regexp.MustCompile(mark + `-(\d+)x(\d+)`)
			p.waitText(".xterm-rows", mark+"-")
			testkit.WaitFor(t, 30*time.Second, "the tty size", testkit.Cond(func() bool {
				m := re.FindStringSubmatch(p.text(".xterm-rows"))
				if m != nil {
					rows, _ = strconv.Atoi(m[1])
					cols, _ = strconv.Atoi(m[2])
				}
				return m != nil
			}))
			return rows, cols
		}
		r1, c1 := size("big")
		p.run("shrink the window", chromedp.EmulateViewport(1100, 650))
		defer p.run("restore the window", chromedp.EmulateViewport(1400, 900))
		var r2, c2 int
		testkit.WaitFor(t, 30*time.Second, "the tty to shrink with the panel", testkit.Cond(func() bool {
			r2, c2 = size(fmt.Sprintf("small%d", time.Now().UnixNano()%1000))
			return r2 < r1 && c2 < c1
		}))
		t.Logf("tty %dx%d in the large window, %dx%d in the small one", r1, c1, r2, c2)
	})

	// agentctl dies: with auto-resume off the session is ERROR; the error
	// badge (an alert carrying error_message) offers Retry, which resumes it.
	t.Run("ErrorBadgeRetry", func(t *testing.T) {
		s := startDemoSession(t, api, "errors", "demo")
		promptAndWait(t, api, s.ID, "remember pears")
		p := p(t)
		p.open(node.URL() + "/ui/sessions/" + s.ID)
		p.find("region", "Terminal")
		killPID(t, agentctlPID(t, api, s.ID))
		failed := waitState(t, api, s.ID, wire.SessionError)
		p.waitText("[role=alert]:not([hidden])", failed.ErrorMessage)
		p.click("button", "Retry")
		testkit.WaitFor(t, 60*time.Second, "the session to run again", testkit.Cond(func() bool {
			st, err := api.SessionStatus(testCtx(t), s.ID)
			return err == nil && st.IsAgentRunning && st.State == wire.SessionWaitingForInput
		}))
		testkit.WaitFor(t, 30*time.Second, "the error badge to go", testkit.Cond(func() bool { return p.text("[role=alert]:not([hidden])") == "" }))
		p.find("region", "Terminal")
		p.fill("textbox", "Prompt", "recall")
		p.click("button", "Send")
		p.waitText("ol.messages", "you asked me to remember: pears")
	})
}
