package sessions

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/shared/runtime"
	"github.com/paddockhq/paddock/supervisor/config"
	"github.com/paddockhq/paddock/supervisor/state"
)

// refusingCluster refuses the first refusals commands with err, then
// records every command it commits.
type refusingCluster struct {
	mu        sync.Mutex
	err       error
	refusals  int
	calls     int
	committed []state.CommandType
	store     *state.Store
	onCall    func(calls int) // optional, called with each call's number
}

func (c *refusingCluster) ID() string          { return "n1" }
func (c *refusingCluster) Store() *state.Store { return c.store }
func (c *refusingCluster) LeaderApplyAll(ctx context.Context, props []state.Proposal) ([]*state.Result, error) {
	return applyEach(ctx, c, props)
}
func (c *refusingCluster) LeaderApply(_ context.Context, typ state.CommandType, _ any) (*state.Result, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	if c.onCall != nil {
		c.onCall(c.calls)
	}
	if c.calls <= c.refusals {
		return nil, c.err
	}
	c.committed = append(c.committed, typ)
	return &state.Result{}, nil
}

// Issue 21: an event published while a leadership transfer is pending is
// committed once the transfer ends (here: fails), not dropped.
func TestPublishWaitsOutATransfer(t *testing.T) {
	c := &refusingCluster{err: fmt.Errorf("apply: %w", raft.ErrLeadershipTransferInProgress), refusals: 5, store: state.NewStore()}
	m := New(Options{Cluster: c, Config: config.Default()})
	m.publish(context.Background(), "s1", api.EventAgentctlStarting, nil)
	if c.calls != 6 || len(c.committed) != 1 || c.committed[0] != state.CmdPublishEvent {
		t.Fatalf("%d calls, committed %v; want the event committed on the 6th", c.calls, c.committed)
	}
}

// A command refused for a transfer is retried only while ctx lives; the
// error then comes back as Retryable.
func TestApplyStopsWithItsContext(t *testing.T) {
	c := &refusingCluster{err: raft.ErrLeadershipTransferInProgress, refusals: 1 << 30, store: state.NewStore()}
	m := New(Options{Cluster: c, Config: config.Default()})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.onCall = func(calls int) {
		if calls == 3 {
			cancel()
		}
	}
	_, err := m.apply(ctx, state.CmdPutExecutor, nil)
	if !errors.Is(err, raft.ErrLeadershipTransferInProgress) || !Retryable(err) {
		t.Fatalf("apply: %v, want the transfer error, retryable", err)
	}
}

func TestRetryable(t *testing.T) {
	cases := []struct {
		err  error
		want bool
	}{
		{nil, false},
		{raft.ErrLeadershipTransferInProgress, true},
		{fmt.Errorf("put: %w", raft.ErrLeadershipLost), true},
		{raft.ErrEnqueueTimeout, true},
		{&applyError{err: errors.New("not the leader")}, true},
		{ErrNotLeader, true},
		{fmt.Errorf("recover: %w", runtime.ErrUnavailable), true},
		{fmt.Errorf("health: %w", context.DeadlineExceeded), true},
		{fmt.Errorf("claim: %w", state.ErrConflict), false},
		{fmt.Errorf("session %w", state.ErrNotFound), false},
		{runtime.ErrNotFound, false},
		{errors.New("agent refused"), false},
	}
	for _, tc := range cases {
		if got := Retryable(tc.err); got != tc.want {
			t.Errorf("Retryable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
