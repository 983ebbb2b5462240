package term

import (
	"errors"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"
)

func newShell(t *testing.T) *Terminal {
	t.Helper()
	term, err := NewTerminal(TerminalConfig{Argv: []string{"/bin/sh"}, Dir: t.TempDir(), Env: append(os.Environ(), "PS1=$ "), Cols: 90, Rows: 30})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = term.Close() })
	return term
}

func TestTerminalLifecycle(t *testing.T) {
	term := newShell(t)
	pid, epoch := term.Pid(), term.Epoch()
	if pid <= 0 || epoch == "" {
		t.Fatalf("pid %d epoch %q", pid, epoch)
	}
	if _, err := term.Write([]byte("stty size; sleep 1000 & echo \"BG$!:\"\r")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "stty size", func() bool { return ringHas(term.Ring(), "30 90") })
	var bg int
	bgRE := regexp.MustCompile(`BG(\d+):`)
	waitFor(t, 5*time.Second, "background job", func() bool {
		m := bgRE.FindStringSubmatch(ringText(term.Ring()))
		if m == nil {
			return false
		}
		bg, _ = strconv.Atoi(m[1])
		return true
	})
	if err := term.Resize(100, 40); err != nil {
		t.Fatal(err)
	}
	if err := term.Resize(0, 40); !errors.Is(err, ErrBadSize) {
		t.Fatalf("resize 0: %v", err)
	}
	if err := term.Reset(); err != nil {
		t.Fatal(err)
	}
	if term.Pid() == pid || term.Epoch() == epoch || term.Ring().Next() > 4096 {
		t.Fatalf("reset kept pid %d / epoch / ring", pid)
	}
	waitFor(t, 5*time.Second, "old shell and its job killed", func() bool { return !alive(pid) && !alive(bg) })
	_, _ = term.Write([]byte("stty size\r"))
	waitFor(t, 5*time.Second, "size kept across reset", func() bool { return ringHas(term.Ring(), "40 100") })

	_, _ = term.Write([]byte("exit 7\r"))
	waitFor(t, 5*time.Second, "exit detected", func() bool { ex, _ := term.Exited(); return ex })
	if _, code := term.Exited(); code != 7 {
		t.Fatalf("exit code %d", code)
	}
	if _, err := term.Write([]byte("x")); !errors.Is(err, ErrExited) {
		t.Fatalf("write after exit: %v", err)
	}
	_ = term.Close()
	if _, err := term.Write([]byte("x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("write after close: %v", err)
	}
	if err := term.Reset(); !errors.Is(err, ErrClosed) {
		t.Fatalf("reset after close: %v", err)
	}
}

func TestTerminalBadConfig(t *testing.T) {
	if _, err := NewTerminal(TerminalConfig{}); err == nil {
		t.Fatal("empty argv accepted")
	}
	if _, err := NewTerminal(TerminalConfig{Argv: []string{"/nonexistent/shell"}}); err == nil {
		t.Fatal("missing program accepted")
	}
	if _, err := NewTerminal(TerminalConfig{Argv: []string{"/bin/sh"}, Cols: 5000, Rows: 1}); !errors.Is(err, ErrBadSize) {
		t.Fatalf("bad size: %v", err)
	}
}

func ringText(r *Ring) string {
	buf := make([]byte, r.Size())
	n, _ := r.ReadAt(buf, r.Oldest())
	return string(buf[:n])
}
