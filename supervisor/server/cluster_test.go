package server

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/shared/testkit"
	"github.com/paddockhq/paddock/supervisor/cluster"
	"github.com/paddockhq/paddock/supervisor/config"
	"github.com/paddockhq/paddock/supervisor/state"
)

func TestFollowerWritesAreForwardedAndReplicated(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	c := newTestCluster(t, 3, "")
	f := c.follower()
	task, err := c.client(f).CreateTask(ctx(t), api.CreateTaskRequest{Title: "via follower"})
	if err != nil {
		t.Fatalf("write through follower: %v", err)
	}
	for i := range c.servers {
		cl := c.client(i, client.WithStaleReads(true))
		testkit.WaitFor(t, 5*time.Second, "task on every node's own state", testkit.Cond(func() bool {
			got, err := cl.GetTask(ctx(t), task.ID)
			return err == nil && got.Title == "via follower"
		}))
	}
	// A consistent read through a follower is served by the leader.
	if _, err := c.client(f).GetTask(ctx(t), task.ID); err != nil {
		t.Fatalf("consistent read through follower: %v", err)
	}
}

// TestLeaderChangeKeepsAcknowledgedWrites runs on each raft store
// (server.raft_store).
func TestLeaderChangeKeepsAcknowledgedWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	for _, store := range []string{config.RaftStoreBolt, config.RaftStoreWAL} {
		t.Run(store, func(t *testing.T) { leaderChangeKeepsAcknowledgedWrites(t, store) })
	}
}

func leaderChangeKeepsAcknowledgedWrites(t *testing.T, store string) {
	c := newTestClusterWith(t, 3, "", func(_ int, cfg *config.Config) { cfg.Server.RaftStore = store })
	for i := range c.servers {
		if got := c.servers[i].Node.RaftStore(); got != store {
			t.Fatalf("server %d opened a %s raft store, want %s", i, got, store)
		}
	}
	var ids []string
	for i := 0; i < 20; i++ {
		task, err := c.client(i%3).CreateTask(ctx(t), api.CreateTaskRequest{Title: "before"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, task.ID)
	}
	old := c.waitLeader(-1)
	c.stop(old)
	leader := c.waitLeader(old)
	task, err := c.client(c.follower()).CreateTask(ctx(t), api.CreateTaskRequest{Title: "after"})
	if err != nil {
		t.Fatalf("write after failover: %v", err)
	}
	ids = append(ids, task.ID)
	for _, id := range ids {
		if _, err := c.client(leader).GetTask(ctx(t), id); err != nil {
			t.Fatalf("acknowledged task %s lost after failover: %v", id, err)
		}
	}
	// The old leader restarts from its data_dir and catches up.
	c.start(old)
	cl := c.client(old, client.WithStaleReads(true))
	testkit.WaitFor(t, 10*time.Second, "restarted node to catch up", testkit.Cond(func() bool {
		got, err := cl.GetTask(ctx(t), task.ID)
		return err == nil && got.Title == "after"
	}))
}

func TestSnapshotSaveAndRestore(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	c := newTestCluster(t, 3, "")
	cl := c.client(c.follower())
	kept, err := cl.CreateTask(ctx(t), api.CreateTaskRequest{Title: "kept"})
	if err != nil {
		t.Fatal(err)
	}
	var snap bytes.Buffer
	if _, err := cl.SnapshotSave(ctx(t), &snap); err != nil {
		t.Fatalf("snapshot save: %v", err)
	}
	gone, err := cl.CreateTask(ctx(t), api.CreateTaskRequest{Title: "after snapshot"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.SnapshotRestore(ctx(t), bytes.NewReader(snap.Bytes())); err != nil {
		t.Fatalf("snapshot restore: %v", err)
	}
	for i := range c.servers {
		stale := c.client(i, client.WithStaleReads(true))
		testkit.WaitFor(t, 10*time.Second, "restored state on every node", testkit.Cond(func() bool {
			_, errKept := stale.GetTask(ctx(t), kept.ID)
			_, errGone := stale.GetTask(ctx(t), gone.ID)
			return errKept == nil && client.IsCode(errGone, "not_found")
		}))
	}
	// A garbage snapshot is refused and changes nothing.
	if _, err := cl.SnapshotRestore(ctx(t), bytes.NewReader([]byte("garbage"))); !client.IsCode(err, "bad_request") {
		t.Fatalf("garbage snapshot: %v, want bad_request", err)
	}
	if _, err := cl.GetTask(ctx(t), kept.ID); err != nil {
		t.Fatalf("state lost after a refused restore: %v", err)
	}
	// Writes keep working after a restore.
	if _, err := cl.CreateTask(ctx(t), api.CreateTaskRequest{Title: "after restore"}); err != nil {
		t.Fatalf("write after restore: %v", err)
	}
}

func TestIdempotentRetryAcrossNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	c := newTestCluster(t, 3, "")
	leader := c.waitLeader(-1)
	f := c.follower()
	cmd, err := state.Command{Type: state.CmdCreateTask, Key: cluster.NewKey(), Now: time.Now(),
		Body: &state.CreateTaskBody{Task: api.Task{ID: "retried", Title: "once"}}}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	first, err := c.servers[f].Node.ApplyEncoded(ctx(t), cmd)
	if err != nil || first.Err != nil {
		t.Fatalf("first apply via follower: %v %v", err, first)
	}
	// The same command retried on the leader (as after ErrLeadershipLost).
	again, err := c.servers[leader].Node.ApplyEncoded(ctx(t), cmd)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Duplicate || again.Index != first.Index || again.Err != nil {
		t.Fatalf("retry = %+v, want a duplicate of index %d without error", again, first.Index)
	}
	tasks, err := c.client(leader).ListTasks(ctx(t))
	if err != nil || len(tasks) != 1 {
		t.Fatalf("tasks = %v (%v), want exactly one", tasks, err)
	}
}

func TestRestartAllNodesLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	c := newTestCluster(t, 3, "")
	var ids []string
	for i := 0; i < 10; i++ {
		task, err := c.client(i%3).CreateTask(ctx(t), api.CreateTaskRequest{Title: "durable"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, task.ID)
	}
	c.stopAll()
	for i := range c.servers {
		c.start(i)
	}
	leader := c.waitLeader(-1)
	for _, id := range ids {
		if _, err := c.client(leader).GetTask(ctx(t), id); err != nil {
			t.Fatalf("task %s lost across a full restart: %v", id, err)
		}
	}
	if _, err := c.client(c.follower()).CreateTask(ctx(t), api.CreateTaskRequest{Title: "after restart"}); err != nil {
		t.Fatalf("write after full restart: %v", err)
	}
}

func TestNoLeaderIsUnavailable(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	c := newTestCluster(t, 3, "")
	c.waitLeader(-1)
	f := c.follower()
	for i := range c.servers {
		if i != f {
			c.stop(i)
		}
	}
	start := time.Now()
	_, err := c.client(f).CreateTask(ctx(t), api.CreateTaskRequest{Title: "no quorum"})
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != 503 || apiErr.Code != "unavailable" {
		t.Fatalf("write without quorum: %v, want 503 unavailable", err)
	}
	if waited := time.Since(start); waited > 10*time.Second {
		t.Fatalf("waited %s for a leader, want a bounded wait", waited)
	}
}

// A leader whose process is gone (its raft connections closed, its port
// refusing) is noticed by the followers, which elect with short timeouts and
// restore the configured ones once a leader is known again
// (supervisor/cluster/deadleader.go).
func TestDeadLeaderIsDetectedAndTimingRestored(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	c := newTestCluster(t, 3, "")
	// Some writes so that the leader has pipelined connections to both.
	for i := 0; i < 5; i++ {
		if _, err := c.client(i%3).CreateTask(ctx(t), api.CreateTaskRequest{Title: "warm"}); err != nil {
			t.Fatal(err)
		}
	}
	old := c.waitLeader(-1)
	c.stop(old)
	c.waitLeader(old)
	detected := uint64(0)
	for i, s := range c.servers {
		if s == nil {
			continue
		}
		detected += s.Node.DeadLeadersDetected()
		testkit.WaitFor(t, 5*time.Second, "configured election timing back on every survivor", testkit.Cond(func() bool {
			rc := s.Node.Raft().ReloadableConfig()
			return rc.HeartbeatTimeout == c.cfgs[i].Server.HeartbeatTimeout && rc.ElectionTimeout == c.cfgs[i].Server.ElectionTimeout
		}))
	}
	if detected == 0 {
		t.Fatal("no survivor detected the dead leader")
	}
}
