package sessions

import (
	"context"
	"fmt"
	"sync"

	"github.com/paddockhq/paddock/supervisor/state"
)

// Recoveries found as recorded are group-committed. A recovery run brings
// up many sessions at once; each one whose recorded agentctl answered as
// recorded needs only its agentctl_starting and agentctl_ready events (and
// rarely a changed executor row) written before its agent is continued.
// Those records queue here: the first is committed at once as one
// recover_executors command, and the ones that queued while it was in
// flight go together in the next, so a recovery run of N sessions costs a
// few commits instead of 2N and no session waits for more than two.

// maxRecoveredBatch bounds the items of one recover_executors command.
const maxRecoveredBatch = 256

// recoveredQueue is the leader's queue of recoveries waiting for a commit.
type recoveredQueue struct {
	mu       sync.Mutex
	pending  []pendingRecovery
	flushing bool
}

// pendingRecovery is one queued item and where its outcome goes.
type pendingRecovery struct {
	item state.RecoveredExecutor
	done chan error
}

// recordRecovered commits item in the next recover_executors command and
// returns its outcome: nil when it is recorded, a domain error (the lease
// moved on) or a cluster error (Retryable) otherwise. lctx, the leader
// context, bounds the commit; ctx bounds the wait.
func (m *Manager) recordRecovered(ctx, lctx context.Context, item state.RecoveredExecutor) error {
	p := pendingRecovery{item: item, done: make(chan error, 1)}
	q := &m.recovered
	q.mu.Lock()
	q.pending = append(q.pending, p)
	start := !q.flushing
	q.flushing = true
	q.mu.Unlock()
	if start {
		go m.flushRecovered(lctx)
	}
	select {
	case err := <-p.done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("record the recovery of session %s: %w", item.SessionID, ctx.Err())
	}
}

// flushRecovered commits the queue, one command per batch, until it is
// empty. An item that refuses the command (all or nothing) is found by
// committing the rest without it: the others are not held up by one lease
// that moved on.
func (m *Manager) flushRecovered(ctx context.Context) {
	q := &m.recovered
	for {
		q.mu.Lock()
		n := min(len(q.pending), maxRecoveredBatch)
		batch := q.pending[:n:n]
		q.pending = q.pending[n:]
		if n == 0 {
			q.flushing = false
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		m.commitRecovered(ctx, batch)
	}
}

// commitRecovered commits one batch; a refused batch is split in halves
// until the refused items are alone, each answered with its refusal.
func (m *Manager) commitRecovered(ctx context.Context, batch []pendingRecovery) {
	items := make([]state.RecoveredExecutor, len(batch))
	for i, p := range batch {
		items[i] = p.item
	}
	_, err := m.apply(ctx, state.CmdRecoverExecutors, &state.RecoverExecutorsBody{Items: items})
	if err != nil && !Retryable(err) && len(batch) > 1 {
		half := len(batch) / 2
		m.commitRecovered(ctx, batch[:half])
		m.commitRecovered(ctx, batch[half:])
		return
	}
	for _, p := range batch {
		p.done <- err
	}
}
