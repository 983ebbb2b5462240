package cluster

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/shared/testkit"
	"github.com/paddockhq/paddock/supervisor/state"
)

// LeaderApplyAll commits its commands in their order, each with its own
// outcome: a domain refusal in the middle does not stop the ones after it.
// A node that does not lead refuses them all.
func TestLeaderApplyAllCommitsInOrder(t *testing.T) {
	n := oneVoter(t, func(*Config) {})()
	defer n.Shutdown()
	testkit.WaitFor(t, 15*time.Second, "the node to lead", testkit.Cond(n.IsLeader))
	task := func(id string) *state.CreateTaskBody {
		return &state.CreateTaskBody{Task: api.Task{ID: id, Title: id}}
	}
	props := []state.Proposal{
		{Type: state.CmdCreateTask, Body: task("t1")},
		{Type: state.CmdCreateTask, Body: task("t1")}, // a conflict
		{Type: state.CmdSetTaskState, Body: &state.SetTaskStateBody{TaskID: "t1", State: api.TaskDone}},
		{Type: state.CmdCreateTask, Body: task("t2")},
	}
	results, err := n.LeaderApplyAll(context.Background(), props)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != len(props) {
		t.Fatalf("%d results for %d commands", len(results), len(props))
	}
	for i, res := range results {
		if wantErr := i == 1; (res.Err != nil) != wantErr || (wantErr && !errors.Is(res.Err, state.ErrConflict)) {
			t.Fatalf("command %d: %v", i, res.Err)
		}
		if i > 0 && res.Index <= results[i-1].Index {
			t.Fatalf("command %d committed at index %d, after command %d's %d", i, res.Index, i-1, results[i-1].Index)
		}
	}
	if tk, ok := n.Store().Task("t1"); !ok || tk.State != api.TaskDone {
		t.Fatalf("t1 = %+v, %v; want DONE (closed after it was created)", tk, ok)
	}
	if _, ok := n.Store().Task("t2"); !ok {
		t.Fatal("t2 was not created")
	}

	if err := n.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if res, err := n.LeaderApplyAll(context.Background(), props[3:]); !errors.Is(err, ErrNotLeader) || len(res) != 0 {
		t.Fatalf("a node that does not lead: %v, %v; want ErrNotLeader", res, err)
	}
}
