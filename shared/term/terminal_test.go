package term

import (
	"errors"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/paddockhq/paddock/api/termproto"
	"github.com/paddockhq/paddock/shared/nice"
	"github.com/paddockhq/paddock/shared/testkit"
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
	testkit.WaitFor(t, 5*time.Second, "stty size", testkit.Cond(func() bool { return ringHas(term.Ring(), "30 90") }))
	var bg int
	bgRE := regexp.MustCompile(`BG(\d+):`)
	testkit.WaitFor(t, 5*time.Second, "background job", testkit.Cond(func() bool {
		m := bgRE.FindStringSubmatch(ringText(term.Ring()))
		if m == nil {
			return false
		}
		bg, _ = strconv.Atoi(m[1])
		return true
	}))
	if err := term.Resize(100, 40); err != nil {
		t.Fatal(err)
	}
	if err := term.Resize(0, 40); !errors.Is(err, termproto.ErrBadSize) {
		t.Fatalf("resize 0: %v", err)
	}
	if err := term.Reset(); err != nil {
		t.Fatal(err)
	}
	if term.Pid() == pid || term.Epoch() == epoch || term.Ring().Next() > 4096 {
		t.Fatalf("reset kept pid %d / epoch / ring", pid)
	}
	testkit.WaitFor(t, 5*time.Second, "old shell and its job killed", testkit.Cond(func() bool { return !alive(pid) && !alive(bg) }))
	_, _ = term.Write([]byte("stty size\r"))
	testkit.WaitFor(t, 5*time.Second, "size kept across reset", testkit.Cond(func() bool { return ringHas(term.Ring(), "40 100") }))

	_, _ = term.Write([]byte("exit 7\r"))
	testkit.WaitFor(t, 5*time.Second, "exit detected", testkit.Cond(func() bool { ex, _ := term.Exited(); return ex }))
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
	if _, err := NewTerminal(TerminalConfig{Argv: []string{"/bin/sh"}, Cols: 5000, Rows: 1}); !errors.Is(err, termproto.ErrBadSize) {
		t.Fatalf("bad size: %v", err)
	}
}

func ringText(r *Ring) string {
	buf := make([]byte, r.Size())
	n, _ := r.ReadAt(buf, r.Oldest())
	return string(buf[:n])
}

// ptyNonblocking reports whether the terminal's PTY master is served by Go's poller:
// non-blocking, and deadlines work (they fail with ErrNoDeadline on a blocking file).
func ptyNonblocking(t *testing.T, term *Terminal) bool {
	t.Helper()
	term.mu.Lock()
	f := term.cur.ptmx
	term.mu.Unlock()
	if err := f.SetReadDeadline(time.Time{}); err != nil {
		return false
	}
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var flags int
	var fcErr error
	if err := rc.Control(func(fd uintptr) { flags, fcErr = unix.FcntlInt(fd, unix.F_GETFL, 0) }); err != nil || fcErr != nil {
		t.Fatalf("F_GETFL: %v %v", err, fcErr)
	}
	return flags&unix.O_NONBLOCK != 0
}

// TestTerminalPTYIsPollable checks that the PTY master stays non-blocking through
// start, resize and reset, so reads park in the poller instead of holding a thread.
func TestTerminalPTYIsPollable(t *testing.T) {
	term := newShell(t)
	if !ptyNonblocking(t, term) {
		t.Fatal("pty master is blocking after start")
	}
	if err := term.Resize(101, 41); err != nil {
		t.Fatal(err)
	}
	if !ptyNonblocking(t, term) {
		t.Fatal("pty master is blocking after resize")
	}
	_, _ = term.Write([]byte("stty size\r"))
	testkit.WaitFor(t, 5*time.Second, "new size", testkit.Cond(func() bool { return ringHas(term.Ring(), "41 101") }))
	if err := term.Reset(); err != nil {
		t.Fatal(err)
	}
	if !ptyNonblocking(t, term) {
		t.Fatal("pty master is blocking after reset")
	}
	_, _ = term.Write([]byte("echo RESET$((1+1))\r"))
	testkit.WaitFor(t, 5*time.Second, "output after reset", testkit.Cond(func() bool { return ringHas(term.Ring(), "RESET2") }))
}

// A terminal with Nice runs its shell at that nice value (agentctl's
// -nice), in a scheduling group at it, and so does what the shell starts.
func TestTerminalShellRunsAtItsNiceValue(t *testing.T) {
	own, err := nice.Of(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	want := min(own+5, nice.Max)
	term, err := NewTerminal(TerminalConfig{Argv: []string{"/bin/sh", "-c", "sleep 600 & echo child=$!; exec sleep 600"}, Dir: "/",
		Nice: want, Cols: 80, Rows: 24})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = term.Close() })
	var child int
	testkit.WaitFor(t, 5*time.Second, "the shell's child", testkit.Cond(func() bool {
		buf := make([]byte, term.Ring().Size())
		n, _ := term.Ring().ReadAt(buf, term.Ring().Oldest())
		_, after, ok := strings.Cut(string(buf[:n]), "child=")
		if !ok {
			return false
		}
		child, _ = strconv.Atoi(strings.TrimSpace(strings.SplitN(after, "\n", 2)[0]))
		return child > 0
	}))
	for _, pid := range []int{term.Pid(), child} {
		if got, err := nice.Of(pid); err != nil || got != want {
			t.Fatalf("pid %d runs at nice %d (%v), want %d", pid, got, err, want)
		}
	}
	// The shell leads its own session: its scheduling group is lowered too.
	if _, ok, _ := nice.GroupOf(term.Pid()); ok {
		testkit.WaitFor(t, 5*time.Second, "the shell's scheduling group at its nice value", testkit.Cond(func() bool {
			n, _, _ := nice.GroupOf(term.Pid())
			return n == want
		}))
	}
}

// A terminal with a Credential runs its shell as that user (agentctl's
// -agent-user): nobody, 65534, on Debian.
func TestTerminalRunsAsCredential(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (CI runs as root)")
	}
	term, err := NewTerminal(TerminalConfig{Argv: []string{"/bin/sh", "-c", "echo uid=$(id -u):$(id -g); exec sleep 600"}, Dir: "/",
		Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}, Cols: 80, Rows: 24})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = term.Close() })
	testkit.WaitFor(t, 5*time.Second, "the shell's uid", testkit.Cond(func() bool { return ringHas(term.Ring(), "uid=65534:65534") }))
}
