//go:build chaosrun

package chaos

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"
)

// TestChaosRun is a manual bench-sized run of the chaos loop:
//
//	PADDOCK_BIN=$PWD/bin CHAOS_FAULTS=1000 CHAOS_SESSIONS=8 CHAOS_MINUTES=10 \
//	  go test -tags chaosrun -run ChaosRun -timeout 30m -v ./bench/chaos/
//
// CHAOS_RAFT_STORE sets the servers' server.raft_store ("bolt" or "wal";
// unset: the default, bolt). CHAOS_DIR keeps the run's directory (node
// logs, journals). The run ends by killing every process whose environment
// mentions that directory, which includes a `go test` that was given
// CHAOS_DIR: build the test binary with -c and run it instead.
func TestChaosRun(t *testing.T) {
	bin := os.Getenv("PADDOCK_BIN")
	if bin == "" {
		t.Skip("PADDOCK_BIN is not set")
	}
	env := func(name string, def int) int {
		if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v != 0 {
			return v
		}
		return def
	}
	seed, _ := strconv.ParseUint(os.Getenv("CHAOS_SEED"), 10, 64)
	dir := os.Getenv("CHAOS_DIR") // kept for the node logs when set
	if dir == "" {
		dir = t.TempDir()
	}
	o := Options{Bin: bin, Dir: dir, Faults: env("CHAOS_FAULTS", 1000), Sessions: env("CHAOS_SESSIONS", 8),
		MinLeaderFaults: env("CHAOS_LEADER_FAULTS", 50), PromptsPerSession: env("CHAOS_PROMPTS", 25), Seed: seed,
		MaxDuration: time.Duration(env("CHAOS_MINUTES", 10)) * time.Minute, Out: os.Getenv("CHAOS_OUT"), Logf: t.Logf,
		RaftStore: os.Getenv("CHAOS_RAFT_STORE")}
	res, err := Run(context.Background(), o)
	t.Logf("%d faults %v in %.0fs (%.1f/min), %d operations (%d executions, %d lease changes, %d/%d prompts answered, %d/%d recalls, %d sessions added), %d violations, seed %d, %s",
		res.Faults, res.ByKind, res.FaultSeconds, res.FaultsPerMinute, res.Operations, res.Executions, res.Grants,
		res.PromptsAnswered, res.PromptsSent, res.Recalls, res.Sessions, res.SessionsAdded, res.Violations, res.Seed, res.Took.Round(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range res.Details {
		t.Errorf("violation: %s", d)
	}
}
