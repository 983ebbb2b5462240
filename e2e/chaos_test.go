package e2e

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/paddockhq/paddock/bench/chaos"
)

// TestChaosNoDoubleOwners injects at least 50 faults (kill -9 the leader,
// SIGSTOP/SIGCONT it, cut it off with network namespaces, kill -9 a
// session's agentctl) into a three-node cluster running three sessions,
// records every lease grant and every agent execution, and checks that no
// two executions of a session overlapped and that tokens never went
// backwards. PADDOCK_CHAOS_FAULTS overrides the fault count.
func TestChaosNoDoubleOwners(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	faults := 50
	if v, err := strconv.Atoi(os.Getenv("PADDOCK_CHAOS_FAULTS")); err == nil && v > 0 {
		faults = v
	}
	partitions := "auto"
	if os.Getenv("CI") != "" {
		partitions = "on" // .ci/run installs iproute2 and runs as root
	}
	ctx, cancel := context.WithTimeout(context.Background(), 9*time.Minute)
	defer cancel()
	dir := t.TempDir()
	res, err := chaos.Run(ctx, chaos.Options{Bin: binDir, Dir: dir, Faults: faults, Partitions: partitions, MaxDuration: 6 * time.Minute, Logf: t.Logf})
	t.Logf("chaos: %d faults %v, %d executions, %d lease changes, %d violations, partitions=%v, seed %d, %s",
		res.Faults, res.ByKind, res.Executions, res.Grants, res.Violations, res.Partitions, res.Seed, res.Took.Round(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range res.Details {
		t.Errorf("violation: %s", d)
	}
	if res.Faults < faults {
		t.Errorf("only %d of %d faults were injected in the time bound", res.Faults, faults)
	}
	if res.Executions < res.ByKind[chaos.KillAgentctl] {
		t.Errorf("%d executions recorded for %d agentctl kills: the journal misses executions", res.Executions, res.ByKind[chaos.KillAgentctl])
	}
	if res.Violations > 0 {
		t.Logf("node logs are under %s", dir)
	}
}
