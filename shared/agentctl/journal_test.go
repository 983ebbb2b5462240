package agentctl_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/shared/agentctl"
	"github.com/paddockhq/paddock/shared/testkit"
)

// TestExecutionJournal runs two agent executions under rising tokens and
// reads back one start and one stop per execution, with its token, pid and
// ordered times.
func TestExecutionJournal(t *testing.T) {
	stateDir := t.TempDir()
	_, _, c := inProcess(t, agentctl.Options{StateDir: stateDir})
	before := time.Now()
	var pids []int
	for _, tok := range []uint64{3, 7} {
		c.SetFencingToken(tok)
		st, err := c.StartAgent(ctx(t), acpProfile, "")
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, st.PID)
		if _, err := c.StopAgent(ctx(t)); err != nil {
			t.Fatal(err)
		}
	}
	var entries []agentctl.JournalEntry
	var err error
	testkit.WaitFor(t, 10*time.Second, "four journal entries", testkit.Cond(func() bool {
		entries, err = agentctl.ReadJournal(filepath.Join(stateDir, agentctl.JournalFile))
		return err == nil && len(entries) == 4
	}))
	want := []struct {
		event string
		token uint64
		pid   int
	}{{"start", 3, pids[0]}, {"stop", 3, pids[0]}, {"start", 7, pids[1]}, {"stop", 7, pids[1]}}
	last := before.Add(-time.Second)
	for i, e := range entries {
		if e.Event != want[i].event || e.FencingToken != want[i].token || e.PID != want[i].pid || e.AgentctlPID != os.Getpid() {
			t.Fatalf("entry %d: %+v, want %+v", i, e, want[i])
		}
		// Start times come from /proc: the process's start tick and
		// /proc/uptime, each to 10 ms, so a start may read up to two ticks
		// before the previous stop.
		if e.Time.Before(last.Add(-20*time.Millisecond)) || e.Time.After(time.Now()) {
			t.Fatalf("entry %d at %s: not after %s", i, e.Time, last)
		}
		if (e.Event == "stop") != (e.ExitCode != nil) {
			t.Fatalf("entry %d: exit code %v", i, e.ExitCode)
		}
		last = e.Time
	}
}

func TestDecodeJournal(t *testing.T) {
	good := `{"event":"start","pid":10,"fencing_token":4,"time":"2026-01-02T03:04:05Z","agentctl_pid":9}` + "\n"
	for _, tc := range []struct {
		name, in string
		n        int
		err      string
	}{
		{"empty", "", 0, ""},
		{"one", good, 1, ""},
		{"torn last line", good + `{"event":"st`, 1, ""},
		{"blank lines", "\n" + good + "\n", 1, ""},
		{"garbage", "nope\n" + good, 0, "line 1"},
		{"bad event", `{"event":"run","pid":1,"time":"2026-01-02T03:04:05Z"}` + "\n", 0, "start|stop"},
		{"no pid", `{"event":"stop","time":"2026-01-02T03:04:05Z"}` + "\n", 0, "pid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := agentctl.DecodeJournal(strings.NewReader(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || len(got) != tc.n {
				t.Fatalf("%d entries, %v; want %d", len(got), err, tc.n)
			}
		})
	}
}

func FuzzDecodeJournal(f *testing.F) {
	f.Add([]byte(`{"event":"start","pid":10,"fencing_token":4,"time":"2026-01-02T03:04:05Z"}` + "\n"))
	f.Add([]byte("\n\n{"))
	f.Fuzz(func(t *testing.T, b []byte) {
		entries, err := agentctl.DecodeJournal(strings.NewReader(string(b)))
		if err == nil {
			for _, e := range entries {
				if e.PID <= 0 || e.Time.IsZero() {
					t.Fatalf("accepted %+v", e)
				}
			}
		}
	})
}
