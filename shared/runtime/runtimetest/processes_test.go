package runtimetest_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/paddockhq/paddock/shared/runtime/agentctlproc"
	"github.com/paddockhq/paddock/shared/runtime/runtimetest"
	"github.com/paddockhq/paddock/shared/testkit"
)

// TestCleanupProcessesEndsADetachedAgentctl starts a real agentctl the way
// a local runtime does (detached: its own session, it outlives its
// starter) and a detached shell whose child left the test's directory, in
// a test that called CleanupProcesses; once that test is over, every one of
// them must be gone.
func TestCleanupProcessesEndsADetachedAgentctl(t *testing.T) {
	if testing.Short() {
		t.Skip("starts agentctl")
	}
	agentctl, fake, err := runtimetest.Agentctl(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if fake {
		t.Fatal("cmd/agentctl is missing: this test needs the real agentctl")
	}
	var root string
	var agentctlDone, shellDone <-chan struct{}
	t.Run("session", func(t *testing.T) {
		runtimetest.CleanupProcesses(t)
		dir := t.TempDir()
		root = filepath.Dir(dir)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		p, err := agentctlproc.Start(ctx, agentctlproc.StartConfig{
			AgentctlPath: agentctl, SessionID: "cleanup-test", Workspace: dir,
			StateDir: filepath.Join(dir, "state"), Secret: "cleanup-test-secret", Env: os.Environ(),
		})
		if err != nil {
			t.Fatal(err)
		}
		agentctlDone = p.Done
		sh := exec.Command("sh", "-c", "(cd / && sleep 600) & wait")
		sh.Dir = dir
		sh.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := sh.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { _ = sh.Wait(); close(done) }()
		shellDone = done
		testkit.WaitFor(t, 10*time.Second, "agentctl, the shell and the shell's child in / listed", testkit.Cond(func() bool {
			under := runtimetest.ProcessesUnder(dir)
			return slices.Contains(under, p.Info.PID) && slices.Contains(under, sh.Process.Pid) &&
				slices.ContainsFunc(under, func(pid int) bool { return cwd(pid) == "/" })
		}))
	})
	if t.Failed() {
		return
	}
	for what, done := range map[string]<-chan struct{}{"agentctl": agentctlDone, "the shell": shellDone} {
		select {
		case <-done: // killed, and reaped by its starter (a moment after the kill)
		case <-time.After(5 * time.Second):
			t.Errorf("%s outlived its test's cleanup", what)
		}
	}
	if left := runtimetest.ProcessesUnder(root); len(left) > 0 {
		t.Errorf("processes %v under %s outlived its test's cleanup", left, root)
	}
}

// TestProcessesUnderTakesOnlyItsDirectory: a process of a sibling directory
// whose name only begins like the asked one is not taken, and directories
// that would take in other people's processes are refused.
func TestProcessesUnderTakesOnlyItsDirectory(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	runtimetest.CleanupProcesses(t)
	base := t.TempDir()
	mine, sibling := filepath.Join(base, "run1"), filepath.Join(base, "run12")
	pids := map[string]int{}
	for _, d := range []string{mine, sibling} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("sleep", "600")
		cmd.Dir = d
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		pids[d] = cmd.Process.Pid
	}
	testkit.WaitFor(t, 10*time.Second, "both sleepers", testkit.Cond(func() bool {
		return cwd(pids[mine]) == mine && cwd(pids[sibling]) == sibling
	}))
	got := runtimetest.ProcessesUnder(mine)
	if !slices.Contains(got, pids[mine]) || slices.Contains(got, pids[sibling]) {
		t.Errorf("ProcessesUnder(%s) = %v; want %d and not %d (in %s)", mine, got, pids[mine], pids[sibling], sibling)
	}
	for _, d := range []string{"", "/", "relative/dir", os.TempDir(), os.TempDir() + "/"} {
		if got := runtimetest.ProcessesUnder(d); len(got) != 0 {
			t.Errorf("ProcessesUnder(%q) = %d processes; want it refused", d, len(got))
		}
	}
	if slices.Contains(runtimetest.ProcessesUnder(filepath.Dir(os.Args[0])), os.Getpid()) {
		t.Error("ProcessesUnder listed the test process itself")
	}
}

func cwd(pid int) string {
	s, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd")
	return s
}
