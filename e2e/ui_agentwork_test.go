package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/paddockhq/paddock/shared/testkit"
)

// TestUIAgentWork is the agent's work as a person supervises it in the web
// UI, in headless Chromium against a real server with the demo agent
// (permission = "ask", the default): the demo agent's "work notes.txt"
// shows its plan as a checklist, a thought, its edit as a diff, and asks
// to run wc -l; the session, its row in the task's session list and its
// task in the task list say "Needs approval" (and a tab in the background
// counts the request in its title); "Allow once" answers it, the command
// runs and its terminal opens read-only. Agent text is Markdown without
// raw HTML. The slash commands and modes the agent announced are offered
// beside the prompt.
func TestUIAgentWork(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	ctx := browser(t)
	acceptDialogs(ctx)
	c, api := uiNode(t, 1, false)
	node := c.Nodes[0].URL()
	var scripts scriptErrors
	scripts.watch(ctx)
	t.Cleanup(func() {
		if errs := scripts.list(); len(errs) > 0 {
			t.Errorf("the pages had script errors or refused content:\n%s", strings.Join(errs, "\n"))
		}
	})

	s := startDemoSession(t, api, "agent work", "demo")
	if err := api.WriteFile(testCtx(t), s.ID, "notes.txt", strings.NewReader("first line\nsecond line\n")); err != nil {
		t.Fatal(err)
	}
	p := page{t: t, ctx: ctx}
	t.Cleanup(func() {
		if t.Failed() {
			p.screenshot("agent-work-failure.png")
		}
	})
	p.open(node + "/ui/sessions/" + s.ID)
	p.find("region", "Terminal") // the executor is ready

	// The commands the agent announced are offered when the prompt starts
	// with "/": Tab completes the one chosen.
	p.fill("textbox", "Prompt", "/wo")
	p.waitText(`ul.commands li[data-command="work"]`, "/work")
	p.run("complete the command", chromedp.KeyEvent(kb.Tab))
	var value string
	p.run("read the prompt", chromedp.Evaluate(`document.getElementById("prompt").value`, &value))
	if value != "/work " {
		t.Fatalf("Tab on /wo made the prompt %q, want %q", value, "/work ")
	}
	p.run("clear the prompt", chromedp.Evaluate(`(() => { const el = document.getElementById("prompt"); el.value = ""; el.dispatchEvent(new Event("input")); return 0; })()`, nil))

	p.fill("textbox", "Prompt", "work notes.txt")
	p.click("button", "Send")

	// The plan as a checklist, the thought folded, the edit as a diff with
	// the added line marked.
	p.find("list", "Plan")
	p.find("checkbox", "Read notes.txt")
	p.find("checkbox", "Append a line to notes.txt")
	p.waitText("li.msg.thought details > summary", "Thought")
	p.waitText(".udiff-line.add", "+edited by paddock-demo-agent (turn 1)")
	if sign := p.text(".udiff-line.add .sign"); sign != "+" {
		t.Fatalf("the added line is marked %q, want +", sign)
	}
	p.waitText(".udiff-line.hunk", "@@ -1,2 +1,3 @@")

	// The permission request: a card with the agent's options, and the
	// session says it needs approval.
	p.find("group", "Run: wc -l notes.txt")
	p.find("button", "Allow once")
	p.find("button", "Reject")
	waitVisible(p, "h1 .needs-approval", true)
	p.waitText("h1", "Needs approval")
	p.screenshot("agent-work-permission.png")

	// A second tab: the task's session list and the task list say so too,
	// and the first tab, now in the background, counts the request in its
	// title.
	tab, cancel := chromedp.NewContext(ctx)
	defer cancel()
	if err := chromedp.Run(tab); err != nil {
		t.Fatal(err)
	}
	scripts.watch(tab)
	second := page{t: t, ctx: tab}
	second.open(node + "/ui/tasks/" + s.TaskID)
	second.waitText(fmt.Sprintf(`li[data-session=%q]`, s.ID), "Needs approval")
	backgroundTitle(t, ctx, "(1) Paddock")
	second.open(node + "/ui/")
	second.waitText(fmt.Sprintf(`li[data-task=%q]`, s.TaskID), "Needs approval")

	// Allow once: the command runs, the tool call completes, the agent's
	// last line names the option, and every badge goes.
	p.click("button", "Allow once")
	testkit.WaitFor(t, 60*time.Second, "the run tool call to complete", testkit.Cond(func() bool {
		var status string
		p.run("read the tool call", chromedp.Evaluate(`document.querySelector('[data-tool-call="work-1-run"]')?.dataset.status ?? ""`, &status))
		return status == "completed"
	}))
	p.waitText(`[data-tool-call="work-1-run"] .tool-status`, "completed")
	waitLastAgent(p, "command allowed (allow_once)")
	p.waitText(`[data-tool-call="work-1-run"] .perm-note`, "Permission answered: Allow once (allow_once) by user")
	waitVisible(p, "h1 .needs-approval", false)
	if n := len(p.query("button", "Allow once")); n != 0 {
		t.Fatal("the answered request still offers Allow once")
	}
	testkit.WaitFor(t, 30*time.Second, "the task list's badge to go", testkit.Cond(func() bool {
		return !strings.Contains(second.text(fmt.Sprintf(`li[data-task=%q]`, s.TaskID)), "Needs approval")
	}))
	var title string
	p.run("read the title", chromedp.Evaluate(`document.title`, &title))
	if title != "Paddock" {
		t.Fatalf("the title is %q once nothing waits, want Paddock", title)
	}

	// The command's terminal opens read-only and shows wc's output.
	p.click("button", "Open terminal cmd-1")
	p.find("region", "Terminal cmd-1")
	p.waitText(`[aria-label="Terminal cmd-1"] .xterm-rows`, "3 ")
	p.waitText(`[aria-label="Terminal cmd-1"] .xterm-rows`, "notes.txt")
	p.waitText(`[aria-label="Terminal cmd-1"] .term-bar`, "read-only")
	if n := len(p.query("button", "Reset terminal")); n > 0 {
		t.Fatal("the command's terminal offers Reset terminal")
	}

	// A location of a tool call opens the file in the Files panel.
	p.click("button", "Open notes.txt")
	p.waitText("pre.viewer", "first line\nsecond line\nedited by paddock-demo-agent (turn 1)")
	p.screenshot("agent-work.png")

	// Agent text is Markdown: **bold** is <strong>; raw HTML is text.
	p.fill("textbox", "Prompt", `say **bold** <script>window.pwned=1</script> <img src=x onerror="window.pwned=2">`)
	p.click("button", "Send")
	waitLastAgent(p, `say bold <script>window.pwned=1</script> <img src=x onerror="window.pwned=2">`)
	var strong string
	p.run("read the reply's emphasis", chromedp.Evaluate(`[...document.querySelectorAll("ol.messages li.msg.agent")].pop()?.querySelector("strong")?.textContent ?? ""`, &strong))
	if strong != "bold" {
		t.Fatalf("the reply's **bold** is <strong>%s</strong>, want bold", strong)
	}
	var injected bool
	p.run("look for injected HTML", chromedp.Evaluate(`!!document.querySelector("ol.messages script, ol.messages img") || window.pwned !== undefined`, &injected))
	if injected {
		t.Fatal("raw HTML in the agent's text became HTML")
	}

	// The Mode select switches the agent's mode.
	p.choose("Mode", "plan")
	testkit.WaitFor(t, 30*time.Second, "the agent's mode to be plan", testkit.Cond(func() bool {
		st, err := api.SessionStatus(testCtx(t), s.ID)
		return err == nil && st.Modes != nil && st.Modes.CurrentModeID == "plan"
	}))
}

// waitLastAgent waits until the transcript's last agent message holds want.
func waitLastAgent(p page, want string) {
	p.t.Helper()
	var got string
	testkit.WaitFor(p.t, 60*time.Second, fmt.Sprintf("an agent message with %q", want), testkit.Cond(func() bool {
		p.run("read the last agent message", chromedp.Evaluate(`[...document.querySelectorAll("ol.messages li.msg.agent")].pop()?.textContent ?? ""`, &got))
		return strings.Contains(got, want)
	}))
}

// waitVisible waits until the element sel is shown (or hidden).
func waitVisible(p page, sel string, shown bool) {
	p.t.Helper()
	js := fmt.Sprintf(`(() => { const el = document.querySelector(%q); return !!el && !el.hidden && el.getClientRects().length > 0; })()`, sel)
	testkit.WaitFor(p.t, 60*time.Second, fmt.Sprintf("%s to be shown=%v", sel, shown), testkit.Cond(func() bool {
		var ok bool
		p.run("look at "+sel, chromedp.Evaluate(js, &ok))
		return ok == shown
	}))
}

// backgroundTitle waits for the tab ctx, which another tab has put in the
// background, to be hidden and to show want as its title. It reads the
// tab without bringing it to the front.
func backgroundTitle(t *testing.T, ctx context.Context, want string) {
	t.Helper()
	var hidden bool
	var title string
	testkit.WaitFor(t, 30*time.Second, fmt.Sprintf("the background tab's title %q", want), testkit.Cond(func() bool {
		c, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := chromedp.Run(c, chromedp.Evaluate(`document.hidden`, &hidden), chromedp.Evaluate(`document.title`, &title)); err != nil {
			t.Fatalf("read the background tab: %v", err)
		}
		return hidden && title == want
	}))
}
