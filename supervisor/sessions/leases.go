package sessions

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/shared/agentctl"
	"github.com/paddockhq/paddock/supervisor/config"
	"github.com/paddockhq/paddock/supervisor/state"
)

// Lease keeping (issue "leases with fencing tokens"). The lease of a live
// execution is renewed without a raft write: the leader renews it on the
// holder's agentctl every renewInterval (agentctl self-fences when renewals
// stop) and keeps the expiry in memory. Expiry is decided by a raft write,
// ReclaimLease, a compare-and-set on the fencing token. A new leader gives
// every held lease a grace period first, so a holder that was renewing
// through the failover is never reclaimed.

// leaseTimes returns the renewal interval and the failover grace. A lease
// is renewed every TTL/5: agentctl stops its agent when no renewal reached
// it for the TTL minus its margin (8 s of the default 10 s), so what a
// leader stall plus the election after it may take is that less the
// interval, ~6 s (with TTL/3, ~4.7 s: the prompt storm on a starved 2-CPU
// host lost most of its agents to stalls of ~5 s).
func (m *Manager) leaseTimes() (renew, grace time.Duration) {
	renew = m.cfg.Lease.TTL / 5
	grace = 2*m.cfg.Server.ElectionTimeout + renew
	return renew, grace
}

// leaseClock is the leader's in-memory lease expiry per session, and when
// each session's pump last sent a poll that renewed its lease.
type leaseClock struct {
	mu     sync.Mutex
	expiry map[string]time.Time
	polled map[string]time.Time
}

func (c *leaseClock) set(sessionID string, t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expiry[sessionID] = t
}

// renewedByPoll records a pump's poll, sent at sent, that agentctl answered
// as a renewal: the expiry counts from the answer (now), later than the
// poll's arrival that agentctl's own deadline counts from, as a renewal's
// does; the keeper's next renewal of the lease is due an interval after
// sent (see leaseKeeper.round). An untracked lease (released or reclaimed
// meanwhile) stays untracked.
func (c *leaseClock) renewedByPoll(sessionID string, sent time.Time, ttl time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.expiry[sessionID]; !ok {
		return
	}
	c.expiry[sessionID] = time.Now().Add(ttl)
	c.polled[sessionID] = sent
}

// lastPolled is when the last poll that renewed a session's lease was sent
// (zero when none did).
func (c *leaseClock) lastPolled(sessionID string) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.polled[sessionID]
}

func (c *leaseClock) forget(sessionID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.expiry, sessionID)
	delete(c.polled, sessionID)
}

// get returns a session's expiry (zero when untracked).
func (c *leaseClock) get(sessionID string) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.expiry[sessionID]
}

func (c *leaseClock) expired(now time.Time) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for id, t := range c.expiry {
		if now.After(t) {
			out = append(out, id)
		}
	}
	return out
}

// LeaseExpiry is the leader's current expiry of a session's lease.
func (m *Manager) LeaseExpiry(sessionID string) (time.Time, bool) {
	t := m.leases.get(sessionID)
	return t, !t.IsZero()
}

// startLeaseClock gives every held lease the failover grace.
func (m *Manager) startLeaseClock() {
	_, grace := m.leaseTimes()
	until := time.Now().Add(m.cfg.Lease.TTL + grace)
	m.leases.mu.Lock()
	m.leases.expiry = map[string]time.Time{}
	m.leases.polled = map[string]time.Time{}
	m.leases.mu.Unlock()
	for _, l := range m.store.HeldLeases() {
		m.leases.set(l.SessionID, until)
	}
}

// keepLeases renews live executions' leases and reclaims expired ones until
// ctx (leadership) ends. Each lease is renewed renewInterval after its last
// renewal was sent (at once when this leader starts), each on its own: a
// holder that answers slowly holds up no other. A poll of the session's
// pump that renewed the lease counts as a renewal sent (see pumper.poll):
// a session whose turn streams is renewed by its pump alone. A renewal that
// fails or times out is tried again after renewRetry, not an interval
// later: on a starved host one lost round trip would otherwise use up a
// third of the TTL, and agentctl stops its agent at the TTL minus its
// margin.
func (m *Manager) keepLeases(ctx context.Context) {
	k := newLeaseKeeper(m)
	t := time.NewTicker(k.retry)
	defer t.Stop()
	for {
		k.round(ctx)
		for _, id := range m.leases.expired(time.Now()) {
			m.reclaimExpired(ctx, id)
		}
		select {
		case <-ctx.Done():
			k.wg.Wait()
			return
		case <-t.C:
		}
	}
}

// newLeaseKeeper is the keeper of one leadership, with nothing listed yet.
func newLeaseKeeper(m *Manager) *leaseKeeper {
	renew, _ := m.leaseTimes()
	return &leaseKeeper{m: m, renew: renew, retry: renewRetry(renew), byID: map[string]*leaseEntry{}, sem: make(chan struct{}, 64)}
}

// renewRetry is how soon a failed renewal is tried again (and how often
// the keeper looks for due renewals).
func renewRetry(renew time.Duration) time.Duration {
	return max(renew/10, 50*time.Millisecond)
}

// leaseKeeper schedules the renewals of one leadership.
type leaseKeeper struct {
	m     *Manager
	renew time.Duration
	retry time.Duration
	sem   chan struct{} // bounds renewals in flight
	wg    sync.WaitGroup

	mu sync.Mutex
	// entries are the held leases as last listed (see round), byID the
	// same by session; listed is when.
	entries []*leaseEntry
	byID    map[string]*leaseEntry
	listed  time.Time
}

// leaseEntry is one held lease's renewal schedule.
type leaseEntry struct {
	leaseTarget
	due  time.Time // when its next renewal is due
	busy bool      // a renewal is in flight
}

// round starts the renewal of every held lease that is due and not in
// flight already, the longest-unrenewed first (those nearest to agentctl's
// own deadline), up to the bound on renewals in flight: past it the round
// waits for a renewal to finish, so a new leader's first round renews every
// lease as fast as its holders answer.
//
// The held leases are listed again (from the store, with their holders'
// clients) once a renewal interval, not every round: a round looks at
// ten times a second, and listing 1,000 leases each time was a tenth of a
// leader's CPU with 1,000 idle sessions. A lease claimed in between has
// just been renewed by the bring-up that claimed it, so it is renewed an
// interval later at the latest, well within agentctl's TTL less its margin;
// a released one may get a renewal more, which changes nothing.
func (k *leaseKeeper) round(ctx context.Context) {
	now := time.Now()
	if k.stale(now) {
		k.relist(now, k.m.leaseTargets())
	}
	k.mu.Lock()
	var due []*leaseEntry
	for _, e := range k.entries {
		if e.busy || now.Before(e.due) {
			continue
		}
		if polled := k.m.leases.lastPolled(e.sessionID); now.Before(polled.Add(k.renew)) {
			e.due = polled.Add(k.renew) // the pump's poll renewed it
			continue
		}
		e.busy = true
		due = append(due, e)
	}
	sort.SliceStable(due, func(i, j int) bool { return due[i].due.Before(due[j].due) })
	targets := make([]leaseTarget, len(due))
	for i, e := range due {
		targets[i] = e.leaseTarget
	}
	k.mu.Unlock()
	for i, e := range due {
		select {
		case k.sem <- struct{}{}:
		case <-ctx.Done():
			k.mu.Lock()
			for _, left := range due[i:] {
				left.busy = false
			}
			k.mu.Unlock()
			return
		}
		k.wg.Add(1)
		go func() {
			defer k.wg.Done()
			defer func() { <-k.sem }()
			next := k.renewOne(ctx, targets[i])
			k.mu.Lock()
			e.busy, e.due = false, next
			k.mu.Unlock()
		}()
	}
}

// stale reports whether the held leases are to be listed again.
func (k *leaseKeeper) stale(now time.Time) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.entries == nil || now.Sub(k.listed) >= k.renew
}

// relist replaces the entries with targets, keeping the schedule of each
// session still held by the same holder (its entry, in flight or not); a
// new holder is due at once.
func (k *leaseKeeper) relist(now time.Time, targets []leaseTarget) {
	k.mu.Lock()
	defer k.mu.Unlock()
	entries := make([]*leaseEntry, 0, len(targets))
	byID := make(map[string]*leaseEntry, len(targets))
	for _, tg := range targets {
		e := k.byID[tg.sessionID]
		switch {
		case e == nil:
			e = &leaseEntry{leaseTarget: tg}
		case e.nonce != tg.nonce:
			// A new holder: due at once (a renewal still in flight to the
			// old one updates the old entry, no longer listed).
			e = &leaseEntry{leaseTarget: tg}
		default:
			e.leaseTarget = tg
		}
		entries = append(entries, e)
		byID[tg.sessionID] = e
	}
	k.entries, k.byID, k.listed = entries, byID, now
}

// renewOne renews one lease and returns when the next renewal is due: an
// interval after this one was sent, or a retry interval from now when it
// failed. A renewal counts only when the answering agentctl is the holder
// (same boot nonce).
func (k *leaseKeeper) renewOne(ctx context.Context, tg leaseTarget) time.Time {
	sent := time.Now()
	// Half an interval: a renewal lost on the way is retried well within
	// the margin agentctl allows.
	rctx, cancel := context.WithTimeout(ctx, max(k.renew/2, 50*time.Millisecond))
	defer cancel()
	resp, err := tg.client.RenewLease(rctx, k.m.cfg.Lease.TTL)
	if err != nil {
		k.m.log.Debug("lease renewal failed", "session", tg.sessionID, "error", err)
		return time.Now().Add(k.retry)
	}
	if resp.Nonce != tg.nonce {
		// A restarted agentctl is not the holder: nothing to renew there
		// (the lease is reclaimed at its expiry); look again later.
		return sent.Add(k.renew)
	}
	// The expiry counts from the answer, which is later than agentctl's own
	// deadline base: agentctl stops first.
	k.m.leases.set(tg.sessionID, time.Now().Add(k.m.cfg.Lease.TTL))
	return sent.Add(k.renew)
}

// leaseTarget is a held lease and the client of its holder's agentctl.
type leaseTarget struct {
	sessionID string
	nonce     string
	client    *agentctl.Client
}

// leaseTargets lists every held lease with a client of its holder's
// agentctl: live executions' own, and for the others (recorded executions
// a new leader has not recovered yet) one built from the executor row, so
// agents keep running however long recovery takes.
func (m *Manager) leaseTargets() []leaseTarget {
	m.mu.Lock()
	live := make(map[string]*execution, len(m.live))
	for id, e := range m.live {
		live[id] = e
	}
	m.mu.Unlock()
	var targets []leaseTarget
	for _, l := range m.store.HeldLeases() {
		if l.HolderNonce == "" {
			continue
		}
		if e := live[l.SessionID]; e != nil {
			targets = append(targets, leaseTarget{l.SessionID, l.HolderNonce, e.client})
			continue
		}
		ex, ok := m.store.Executor(l.HolderExecutorID)
		if !ok || ex.AgentctlURL == "" || (ex.Status != api.ExecutorReady && ex.Status != api.ExecutorStarting) {
			continue
		}
		targets = append(targets, leaseTarget{l.SessionID, l.HolderNonce, clientFor(ex, l.FencingToken)})
	}
	return targets
}

// reclaimExpired ends a lease whose holder stopped renewing: a raft
// compare-and-set on the token, then the session is ERROR (and resumed when
// auto_resume allows, with a strictly higher token).
func (m *Manager) reclaimExpired(ctx context.Context, sessionID string) {
	lock := m.sessionLock(sessionID)
	if !lock.TryLock() {
		return // a lifecycle operation is running; check again next tick
	}
	// Re-read under the lock: a lifecycle operation that held it may have
	// claimed the lease afresh meanwhile (untracked or renewed: not expired).
	l, ok := m.store.Lease(sessionID)
	until := m.leases.get(sessionID)
	if !ok || l.State != api.LeaseHeld || until.IsZero() || !time.Now().After(until) {
		lock.Unlock()
		if !ok || l.State != api.LeaseHeld {
			m.leases.forget(sessionID)
		}
		return
	}
	if ex, ok := m.store.Executor(l.HolderExecutorID); ok && m.waitsForNode(ctx, ex) {
		// The holder's node does not answer: the session waits for it
		// (node_unavailable) rather than fail; its agent, if it still runs
		// behind a partition, has stopped itself by now.
		lock.Unlock()
		return
	}
	m.log.Warn("lease expired; reclaiming", "session", sessionID, "holder", l.HolderExecutorID, "token", l.FencingToken)
	if _, err := m.apply(ctx, state.CmdReclaimLease, &state.ReleaseLeaseBody{SessionID: sessionID, FencingToken: l.FencingToken}); err != nil {
		lock.Unlock()
		m.log.Warn("reclaim lease", "session", sessionID, "error", err)
		return
	}
	m.leases.forget(sessionID)
	if e := m.live1(sessionID); e != nil {
		m.mu.Lock()
		e.stopping = true // its exit is this reclaim, not a new failure
		m.mu.Unlock()
		m.detach(sessionID)
	}
	sess, _ := m.store.Session(sessionID)
	err := fmt.Errorf("the lease of executor %s expired (no renewal for %s); the agent is considered gone", l.HolderExecutorID, m.cfg.Lease.TTL)
	m.record(ctx, sess, failure{Reason: api.ReasonAgentNotRunning, Executor: l.HolderExecutorID, Err: err})
	lock.Unlock()
	// Resume what was live: an active session, or one that went to ERROR
	// because its agentctl became unreachable (waiting for this expiry).
	wasLive := sess.State != api.SessionError || sess.StateReason == api.ReasonAgentNotRunning
	if m.cfg.Recovery.AutoResume != config.AutoResumeNone && wasLive {
		if rerr := m.Resume(ctx, sessionID); rerr != nil {
			m.log.Info("not auto-resuming session", "session", sessionID, "reason", rerr)
		}
	}
}

// endLease releases a held lease (when the agent is known not to run).
func (m *Manager) endLease(ctx context.Context, sessionID string, reclaim bool) {
	l, ok := m.store.Lease(sessionID)
	if !ok || l.State != api.LeaseHeld {
		return
	}
	typ := state.CmdReleaseLease
	if reclaim {
		typ = state.CmdReclaimLease
	}
	if _, err := m.apply(ctx, typ, &state.ReleaseLeaseBody{SessionID: sessionID, FencingToken: l.FencingToken}); err != nil && !errors.Is(err, state.ErrConflict) {
		m.log.Warn("end lease", "session", sessionID, "error", err)
	}
	m.leases.forget(sessionID)
}
