package chaos

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/shared/agentctl"
)

// TestWatcherRereadsGrownJournals: a journal parsed once is parsed again
// when it grows, so a stop appended later ends its execution.
func TestWatcherRereadsGrownJournals(t *testing.T) {
	root := t.TempDir()
	path := JournalPath(root, "s1")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	// Our own pid and start time: a process that runs.
	start, ok := procStart(os.Getpid())
	if !ok {
		t.Skip("no /proc")
	}
	if err := agentctl.AppendJournal(path, agentctl.JournalEntry{Event: agentctl.JournalStart, PID: os.Getpid(), FencingToken: 7, Time: start, AgentctlPID: 1}); err != nil {
		t.Fatal(err)
	}
	w := NewWatcher(root)
	execs, err := w.Executions()
	if err != nil || len(execs) != 1 || !execs[0].Alive || execs[0].Token != 7 {
		t.Fatalf("executions %+v, %v; want one alive under token 7", execs, err)
	}
	end := time.Now()
	code := 0
	if err := agentctl.AppendJournal(path, agentctl.JournalEntry{Event: agentctl.JournalStop, PID: os.Getpid(), FencingToken: 7, Time: end, AgentctlPID: 1, ExitCode: &code}); err != nil {
		t.Fatal(err)
	}
	execs, err = w.Executions()
	if err != nil || len(execs) != 1 || execs[0].Alive || !execs[0].End.Equal(end) {
		t.Fatalf("executions %+v, %v; want one ended at %s", execs, err, end)
	}
	// A malformed line is an error, not a silent gap.
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("{not json}\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := w.Executions(); err == nil {
		t.Fatal("a malformed journal line went unnoticed")
	}
}

func TestAllUpSince(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := &runner{sessions: []string{"a", "b"}, upAt: map[string]time.Time{}}
	up := func(id string) api.Session { return api.Session{ID: id, State: api.SessionWaitingForInput} }
	down := func(id string) api.Session { return api.Session{ID: id, State: api.SessionError} }
	if r.allUpSince(t0) {
		t.Fatal("nothing seen, yet all up")
	}
	r.sawUp([]api.Session{up("a"), down("b")}, t0.Add(time.Second))
	if r.allUpSince(t0) {
		t.Fatal("b was ERROR, yet all up")
	}
	r.sawUp([]api.Session{{ID: "b", State: api.SessionRunning}}, t0.Add(2*time.Second))
	if !r.allUpSince(t0) {
		t.Fatal("both seen up since t0")
	}
	if r.allUpSince(t0.Add(time.Second)) {
		t.Fatal("a was seen up only at t0+1s, not after it")
	}
	// An older sighting never replaces a newer one.
	r.sawUp([]api.Session{up("a")}, t0)
	if !r.allUpSince(t0) {
		t.Fatal("an older sighting replaced a newer one")
	}
}

// TestWatcherKnowsWhenAKilledProcessWasLastSeen: a process whose stop is
// never journaled (its agentctl was killed) ends when the watcher finds it
// gone, and the watcher says when it last saw it alive: the real end lies
// between the two.
func TestWatcherKnowsWhenAKilledProcessWasLastSeen(t *testing.T) {
	root := t.TempDir()
	path := JournalPath(root, "s1")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	start, ok := procStart(cmd.Process.Pid)
	if !ok {
		t.Skip("no /proc")
	}
	if err := agentctl.AppendJournal(path, agentctl.JournalEntry{Event: agentctl.JournalStart, PID: cmd.Process.Pid, FencingToken: 3, Time: start, AgentctlPID: 1}); err != nil {
		t.Fatal(err)
	}
	w := NewWatcher(root)
	execs, err := w.Executions()
	if err != nil || len(execs) != 1 || !execs[0].Alive {
		t.Fatalf("executions %+v, %v; want one alive", execs, err)
	}
	seen := time.Now()
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	execs, err = w.Executions()
	if err != nil || len(execs) != 1 || execs[0].Alive {
		t.Fatalf("executions %+v, %v; want one ended", execs, err)
	}
	e := execs[0]
	if e.LastSeen.After(seen) || e.LastSeen.Before(start) || !e.End.After(seen) {
		t.Fatalf("last seen %s, end %s; want last seen before the kill at %s and the end after it", ts(e.LastSeen), ts(e.End), ts(seen))
	}
}
