package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/paddockhq/paddock/bench/chaos"
)

// TestChaosNoDoubleOwners injects at least 50 faults, once per raft store
// (server.raft_store = bolt, then wal), into a three-node
// cluster running three sessions: leader faults (kill -9 the leader,
// SIGSTOP/SIGCONT it, cut it off with network namespaces), at least 15 of
// them, one at a time, while a second injector kill -9s sessions' agentctls
// and every session is sent prompts. It records every lease grant and every
// agent execution and checks that no two executions of a session overlapped,
// that tokens never went backwards, that every unanswered prompt lost its
// turn to the end of its agent, and that every session still answers at the
// end, remembering every word it confirmed. PADDOCK_CHAOS_FAULTS overrides
// the fault count.
func TestChaosNoDoubleOwners(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	faults := 50
	if v, err := strconv.Atoi(os.Getenv("PADDOCK_CHAOS_FAULTS")); err == nil && v > 0 {
		faults = v
	}
	leaderFaults := max(faults*3/10, 1)
	partitions := "auto"
	if os.Getenv("CI") != "" {
		partitions = "on" // .ci/run installs iproute2 and runs as root
	}
	// Both raft stores (server.raft_store): bolt, the default, and the WAL.
	for _, store := range []string{"bolt", "wal"} {
		t.Run(store, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
			defer cancel()
			dir := t.TempDir()
			res, err := chaos.Run(ctx, chaos.Options{Bin: binDir, Dir: dir, Faults: faults, MinLeaderFaults: leaderFaults, Sessions: 3,
				PromptsPerSession: 20, Partitions: partitions, MaxDuration: 2 * time.Minute, RaftStore: store, Logf: t.Logf})
			t.Logf("chaos: %d faults %v in %.0fs, %d operations checked (%d executions, %d lease changes, %d/%d prompts answered, %d/%d sessions answered the final recall, %d sessions added), %d violations, partitions=%v, seed %d, %s",
				res.Faults, res.ByKind, res.FaultSeconds, res.Operations, res.Executions, res.Grants, res.PromptsAnswered, res.PromptsSent, res.Recalls, res.Sessions,
				res.SessionsAdded, res.Violations, res.Partitions, res.Seed, res.Took.Round(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range res.Details {
				t.Errorf("violation: %s", d)
			}
			if res.Faults < faults {
				t.Errorf("only %d of %d faults were injected in the time bound", res.Faults, faults)
			}
			if n := res.Faults - res.ByKind[chaos.KillAgentctl]; n < leaderFaults {
				t.Errorf("only %d of %d leader faults were injected in the time bound", n, leaderFaults)
			}
			if res.Executions < res.ByKind[chaos.KillAgentctl] {
				t.Errorf("%d executions recorded for %d agentctl kills: the journal misses executions", res.Executions, res.ByKind[chaos.KillAgentctl])
			}
			if res.PromptsAnswered == 0 {
				t.Errorf("no prompt was answered during the run (%d sent)", res.PromptsSent)
			}
			if res.Violations > 0 {
				keepLogs(t, dir)
			}

		})
	}
}

// keepLogs copies the nodes' server logs out of the test's temporary
// directory (removed when the test ends) for a failed run.
func keepLogs(t *testing.T, dir string) {
	logs, _ := filepath.Glob(filepath.Join(dir, "node*", "server.log"))
	keep, err := os.MkdirTemp("", "paddock-chaos-logs-")
	if err != nil {
		t.Logf("keep node logs: %v", err)
		return
	}
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err == nil {
			err = os.WriteFile(filepath.Join(keep, filepath.Base(filepath.Dir(l))+".log"), b, 0o600)
		}
		if err != nil {
			t.Logf("keep node log %s: %v", l, err)
		}
	}
	t.Logf("node logs kept in %s", keep)
}
