package agentctl

import (
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// endLeftovers ends a journaled agent only while its pid names the process
// the journal recorded (by its start time): a pid reused since, by another
// process, is left alone.
func TestEndLeftoversSparesAReusedPid(t *testing.T) {
	cmd := exec.Command("sleep", "600")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	pid := cmd.Process.Pid
	dir := t.TempDir()
	journal := filepath.Join(dir, JournalFile)
	// Another process had the pid an hour ago.
	if err := AppendJournal(journal, JournalEntry{Event: JournalStart, PID: pid, Time: time.Now().Add(-time.Hour), AgentctlPID: 1}); err != nil {
		t.Fatal(err)
	}
	if err := endLeftovers(dir, time.Second, hclog.NewNullLogger()); err != nil {
		t.Fatal(err)
	}
	if !alive(pid) {
		t.Fatal("a process that only shares a journaled agent's pid was ended")
	}
	// The same pid recorded when it started is a leftover.
	if err := AppendJournal(journal, JournalEntry{Event: JournalStart, PID: pid, Time: procStartTime(pid, time.Now()), AgentctlPID: 2}); err != nil {
		t.Fatal(err)
	}
	if err := endLeftovers(dir, 5*time.Second, hclog.NewNullLogger()); err != nil {
		t.Fatal(err)
	}
	if alive(pid) {
		t.Fatal("the journaled agent still runs")
	}
}
