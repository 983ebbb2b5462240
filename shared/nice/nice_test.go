package nice

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

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

// LowerGroup sets every process of the child's group, and nothing of the
// caller's, to the nice value; what the group starts afterwards inherits it.
func TestLowerGroupSetsTheChildsWholeGroup(t *testing.T) {
	own, err := Of(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	want := min(own+7, Max)
	dir := t.TempDir()
	// The shell starts one sleep at once and one after the change.
	cmd := exec.Command("sh", "-c", "sleep 30 & echo $! > early; read go; sleep 30 & echo $! > late; wait")
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	pidIn := func(name string) int {
		var pid int
		runtimetest.WaitFor(t, 10*time.Second, "the shell's "+name+" sleep", func() bool {
			b, _ := os.ReadFile(dir + "/" + name)
			pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
			return pid > 0
		})
		return pid
	}
	early := pidIn("early")
	if err := LowerGroup(cmd.Process.Pid, want); err != nil {
		t.Fatal(err)
	}
	if _, err := stdin.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	late := pidIn("late")
	for _, pid := range []int{cmd.Process.Pid, early, late} {
		if got, err := Of(pid); err != nil || got != want {
			t.Fatalf("pid %d: nice %d (%v), want %d", pid, got, err, want)
		}
	}
	for tid, n := range threadNices(t) {
		if n != own {
			t.Fatalf("this process's thread %d went from nice %d to %d", tid, own, n)
		}
	}
	// Zero, or a value above the group's priority, changes nothing.
	for _, n := range []int{0, want - 1} {
		if err := LowerGroup(cmd.Process.Pid, n); err != nil {
			t.Fatal(err)
		}
		if got, _ := Of(early); got != want {
			t.Fatalf("nice %d changed the group to %d", n, got)
		}
	}
}

func TestOutOfRangeNiceValuesAreRefused(t *testing.T) {
	for _, n := range []int{-1, -20, 20, 100} {
		err := LowerGroup(os.Getpid(), n)
		if err == nil || !strings.Contains(err.Error(), "between 0 and 19") {
			t.Fatalf("nice %d: %v", n, err)
		}
		if _, err := LowerSessionGroup(n); err == nil {
			t.Fatalf("LowerSessionGroup(%d) accepted it", n)
		}
	}
}

// A session leader lowers its own scheduling group; a process that does
// not lead its session leaves that session's group alone.
func TestLowerSessionGroupOnlyForASessionLeader(t *testing.T) {
	if os.Getenv("NICE_TEST_LEADER") != "" {
		changed, err := LowerSessionGroup(6)
		if err != nil || !changed {
			os.Exit(3)
		}
		time.Sleep(30 * time.Second) // the parent reads our group, then kills us
		os.Exit(0)
	}
	before, ok, err := GroupOf(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Skip("this kernel has no autogroups (/proc/self/autogroup)")
	}
	if sid, _ := unix.Getsid(0); sid == os.Getpid() {
		t.Skip("the test process leads its own session")
	}
	if changed, err := LowerSessionGroup(6); err != nil || changed {
		t.Fatalf("not a session leader: changed %v, err %v", changed, err)
	}
	if after, _, _ := GroupOf(os.Getpid()); after != before {
		t.Fatalf("our session's group went from nice %d to %d", before, after)
	}

	cmd := exec.Command(os.Args[0], "-test.run=^TestLowerSessionGroupOnlyForASessionLeader$")
	cmd.Env = append(os.Environ(), "NICE_TEST_LEADER=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var werr error
	go func() { werr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	runtimetest.WaitFor(t, 10*time.Second, "the session leader's group at nice 6", func() bool {
		select {
		case <-exited:
			t.Fatalf("the session leader exited: %v", werr)
		default:
		}
		n, _, _ := GroupOf(cmd.Process.Pid)
		return n == 6
	})
	if after, _, _ := GroupOf(os.Getpid()); after != before {
		t.Fatalf("the child's change reached our group: nice %d → %d", before, after)
	}
}
