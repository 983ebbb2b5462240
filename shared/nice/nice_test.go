package nice

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddockhq/paddock/shared/testkit"
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
	testkit.WaitFor(t, 10*time.Second, "the shell's "+name+" sleep", testkit.Cond(func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, name))
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return pid > 0
	}))
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
		testkit.WaitFor(t, 5*time.Second, "the child's scheduling group at its nice value", testkit.Cond(func() bool {
			n, _, _ := GroupOf(cmd.Process.Pid)
			return n == want
		}))
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

// raiseHelperEnv makes the test binary a helper process that raises itself
// (TestMain is not needed: the helper test exits before any other runs).
const raiseHelperEnv = "PADDOCK_NICE_RAISE_HELPER"

// TestRaiseHelper is the helper: it raises itself to the nice value in its
// environment, starts more threads, and prints what it got: "error …" or
// "group BOOL", then "thread TID NICE old|new" for every thread (new: started
// after Raise) and "autogroup N".
func TestRaiseHelper(t *testing.T) {
	v := os.Getenv(raiseHelperEnv)
	if v == "" {
		t.Skip("a helper process of the Raise tests")
	}
	n, _ := strconv.Atoi(v)
	group, err := Raise(n, nil)
	if err != nil {
		fmt.Printf("error %v (permission: %v)\n", err, errors.Is(err, os.ErrPermission))
	} else {
		fmt.Printf("group %v\n", group)
	}
	// Threads started afterwards inherit the value: more goroutines locked
	// to threads than the runtime has threads idle make it start some.
	before := threadNices(t)
	release := make(chan struct{})
	for range 8 {
		go func() {
			runtime.LockOSThread()
			<-release
		}()
	}
	testkit.WaitFor(t, 10*time.Second, "a thread started after Raise", testkit.Cond(func() bool {
		for tid := range threadNices(t) {
			if _, old := before[tid]; !old {
				return true
			}
		}
		return false
	}))
	if group {
		// Past the kernel's rate limit the group follows within a second.
		testkit.WaitFor(t, 5*time.Second, "the scheduling group at the nice value", testkit.Cond(func() bool {
			g, _, _ := GroupOf(os.Getpid())
			return g == n
		}))
	}
	for tid, nv := range threadNices(t) {
		age := "new"
		if _, old := before[tid]; old {
			age = "old"
		}
		fmt.Printf("thread %d %d %s\n", tid, nv, age)
	}
	if g, ok, _ := GroupOf(os.Getpid()); ok {
		fmt.Printf("autogroup %d\n", g)
	}
	close(release)
	os.Exit(0)
}

// raised is what a Raise helper printed.
type raised struct {
	err       string
	group     bool
	threads   map[int]int
	started   int // threads started after Raise
	autogroup *int
}

// runRaiseHelper runs the test binary as a Raise helper at nice n with attr.
func runRaiseHelper(t *testing.T, exe string, n int, attr *syscall.SysProcAttr) raised {
	t.Helper()
	cmd := exec.Command(exe, "-test.run=^TestRaiseHelper$")
	cmd.Env = append(os.Environ(), raiseHelperEnv+"="+strconv.Itoa(n))
	cmd.Dir = "/" // a working directory any user may enter
	cmd.SysProcAttr = attr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	r := raised{threads: map[int]int{}}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) > 1 && f[0] == "error":
			r.err = strings.TrimPrefix(line, "error ")
		case len(f) == 2 && f[0] == "group":
			r.group = f[1] == "true"
		case len(f) == 4 && f[0] == "thread":
			tid, _ := strconv.Atoi(f[1])
			r.threads[tid], _ = strconv.Atoi(f[2])
			if f[3] == "new" {
				r.started++
			}
		case len(f) == 2 && f[0] == "autogroup":
			g, _ := strconv.Atoi(f[1])
			r.autogroup = &g
		}
	}
	if r.started == 0 {
		t.Fatalf("the helper printed no thread started after Raise:\n%s", out)
	}
	return r
}

// Raise sets every thread of the process, those started afterwards too,
// and, when the process leads a session of its own, its scheduling group;
// a process sharing its session (one started from a shell) leaves the
// session's group alone; without the privilege nothing changes.
func TestRaiseSetsEveryThreadAndItsOwnSessionsGroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("raising a priority needs root (the tests run as root in CI)")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ownGroup, groups, err := GroupOf(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	own := threadNices(t)
	const want = -5
	t.Run("session leader", func(t *testing.T) {
		r := runRaiseHelper(t, exe, want, &syscall.SysProcAttr{Setsid: true})
		if r.err != "" {
			t.Fatalf("Raise: %s", r.err)
		}
		for tid, n := range r.threads {
			if n != want {
				t.Errorf("thread %d at nice %d, want %d", tid, n, want)
			}
		}
		// A session leader has a scheduling group wherever the kernel has
		// autogroups, even where this process has none.
		if r.autogroup != nil && (*r.autogroup != want || !r.group) {
			t.Errorf("its scheduling group at nice %d (Raise reported %v), want %d", *r.autogroup, r.group, want)
		}
	})
	t.Run("shared session", func(t *testing.T) {
		r := runRaiseHelper(t, exe, want, &syscall.SysProcAttr{Setpgid: true})
		if r.err != "" || r.group {
			t.Fatalf("Raise: error %q, group %v; want no error and the group left alone", r.err, r.group)
		}
		for tid, n := range r.threads {
			if n != want {
				t.Errorf("thread %d at nice %d, want %d", tid, n, want)
			}
		}
		if groups && (r.autogroup == nil || *r.autogroup != ownGroup) {
			t.Errorf("the shared session's scheduling group changed: %v, was %d", r.autogroup, ownGroup)
		}
	})
	t.Run("unprivileged", func(t *testing.T) {
		// A copy another user may run: the test binary's own directory is
		// private to root.
		dir := t.TempDir()
		for d := dir; d != filepath.Dir(d) && strings.HasPrefix(d, os.TempDir()+"/"); d = filepath.Dir(d) {
			if err := os.Chmod(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		b, err := os.ReadFile(exe)
		if err != nil {
			t.Fatal(err)
		}
		copyExe := filepath.Join(dir, "nice.test")
		if err := os.WriteFile(copyExe, b, 0o755); err != nil {
			t.Fatal(err)
		}
		r := runRaiseHelper(t, copyExe, want, &syscall.SysProcAttr{Setsid: true, Credential: &syscall.Credential{Uid: 65534, Gid: 65534}})
		if !strings.Contains(r.err, "CAP_SYS_NICE") || !strings.Contains(r.err, "permission: true") {
			t.Fatalf("Raise without the privilege: %q, want an os.ErrPermission naming CAP_SYS_NICE", r.err)
		}
		for tid, n := range r.threads {
			if n != 0 {
				t.Errorf("thread %d at nice %d, want 0 (unchanged)", tid, n)
			}
		}
		if r.autogroup != nil && *r.autogroup != 0 {
			t.Errorf("its scheduling group at nice %d, want 0", *r.autogroup)
		}
	})
	for tid, n := range threadNices(t) {
		if was, ok := own[tid]; ok && n != was {
			t.Fatalf("this process's thread %d went from nice %d to %d", tid, was, n)
		}
	}
	if groups {
		if n, _, _ := GroupOf(os.Getpid()); n != ownGroup {
			t.Fatalf("our scheduling group went from nice %d to %d", ownGroup, n)
		}
	}
}

func TestRaiseRefusesOutOfRangeValues(t *testing.T) {
	for _, n := range []int{1, 19, -21} {
		if _, err := Raise(n, nil); err == nil || !strings.Contains(err.Error(), "between -20 and 0") {
			t.Fatalf("nice %d: %v", n, err)
		}
	}
}
