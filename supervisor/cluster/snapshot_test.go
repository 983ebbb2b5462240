package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/shared/testkit"
	"github.com/paddockhq/paddock/supervisor/state"
)

// TestServerSnapshotsWhenWritesGoQuiet: a burst of writes far below raft's
// own threshold (8,192 entries) is followed by a snapshot once the log has
// been still for the quiet period, and a restart restores it, so the log
// it applies begins after the burst.
func TestServerSnapshotsWhenWritesGoQuiet(t *testing.T) {
	start := oneVoter(t, func(c *Config) {
		c.QuietSnapshotAfter, c.QuietSnapshotEntries = 300*time.Millisecond, 100
	})
	n := start()
	testkit.WaitFor(t, 15*time.Second, "the new cluster's first election", testkit.Cond(n.IsLeader))
	const burst = 300
	for i := 0; i < burst; i++ {
		if _, err := n.Apply(context.Background(), state.CmdCreateTask, &state.CreateTaskBody{Task: api.Task{ID: fmt.Sprintf("t%d", i), Title: "x"}}); err != nil {
			t.Fatal(err)
		}
	}
	last := n.raft.LastIndex()
	testkit.WaitFor(t, 10*time.Second, "a snapshot covering the burst", testkit.Cond(func() bool { return n.lastSnapshotIndex() >= last }))
	if err := n.Shutdown(); err != nil {
		t.Fatal(err)
	}

	n = start()
	defer n.Shutdown()
	if got := n.lastSnapshotIndex(); got < last {
		t.Fatalf("the restarted server's latest snapshot is at %d, want at least %d", got, last)
	}
	if tasks := n.Store().Tasks(); len(tasks) != burst {
		t.Fatalf("the restored state has %d tasks before any log entry is applied, want %d", len(tasks), burst)
	}
}
