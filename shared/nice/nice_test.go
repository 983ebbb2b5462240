package nice

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddockhq/paddock/shared/runtime/runtimetest"
)

// threadNices returns the nice value of every thread of this process.
func threadNices(t *testing.T) map[int]int {
	t.Helper()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]int{}
	for _, e := range tasks {
		tid, _ := strconv.Atoi(e.Name())
		if n, err := Of(tid); err == nil {
			out[tid] = n
		}
	}
	return out
}

// startShell starts a shell that starts one sleep at once and one after
// it reads a line, each sleep's pid written into dir; the shell's stdin is
// returned.
func startShell(t *testing.T, dir string, attr *syscall.SysProcAttr) (*exec.Cmd, io.Writer) {
	t.Helper()
	cmd := exec.Command("sh", "-c", "sleep 30 & echo $! > early; read go; sleep 30 & echo $! > late; wait")
	cmd.Dir = dir
	cmd.SysProcAttr = attr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	return cmd, stdin
}

// pidIn waits for the pid the shell wrote into dir/name.
func pidIn(t *testing.T, dir, name string) int {
	t.Helper()
	var pid int
	runtimetest.WaitFor(t, 10*time.Second, "the shell's "+name+" sleep", func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, name))
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return pid > 0
	})
	return pid
}

// Lower sets a session leader's whole process group, and its scheduling
// group, to the nice value, and nothing of the caller's; what the group
// starts afterwards inherits it.
func TestLowerSetsTheChildsSessionAndGroup(t *testing.T) {
	own, err := Of(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	ownGroup, groups, err := GroupOf(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	want := min(own+7, Max)
	dir := t.TempDir()
	cmd, stdin := startShell(t, dir, &syscall.SysProcAttr{Setsid: true})
	early := pidIn(t, dir, "early")
	if err := Lower(cmd.Process.Pid, want, t.Logf); err != nil {
		t.Fatal(err)
	}
	if _, err := stdin.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	late := pidIn(t, dir, "late")
	for _, pid := range []int{cmd.Process.Pid, early, late} {
		if got, err := Of(pid); err != nil || got != want {
			t.Fatalf("pid %d: nice %d (%v), want %d", pid, got, err, want)
		}
	}
	// The child leads a session of its own, so it has a scheduling group
	// wherever the kernel has autogroups, even where this process has none
	// (one that never left init's session, as on a fresh CI machine).
	if _, childGroups, err := GroupOf(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	} else if childGroups {
		// The change may wait out the kernel's rate limit (without
		// CAP_SYS_ADMIN).
		runtimetest.WaitFor(t, 5*time.Second, "the child's scheduling group at its nice value", func() bool {
			n, _, _ := GroupOf(cmd.Process.Pid)
			return n == want
		})
	}
	if groups {
		if n, _, _ := GroupOf(os.Getpid()); n != ownGroup {
			t.Fatalf("our scheduling group went from nice %d to %d", ownGroup, n)
		}
	}
	for tid, n := range threadNices(t) {
		if n != own {
			t.Fatalf("this process's thread %d went from nice %d to %d", tid, own, n)
		}
	}
	// Zero, or a value above the group's priority, changes nothing.
	for _, n := range []int{0, want - 1} {
		if err := Lower(cmd.Process.Pid, n, t.Logf); err != nil {
			t.Fatal(err)
		}
		if got, _ := Of(early); got != want {
			t.Fatalf("nice %d changed the group to %d", n, got)
		}
	}
}

// A child that shares the caller's session gets the nice value on its
// process group only: its scheduling group is the caller's own, left alone.
func TestLowerLeavesASharedSessionsGroupAlone(t *testing.T) {
	before, groups, err := GroupOf(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if !groups {
		t.Skip("this kernel has no autogroups (/proc/self/autogroup)")
	}
	dir := t.TempDir()
	cmd, _ := startShell(t, dir, &syscall.SysProcAttr{Setpgid: true})
	pidIn(t, dir, "early")
	want := min(before+5, Max)
	if err := Lower(cmd.Process.Pid, want, t.Logf); err != nil {
		t.Fatal(err)
	}
	if got, _ := Of(cmd.Process.Pid); got < want {
		t.Fatalf("child at nice %d, want at least %d", got, want)
	}
	if after, _, _ := GroupOf(os.Getpid()); after != before {
		t.Fatalf("our session's scheduling group went from nice %d to %d", before, after)
	}
}

func TestOutOfRangeNiceValuesAreRefused(t *testing.T) {
	for _, n := range []int{-1, -20, 20, 100} {
		if err := Lower(os.Getpid(), n, t.Logf); err == nil || !strings.Contains(err.Error(), "between 0 and 19") {
			t.Fatalf("nice %d: %v", n, err)
		}
	}
}

// A process that never left init's session (as a CI machine's tests) has
// an empty autogroup file: no group, not an error. Anything else unexpected is one.
func TestParseAutogroup(t *testing.T) {
	for _, c := range []struct {
		in     string
		n      int
		ok     bool
		hasErr bool
	}{
		{"/autogroup-110357 nice 0\n", 0, true, false},
		{"/autogroup-7 nice 19\n", 19, true, false},
		{"", 0, false, false},
		{"\n", 0, false, false},
		{"/autogroup-7 nice\n", 0, false, true},
		{"/autogroup-7 nice x\n", 0, false, true},
	} {
		n, ok, err := parseAutogroup([]byte(c.in))
		if n != c.n || ok != c.ok || (err != nil) != c.hasErr {
			t.Errorf("parseAutogroup(%q) = %d, %v, %v; want %d, %v, error %v", c.in, n, ok, err, c.n, c.ok, c.hasErr)
		}
	}
}
