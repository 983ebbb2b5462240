package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	wire "github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/shared/testkit"
)

// statusPatch makes every page of the tab read session statuses with the
// fields of sessionStorage's "test.statusPatch" (JSON) laid over them, so a
// page can be shown a resume reason the server gives only in rare cases.
const statusPatch = `(() => {
	const real = window.fetch.bind(window);
	window.fetch = async (input, init) => {
		const resp = await real(input, init);
		const patch = sessionStorage.getItem("test.statusPatch");
		if (!patch || !String(input).endsWith("/status") || !resp.ok) return resp;
		const body = Object.assign(await resp.json(), JSON.parse(patch));
		return new Response(JSON.stringify(body), {status: resp.status, headers: resp.headers});
	};
})();`

// TestWebUIFaces is the second new-user trial of the web UI ("the faces,
// round two"), in headless Chromium against a real server process: the
// banner says things once, controls that cannot act are disabled and say
// why, the header shows the connection and marks what is stale, cancelled
// turns are marked, entries carry their time and states read as words, a
// pty session opens on its agent, tasks and sessions can be deleted, and a
// fresh terminal shows its prompt. The server is stopped and started again
// in the last subtest.
func TestWebUIFaces(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	ctx := browser(t)
	acceptDialogs(ctx)
	if err := chromedp.Run(ctx, chromedp.ActionFunc(func(ctx context.Context) error {
		_, err := cdppage.AddScriptToEvaluateOnNewDocument(statusPatch).Do(ctx)
		return err
	})); err != nil {
		t.Fatal(err)
	}
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
	eval := func(p page, js string, v any) { p.run("evaluate "+js, chromedp.Evaluate(js, v)) }
	attr := func(p page, sel, name string) string {
		var s string
		eval(p, fmt.Sprintf(`document.querySelector(%q)?.getAttribute(%q) ?? ""`, sel, name), &s)
		return s
	}
	disabled := func(p page, sel string) bool {
		var d bool
		eval(p, fmt.Sprintf(`!!document.querySelector(%q)?.disabled`, sel), &d)
		return d
	}

	// A fresh terminal shows its shell's prompt before any key is pressed.
	t.Run("FreshTerminalShowsPrompt", func(t *testing.T) {
		task, err := api.CreateTask(testCtx(t), wire.CreateTaskRequest{Title: "fresh prompt"})
		if err != nil {
			t.Fatal(err)
		}
		p := p(t)
		p.open(node.URL() + "/ui/tasks/" + task.ID)
		p.choose("Agent", "demo")
		p.choose("Runtime", "standalone")
		p.click("button", "New session")
		p.find("region", "Terminal")
		testkit.WaitFor(t, 15*time.Second, "the shell's prompt without a key pressed", testkit.Cond(func() bool {
			return strings.TrimSpace(p.text(`[aria-label="Terminal"] .xterm-rows`)) != ""
		}))
		if n := p.text(`[aria-label="Terminal"] .term-notice`); n != "" {
			t.Fatalf("the terminal's notice is %q once its prompt is shown, want none", n)
		}
	})

	// Entries carry their time (relative, the full time in the title),
	// states read as words; Send is enabled while the agent waits.
	t.Run("TimestampsAndStateLabels", func(t *testing.T) {
		s := startDemoSession(t, api, "labels", "demo")
		promptAndWait(t, api, s.ID, "remember kiwis")
		p := p(t)
		p.open(node.URL() + "/ui/sessions/" + s.ID)
		p.waitText("ol.messages", "ok, remembering kiwis")
		p.waitText("dl.status", "Waiting for input")
		p.waitText("dl.status", "Ready")
		if h := p.text("dl.status"); strings.Contains(h, "WAITING_FOR_INPUT") || strings.Contains(h, "ready ") {
			t.Fatalf("the header shows raw states: %q", h)
		}
		var times []struct {
			Text, DateTime, Title string
		}
		eval(p, `[...document.querySelectorAll("ol.messages li.msg")].map(li => { const t = li.querySelector("time"); return {Text: t?.textContent ?? "", DateTime: t?.dateTime ?? "", Title: t?.title ?? ""}; })`, &times)
		if len(times) < 2 {
			t.Fatalf("%d messages shown, want the prompt and the reply", len(times))
		}
		for i, tm := range times {
			if tm.Text != "just now" || tm.DateTime == "" || tm.Title == "" {
				t.Fatalf("message %d's time is %+v, want \"just now\" with its full time in datetime and title", i, tm)
			}
			if _, err := time.Parse(time.RFC3339, tm.DateTime); err != nil {
				t.Fatalf("message %d's datetime %q: %v", i, tm.DateTime, err)
			}
		}
		if disabled(p, "form.prompt button[type=submit]") || !disabled(p, "form.prompt .row button[type=button]") {
			t.Fatal("while the agent waits for input, want Send enabled and Cancel turn disabled")
		}
		if why := attr(p, "form.prompt .row button[type=button]", "title"); why == "" {
			t.Fatal("Cancel turn is disabled without a reason in its title")
		}
		// The task's list shows states as words too.
		p.click("link", "Task")
		p.waitText(fmt.Sprintf(`li[data-session=%q]`, s.ID), "Waiting for input")
		p.waitText(fmt.Sprintf(`li[data-session=%q] time`, s.ID), "just now")
		if title := attr(p, fmt.Sprintf(`li[data-session=%q] time`, s.ID), "title"); title == "" {
			t.Fatal("the session's time has no full time in its title")
		}
	})

	// A cancelled turn is marked in the conversation: its messages, and a
	// line at its end.
	t.Run("CancelledTurnMarked", func(t *testing.T) {
		s := startDemoSession(t, api, "cancel", "demo-slow")
		p := p(t)
		p.open(node.URL() + "/ui/sessions/" + s.ID)
		p.find("region", "Terminal")
		p.fill("textbox", "Prompt", "remember a very long list of things to say slowly: apples pears plums figs kiwis")
		p.click("button", "Send")
		waitState(t, api, s.ID, wire.SessionRunning)
		if !disabled(p, "form.prompt button[type=submit]") {
			testkit.WaitFor(t, 10*time.Second, "Send to be disabled while the turn runs", testkit.Cond(func() bool { return disabled(p, "form.prompt button[type=submit]") }))
		}
		p.click("button", "Cancel turn")
		waitState(t, api, s.ID, wire.SessionWaitingForInput)
		p.waitText("ol.messages li.turn-end-note", "Turn cancelled")
		var marked []string
		eval(p, `[...document.querySelectorAll("ol.messages li.msg")].map(li => li.dataset.turnOutcome ?? "")`, &marked)
		if len(marked) == 0 || marked[0] != "cancelled" {
			t.Fatalf("the cancelled turn's messages are marked %q, want cancelled", marked)
		}
		st, err := api.SessionStatus(testCtx(t), s.ID)
		if err != nil || st.LastTurnOutcome == nil || string(*st.LastTurnOutcome) != "cancelled" {
			t.Fatalf("status %+v %v, want last_turn_outcome cancelled", st, err)
		}
		// The next turn completes and is not marked; the cancelled one stays.
		p.fill("textbox", "Prompt", "recall")
		p.click("button", "Send")
		p.waitText("ol.messages", "you asked me to remember")
		waitState(t, api, s.ID, wire.SessionWaitingForInput)
		time.Sleep(300 * time.Millisecond)
		eval(p, `[...document.querySelectorAll("ol.messages li.msg")].map(li => li.dataset.turnOutcome ?? "")`, &marked)
		if marked[0] != "cancelled" || marked[len(marked)-1] != "" {
			t.Fatalf("after a completed turn the marks are %q, want the first turn cancelled and the last unmarked", marked)
		}
		if n := strings.Count(p.text("ol.messages"), "Turn cancelled"); n != 1 {
			t.Fatalf("the conversation says Turn cancelled %d times, want once", n)
		}
	})

	// A stopped session of an agent that cannot resume: the banner says it
	// once; Send and Cancel are disabled and say why; New session is offered.
	// Reasons the server gives rarely (faked here): missing_resume_token
	// offers New session too; workspace_missing disables Resume and Retry
	// with the server's message.
	t.Run("StoppedSessionControls", func(t *testing.T) {
		s := startDemoSession(t, api, "stopped controls", "demo-noresume")
		p := p(t)
		p.open(node.URL() + "/ui/sessions/" + s.ID)
		p.find("region", "Terminal")
		p.click("button", "Stop session")
		waitState(t, api, s.ID, wire.SessionStopped)
		st, err := api.SessionStatus(testCtx(t), s.ID)
		if err != nil || st.ResumeMessage == nil {
			t.Fatalf("status of the stopped session: %+v %v", st, err)
		}
		p.waitText(".banner[role=status]:not([hidden])", *st.ResumeMessage)
		banner := strings.TrimSpace(p.text(".banner[role=status]"))
		for _, sentence := range strings.SplitAfter(banner, ".") {
			if sentence = strings.TrimSpace(sentence); sentence != "" && strings.Count(banner, sentence) > 1 {
				t.Fatalf("the banner says %q more than once: %q", sentence, banner)
			}
		}
		if strings.Contains(banner, "support resuming") {
			t.Fatalf("the banner says its own sentence beside the server's: %q", banner)
		}
		p.find("button", "New session")
		p.waitText("dl.status", "Stopped")
		testkit.WaitFor(t, 10*time.Second, "Send and Cancel turn to be disabled", testkit.Cond(func() bool {
			return disabled(p, "form.prompt button[type=submit]") && disabled(p, "form.prompt .row button[type=button]")
		}))
		if why := attr(p, "form.prompt button[type=submit]", "title"); why == "" {
			t.Fatal("Send is disabled without a reason in its title")
		}
		if by := attr(p, "form.prompt button[type=submit]", "aria-describedby"); by == "" || p.text("#"+by) == "" {
			t.Fatalf("Send is described by %q, which says %q; want the reason", by, p.text("#"+by))
		}
		if n := len(p.query("button", "Stop session")); n != 0 {
			t.Fatal("a stopped session offers Stop session")
		}

		// missing_resume_token: New session is offered too.
		s2 := startDemoSession(t, api, "no token", "demo")
		if _, err := api.Stop(testCtx(t), s2.ID); err != nil {
			t.Fatal(err)
		}
		waitState(t, api, s2.ID, wire.SessionStopped)
		p.run("fake missing_resume_token", chromedp.Evaluate(`sessionStorage.setItem("test.statusPatch", JSON.stringify({resume_reason: "missing_resume_token", resume_message: "This session has no conversation to resume. Create a new session.", is_resumable: false, needs_resume: false})); 0`, nil))
		defer p.run("stop faking", chromedp.Evaluate(`sessionStorage.removeItem("test.statusPatch"); 0`, nil))
		p.open(node.URL() + "/ui/sessions/" + s2.ID)
		p.find("button", "New session")
		p.waitText(".banner[role=status]:not([hidden])", "This session has no conversation to resume.")

		// workspace_missing: Resume and Retry are shown disabled, with the
		// server's message as the reason.
		const gone = "The session's workspace is gone. Create a new task or session."
		p.run("fake workspace_missing", chromedp.Evaluate(fmt.Sprintf(`sessionStorage.setItem("test.statusPatch", JSON.stringify({resume_reason: "workspace_missing", resume_message: %q, is_resumable: true, needs_resume: true})); 0`, gone), nil))
		p.open(node.URL() + "/ui/sessions/" + s2.ID)
		n := p.find("button", "Resume session")
		if !axDisabled(n) {
			t.Fatal("Resume session is enabled although the workspace is gone")
		}
		var titles []string
		eval(p, `[...document.querySelectorAll("button")].filter(b => b.textContent === "Resume session" || b.textContent === "Retry").map(b => b.disabled + " " + b.title)`, &titles)
		if len(titles) != 2 || titles[0] != "true "+gone || titles[1] != "true "+gone {
			t.Fatalf("Retry and Resume session: %q, want both disabled with the reason %q", titles, gone)
		}
		if by := attr(p, ".actions button:not([hidden])", "aria-describedby"); by == "" || !strings.Contains(p.text("#"+by), gone) {
			t.Fatalf("Resume session is described by %q (%q), want the reason", by, p.text("#"+by))
		}
		if n := len(p.query("button", "New session")); n != 0 {
			t.Fatal("workspace_missing offers New session")
		}
	})

	// A pty agent's session opens on its agent's terminal.
	t.Run("PtySessionOpensOnItsAgent", func(t *testing.T) {
		s := startDemoSession(t, api, "pty opens", "demo-tty")
		p := p(t)
		p.open(node.URL() + "/ui/sessions/" + s.ID)
		p.find("region", "Terminal agent")
		if sel := attr(p, "#tab-agent", "aria-selected"); sel != "true" {
			t.Fatalf("the Agent tab is aria-selected=%q, want the page to open on it", sel)
		}
		p.waitText(`[aria-label="Terminal agent"] .xterm-rows`, "demo>")
	})

	// Secondary actions look secondary; tasks close, reopen and are deleted,
	// sessions are deleted from the task's page and their own.
	t.Run("DeleteAndClose", func(t *testing.T) {
		s := startDemoSession(t, api, "to delete", "demo")
		s2, err := api.CreateSession(testCtx(t), s.TaskID, wire.CreateSessionRequest{Agent: "demo", Runtime: "standalone"})
		if err != nil {
			t.Fatal(err)
		}
		p := p(t)
		p.open(node.URL() + "/ui/sessions/" + s.ID)
		p.find("button", "Stop session")
		var bg struct{ Stop, Delete, Send string }
		eval(p, `(() => { const bg = (b) => getComputedStyle(b).backgroundColor; const bs = [...document.querySelectorAll("button")];
			const by = (name) => bg(bs.find(b => b.textContent === name));
			return {Stop: by("Stop session"), Delete: by("Delete session"), Send: by("Send")}; })()`, &bg)
		if bg.Stop == bg.Send || bg.Delete == bg.Send || !strings.Contains(attr(p, ".actions button.secondary", "class"), "secondary") {
			t.Fatalf("button backgrounds %+v: want Stop and Delete styled apart from the primary Send", bg)
		}

		// Delete session (confirmed): the page goes to its task.
		p.click("button", "Delete session")
		testkit.WaitFor(t, 30*time.Second, "the task's page after deleting the session", testkit.Cond(func() bool {
			return strings.HasSuffix(p.location(), "/ui/tasks/"+s.TaskID)
		}))
		testkit.WaitFor(t, 30*time.Second, "the session to be deleted", testkit.Cond(func() bool {
			ss, err := api.GetSession(testCtx(t), s.ID)
			return err != nil || ss.State == wire.SessionCompleted
		}))

		// Close and reopen the task from its page.
		p.click("button", "Close task")
		p.find("button", "Reopen task")
		p.waitText("h1", "Done")
		if task, err := api.GetTask(testCtx(t), s.TaskID); err != nil || task.State != wire.TaskDone {
			t.Fatalf("the closed task: %+v %v", task, err)
		}
		p.click("button", "Reopen task")
		p.find("button", "Close task")
		testkit.WaitFor(t, 30*time.Second, "the task to be reopened", testkit.Cond(func() bool {
			return !strings.Contains(p.text("h1"), "Done")
		}))
		if task, err := api.GetTask(testCtx(t), s.TaskID); err != nil || task.State == wire.TaskDone {
			t.Fatalf("the reopened task: %+v %v", task, err)
		}

		// Delete the other session from the list.
		p.click("button", "Delete session "+s2.ID[:8])
		testkit.WaitFor(t, 30*time.Second, "the listed session to be deleted", testkit.Cond(func() bool {
			ss, err := api.GetSession(testCtx(t), s2.ID)
			return err != nil || ss.State == wire.SessionCompleted
		}))

		// Delete the task: the page goes to the task list, without it.
		p.click("button", "Delete task")
		testkit.WaitFor(t, 30*time.Second, "the task list after deleting the task", testkit.Cond(func() bool {
			return strings.HasSuffix(p.location(), "/ui/")
		}))
		testkit.WaitFor(t, 30*time.Second, "the task to be gone", testkit.Cond(func() bool {
			_, err := api.GetTask(testCtx(t), s.TaskID)
			return err != nil
		}))
		p.find("button", "Create task")
		if strings.Contains(p.text("ul.tasks"), "to delete") {
			t.Fatal("the deleted task is still listed")
		}
	})

	// The server goes away: the header's indicator says Reconnecting… and
	// every field of the session's header is marked stale; back once it is.
	t.Run("ConnectionIndicator", func(t *testing.T) {
		s := startDemoSession(t, api, "outage", "demo")
		p := p(t)
		p.open(node.URL() + "/ui/sessions/" + s.ID)
		p.find("region", "Terminal")
		p.find("status", "Connected")
		p.waitText("dl.status", "Waiting for input")
		stale := func() (all, none bool) {
			var r []bool
			eval(p, `(() => { const dds = [...document.querySelectorAll("dl.status dd")];
				const st = dds.map(d => d.classList.contains("stale") && d.getAttribute("aria-describedby") === "connection");
				return [dds.length > 0 && st.every(Boolean), !st.some(Boolean) && document.querySelector("dl.status").getAttribute("aria-busy") !== "true"]; })()`, &r)
			return r[0], r[1]
		}
		if _, none := stale(); !none {
			t.Fatal("the header is marked stale while connected")
		}
		node.Kill()
		p.find("status", "Reconnecting…")
		testkit.WaitFor(t, 10*time.Second, "every header field to be marked stale", testkit.Cond(func() bool { all, _ := stale(); return all }))
		if busy := attr(p, "dl.status", "aria-busy"); busy != "true" {
			t.Fatalf("the header's aria-busy is %q while reconnecting", busy)
		}
		p.screenshot("faces-reconnecting.png")
		if err := node.Start(); err != nil {
			t.Fatal(err)
		}
		p.find("status", "Connected")
		testkit.WaitFor(t, 60*time.Second, "the header to be fresh again", testkit.Cond(func() bool { _, none := stale(); return none }))
	})
}
