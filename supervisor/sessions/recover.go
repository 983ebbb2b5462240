package sessions

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/shared/agentctl"
	"github.com/paddockhq/paddock/shared/runtime"
	"github.com/paddockhq/paddock/supervisor/state"
)

// Outcome says what recovery did with one session.
type Outcome string

// Recovery outcomes.
const (
	OutcomeContinued Outcome = "continued" // the agent was alive: same execution
	OutcomeResumed   Outcome = "resumed"   // the agent was gone and resumed from its token
	OutcomeWorkspace Outcome = "workspace" // agentctl is back, the agent is not (ERROR with a reason)
	OutcomeLost      Outcome = "lost"      // the executor is gone (ERROR executor_lost)
	OutcomeSkipped   Outcome = "skipped"   // nothing to recover
	OutcomeStarted   Outcome = "started"   // recorded but never started: started now
	OutcomeStopped   Outcome = "stopped"   // a stop the last leader answered and did not finish: finished now
	// OutcomeNodeUnavailable: the executor's node and its agentctl do not
	// answer; the session waits for the node (RecoverNode takes it up).
	OutcomeNodeUnavailable Outcome = "node_unavailable"
)

// runtimeRetries bounds retries of a runtime that is temporarily unavailable
// (a plugin restarting, a Docker engine coming back).
const runtimeRetries = 8

// Recover brings one recorded session back on a new leader, so that
// sessions outlive a failover: it finds the recorded executor (find), then
// runs the bring-up a launch runs (bringUp): health-check agentctl, hold
// the lease, enable workspace access, then continue a live agent, resume a
// gone one from its token (when autoResume), or record why it cannot.
//
// An error with OutcomeSkipped that is Retryable means a step failed for a
// transient reason with nothing recorded against the session: the caller
// tries again under the same leadership (every step is safe to repeat).
// A failure that was recorded returns its outcome and no error.
//
// A recovery is nobody's activity: the state changes it makes leave the
// session's last_activity_at as it is (withoutActivity).
func (m *Manager) Recover(ctx context.Context, sessionID string, autoResume bool) (Outcome, error) {
	ctx = withoutActivity(ctx)
	lctx, err := m.leaderCtx(ctx)
	if err != nil {
		return OutcomeSkipped, err
	}
	lock := m.sessionLock(sessionID)
	if err := lock.Lock(ctx); err != nil {
		return OutcomeSkipped, err
	}
	defer lock.Unlock()
	if m.live1(sessionID) != nil {
		return OutcomeSkipped, nil // recovered already (never twice)
	}
	sess, ok := m.store.Session(sessionID)
	if !ok {
		return OutcomeSkipped, fmt.Errorf("session %q %w", sessionID, state.ErrNotFound)
	}
	if sess.StopRequested && (sess.State == api.SessionCreated || sess.State.Active()) {
		// A previous leader answered a stop and was cut off before the
		// session was STOPPED: the stop is finished, not the session
		// continued (or resumed, were its agent already stopped).
		m.log.Info("finishing a stop that a previous leader answered", "session", sess.ID, "state", sess.State)
		err := m.finishStop(ctx, sess.ID)
		switch {
		case err == nil:
			return OutcomeStopped, nil
		case ctx.Err() != nil || Retryable(err):
			return OutcomeSkipped, err // still on record: the recovery tries again
		case nodeDown(err):
			// Still on record: finished when the node answers again.
			if ex, ok := m.store.Executor(sess.ExecutorID); ok {
				m.nodeLost(ctx, sess, ex, err)
			}
			return OutcomeNodeUnavailable, nil
		}
		m.stopFailed(ctx, sess.ID, err)
		return OutcomeLost, nil
	}
	ex, ok := m.store.Executor(sess.ExecutorID)
	if ok && ex.Status == api.ExecutorError && sess.State.Active() {
		// The last leader recorded the executor's failure but lost
		// leadership before recording the session's: finish recording it
		// (the lease stays until it expires, as for any unproven failure).
		m.record(ctx, sess, failure{Reason: api.ReasonAgentNotRunning, KeepLease: true,
			Err: fmt.Errorf("the session's executor failed during a leader change: %s", ex.ErrorMessage)})
		return OutcomeLost, nil
	}
	if !ok || (ex.Status != api.ExecutorStarting && ex.Status != api.ExecutorReady) {
		return OutcomeSkipped, nil
	}
	if len(ex.Handle) == 0 {
		// The launch was cut off before the runtime answered: no agent ran
		// under its lease, so the lease ends with the executor.
		m.record(ctx, sess, failure{Reason: api.ReasonExecutorLost, Executor: ex.ID, Err: errors.New("the executor's launch was interrupted by a leader change")})
		return OutcomeLost, nil
	}
	b, out, f := m.find(ctx, sess, ex)
	if f != nil {
		m.record(ctx, sess, *f)
	}
	if b == nil {
		return out, nil
	}
	b.plan, b.autoResume = planRecover, autoResume
	return m.bringUp(ctx, lctx, b)
}

// find locates a recorded executor for recovery. First over agentctl's
// recorded address (asRecorded): an agentctl that answers there with the
// recorded boot nonce is the lease holder's process, and it is continued
// with no plugin call on the session's path. Otherwise through its owner's
// plugin (which proves the old agentctl gone, or recovers it); over the
// recorded address when the owner's server does not answer (its machine
// may still run the agentctl); or, for a workspace on shared storage whose
// owner is gone, through this node's plugin, which takes it over. It
// returns the bring-up to run, or the outcome and the failure (nil:
// nothing to record) that end recovery here.
func (m *Manager) find(ctx context.Context, sess api.Session, ex api.Executor) (*bringUp, Outcome, *failure) {
	b, notAsRecorded := m.asRecorded(ctx, sess, ex)
	if b != nil {
		return b, "", nil
	}
	lost := func(err error) (*bringUp, Outcome, *failure) {
		// The holder is not proven gone: its lease is waited out.
		return nil, OutcomeLost, &failure{Reason: api.ReasonExecutorLost, Executor: ex.ID, KeepLease: true, Err: err}
	}
	rt, err := m.runtimeOf(ctx, ex)
	for i := 0; err != nil && !nodeDown(err) && i < runtimeRetries && ctx.Err() == nil; i++ {
		select {
		case <-ctx.Done():
		case <-time.After(backoff(i)):
		}
		rt, err = m.runtimeOf(ctx, ex)
	}
	ownerDown := nodeDown(err)
	if err != nil && !ownerDown {
		return lost(fmt.Errorf("runtime %q: %w", ex.Runtime, err))
	}
	// The event commits while the runtime is asked (one raft round trip
	// fewer on each session's path); find returns only after it, so every
	// later write of the session comes after it.
	published := make(chan struct{})
	go func() {
		defer close(published)
		m.publish(ctx, sess.ID, api.EventAgentctlStarting, startingData(ex))
	}()
	defer func() { <-published }()
	b = &bringUp{sess: sess, ex: ex, recorded: ex}
	if lease, held := m.store.Lease(sess.ID); held && lease.State == api.LeaseHeld {
		b.token = lease.FencingToken
	}
	if !ownerDown {
		takenOver := ex.Node != m.cluster.ID() && !m.nodes.Available(ex.Node)
		// Only the owner's plugin can prove a node-local executor gone: a
		// plugin that took one over is not asked (its answer would not
		// count).
		inspect := true
		if takenOver {
			// The owner is gone and runtimeOf gave this node's plugin (a
			// runtime that is not node-local, or a shared workspace): it
			// manages the executor from now on.
			b.ex.Node = m.cluster.ID()
			caps, cerr := rt.Capabilities(ctx)
			inspect = cerr == nil && !caps.NodeLocal
		}
		if inspect {
			b.holderGone, err = m.provenGone(ctx, rt, ex)
		}
		if !nodeDown(err) {
			var resp runtime.LaunchResponse
			resp, err = m.recoverExecutor(ctx, rt, ex)
			if err != nil && !nodeDown(err) {
				return lost(fmt.Errorf("recover executor %s: %w", ex.ID, err))
			}
			if err == nil {
				b.found(resp)
				return b, "", nil
			}
		}
	}
	// The owner's server does not answer, and neither does its agentctl
	// as recorded (asRecorded asked it first: only the server process may
	// have died, with the machine still running the agentctl).
	err = notAsRecorded
	if !m.sharedWorkspace(ctx, ex.Runtime) {
		// Neither failed nor moved: the session waits for its node.
		<-published
		m.nodeLost(ctx, sess, ex, err)
		return nil, OutcomeNodeUnavailable, nil
	}
	// The workspace is on shared storage: this node's plugin takes the
	// executor over (its holder is not proven gone, so bringUp waits its
	// lease out before anything runs here).
	local, lerr := m.nodes.Runtime(m.cluster.ID(), ex.Runtime)
	var resp runtime.LaunchResponse
	if lerr == nil {
		b.ex.Node = m.cluster.ID()
		resp, lerr = m.recoverExecutor(ctx, local, b.ex)
	}
	if lerr != nil {
		return lost(fmt.Errorf("node %s does not answer, and this node could not take its executor over: %w", ex.Node, lerr))
	}
	b.holderGone = false
	b.found(resp)
	return b, "", nil
}

// asRecorded is find's fast path: when the agentctl at the recorded
// address answers its health check with the recorded boot nonce (over the
// pinned certificate when one is recorded), that agentctl is the process
// the lease was granted to, alive: the bring-up continues it without the
// plugin's Inspect and Recover, whether or not its owner's server answers.
// The plugin is not told: every later call (Inspect, Stop, Destroy) hands
// it the executor's handle, which carries all it keeps of an executor, and
// what its Recover would answer for this agentctl (address, boot nonce,
// pid, handle) is what the row records. Nor is it asked in the background:
// a Recover that ran after the agentctl died would start a new one, and
// the lost agentctl's lease could no longer be proven gone. It returns nil
// and why for the slow path: agentctl
// does not answer, or answers as another process (a restarted agentctl has
// another nonce, and only the plugin can say what became of the recorded
// one).
//
// A bring-up whose lease the answering agentctl already holds is marked
// batched: its agentctl_starting event is recorded with agentctl_ready in
// one batched command (recordRecovered). Any other publishes
// agentctl_starting here.
func (m *Manager) asRecorded(ctx context.Context, sess api.Session, ex api.Executor) (*bringUp, error) {
	if ex.AgentctlURL == "" || ex.Nonce == "" {
		return nil, fmt.Errorf("executor %s has no recorded agentctl", ex.ID)
	}
	b := &bringUp{sess: sess, ex: ex, recorded: ex}
	lease, held := m.store.Lease(sess.ID)
	held = held && lease.State == api.LeaseHeld
	if held {
		b.token = lease.FencingToken
	}
	b.client = clientFor(ex, b.token)
	hctx, cancel := context.WithTimeout(ctx, m.cfg.Recovery.HealthTimeout)
	health, err := b.client.Health(hctx)
	cancel()
	if err == nil && (health.Nonce != ex.Nonce || (health.SessionID != "" && health.SessionID != sess.ID)) {
		err = fmt.Errorf("agentctl at %s restarted (boot nonce %s, recorded %s)", ex.AgentctlURL, health.Nonce, ex.Nonce)
	}
	if err != nil {
		m.log.Debug("recorded agentctl does not answer as recorded", "session", sess.ID, "executor", ex.ID, "error", err)
		return nil, err
	}
	b.health = health
	b.batched = held && lease.FencingToken != 0 && lease.HolderNonce == ex.Nonce && lease.HolderExecutorID == ex.ID &&
		sess.ExecutorID == ex.ID && sess.State != api.SessionStopped
	if !b.batched {
		m.publish(ctx, sess.ID, api.EventAgentctlStarting, startingData(ex))
	}
	return b, nil
}

// startingData is the agentctl_starting event of a recovery.
func startingData(ex api.Executor) map[string]any {
	return map[string]any{"executor_id": ex.ID, "recovery": true, "node": ex.Node}
}

// found records what a runtime's recover answered in the bring-up's
// executor and gives it a client.
func (b *bringUp) found(resp runtime.LaunchResponse) {
	b.ex.AgentctlURL, b.ex.PID, b.ex.ContainerID = resp.AgentctlURL, resp.PID, resp.ContainerID
	b.ex.AgentctlFingerprint = resp.AgentctlFingerprint
	if len(resp.Handle) > 0 {
		b.ex.Handle = resp.Handle
	}
	if resp.WorkspacePath != "" {
		b.ex.WorkspacePath, b.ex.WorktreePath, b.ex.WorktreeBranch = resp.WorkspacePath, resp.WorktreePath, resp.WorktreeBranch
	}
	b.client = clientFor(b.ex, b.token)
}

// recoverExecutor asks the runtime to recover an executor, retrying while
// the runtime is temporarily unavailable or the call times out.
func (m *Manager) recoverExecutor(ctx context.Context, rt runtime.Runtime, ex api.Executor) (runtime.LaunchResponse, error) {
	var resp runtime.LaunchResponse
	var err error
	for i := 0; ; i++ {
		rctx, cancel := context.WithTimeout(ctx, launchTimeout)
		resp, err = rt.Recover(rctx, ex.Handle, ex.Secret)
		cancel()
		if err == nil || !(errors.Is(err, runtime.ErrUnavailable) || timedOut(ctx, err)) || i >= runtimeRetries || ctx.Err() != nil {
			return resp, err
		}
		m.log.Info("runtime unavailable or slow during recovery; retrying", "executor", ex.ID, "attempt", i+1, "error", err)
		select {
		case <-ctx.Done():
			return resp, ctx.Err()
		case <-time.After(backoff(i)):
		}
	}
}

func backoff(attempt int) time.Duration {
	d := 250 * time.Millisecond << min(attempt, 4)
	return min(d, 4*time.Second)
}

// reclaimAndClaim ends a session's held lease (its holder is dead) and claims
// a new one for holder (executorID, nonce).
func (m *Manager) reclaimAndClaim(ctx context.Context, sessionID, executorID, nonce string) (uint64, error) {
	m.endLease(ctx, sessionID, true)
	res, err := m.apply(ctx, state.CmdClaimLease, &state.ClaimLeaseBody{SessionID: sessionID, ExecutorID: executorID, Nonce: nonce, TTL: m.cfg.Lease.TTL})
	if err != nil {
		return 0, fmt.Errorf("claim lease of session %s: %w", sessionID, err)
	}
	m.leases.set(sessionID, time.Now().Add(m.cfg.Lease.TTL))
	return res.FencingToken, nil
}

// provenGone reports whether the runtime proves an executor's agentctl gone:
// its owner's plugin says so (exited or not found), or a plugin that is not
// node-local does. The error is the inspection's (a node that does not
// answer proves nothing).
func (m *Manager) provenGone(ctx context.Context, rt runtime.Runtime, ex api.Executor) (bool, error) {
	ictx, cancel := context.WithTimeout(ctx, agentctlTimeout)
	defer cancel()
	insp, err := rt.Inspect(ictx, ex.Handle)
	if !(errors.Is(err, runtime.ErrNotFound) || (err == nil && insp.State == runtime.StateExited)) {
		return false, err
	}
	return true, nil
}

// waitLeaseExpiry waits until this leader's expiry of a session's lease has
// passed (bounded by ctx).
func (m *Manager) waitLeaseExpiry(ctx context.Context, sessionID string) error {
	until := m.leases.get(sessionID)
	if d := time.Until(until); !until.IsZero() && d > 0 {
		m.log.Info("holder not proven gone; waiting for its lease to expire", "session", sessionID, "wait", d.Round(time.Millisecond))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
		}
	}
	return nil
}

// messageBody is the put_message command that records msg.
func (p *pumper) messageBody(msg agentctl.Message) *state.PutMessageBody {
	return &state.PutMessageBody{SessionID: p.e.sessionID, Source: p.source, History: msg.History,
		Message: api.Message{ID: msg.ID, Role: api.Role(msg.Role), Text: msg.Text, Complete: msg.Complete, ToolCall: msg.ToolCall, Plan: msg.Plan}}
}

// dropRecorded forgets the pending messages the state already holds as
// they are: a continued agentctl's catch-up replays every message it kept,
// and most were recorded by the leader before (each a commit the session's
// recovery would wait for, more with every turn the session has had).
func (p *pumper) dropRecorded() {
	kept := p.order[:0]
	for _, mid := range p.order {
		if p.m.store.Recorded(p.messageBody(p.pending[mid])) {
			delete(p.pending, mid)
			continue
		}
		kept = append(kept, mid)
	}
	p.order = kept
}
