package agentctlproc

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddockhq/paddock/shared/runtime"
	"github.com/paddockhq/paddock/shared/testkit"
)

func TestReadInfoRejectsMalformed(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"empty":      ``,
		"not_json":   `url=x`,
		"no_nonce":   `{"url":"http://127.0.0.1:1","pid":5}`,
		"zero_pid":   `{"url":"http://127.0.0.1:1","pid":0,"nonce":"n"}`,
		"no_url":     `{"pid":5,"nonce":"n"}`,
		"wrong_type": `{"url":"http://x","pid":"5","nonce":"n"}`,
	} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadInfo(p); err == nil {
			t.Errorf("%s: accepted %q", name, body)
		}
	}
	if _, err := ReadInfo(filepath.Join(dir, "missing")); err == nil {
		t.Error("missing file accepted")
	}
}

func TestCheckHealth(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Header.Get("Authorization") {
		case "Bearer good":
			_, _ = w.Write([]byte(`{"status":"ok","nonce":"n","pid":7,"session_id":"s"}`))
		case "Bearer degraded":
			_, _ = w.Write([]byte(`{"status":"starting"}`))
		case "Bearer garbage":
			_, _ = w.Write([]byte(`{not json`))
		default:
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	if h, err := CheckHealth(ctx, srv.URL, "good"); err != nil || h.Nonce != "n" || h.PID != 7 {
		t.Fatalf("good: %+v %v", h, err)
	}
	for _, secret := range []string{"bad", "degraded", "garbage"} {
		if _, err := CheckHealth(ctx, srv.URL, secret); err == nil {
			t.Errorf("%s: accepted", secret)
		}
	}
}

func TestProcessChecks(t *testing.T) {
	if !Alive(os.Getpid()) {
		t.Error("own process not alive")
	}
	if Alive(0) || Alive(-1) {
		t.Error("invalid pid alive")
	}
	if IsSessionAgentctl(os.Getpid(), "s1") {
		t.Error("the test binary taken for an agentctl")
	}
}

func TestStartRequiresFields(t *testing.T) {
	if _, err := Start(context.Background(), StartConfig{AgentctlPath: "/bin/true"}); err == nil {
		t.Fatal("incomplete config accepted")
	}
	dir := t.TempDir()
	_, err := Start(context.Background(), StartConfig{AgentctlPath: "/bin/false", SessionID: "s", Workspace: dir, StateDir: filepath.Join(dir, "st"), Secret: "x"})
	if err == nil {
		t.Fatal("an agentctl that exits at once was reported started")
	}
}

// cmdlineReference is the plain (allocating) reading of a command line that
// isSessionAgentctlCmdline must agree with.
func cmdlineReference(b []byte, sessionID string) bool {
	s := strings.TrimRight(string(b), "\x00")
	if s == "" {
		return false
	}
	args := strings.Split(s, "\x00")
	serve, session := false, false
	for i, a := range args {
		if a == "serve" {
			serve = true
		}
		if (a == "-session" || a == "--session") && i+1 < len(args) && args[i+1] == sessionID {
			session = true
		}
		if a == "-session="+sessionID || a == "--session="+sessionID {
			session = true
		}
	}
	return serve && session
}

func TestIsSessionAgentctlCmdline(t *testing.T) {
	for _, tc := range []struct {
		cmdline string
		want    bool
	}{
		{"agentctl\x00serve\x00-session\x00s1\x00", true},
		{"agentctl\x00serve\x00--session\x00s1\x00", true},
		{"agentctl\x00serve\x00-session=s1\x00", true},
		{"agentctl\x00serve\x00--session=s1\x00", true},
		{"agentctl\x00-session\x00s1\x00serve\x00", true},
		{"agentctl\x00serve\x00-session\x00s1", true}, // no final NUL
		{"agentctl\x00serve\x00-session\x00s2\x00", false},
		{"agentctl\x00serve\x00-session\x00s10\x00", false},
		{"agentctl\x00serve\x00---session=s1\x00", false},
		{"agentctl\x00serve\x00-session\x00", false},
		{"agentctl\x00run\x00-session\x00s1\x00", false},
		{"agentctl\x00servex\x00-session=s1\x00", false},
		{"agentctl\x00serve\x00-session\x00\x00s1\x00", false},
		{"", false},
		{"\x00\x00", false},
	} {
		if got := isSessionAgentctlCmdline([]byte(tc.cmdline), "s1"); got != tc.want {
			t.Errorf("%q: got %v, want %v", tc.cmdline, got, tc.want)
		}
		if ref := cmdlineReference([]byte(tc.cmdline), "s1"); ref != tc.want {
			t.Errorf("%q: reference says %v, table says %v", tc.cmdline, ref, tc.want)
		}
	}
}

func FuzzIsSessionAgentctlCmdline(f *testing.F) {
	f.Add([]byte("agentctl\x00serve\x00-session\x00s1\x00"), "s1")
	f.Add([]byte("agentctl\x00serve\x00--session=s1"), "s1")
	f.Add([]byte("\x00serve\x00-session\x00\x00"), "")
	f.Fuzz(func(t *testing.T, b []byte, id string) {
		if got, want := isSessionAgentctlCmdline(b, id), cmdlineReference(b, id); got != want {
			t.Fatalf("%q, %q: got %v, reference %v", b, id, got, want)
		}
	})
}

// TestIsSessionAgentctlProcess checks a real process through /proc: found
// while it runs (also with a command line longer than the stack buffer), not
// once it is a zombie, nor once reaped.
func TestIsSessionAgentctlProcess(t *testing.T) {
	for _, pad := range []int{0, 5000} {
		// sh -c SCRIPT serve -session s1: sh's own command line carries the
		// arguments; "; :" keeps sh from exec'ing sleep.
		cmd := exec.Command("/bin/sh", "-c", "sleep 60; :", "serve", "-session", "s1", strings.Repeat("x", pad))
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pid := cmd.Process.Pid
		reaped := false
		t.Cleanup(func() {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			if !reaped {
				_ = cmd.Wait()
			}
		})
		// Until the child has exec'd, its command line is the test binary's.
		testkit.WaitFor(t, 10*time.Second, "the running process to be recognised", testkit.Cond(func() bool { return IsSessionAgentctl(pid, "s1") }))
		if IsSessionAgentctl(pid, "s2") {
			t.Fatalf("pad %d: taken for another session's agentctl", pad)
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		testkit.WaitFor(t, 10*time.Second, "the process to be a zombie", testkit.Cond(func() bool { return !Alive(pid) }))
		if IsSessionAgentctl(pid, "s1") {
			t.Fatalf("pad %d: zombie taken for a live agentctl", pad)
		}
		_ = cmd.Wait()
		reaped = true
		if IsSessionAgentctl(pid, "s1") {
			t.Fatalf("pad %d: reaped process taken for a live agentctl", pad)
		}
	}
}

func TestReadProc(t *testing.T) {
	b, err := readProc(os.Getpid(), "cmdline", make([]byte, 0, 4)) // grows
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("/proc/self/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != string(want) {
		t.Fatalf("got %q, want %q", b, want)
	}
	if _, err := readProc(os.Getpid(), "no-such-file", nil); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v, want ErrNotExist", err)
	}
}

func TestStartRefusesInvalidTerminal(t *testing.T) {
	dir := t.TempDir()
	for name, term := range map[string]runtime.Terminal{
		"empty_program":   {Shell: []string{""}},
		"negative_replay": {ReplayBytes: -1},
		"negative_idle":   {IdleTimeout: -time.Second},
	} {
		_, err := Start(context.Background(), StartConfig{AgentctlPath: "/bin/true", SessionID: "s", Workspace: dir,
			StateDir: filepath.Join(dir, "st"), Secret: "x", Terminal: term})
		if !errors.Is(err, runtime.ErrInvalidRequest) {
			t.Errorf("%s: Start = %v, want ErrInvalidRequest", name, err)
		}
	}
}

// Terminal flags never make a command line unrecognisable as the session's
// agentctl, nor make another session's look like it: the shell travels as
// one JSON array, never as a bare word.
func TestTerminalArgsKeepCmdlineRecognisable(t *testing.T) {
	term := runtime.Terminal{Shell: []string{"serve", "-session", "s1"}, ReplayBytes: 8192, IdleTimeout: time.Minute}
	line := func(session string) []byte {
		args := append([]string{"/bin/agentctl", "serve", "-session", session}, term.Args()...)
		return []byte(strings.Join(args, "\x00") + "\x00")
	}
	if !isSessionAgentctlCmdline(line("s1"), "s1") {
		t.Error("agentctl with terminal flags not recognised")
	}
	if isSessionAgentctlCmdline(line("s2"), "s1") {
		t.Error("another session's agentctl taken for s1 because of its shell argv")
	}
}
