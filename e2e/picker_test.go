package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	wire "github.com/paddockhq/paddock/api"
)

// tmux runs `paddock resume` in a real terminal: a tmux server of its own
// (its socket in the test's directory), one window of 120x35.
type tmux struct {
	t      *testing.T
	socket string
}

func newTmux(t *testing.T) *tmux {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("tmux is not installed (.ci/run installs it)")
		}
		t.Skip("SKIPPED: tmux is not installed")
	}
	x := &tmux{t: t, socket: filepath.Join(t.TempDir(), "tmux.sock")}
	t.Cleanup(func() { _ = exec.Command("tmux", "-S", x.socket, "kill-server").Run() })
	return x
}

func (x *tmux) run(args ...string) string {
	x.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-S", x.socket}, args...)...).CombinedOutput()
	if err != nil {
		x.t.Fatalf("tmux %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// start opens window name in dir running the shell command cmd, which then
// prints its exit code and waits (so the last screen stays capturable).
func (x *tmux) start(name, dir, cmd string, env ...string) {
	x.t.Helper()
	args := []string{"new-session", "-d", "-s", name, "-x", "120", "-y", "35", "-c", dir}
	for _, e := range env {
		args = append(args, "-e", e)
	}
	x.run(append(args, cmd+`; echo "EXIT=$?"; sleep 600`)...)
}

func (x *tmux) keys(name string, keys ...string) {
	x.t.Helper()
	x.run(append([]string{"send-keys", "-t", name}, keys...)...)
}

func (x *tmux) screen(name string) string {
	x.t.Helper()
	return x.run("capture-pane", "-p", "-t", name)
}

// waitScreen waits until the window shows every one of want.
func (x *tmux) waitScreen(name string, want ...string) string {
	x.t.Helper()
	var last string
	deadline := time.Now().Add(60 * time.Second)
	for {
		last = x.screen(name)
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(last, w)
		}
		if ok {
			return last
		}
		if time.Now().After(deadline) {
			x.t.Fatalf("window %s never showed %q; it shows:\n%s", name, want, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestResumePickerInATerminal runs `paddock resume` in tmux against a real
// server: the picker lists this workspace's sessions only, Esc leaves with
// exit 1 and changes nothing, and filtering then Enter resumes a stopped pty
// session and hands the terminal over to `paddock attach`, where the agent
// answers what is typed.
func TestResumePickerInATerminal(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	x := newTmux(t)
	c := startCluster(t, 1, false, standaloneConfig(t))
	leader := leaderOf(t, c)
	api := apiClient(t, leader)

	here := t.TempDir()
	elsewhere := t.TempDir()
	mine, err := api.CreateTask(testCtx(t), wire.CreateTaskRequest{Title: "picker task", Workspace: wire.Workspace{Path: here}})
	if err != nil {
		t.Fatal(err)
	}
	other, err := api.CreateTask(testCtx(t), wire.CreateTaskRequest{Title: "somebody else's task", Workspace: wire.Workspace{Path: elsewhere}})
	if err != nil {
		t.Fatal(err)
	}
	create := func(task, agent string) string {
		s, err := api.CreateSession(testCtx(t), task, wire.CreateSessionRequest{Agent: agent, Runtime: "standalone"})
		if err != nil {
			t.Fatal(err)
		}
		waitState(t, api, s.ID, wire.SessionWaitingForInput)
		return s.ID
	}
	stop := func(id string) {
		if _, err := api.Stop(testCtx(t), id); err != nil {
			t.Fatal(err)
		}
		waitState(t, api, id, wire.SessionStopped)
	}
	tty := create(mine.ID, "demo-tty")
	noResume := create(mine.ID, "demo-noresume")
	foreign := create(other.ID, "demo")
	stop(noResume)
	stop(tty) // the newest activity: listed first

	paddock := filepath.Join(binDir, "paddock")
	env := []string{"PADDOCK_ADDR=" + leader.URL(), "PADDOCK_SESSION_ID=", "TERM=xterm-256color"}

	// Without a terminal: the same rows as a table, exit 2 with a hint.
	cmd := exec.Command(paddock, "resume")
	cmd.Dir = here
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(ee.Stderr), "needs a terminal") {
		t.Fatalf("paddock resume without a terminal: %v (want exit 2 and a hint)", err)
	}
	assertRowSays(t, string(out), tty, "resumable")
	assertRowSays(t, string(out), noResume, "not resumable")
	if strings.Contains(string(out), foreign) {
		t.Errorf("the table lists another workspace's session:\n%s", out)
	}
	all := exec.Command(paddock, "resume", "-all", "-json")
	all.Dir, all.Env = here, cmd.Env
	out, _ = all.Output()
	if !strings.Contains(string(out), `"session_id": "`+foreign+`"`) || !strings.Contains(string(out), `"selectable": false`) {
		t.Errorf("paddock resume -all -json:\n%s", out)
	}

	// Esc: exit 1, nothing changed.
	x.start("esc", here, paddock+" resume", env...)
	screen := x.waitScreen("esc", "Resume a session (2)", tty[:8], noResume[:8], "picker task")
	if strings.Contains(screen, foreign[:8]) || strings.Contains(screen, "somebody else") {
		t.Fatalf("the picker lists another workspace's session:\n%s", screen)
	}
	assertRowSays(t, screen, tty, "resumable")
	assertRowSays(t, screen, noResume, "not resumable")
	x.keys("esc", "Escape")
	x.waitScreen("esc", "EXIT=1")
	for id, want := range map[string]wire.SessionState{tty: wire.SessionStopped, noResume: wire.SessionStopped, foreign: wire.SessionWaitingForInput} {
		if s, err := api.GetSession(testCtx(t), id); err != nil || s.State != want {
			t.Fatalf("after Esc, session %s: %+v %v, want %s", id, s, err, want)
		}
	}

	// The not-resumable row cannot be chosen; the filter finds the other by
	// id; Enter resumes it and attaches to its agent's terminal.
	x.start("pick", here, paddock+" resume", env...)
	x.waitScreen("pick", "Resume a session (2)")
	x.keys("pick", "-l", noResume[:8])
	x.waitScreen("pick", `Resume a session (1 matching "`+noResume[:8]+`")`)
	x.keys("pick", "Enter")
	x.waitScreen("pick", "Cannot select this session: not resumable")
	for range noResume[:8] {
		x.keys("pick", "BSpace")
	}
	x.keys("pick", "-l", tty[:8])
	x.waitScreen("pick", `Resume a session (1 matching "`+tty[:8]+`")`)
	x.keys("pick", "Enter")
	x.waitScreen("pick", "demo>") // capture-pane drops the trailing space
	waitState(t, api, tty, wire.SessionWaitingForInput)
	x.keys("pick", "-l", "remember kiwi")
	x.keys("pick", "Enter")
	x.waitScreen("pick", "ok, remembering kiwi")
	x.keys("pick", "C-]")
	x.waitScreen("pick", "EXIT=0")
	if s, err := api.GetSession(testCtx(t), noResume); err != nil || s.State != wire.SessionStopped {
		t.Fatalf("the refused session changed: %+v %v", s, err)
	}
}

// assertRowSays checks that the picker's row of session id (the first line
// with its first 8 characters) shows word.
func assertRowSays(t *testing.T, screen, id, word string) {
	t.Helper()
	for _, line := range strings.Split(screen, "\n") {
		if strings.Contains(line, id[:8]) {
			if !strings.Contains(line, fmt.Sprintf(" %s ", word)) {
				t.Errorf("row of %s does not say %q: %q", id, word, line)
			}
			return
		}
	}
	t.Errorf("no row for %s in:\n%s", id, screen)
}

// TestResumePickerFindsConversations runs `paddock resume` in tmux against
// a real server with three ACP sessions of this directory's task and one of
// another directory's: the pinned session is listed first, a renamed one
// shows its name, the preview shows the highlighted session's last reply,
// and typing a word said only in the middle of one conversation (not its
// title, first prompt or last reply) narrows the list to it, the server
// searching within this directory's sessions.
func TestResumePickerFindsConversations(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	x := newTmux(t)
	c := startCluster(t, 1, false, standaloneConfig(t))
	leader := leaderOf(t, c)
	api := apiClient(t, leader)

	here, elsewhere := t.TempDir(), t.TempDir()
	task := func(title, dir string) string {
		tk, err := api.CreateTask(testCtx(t), wire.CreateTaskRequest{Title: title, Workspace: wire.Workspace{Path: dir}})
		if err != nil {
			t.Fatal(err)
		}
		return tk.ID
	}
	mine, other := task("finder task", here), task("other finder task", elsewhere)
	talk := func(taskID string, prompts ...string) string {
		s, err := api.CreateSession(testCtx(t), taskID, wire.CreateSessionRequest{Agent: "demo", Runtime: "standalone"})
		if err != nil {
			t.Fatal(err)
		}
		waitState(t, api, s.ID, wire.SessionWaitingForInput)
		for _, p := range prompts {
			promptAndWait(t, api, s.ID, p)
		}
		return s.ID
	}
	// Oldest activity first: pinned, then the newest first would be
	// renamed, talked, pinned.
	pinned := talk(mine, "remember guava")
	talked := talk(mine, "remember apple", "remember papaya", "remember plum")
	renamed := talk(mine, "remember mango")
	foreign := talk(other, "remember papaya")
	if _, err := api.PinSession(testCtx(t), pinned, true); err != nil {
		t.Fatal(err)
	}
	if _, err := api.RenameSession(testCtx(t), renamed, "release checklist"); err != nil {
		t.Fatal(err)
	}

	env := []string{"PADDOCK_ADDR=" + leader.URL(), "PADDOCK_SESSION_ID=", "TERM=xterm-256color"}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the picker window:\n%s", x.screen("find"))
		}
	})
	x.start("find", here, filepath.Join(binDir, "paddock")+" resume", env...)
	screen := x.waitScreen("find", "Resume a session (3)", pinned[:8], talked[:8], renamed[:8], "agent  ok, remembering guava")
	if strings.Contains(screen, foreign[:8]) {
		t.Fatalf("the picker lists another directory's session:\n%s", screen)
	}
	// Pinned first, then newest activity first: the row order.
	row := func(screen, id string) (int, string) {
		for i, l := range strings.Split(screen, "\n") {
			if strings.Contains(l, id[:8]) {
				return i, l
			}
		}
		t.Fatalf("no row of %s:\n%s", id, screen)
		return 0, ""
	}
	ip, lp := row(screen, pinned)
	ir, lr := row(screen, renamed)
	it, lt := row(screen, talked)
	if !(ip < ir && ir < it) {
		t.Errorf("rows at lines %d (pinned), %d (renamed), %d (talked): want pinned, then newest first:\n%s", ip, ir, it, screen)
	}
	if !strings.Contains(lp, "> ★ remember guava") {
		t.Errorf("the pinned row is not highlighted, marked and called by its first prompt: %q", lp)
	}
	if !strings.Contains(lr, "release checklist") || strings.Contains(lr, "remember mango") {
		t.Errorf("the renamed row does not show its name instead of its prompt: %q", lr)
	}
	if !strings.Contains(lt, "remember apple") {
		t.Errorf("a row without a name does not show its first prompt: %q", lt)
	}
	// Down: the preview follows the highlight to the renamed session.
	x.keys("find", "Down")
	x.waitScreen("find", "agent  ok, remembering mango", "you    remember mango")

	// "papaya" is in the talked session's transcript, between its first
	// prompt and last reply, and in the other directory's session.
	x.keys("find", "-l", "papaya")
	screen = x.waitScreen("find", `Resume a session (1 matching "papaya")`, talked[:8], "found: ")
	for _, id := range []string{pinned, renamed, foreign} {
		if strings.Contains(screen, id[:8]) {
			t.Errorf("the search for papaya lists %s:\n%s", id, screen)
		}
	}
	x.waitScreen("find", "agent  ok, remembering plum")
	x.keys("find", "Escape")
	x.waitScreen("find", "EXIT=1")
}
