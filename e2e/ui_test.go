package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/accessibility"
	"github.com/chromedp/cdproto/dom"
	"github.com/chromedp/cdproto/input"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/supervisor/state"
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
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() { cancel(); cancelAlloc() })
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
	if err := chromedp.Run(ctx, actions...); err != nil {
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
	waitFor(p.t, 60*time.Second, fmt.Sprintf("a %s named %q", role, name), func() bool {
		if found := p.query(role, name); len(found) > 0 {
			n = found[0]
			return true
		}
		return false
	})
	return n
}

// click clicks the middle of a control with the mouse.
func (p page) click(role, name string) {
	p.t.Helper()
	n := p.find(role, name)
	p.run(fmt.Sprintf("click %s %q", role, name), chromedp.ActionFunc(func(ctx context.Context) error {
		if err := dom.ScrollIntoViewIfNeeded().WithBackendNodeID(n.BackendDOMNodeID).Do(ctx); err != nil {
			return err
		}
		box, err := dom.GetBoxModel().WithBackendNodeID(n.BackendDOMNodeID).Do(ctx)
		if err != nil {
			return err
		}
		q := box.Content
		return chromedp.MouseClickXY((q[0]+q[4])/2, (q[1]+q[5])/2).Do(ctx)
	}))
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
			p.screenshot("failure.png")
			p.t.Fatalf("timed out waiting for %q in %s, which holds %q", want, sel, p.text(sel))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (p page) screenshot(name string) {
	p.t.Helper()
	var png []byte
	p.run("screenshot", chromedp.FullScreenshot(&png, 100))
	path := filepath.Join(p.t.TempDir(), name)
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
	var box []float64
	p.run("find the terminal screen", chromedp.Evaluate(`(() => { const r = document.querySelector(".term-screen").getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()`, &box))
	p.run("focus the terminal", chromedp.MouseClickXY(box[0], box[1]))
	p.run("type into the terminal", input.InsertText(line), chromedp.KeyEvent("\r"))
}

// TestWebUISessionPromptAndTerminal is the web UI as a person uses it: log in,
// create a task and a demo session, prompt and see the reply, use the
// terminal, reload and see it replayed, stop and resume the session.
func TestWebUISessionPromptAndTerminal(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	ctx := browser(t)
	// A plain shell: a login shell runs the machine's profile, which can take long.
	cfg := standaloneConfig(t) + fmt.Sprintf("acl {\n  token = %q\n}\nterminal {\n  shell = [\"/bin/sh\"]\n}\n", uiToken)
	node := startCluster(t, 1, false, cfg).Nodes[0]
	api, err := client.New(node.URL(), uiToken)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the node to lead", func() bool {
		h, err := api.Health(testCtx(t))
		return err == nil && h.Leader
	})
	p := page{t: t, ctx: ctx}

	// / redirects to the UI; the API's 401 asks for the token.
	p.run("open the UI", chromedp.Navigate(node.URL()+"/"))
	p.fill("textbox", "Token", uiToken) // a password field, named by its label
	var inputType, url string
	p.run("read the token field", chromedp.Evaluate(`document.activeElement.type`, &inputType), chromedp.Evaluate(`location.href`, &url))
	if inputType != "password" || !strings.HasSuffix(url, "/ui/") {
		t.Fatalf("token field type %q at %s, want a password field at /ui/", inputType, url)
	}
	p.click("button", "Log in")

	// Create a task and open it.
	p.fill("textbox", "Title", "ui walkthrough")
	p.click("button", "Create task")
	p.click("link", "ui walkthrough")

	// A demo session on the standalone runtime.
	p.choose("Agent", "demo")
	p.choose("Runtime", "standalone")
	p.click("button", "New session")
	p.find("region", "Terminal") // shown once the executor is ready
	p.run("read the session URL", chromedp.Evaluate(`location.href`, &url))
	m := regexp.MustCompile(`/ui/sessions/([^/]+)$`).FindStringSubmatch(url)
	if m == nil {
		t.Fatalf("session page at %s", url)
	}
	sessionID := m[1]
	for _, name := range []string{"Send", "Cancel turn", "Reset terminal"} {
		p.find("button", name)
	}

	// A prompt's reply streams into the transcript.
	p.fill("textbox", "Prompt", "remember apples")
	p.click("button", "Send")
	p.waitText("ol.messages", "ok, remembering apples")

	// The terminal: type a command, see its output.
	p.termType("echo hi-$((6*7)) pid-$$")
	p.waitText(".xterm-rows", "hi-42 pid-")
	pid := regexp.MustCompile(`hi-42 pid-(\d+)`).FindStringSubmatch(p.text(".xterm-rows"))
	if pid == nil {
		t.Fatalf("no pid on the screen: %q", p.text(".xterm-rows"))
	}
	p.screenshot("session.png")

	// Reload: the page comes back to the same session (the token is kept for
	// the tab), the screen is replayed and the shell is the same one.
	p.run("reload", chromedp.Reload())
	p.find("region", "Terminal")
	p.waitText(".xterm-rows", "hi-42 pid-"+pid[1])
	p.waitText("ol.messages", "ok, remembering apples")
	if n := len(p.query("textbox", "Token")); n != 0 {
		t.Fatal("the page asked for the token again after a reload")
	}
	p.termType("echo again-$$")
	p.waitText(".xterm-rows", "again-"+pid[1])
	p.screenshot("session-reloaded.png")

	// Stop: the page offers "Resume session"; resuming keeps the conversation.
	if _, err := api.Stop(testCtx(t), sessionID); err != nil {
		t.Fatal(err)
	}
	waitState(t, api, sessionID, state.SessionStopped)
	p.click("button", "Resume session")
	waitState(t, api, sessionID, state.SessionWaitingForInput)
	p.fill("textbox", "Prompt", "recall")
	p.click("button", "Send")
	p.waitText("ol.messages", "you asked me to remember: apples")
}
