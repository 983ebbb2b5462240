package cluster

import (
	"context"
	"sync"
	"time"

	"github.com/paddockhq/paddock/supervisor/state"
)

// monitorLeadership starts the leader loop when this node gains leadership
// and cancels it when leadership is lost. Only one leader loop ever runs: the
// previous one has fully stopped before the next starts (Nomad's pattern).
func (n *Node) monitorLeadership(ctx context.Context) {
	var run *leaderRun
	stop := func() {
		if run != nil {
			run.stop()
			run = nil
		}
	}
	defer stop()
	for {
		select {
		case <-ctx.Done():
			return
		case isLeader := <-n.notifyCh:
			if isLeader && run == nil {
				run = n.startLeaderLoop(ctx)
			} else if !isLeader {
				stop()
			}
		}
	}
}

// leaderRun is one running leader loop.
type leaderRun struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func (r *leaderRun) stop() {
	r.cancel()
	<-r.done
}

func (n *Node) startLeaderLoop(ctx context.Context) *leaderRun {
	lctx, cancel := context.WithCancel(ctx)
	r := &leaderRun{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		n.leaderLoop(lctx)
	}()
	return r
}

// leaderLoop runs while this node leads: a barrier so the FSM holds every
// committed entry, registration of this node's addresses, then every
// registered LeaderFunc until the context ends.
//
// A leadership transfer does not end the loop: only the loss of leadership
// does (monitorLeadership). While a transfer is pending raft refuses
// commands, and leader work waits and retries them (sessions' apply,
// recovery's per-session retries); when the transfer fails this node still
// leads and its work carries on where it was, under the same context.
func (n *Node) leaderLoop(ctx context.Context) {
	n.log.Info("gained leadership")
	defer n.log.Info("leader loop stopped")
	for {
		err := n.barrier(ctx)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return
		}
		n.log.Warn("barrier failed", "error", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
	ctx = context.WithValue(ctx, leaderSinceKey{}, n.store.LastIndex())
	n.registerSelf(ctx)
	n.mu.Lock()
	funcs := append([]LeaderFunc(nil), n.leaderFuncs...)
	n.mu.Unlock()
	var wg sync.WaitGroup
	for _, f := range funcs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(ctx)
		}()
	}
	wg.Wait()
	<-ctx.Done()
}

type leaderSinceKey struct{}

// LeaderSince is, in a LeaderFunc's context, the store index this
// leadership's barrier had applied: writes after it were committed under
// this leader (or are still to be applied here). Work that follows the
// store from its start (the lifecycle log) starts there, not at whatever
// index the store reached by the time the func ran.
func LeaderSince(ctx context.Context) uint64 {
	v, _ := ctx.Value(leaderSinceKey{}).(uint64)
	return v
}

// barrier waits for raft's barrier, or for ctx. A barrier enqueued just as
// raft shuts down is never answered (nothing reads raft's apply queue any
// more), so waiting on it alone would hold the leader loop, and Shutdown,
// for good; the goroutine is left to the process in that case.
func (n *Node) barrier(ctx context.Context) error {
	done := make(chan error, 1)
	go func() { done <- n.raft.Barrier(n.cfg.ApplyTimeout).Error() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// registerSelf records this node's addresses in replicated state so that
// followers can forward to it. A failed write (a leadership transfer that
// outlasted Apply's own retries, say) is tried again until it commits or
// leadership ends: followers cannot forward to a leader they cannot find.
func (n *Node) registerSelf(ctx context.Context) {
	self := state.NodeInfo{ID: n.cfg.NodeID, RaftAddr: n.cfg.RaftAddr, HTTPAddr: n.cfg.HTTPAddr}
	for attempt := 0; n.store.Nodes()[self.ID] != self; attempt++ {
		_, err := n.Apply(ctx, state.CmdRegisterNode, &state.RegisterNodeBody{Node: self})
		if err == nil {
			return
		}
		n.log.Warn("register leader address", "attempt", attempt+1, "error", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(min(100*time.Millisecond<<min(attempt, 5), 2*time.Second)):
		}
	}
}
