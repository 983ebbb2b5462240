package agentctl

import (
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// TestWaitExited: the wait for a process agentctl did not start ends when
// the process exits (also while nobody reaps it), and not before.
func TestWaitExited(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	if waitExited(cmd.Process.Pid, 100*time.Millisecond) {
		t.Fatal("waitExited reported a running process as exited")
	}
	start := time.Now()
	_ = syscall.Kill(cmd.Process.Pid, syscall.SIGKILL) // a zombie until Wait below
	if !waitExited(cmd.Process.Pid, 10*time.Second) {
		t.Fatal("waitExited did not see a killed process exit")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("waitExited took %s to see the exit", d)
	}
	if !pollExited(cmd.Process.Pid, 10*time.Second) {
		t.Fatal("pollExited did not see a killed process exit")
	}
}
