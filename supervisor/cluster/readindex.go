package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Linearizable reads.
//
// raft.State() == Leader is this node's own belief: a leader that was paused
// (GC, SIGSTOP, a VM stall) or cut off keeps it until it hears of a newer
// term, and meanwhile would answer from state that a newer leader has
// already moved past (the stale read Jepsen found in Consul's default
// mode). So a consistent read first runs a read round, the read-index
// protocol of the Raft thesis (§6.4) on hashicorp/raft's primitives:
//
//  1. note the index of the last entry in this leader's log: by the Leader
//     Completeness Property it holds every entry committed so far, including
//     the no-op a new leader appends, so reads on a new leader see everything
//     its predecessors committed;
//  2. VerifyLeader: a quorum answers a heartbeat in this leader's term, so no
//     newer leader had committed anything when the round began;
//  3. the reader then waits until that index is committed and the FSM has
//     applied every command up to it (waitReadIndex).
//
// Rounds are batched: every reader that arrives while a round is in flight
// waits for the next round, which starts when the current one ends, so each
// read is covered by a round that began after the read did, and any number
// of concurrent reads cost one heartbeat round trip each round.
//
// hashicorp/raft counts, for a verify, a heartbeat response that arrives
// after the verify was registered even when the heartbeat was sent before
// it. On a running node that response is at most a round trip old; on a
// node that was stalled it can predate the stall, long enough for the other
// servers to have elected a leader and committed writes. So a round that may
// overlap a stall of this process (stallWatch) is not trusted: it is run
// again once responses buffered across the stall have been consumed.

// readBarrier batches read rounds: concurrent readers share one round, and a
// reader never joins a round that began before it arrived.
type readBarrier struct {
	// round is one read round: the read index, or why not. It ends early,
	// with raft.ErrRaftShutdown, once stop is closed.
	round func(stop <-chan struct{}) (uint64, error)
	stop  chan struct{} // closed by close

	mu      sync.Mutex
	running bool       // a round is in flight
	next    *readRound // the round that starts when the current one ends
	closed  bool
	wg      sync.WaitGroup // the goroutine running rounds
}

// readRound is one round's outcome, shared by the readers that waited on it.
type readRound struct {
	done  chan struct{}
	index uint64
	err   error
}

func newReadBarrier(round func(stop <-chan struct{}) (uint64, error)) *readBarrier {
	return &readBarrier{round: round, stop: make(chan struct{})}
}

// await returns the read index of a round that started after the call.
func (b *readBarrier) await(ctx context.Context) (uint64, error) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return 0, fmt.Errorf("read round: %w", raft.ErrRaftShutdown)
	}
	r := b.next
	if r == nil {
		r = &readRound{done: make(chan struct{})}
		b.next = r
	}
	if !b.running {
		b.running = true
		b.next = nil
		b.wg.Add(1)
		go b.run(r)
	}
	b.mu.Unlock()
	select {
	case <-r.done:
		return r.index, r.err
	case <-ctx.Done():
		return 0, fmt.Errorf("read round: %w", ctx.Err())
	}
}

// run runs r, then each round readers queued meanwhile, until none waits.
// Each round is bounded by raft: VerifyLeader ends when a quorum answers,
// when leadership is lost (the leader lease) or when raft shuts down.
func (b *readBarrier) run(r *readRound) {
	defer b.wg.Done()
	for r != nil {
		r.index, r.err = b.round(b.stop)
		close(r.done)
		b.mu.Lock()
		r, b.next = b.next, nil
		if r == nil {
			b.running = false
		}
		b.mu.Unlock()
	}
}

// close refuses new rounds and waits for the running one (call it after raft
// has shut down, which ends any verify in flight).
func (b *readBarrier) close() {
	b.mu.Lock()
	if !b.closed {
		b.closed = true
		close(b.stop)
	}
	b.mu.Unlock()
	b.wg.Wait()
}

// maxStallRetries bounds how many times one round is run again because a
// stall of this process may have overlapped it.
const maxStallRetries = 10

// ErrReadUnconfirmed means a read round could not confirm this node's
// leadership (it kept stalling); the read is not served from local state.
var ErrReadUnconfirmed = errors.New("leadership could not be confirmed for a consistent read")

// readRound is one read round on this node (see the comment at the top).
// A round run again after a stall waits for the stall's buffered responses
// to drain, or for stop (the node shuts down).
func (n *Node) readRound(stop <-chan struct{}) (uint64, error) {
	for attempt := 0; attempt < maxStallRetries; attempt++ {
		if n.raft.State() != raft.Leader {
			return 0, ErrNotLeader
		}
		start := time.Now()
		index := n.raft.LastIndex()
		if err := n.raft.VerifyLeader().Error(); err != nil {
			if errors.Is(err, raft.ErrRaftShutdown) {
				return 0, fmt.Errorf("verify leadership: %w", err)
			}
			return 0, fmt.Errorf("%w: verify leadership: %v", ErrNotLeader, err)
		}
		wait := n.stalls.settle(start)
		if wait == 0 {
			return index, nil
		}
		n.log.Debug("a stall may have overlapped a read round; running it again", "after", wait)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-stop:
			t.Stop()
			return 0, fmt.Errorf("read round: %w", raft.ErrRaftShutdown)
		}
	}
	return 0, ErrReadUnconfirmed
}

// ConfirmRead makes a read of the local store linearizable: it returns nil
// once a read round that began after the call has confirmed that this node
// leads, and the store holds every write committed before that round. It
// returns an error wrapping ErrNotLeader when this node does not lead (the
// caller forwards the read to the leader); any other error means the read
// cannot be confirmed now. Concurrent callers share rounds.
func (n *Node) ConfirmRead(ctx context.Context) error {
	index, err := n.reads.await(ctx)
	if err != nil {
		return err
	}
	return n.waitReadIndex(ctx, index)
}

// waitReadIndex waits until every entry up to index is committed and the FSM
// has applied each command among them. Only commands reach the FSM (the store
// counts their indexes); a leader's no-op, barriers and configuration entries
// do not, so the wait is for the last command at or before index.
func (n *Node) waitReadIndex(ctx context.Context, index uint64) error {
	if n.store.LastIndex() >= index {
		return nil
	}
	// raft hands entries to the FSM only once they are committed; AppliedIndex
	// is the last one it handed over.
	for backoff := 100 * time.Microsecond; n.raft.AppliedIndex() < index; backoff = min(backoff*2, 10*time.Millisecond) {
		if n.raft.State() != raft.Leader {
			return fmt.Errorf("%w: lost leadership before index %d committed", ErrNotLeader, index)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for index %d to commit: %w", index, ctx.Err())
		case <-time.After(backoff):
		}
	}
	last, err := n.lastCommand(index)
	if err != nil {
		return err
	}
	return n.WaitApplied(ctx, last)
}

// lastCommand is the index of the last command entry at or before index that
// the store may not have applied yet (the store's own index when none).
func (n *Node) lastCommand(index uint64) (uint64, error) {
	applied := n.store.LastIndex()
	for i := index; i > applied; i-- {
		var l raft.Log
		if err := n.stores.logs.GetLog(i, &l); err != nil {
			if errors.Is(err, raft.ErrLogNotFound) {
				// Compacted into a snapshot, which the FSM already holds.
				return applied, nil
			}
			return 0, fmt.Errorf("read log entry %d: %w", i, err)
		}
		if l.Type == raft.LogCommand {
			return i, nil
		}
	}
	return applied, nil
}

// stallWatch notices when this process stops running for a while (a GC
// pause, SIGSTOP, a VM stall): a ticker that finds much more time passed
// than its period records when the stall ended.
type stallWatch struct {
	threshold time.Duration // a gap longer than this is a stall

	mu        sync.Mutex
	running   bool
	lastTick  time.Time
	lastStall time.Time // when the last stall was seen to have ended
}

func newStallWatch(threshold time.Duration) *stallWatch {
	return &stallWatch{threshold: threshold}
}

// run ticks until ctx ends.
func (s *stallWatch) run(ctx context.Context) {
	t := time.NewTicker(s.threshold / 5)
	defer t.Stop()
	s.mu.Lock()
	s.running, s.lastTick = true, time.Now()
	s.mu.Unlock()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		s.mu.Lock()
		if now.Sub(s.lastTick) > s.threshold {
			s.lastStall = now
		}
		s.lastTick = now
		s.mu.Unlock()
	}
}

// settle says how long to wait before running again a read round that began
// at start: zero when no stall can have overlapped it. A stall the ticker has
// not caught up with yet shows as an overdue tick; one it has seen counts if
// it ended less than a threshold before the round began, since heartbeat
// responses buffered across it may not have been consumed yet.
func (s *stallWatch) settle(start time.Time) time.Duration {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.running {
		return 0
	}
	if now.Sub(s.lastTick) > s.threshold {
		return s.threshold
	}
	if !s.lastStall.IsZero() && s.lastStall.After(start.Add(-s.threshold)) {
		return max(s.lastStall.Add(s.threshold).Sub(now), time.Millisecond)
	}
	return 0
}

// Follower reads.
//
// A node serves some routes from its own state (a terminal is relayed by
// whichever node the client reached). A follower's state trails the
// leader's, and right after a restart it holds only its snapshot until a
// leader tells it what is committed: "not found" there may be a session the
// cluster has. CatchUp is the follower read of the Raft thesis (§6.4): the
// follower asks the leader for a read index (the leader runs its read round)
// and waits until it has applied that index itself.

// ReadIndex runs a read round on this node, which must lead, and returns the
// index of the last command applied once it is confirmed: a follower that has
// applied it sees every write committed before the call.
func (n *Node) ReadIndex(ctx context.Context) (uint64, error) {
	if err := n.ConfirmRead(ctx); err != nil {
		return 0, err
	}
	return n.store.LastIndex(), nil
}

// CatchUp returns nil once this node's store holds every write committed
// before the call: on the leader after a read round, on a follower after it
// has applied the leader's read index.
func (n *Node) CatchUp(ctx context.Context) error {
	for {
		if n.IsLeader() {
			err := n.ConfirmRead(ctx)
			if !errors.Is(err, ErrNotLeader) {
				return err
			}
		}
		id, addr, err := n.WaitForLeader(ctx)
		if err != nil {
			return err
		}
		if id == n.ID() {
			continue // elected meanwhile: confirm as the leader
		}
		index, err := n.leaderReadIndex(ctx, addr)
		if err != nil {
			return err
		}
		return n.WaitApplied(ctx, index)
	}
}

// leaderReadIndex asks the leader at httpAddr for its read index.
func (n *Node) leaderReadIndex(ctx context.Context, httpAddr string) (uint64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.scheme()+"://"+httpAddr+"/v1/internal/read-index", nil)
	if err != nil {
		return 0, err
	}
	n.authorize(req)
	resp, err := n.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("ask %s for a read index: %w", httpAddr, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("ask %s for a read index: %s: %s", httpAddr, resp.Status, bytes.TrimSpace(body))
	}
	var out struct {
		Index uint64 `json:"index"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return 0, fmt.Errorf("ask %s for a read index: %w", httpAddr, err)
	}
	return out.Index, nil
}
