package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/shared/testkit"
)

// TestChatInATerminal runs `paddock chat` in tmux against a real server: it
// shows the transcript, streams a reply chunk by chunk, cancels a running
// turn on ctrl-c and stays, sends a bracketed multi-line paste as one
// prompt, reconnects by itself across a server restart, and leaves on
// ctrl-d with exit 0 while the session keeps WAITING_FOR_INPUT; the picker
// hands an ACP session over to it.
func TestChatInATerminal(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	x := newTmux(t)
	cfg := standaloneConfig(t) + `
agent "demo-stream" {
  protocol = "acp"
  command  = ["paddock-demo-agent", "--chunk-delay", "700ms"]
}
`
	c := startCluster(t, 1, false, cfg)
	node := leaderOf(t, c)
	cl := apiClient(t, node)
	task, err := cl.CreateTask(testCtx(t), api.CreateTaskRequest{Title: "chat task"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := cl.CreateSession(testCtx(t), task.ID, api.CreateSessionRequest{Agent: "demo-stream", Runtime: "standalone"})
	if err != nil {
		t.Fatal(err)
	}
	id := s.ID
	waitState(t, cl, id, api.SessionWaitingForInput)
	if err := cl.Prompt(testCtx(t), id, "remember apple"); err != nil {
		t.Fatal(err)
	}
	waitTurnEnd(t, cl, id, 1)

	// Bad ids are refused with the server's reason.
	r := cliRunner{t: t, addr: node.URL()}
	if code, _, errOut := r.run("chat", "no-such-session"); code != 1 || !strings.Contains(errOut, "not_found") {
		t.Fatalf("chat with an unknown session: exit %d: %s", code, errOut)
	}

	paddock := filepath.Join(binDir, "paddock")
	// The window's shell survives the ctrl-c sent to its foreground group.
	x.start("chat", t.TempDir(), "trap true INT; "+paddock+" chat "+id[:8], "PADDOCK_ADDR="+node.URL(), "TERM=xterm-256color")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the chat window:\n%s", x.run("capture-pane", "-p", "-t", "chat"))
		}
	})
	x.waitScreen("chat", "Chat with session "+id, "> remember apple", "ok, remembering apple")

	// The reply streams: its first chunk shows before its last.
	x.keys("chat", "-l", "alpha beta gamma delta epsilon zeta eta theta")
	x.keys("chat", "Enter")
	testkit.WaitFor(t, 30*time.Second, "the first chunk of the reply alone", testkit.Cond(func() bool {
		for _, l := range strings.Split(x.screen("chat"), "\n") {
			if strings.HasPrefix(l, "turn 2: alpha") && !strings.Contains(l, "theta") {
				return true
			}
		}
		return false
	}))
	x.waitScreen("chat", "turn 2: alpha beta gamma delta epsilon zeta eta theta")
	waitTurnEnd(t, cl, id, 2)

	// ctrl-c cancels the running turn, not the chat.
	x.keys("chat", "-l", "sleep 30")
	x.keys("chat", "Enter")
	testkit.WaitFor(t, 30*time.Second, "the agent to get the prompt", testkit.Cond(func() bool {
		msgs, err := cl.Messages(testCtx(t), id)
		return err == nil && hasUserMessage(msgs, "sleep 30")
	}))
	start := time.Now()
	x.keys("chat", "C-c")
	x.waitScreen("chat", "[paddock] turn cancelled")
	got := waitState(t, cl, id, api.SessionWaitingForInput)
	if got.LastTurnOutcome != api.TurnCancelled || time.Since(start) > 20*time.Second {
		t.Fatalf("after ctrl-c: outcome %q after %s", got.LastTurnOutcome, time.Since(start))
	}
	x.keys("chat", "-l", "recall")
	x.keys("chat", "Enter")
	x.waitScreen("chat", "you asked me to remember: apple")
	waitTurnEnd(t, cl, id, 4)

	// A bracketed paste of two lines is one prompt.
	x.run("set-buffer", "line one\nline two")
	x.run("paste-buffer", "-p", "-t", "chat")
	x.keys("chat", "Enter")
	testkit.WaitFor(t, 30*time.Second, "the pasted prompt", testkit.Cond(func() bool {
		msgs, err := cl.Messages(testCtx(t), id)
		return err == nil && len(msgs) > 0 && hasUserMessage(msgs, "line one\nline two")
	}))
	x.waitScreen("chat", "line two")

	// The server restarts under the chat: it reconnects and goes on.
	waitTurnEnd(t, cl, id, 5)
	node.Kill()
	x.waitScreen("chat", "[paddock] connection lost; reconnecting")
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	x.waitScreen("chat", "[paddock] reconnected")
	waitState(t, cl, id, api.SessionWaitingForInput)
	x.keys("chat", "-l", "remember pear")
	x.keys("chat", "Enter")
	x.waitScreen("chat", "ok, remembering pear")
	if strings.Contains(x.screen("chat"), "> > ") {
		t.Error("the prompt marker repeats on one line")
	}

	// ctrl-d leaves with exit 0; the session keeps running.
	waitTurnEnd(t, cl, id, 6)
	x.keys("chat", "C-d")
	x.waitScreen("chat", "Left the chat; session "+id+" keeps running", "EXIT=0")
	if s, err := cl.GetSession(testCtx(t), id); err != nil || s.State != api.SessionWaitingForInput {
		t.Fatalf("after ctrl-d the session is %+v %v, want WAITING_FOR_INPUT", s, err)
	}

	// The running agent's model is in its status and the picker's rows.
	if st, err := cl.SessionStatus(testCtx(t), id); err != nil || st.Model == nil || *st.Model != "demo-1" {
		t.Fatalf("status model: %+v %v, want demo-1", st, err)
	}
	if code, out, _ := r.run("resume", "-task", task.ID, "-json"); code != 2 || !strings.Contains(out, `"model": "demo-1"`) {
		t.Fatalf("resume -json without a terminal: exit %d:\n%s", code, out)
	}

	// The picker hands an ACP session over to paddock chat.
	x.start("pick", t.TempDir(), paddock+" resume -task "+task.ID, "PADDOCK_ADDR="+node.URL(), "PADDOCK_SESSION_ID=", "TERM=xterm-256color")
	x.waitScreen("pick", "Resume a session (1)", id[:8])
	x.keys("pick", "Enter")
	x.waitScreen("pick", "Chat with session "+id, "ok, remembering pear")
	x.keys("pick", "C-d")
	x.waitScreen("pick", "EXIT=0")
}

// interruptTurn cuts a turn short: "sleep 20" is prompted, the session
// stopped while it runs and resumed, and its last turn is interrupted.
func interruptTurn(t *testing.T, cl *client.Client, id string) {
	t.Helper()
	if err := cl.Prompt(testCtx(t), id, "sleep 20"); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 30*time.Second, "the agent to get the prompt", testkit.Cond(func() bool {
		msgs, err := cl.Messages(testCtx(t), id)
		return err == nil && hasUserMessage(msgs, "sleep 20")
	}))
	if _, err := cl.Stop(testCtx(t), id); err != nil {
		t.Fatal(err)
	}
	waitState(t, cl, id, api.SessionStopped)
	if _, err := cl.Resume(testCtx(t), id); err != nil {
		t.Fatal(err)
	}
	if s := waitState(t, cl, id, api.SessionWaitingForInput); s.LastTurnOutcome != api.TurnInterrupted {
		t.Fatalf("last turn %q, want interrupted", s.LastTurnOutcome)
	}
}

// waitTurnEnd waits until the session has answered its n-th prompt.
func waitTurnEnd(t *testing.T, cl *client.Client, id string, n int) {
	t.Helper()
	testkit.WaitFor(t, 60*time.Second, fmt.Sprintf("turn %d of %s to end", n, id), testkit.Cond(func() bool {
		s, err := cl.GetSession(testCtx(t), id)
		if err != nil || s.State != api.SessionWaitingForInput {
			return false
		}
		msgs, err := cl.Messages(testCtx(t), id)
		users := 0
		for _, m := range msgs {
			if m.Role == api.RoleUser {
				users++
			}
		}
		return err == nil && users >= n
	}))
}

func hasUserMessage(msgs []api.Message, text string) bool {
	for _, m := range msgs {
		if m.Role == api.RoleUser && m.Text == text {
			return true
		}
	}
	return false
}

// TestChatAsksBeforeResendingAnInterruptedTurn: a turn cut short by a stop
// is not sent again by itself; chat asks, and sends it only on y.
func TestChatAsksBeforeResendingAnInterruptedTurn(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	x := newTmux(t)
	c := startCluster(t, 1, false, standaloneConfig(t))
	node := leaderOf(t, c)
	cl := apiClient(t, node)
	s := startDemoSession(t, cl, "interrupted", "demo")
	id := s.ID
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the chat window:\n%s", x.run("capture-pane", "-p", "-t", "ask"))
		}
	})
	paddock := filepath.Join(binDir, "paddock")
	env := []string{"PADDOCK_ADDR=" + node.URL(), "TERM=xterm-256color"}

	// n: nothing is sent.
	interruptTurn(t, cl, id)
	x.start("no", t.TempDir(), paddock+" chat "+id, env...)
	x.waitScreen("no", `Send "sleep 20" again? [y/N]`)
	x.keys("no", "n", "Enter")
	x.waitScreen("no", "[paddock] not sent again")
	x.keys("no", "C-d")
	x.waitScreen("no", "EXIT=0")
	if s, err := cl.GetSession(testCtx(t), id); err != nil || s.State != api.SessionWaitingForInput || s.LastTurnOutcome != api.TurnInterrupted {
		t.Fatalf("after n: %+v %v", s, err)
	}

	// y: the prompt goes again, and the agent runs it.
	x.start("ask", t.TempDir(), "trap true INT; "+paddock+" chat "+id, env...)
	x.waitScreen("ask", `Send "sleep 20" again? [y/N]`)
	x.keys("ask", "y", "Enter")
	x.waitScreen("ask", "> sleep 20")
	waitState(t, cl, id, api.SessionRunning)
	x.keys("ask", "C-c")
	x.waitScreen("ask", "[paddock] turn cancelled")
	x.keys("ask", "C-d")
	x.waitScreen("ask", "EXIT=0")
}

// TestChatAnswersAPermissionInline runs `paddock chat` in tmux with the demo
// agent's "work notes.txt": the agent edits notes.txt through fs/*, shows
// its plan and tool calls (the edit with its diff size), and asks to run
// wc -l; the chat asks inline with the options numbered, a line that names
// no option is not sent as a prompt, and "1" answers allow_once, after
// which the agent runs the command in a terminal and its last line names
// the option. While the request waits, `session permissions` lists it and
// the picker says "needs approval".
func TestChatAnswersAPermissionInline(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	x := newTmux(t)
	cfg := standaloneConfig(t) + `
agent "demo-ask" {
  protocol   = "acp"
  command    = ["paddock-demo-agent"]
  permission = "ask"
}
`
	c := startCluster(t, 1, false, cfg)
	node := leaderOf(t, c)
	cl := apiClient(t, node)
	task, err := cl.CreateTask(testCtx(t), api.CreateTaskRequest{Title: "approve work"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := cl.CreateSession(testCtx(t), task.ID, api.CreateSessionRequest{Agent: "demo-ask", Runtime: "standalone"})
	if err != nil {
		t.Fatal(err)
	}
	id := s.ID
	waitState(t, cl, id, api.SessionWaitingForInput)
	if err := cl.WriteFile(testCtx(t), id, "notes.txt", strings.NewReader("one\ntwo\n")); err != nil {
		t.Fatal(err)
	}

	paddock := filepath.Join(binDir, "paddock")
	x.start("work", t.TempDir(), "trap true INT; "+paddock+" chat "+id, "PADDOCK_ADDR="+node.URL(), "TERM=xterm-256color")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the chat window:\n%s", x.run("capture-pane", "-p", "-S", "-100", "-t", "work"))
		}
	})
	x.waitScreen("work", "Chat with session "+id)
	x.keys("work", "-l", "work notes.txt")
	x.keys("work", "Enter")
	x.waitScreen("work", "[plan] ", "[tool] edit Edit notes.txt — completed (+1 −0 lines)",
		"[permission] the agent asks: Run: wc -l notes.txt (execute)", "1) Allow once  2) Reject", "answer 1-2>")

	// While it waits: RUNNING, listed pending, and the picker says so.
	if got, err := cl.GetSession(testCtx(t), id); err != nil || got.State != api.SessionRunning {
		t.Fatalf("while the request waits the session is %+v %v, want RUNNING", got, err)
	}
	r := cliRunner{t: t, addr: node.URL()}
	if code, out, errOut := r.run("session", "permissions", id); code != 0 || !strings.Contains(out, "Run: wc -l notes.txt") || !strings.Contains(out, "pending") {
		t.Fatalf("session permissions: exit %d: %s%s", code, out, errOut)
	}
	if code, out, _ := r.run("resume", "-task", task.ID); code != 2 || !strings.Contains(out, "needs approval") {
		t.Fatalf("resume without a terminal: exit %d:\n%s", code, out)
	}

	// A line that names no option is not a prompt; "1" answers.
	x.keys("work", "-l", "hello there")
	x.keys("work", "Enter")
	x.waitScreen("work", "the agent waits for an answer: type a number from 1 to 2")
	x.keys("work", "-l", "1")
	x.keys("work", "Enter")
	x.waitScreen("work", "[paddock] answered: Allow once (allow_once)",
		"[tool] execute Run: wc -l notes.txt — completed", "terminal cmd-1",
		"work done: notes.txt edited; command allowed (allow_once)")
	waitTurnEnd(t, cl, id, 1)

	msgs, err := cl.Messages(testCtx(t), id)
	if err != nil {
		t.Fatal(err)
	}
	var last string
	for _, m := range msgs {
		if m.Role == api.RoleAgent {
			last = m.Text
		}
		if m.Role == api.RoleUser && strings.Contains(m.Text, "hello there") {
			t.Errorf("the line typed while the request waited was sent as a prompt: %q", m.Text)
		}
	}
	if lines := strings.Split(strings.TrimSpace(last), "\n"); !strings.Contains(lines[len(lines)-1], "allow_once") {
		t.Errorf("the agent's last line %q does not name allow_once", lines[len(lines)-1])
	}
	perms, err := cl.Permissions(testCtx(t), id)
	if err != nil || len(perms) != 1 || perms[0].State != api.PermissionAnswered || perms[0].OptionID != "allow_once" || perms[0].AnsweredBy != "user" {
		t.Fatalf("permissions after the answer: %+v %v", perms, err)
	}
	if b, err := cl.ReadFile(testCtx(t), id, "notes.txt"); err != nil || !strings.Contains(string(b), "edited by paddock-demo-agent (turn 1)") {
		t.Fatalf("notes.txt after the turn: %q %v", b, err)
	}

	// The agent's slash commands and modes: /help lists them, /mode plan
	// switches, and /work of the agent is a prompt it runs in that mode.
	x.keys("work", "-l", "/help")
	x.keys("work", "Enter")
	x.waitScreen("work", "the agent's commands", "/recall", "/work", "the chat's own: /help")
	x.keys("work", "-l", "/mode plan")
	x.keys("work", "Enter")
	x.waitScreen("work", "[paddock] mode: Plan (plan)")
	if st, err := cl.SessionStatus(testCtx(t), id); err != nil || st.Modes == nil || st.Modes.CurrentModeID != "plan" {
		t.Fatalf("status modes after /mode plan: %+v %v", st, err)
	}
	x.keys("work", "-l", "/work notes.txt")
	x.keys("work", "Enter")
	x.waitScreen("work", "plan mode: notes.txt read (3 lines)")
	waitTurnEnd(t, cl, id, 2)
	x.keys("work", "-l", "/mode default")
	x.keys("work", "Enter")
	x.waitScreen("work", "[paddock] mode: Default (default)")
	x.keys("work", "C-d")
	x.waitScreen("work", "Left the chat", "EXIT=0")

	// session prompt says what the agent asks and how to answer; session
	// deny answers it with reject_once.
	var out lockedBuffer
	cmd := r.cmd("session", "prompt", id, "work notes.txt")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	testkit.WaitFor(t, 60*time.Second, "session prompt to show the request", testkit.Cond(func() bool {
		return strings.Contains(out.String(), `answer with "paddock session approve `+id)
	}))
	if code, o, e := r.run("session", "deny", id[:8]); code != 0 || !strings.Contains(o, "Denied permission request") || !strings.Contains(o, "Reject (reject_once)") {
		t.Fatalf("session deny: exit %d: %s%s", code, o, e)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("session prompt: %v:\n%s", err, out.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("session prompt did not return after the answer:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "command rejected (reject_once)") || !strings.Contains(out.String(), "[tool] edit Edit notes.txt") {
		t.Fatalf("session prompt printed:\n%s", out.String())
	}
	if code, o, e := r.run("session", "approve", id); code != 1 || !strings.Contains(e, "has no pending permission request") {
		t.Fatalf("session approve with nothing pending: exit %d: %s%s", code, o, e)
	}
}

// TestChatLineEditing runs `paddock chat` in tmux: ↑ brings back the prompt
// sent before, ←, a word typed there and Enter send the edited prompt (the
// transcript holds its text, no escape bytes); a line typed while the chat
// asks whether to send an interrupted turn again is sent as that prompt,
// not taken for a no.
func TestChatLineEditing(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	x := newTmux(t)
	c := startCluster(t, 1, false, standaloneConfig(t))
	node := leaderOf(t, c)
	cl := apiClient(t, node)
	s := startDemoSession(t, cl, "editing", "demo")
	id := s.ID
	paddock := filepath.Join(binDir, "paddock")
	env := []string{"PADDOCK_ADDR=" + node.URL(), "TERM=xterm-256color"}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the chat window:\n%s", x.run("capture-pane", "-p", "-S", "-100", "-t", "edit"))
		}
	})
	x.start("edit", t.TempDir(), paddock+" chat "+id, env...)
	x.waitScreen("edit", "Chat with session "+id)
	x.keys("edit", "-l", "remember apple")
	x.keys("edit", "Enter")
	x.waitScreen("edit", "ok, remembering apple")
	waitTurnEnd(t, cl, id, 1)

	// ↑: the prompt comes back; the cursor goes 5 left (before "apple"),
	// "green " is typed there, and Enter sends the edited line.
	x.keys("edit", "Up")
	testkit.WaitFor(t, 30*time.Second, "the previous prompt in the editor", testkit.Cond(func() bool {
		lines := strings.Split(strings.TrimRight(x.screen("edit"), "\n"), "\n")
		return strings.TrimSpace(lines[len(lines)-1]) == "> remember apple"
	}))
	x.keys("edit", "Left", "Left", "Left", "Left", "Left")
	x.keys("edit", "-l", "green ")
	x.keys("edit", "Enter")
	x.waitScreen("edit", "ok, remembering green apple")
	waitTurnEnd(t, cl, id, 2)
	msgs, err := cl.Messages(testCtx(t), id)
	if err != nil {
		t.Fatal(err)
	}
	if !hasUserMessage(msgs, "remember green apple") {
		t.Fatalf("the edited prompt is not in the transcript: %+v", msgs)
	}
	for _, m := range msgs {
		if strings.ContainsAny(m.Text, "\x1b\x7f") {
			t.Errorf("a message carries escape bytes: %q", m.Text)
		}
	}
	x.keys("edit", "C-d")
	x.waitScreen("edit", "Left the chat", "EXIT=0")

	// An interrupted turn: the chat asks, and a prompt typed instead of an
	// answer is sent as itself.
	interruptTurn(t, cl, id)
	x.start("again", t.TempDir(), paddock+" chat "+id, env...)
	x.waitScreen("again", `Send "sleep 20" again? [y/N]`, "send it again? [y/N]")
	x.keys("again", "-l", "recall")
	x.keys("again", "Enter")
	x.waitScreen("again", "not sent again; sending the line you typed", "you asked me to remember: apple, green, apple")
	x.keys("again", "C-d")
	x.waitScreen("again", "EXIT=0")
}
