package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	wire "github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/client"
)

// cliRunner runs bin/paddock against one server.
type cliRunner struct {
	t    *testing.T
	addr string
	env  []string // more NAME=VALUE for the CLI's environment
}

func (r cliRunner) cmd(args ...string) *exec.Cmd {
	c := exec.Command(filepath.Join(binDir, "paddock"), args...)
	c.Env = append(append(os.Environ(), "PADDOCK_ADDR="+r.addr), r.env...)
	return c
}

// with returns the runner for a subtest.
func (r cliRunner) with(t *testing.T) cliRunner { return cliRunner{t: t, addr: r.addr, env: r.env} }

// run runs one command to its end and returns its exit code and output.
func (r cliRunner) run(args ...string) (int, string, string) {
	r.t.Helper()
	var out, errOut bytes.Buffer
	c := r.cmd(args...)
	c.Stdout, c.Stderr = &out, &errOut
	err := c.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		r.t.Fatalf("paddock %s: %v", strings.Join(args, " "), err)
	}
	return code, out.String(), errOut.String()
}

// ok runs a command that must succeed and returns its stdout.
func (r cliRunner) ok(args ...string) string {
	r.t.Helper()
	code, out, errOut := r.run(args...)
	if code != 0 {
		r.t.Fatalf("paddock %s: exit %d: %s%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// lines follows a long-running command's stdout line by line; it is killed
// when the test ends.
func (r cliRunner) lines(args ...string) <-chan string {
	r.t.Helper()
	c := r.cmd(args...)
	pr, pw := io.Pipe()
	c.Stdout = pw
	if err := c.Start(); err != nil {
		r.t.Fatal(err)
	}
	ch := make(chan string, 256)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			ch <- sc.Text()
		}
	}()
	r.t.Cleanup(func() {
		_ = c.Process.Kill()
		_ = c.Wait()
		pw.Close()
	})
	return ch
}

// waitLine waits for a line containing want.
func waitLine(t *testing.T, ch <-chan string, want string) string {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case l, ok := <-ch:
			if !ok {
				t.Fatalf("the command ended before printing %q", want)
			}
			if strings.Contains(l, want) {
				return l
			}
		case <-timeout:
			t.Fatalf("no line with %q within 60s", want)
		}
	}
}

// TestCLIAgainstARealServer runs the everyday commands of bin/paddock
// against a real server with the standalone runtime and the demo agent.
func TestCLIAgainstARealServer(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	cfg := standaloneConfig(t) + `
agent "broken" {
  protocol = "acp"
  command  = ["paddock-no-such-agent"]
}
`
	c := startCluster(t, 1, false, cfg)
	leader := leaderOf(t, c)
	api := apiClient(t, leader)
	r := cliRunner{t: t, addr: leader.URL()}

	ws := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", ws, "-c", "user.email=t@example.com", "-c", "user.name=t"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	if err := os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("first line\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("init", "-q")
	git("add", "notes.txt")
	git("commit", "-q", "-m", "notes")

	out := r.ok("task", "create", "-title", "cli task", "-workspace", ws)
	taskID := strings.Fields(strings.TrimPrefix(out, "Created task "))[0]
	// A task id prefix works in flags too.
	out = r.ok("session", "create", "-task", taskID[:6], "-agent", "demo", "-runtime", "standalone")
	sessionID := strings.Fields(strings.TrimPrefix(out, "Created session "))[0]
	prefix := sessionID[:6]

	t.Run("ids accept unique prefixes", func(t *testing.T) {
		r := r.with(t)
		out := r.ok("session", "status", prefix)
		if !strings.Contains(out, sessionID) {
			t.Errorf("session status %s:\n%s", prefix, out)
		}
		// Three characters are too short to expand.
		if code, _, errOut := r.run("session", "status", sessionID[:3]); code != 1 || !strings.Contains(errOut, "not_found") {
			t.Errorf("a 3-character prefix: exit %d, %q", code, errOut)
		}
		// Every session id shares the empty prefix; give two sessions one.
		other, err := api.CreateSession(testCtx(t), taskID, wire.CreateSessionRequest{Agent: "demo", Runtime: "standalone"})
		if err != nil {
			t.Fatal(err)
		}
		waitState(t, api, other.ID, wire.SessionWaitingForInput)
		common := commonPrefix(sessionID, other.ID)
		if len(common) >= 4 {
			code, _, errOut := r.run("session", "status", common)
			if code != 1 || !strings.Contains(errOut, "ambiguous") || !strings.Contains(errOut, other.ID) {
				t.Errorf("an ambiguous prefix: exit %d, %q", code, errOut)
			}
		}
		r.ok("session", "delete", other.ID[:8])

		// attach too (its route reports a missing session only at the
		// upgrade): ctrl-] on stdin detaches at once.
		attach := r.cmd("attach", prefix)
		attach.Stdin = strings.NewReader("\x1d")
		if out, err := attach.CombinedOutput(); err != nil {
			t.Errorf("attach %s: %v: %s", prefix, err, out)
		}
	})

	t.Run("session --help exits 0", func(t *testing.T) {
		r := r.with(t)
		for _, args := range [][]string{{"session", "--help"}, {"task", "--help"}, {"session", "prompt", "--help"}} {
			if code, out, errOut := r.run(args...); code != 0 || errOut != "" || !strings.Contains(out, "Usage: paddock") {
				t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errOut)
			}
		}
		code, _, errOut := r.run("sesion", "list")
		if code != 1 || !strings.Contains(errOut, `did you mean "paddock session"?`) {
			t.Errorf("a mistyped command: exit %d, %q", code, errOut)
		}
	})

	t.Run("version", func(t *testing.T) {
		r := r.with(t)
		for _, args := range [][]string{{"version"}, {"-version"}} {
			out := r.ok(args...)
			if !strings.Contains(out, "commit ") || !strings.Contains(out, "go1.") {
				t.Errorf("%v:\n%s", args, out)
			}
		}
	})

	t.Run("files cat diff", func(t *testing.T) {
		r := r.with(t)
		// The session works in its own checkout of the task's repository.
		if err := api.WriteFile(testCtx(t), sessionID, "notes.txt", strings.NewReader("first line\nsecond line\n")); err != nil {
			t.Fatal(err)
		}
		if err := api.WriteFile(testCtx(t), sessionID, "sub/deeper.txt", strings.NewReader("deep\n")); err != nil {
			t.Fatal(err)
		}
		out := r.ok("session", "files", prefix)
		if !strings.Contains(out, "notes.txt") || !strings.Contains(out, "sub/") {
			t.Errorf("session files:\n%s", out)
		}
		out = r.ok("session", "files", prefix, "sub")
		if !strings.Contains(out, "deeper.txt") {
			t.Errorf("session files:\n%s", out)
		}
		if out := r.ok("session", "cat", prefix, "notes.txt"); out != "first line\nsecond line\n" {
			t.Errorf("session cat: %q", out)
		}
		out = r.ok("session", "diff", prefix)
		if !strings.Contains(out, "+second line") || !strings.Contains(out, "notes.txt") {
			t.Errorf("session diff:\n%s", out)
		}
		if code, _, errOut := r.run("session", "cat", prefix, "../../etc/passwd"); code != 1 || errOut == "" {
			t.Errorf("a path outside the workspace: exit %d, %q", code, errOut)
		}
	})

	t.Run("messages -f and events follow turns", func(t *testing.T) {
		r := r.with(t)
		msgs := r.lines("session", "messages", prefix, "-f")
		events := r.lines("events", "-session", prefix, "-json")
		// messages -f replays what is there, then follows; events shows only
		// what happens once it is connected: prompt until it shows a turn.
		var line string
		for i := 0; line == "" && i < 10; i++ {
			r.ok("session", "prompt", prefix, fmt.Sprintf("remember fig%d", i))
			line = lineWithin(events, `"session.message`, 5*time.Second)
		}
		if line == "" {
			t.Fatal("events -json printed no message event")
		}
		var ev wire.Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil || ev.SessionID != sessionID {
			t.Errorf("events -json line %q: %+v %v", line, ev, err)
		}
		waitLine(t, msgs, "[user] remember fig0")
		waitLine(t, msgs, "ok, remembering fig0")
	})

	t.Run("cancel", func(t *testing.T) {
		r := r.with(t)
		r.ok("session", "prompt", prefix, "-detach", "sleep 30")
		waitState(t, api, sessionID, wire.SessionRunning)
		out := r.ok("session", "cancel", prefix)
		if !strings.Contains(out, "Cancelled the running turn of session "+sessionID) {
			t.Errorf("session cancel: %q", out)
		}
		waitState(t, api, sessionID, wire.SessionWaitingForInput)
		if s, _ := api.GetSession(testCtx(t), sessionID); s.LastTurnOutcome != wire.TurnCancelled {
			t.Errorf("last turn after cancel: %q, want cancelled", s.LastTurnOutcome)
		}
	})

	t.Run("task close reopen delete and the session table", func(t *testing.T) {
		r := r.with(t)
		out := r.ok("task", "create", "-title", "short-lived task")
		id := strings.Fields(strings.TrimPrefix(out, "Created task "))[0]
		out = r.ok("session", "create", "-task", id[:8], "-agent", "demo", "-runtime", "standalone")
		sid := strings.Fields(strings.TrimPrefix(out, "Created session "))[0]

		out = r.ok("session", "list", "-task", id[:8])
		for _, want := range []string{"TITLE", "NODE", "RESUME TOKEN", "LAST ACTIVITY", "REASON", "short-lived task", "node1", "WAITING_FOR_INPUT", "yes", "s ago"} {
			if !strings.Contains(out, want) {
				t.Errorf("session list lacks %q:\n%s", want, out)
			}
		}
		out = r.ok("task", "close", id[:8])
		if !strings.Contains(out, "Closed task "+id+" (DONE)") || !strings.Contains(out, "1 of its sessions still run") {
			t.Errorf("task close:\n%s", out)
		}
		// Reopened, the task takes the state its sessions give it.
		if out := r.ok("task", "reopen", id[:8]); !strings.Contains(out, "Reopened task "+id+" (") || strings.Contains(out, "(DONE)") {
			t.Errorf("task reopen:\n%s", out)
		}
		if code, _, errOut := r.run("task", "close", "no-such-task"); code != 1 || !strings.Contains(errOut, "not_found") {
			t.Errorf("closing an unknown task: exit %d, %q", code, errOut)
		}
		r.ok("session", "stop", sid[:8])
		if out := r.ok("session", "resume", sid[:8]); !strings.Contains(out, "is WAITING_FOR_INPUT") {
			t.Errorf("session resume:\n%s", out)
		}
		if out := r.ok("task", "delete", id[:8]); !strings.Contains(out, "Deleted task "+id+" and its sessions") {
			t.Errorf("task delete:\n%s", out)
		}
		if _, err := api.GetTask(testCtx(t), id); !client.IsCode(err, "not_found") {
			t.Errorf("the deleted task: %v", err)
		}
		if s, err := api.GetSession(testCtx(t), sid); err == nil && s.State != wire.SessionCompleted {
			t.Errorf("the deleted task's session is %s", s.State)
		}
		if out := r.ok("completion", "bash"); !strings.Contains(out, "complete") {
			t.Errorf("completion bash:\n%s", out)
		}
	})

	t.Run("session status shows why a session failed", func(t *testing.T) {
		r := r.with(t)
		code, _, _ := r.run("session", "create", "-task", taskID, "-agent", "broken", "-runtime", "standalone")
		if code != 1 {
			t.Fatalf("creating a session whose agent is missing: exit %d", code)
		}
		sessions, err := api.ListSessions(testCtx(t), taskID, string(wire.SessionError))
		if err != nil || len(sessions) != 1 {
			t.Fatalf("ERROR sessions: %v %v", sessions, err)
		}
		s := sessions[0]
		out := r.ok("session", "status", s.ID[:8])
		if s.ErrorMessage == "" || !strings.Contains(out, "Error: "+firstLine(s.ErrorMessage)) {
			t.Errorf("session status of an ERROR session does not show %q:\n%s", s.ErrorMessage, out)
		}
	})
}

// lineWithin returns the first line containing want within d, "" if none.
func lineWithin(ch <-chan string, want string, d time.Duration) string {
	timeout := time.After(d)
	for {
		select {
		case l, ok := <-ch:
			if !ok {
				return ""
			}
			if strings.Contains(l, want) {
				return l
			}
		case <-timeout:
			return ""
		}
	}
}

func commonPrefix(a, b string) string {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return a[:n]
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	if len(l) > 40 {
		l = l[:40]
	}
	return l
}
