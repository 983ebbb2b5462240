package sessions

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

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
	// OutcomeNodeUnavailable: the executor's node and its agentctl do not
	// answer; the session waits for the node (RecoverNode takes it up).
	OutcomeNodeUnavailable Outcome = "node_unavailable"
)

// runtimeRetries bounds retries of a runtime that is temporarily unavailable
// (a plugin restarting, a Docker engine coming back).
const runtimeRetries = 8

// Recover brings one recorded session back on a new leader, so that
// sessions outlive a failover: recover its executor through the runtime, health-check
// agentctl, enable workspace access, then continue a live agent, resume a
// gone one from its token (when autoResume), or record why it cannot.
//
// An error with OutcomeSkipped that is Retryable means a step failed for a
// transient reason with nothing recorded against the session: the caller
// tries again under the same leadership (every step is safe to repeat).
// A failure that was recorded returns its outcome and no error.
func (m *Manager) Recover(ctx context.Context, sessionID string, autoResume bool) (Outcome, error) {
	lctx, err := m.leaderCtx()
	if err != nil {
		return OutcomeSkipped, err
	}
	lock := m.sessionLock(sessionID)
	lock.Lock()
	defer lock.Unlock()
	if m.live1(sessionID) != nil {
		return OutcomeSkipped, nil // recovered already (never twice)
	}
	sess, ok := m.store.Session(sessionID)
	if !ok {
		return OutcomeSkipped, fmt.Errorf("session %q %w", sessionID, state.ErrNotFound)
	}
	ex, ok := m.store.Executor(sess.ExecutorID)
	if ok && ex.Status == state.ExecutorError && sess.State.Active() {
		// The last leader recorded the executor's failure but lost
		// leadership before recording the session's: finish recording it
		// (the lease stays until it expires, as for any unproven failure).
		m.failUnproven(ctx, sess, "", state.ReasonAgentNotRunning,
			fmt.Errorf("the session's executor failed during a leader change: %s", ex.ErrorMessage))
		return OutcomeLost, nil
	}
	if !ok || (ex.Status != state.ExecutorStarting && ex.Status != state.ExecutorReady) {
		return OutcomeSkipped, nil
	}
	if len(ex.Handle) == 0 {
		// The launch was cut off before the runtime answered: nothing to
		// reattach to. Start over when the session was still starting.
		m.fail(ctx, sess, ex.ID, state.ExecutorError, state.ReasonExecutorLost, errors.New("the executor's launch was interrupted by a leader change"))
		return OutcomeLost, nil
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
		// Recorded as a failure: the outcome says so, and recovery has
		// nothing left to retry.
		m.failUnproven(ctx, sess, ex.ID, state.ReasonExecutorLost, fmt.Errorf("runtime %q: %w", ex.Runtime, err))
		return OutcomeLost, nil
	}
	m.publish(ctx, sess.ID, state.EventAgentctlStarting, map[string]any{"executor_id": ex.ID, "recovery": true, "node": ex.Node})
	var oldGone bool
	var resp runtime.LaunchResponse
	if !ownerDown {
		takenOver := ex.Node != m.cluster.ID() && !m.nodes.Available(ex.Node)
		if takenOver {
			// The owner is gone and runtimeOf gave this node's plugin (a
			// runtime that is not node-local, or a shared workspace): it
			// manages the executor from now on.
			ex.Node = m.cluster.ID()
		}
		oldGone, err = m.provenGone(ctx, rt, ex)
		if takenOver && oldGone {
			// Only the owner's plugin can prove a node-local executor gone.
			if caps, cerr := rt.Capabilities(ctx); cerr != nil || caps.NodeLocal {
				oldGone = false
			}
		}
		if !nodeDown(err) {
			resp, err = m.recoverExecutor(ctx, rt, ex)
			if err != nil && !nodeDown(err) {
				m.failUnproven(ctx, sess, ex.ID, state.ReasonExecutorLost, fmt.Errorf("recover executor %s: %w", ex.ID, err))
				return OutcomeLost, nil
			}
		}
		ownerDown = nodeDown(err)
	}
	if ownerDown {
		// The owner's server does not answer. Its machine may still run the
		// agentctl (only the server process died): reattach over the
		// recorded address, with no plugin call.
		resp = runtime.LaunchResponse{AgentctlURL: ex.AgentctlURL, PID: ex.PID, ContainerID: ex.ContainerID}
	}
	prevNonce, recorded := ex.Nonce, ex
	ex.AgentctlURL, ex.PID, ex.ContainerID = resp.AgentctlURL, resp.PID, resp.ContainerID
	if len(resp.Handle) > 0 {
		ex.Handle = resp.Handle
	}
	if resp.WorkspacePath != "" {
		ex.WorkspacePath, ex.WorktreePath, ex.WorktreeBranch = resp.WorkspacePath, resp.WorktreePath, resp.WorktreeBranch
	}
	var token uint64
	lease, held := m.store.Lease(sess.ID)
	if held && lease.State == state.LeaseHeld {
		token = lease.FencingToken
	}
	client := clientFor(ex, token)
	var health agentctl.Health
	if ownerDown {
		hctx, cancel := context.WithTimeout(ctx, m.cfg.Recovery.HealthTimeout)
		health, err = client.Health(hctx)
		cancel()
		if err == nil && health.Nonce != prevNonce {
			err = fmt.Errorf("agentctl at %s restarted (boot nonce %s, recorded %s)", ex.AgentctlURL, health.Nonce, prevNonce)
		}
		if err != nil && !m.sharedWorkspace(ctx, ex.Runtime) {
			m.nodeLost(ctx, sess, ex, err)
			return OutcomeNodeUnavailable, nil
		}
		if err != nil {
			// The workspace is on shared storage: this node's plugin takes
			// the executor over (its holder is not proven gone, so the
			// lease below is waited out before anything runs here).
			local, lerr := m.nodes.Runtime("", ex.Runtime)
			if lerr == nil {
				ex.Node = m.cluster.ID()
				resp, lerr = m.recoverExecutor(ctx, local, ex)
			}
			if lerr != nil {
				m.failUnproven(ctx, sess, ex.ID, state.ReasonExecutorLost, fmt.Errorf("node %s does not answer, and this node could not take its executor over: %w", recorded.Node, lerr))
				return OutcomeLost, nil
			}
			ex.AgentctlURL, ex.PID, ex.ContainerID = resp.AgentctlURL, resp.PID, resp.ContainerID
			if len(resp.Handle) > 0 {
				ex.Handle = resp.Handle
			}
			if resp.WorkspacePath != "" {
				ex.WorkspacePath, ex.WorktreePath, ex.WorktreeBranch = resp.WorkspacePath, resp.WorktreePath, resp.WorktreeBranch
			}
			client = clientFor(ex, token)
			ownerDown = false
		}
	}
	if !ownerDown {
		if health, err = m.waitHealthy(ctx, client); err != nil {
			m.failUnproven(ctx, sess, ex.ID, state.ReasonExecutorLost, fmt.Errorf("agentctl at %s is not healthy: %w", ex.AgentctlURL, err))
			return OutcomeLost, nil
		}
	}
	if sess.State == state.SessionStopped {
		// A stopped session keeps its agentctl for workspace access: it is
		// reattached, and nothing is claimed or started.
		ex.Nonce, ex.Status, ex.ErrorMessage = health.Nonce, state.ExecutorReady, ""
		if !reflect.DeepEqual(ex, recorded) {
			if _, err := m.apply(ctx, state.CmdPutExecutor, state.NewPutExecutor(ex)); err != nil {
				return OutcomeSkipped, err
			}
		}
		return OutcomeWorkspace, nil
	}
	if token == 0 || lease.HolderNonce != health.Nonce {
		// The agentctl answering is not the lease holder. Unless the runtime
		// proved the holder gone, the holder may be alive out of reach (a
		// partition): wait out its lease (the grace this leader gave it), by
		// which time it has stopped its agent itself. Then reclaim and claim
		// afresh, with a strictly higher token.
		if token != 0 && !oldGone {
			if err := m.waitLeaseExpiry(ctx, sess.ID); err != nil {
				return OutcomeSkipped, err
			}
		}
		if token, err = m.reclaimAndClaim(ctx, sess.ID, ex.ID, health.Nonce); err != nil {
			return OutcomeSkipped, err
		}
		client.SetFencingToken(token)
	}
	ex.Nonce, ex.Status, ex.ErrorMessage = health.Nonce, state.ExecutorReady, ""
	// An executor found as recorded (the common case after a failover)
	// costs no raft write.
	if !reflect.DeepEqual(ex, recorded) {
		if _, err := m.apply(ctx, state.CmdPutExecutor, state.NewPutExecutor(ex)); err != nil {
			return OutcomeSkipped, err
		}
	}
	// Workspace access (shell, files) is on from here, agent or not.
	m.publish(ctx, sess.ID, state.EventAgentctlReady, map[string]any{"executor_id": ex.ID, "recovery": true, "nonce_changed": prevNonce != health.Nonce})

	// A timed-out answer is asked again: taking it for a gone agent would
	// start a second one beside it.
	agent, err := retryTimeouts(ctx, client.AgentState)
	if err != nil && ctx.Err() == nil && Retryable(err) {
		return OutcomeSkipped, fmt.Errorf("agent state of session %s: %w", sess.ID, err)
	}
	alive := err == nil && prevNonce == health.Nonce && (agent.Status == agentctl.StatusWaitingForInput || agent.Status == agentctl.StatusRunning)
	if alive {
		m.attach(lctx, sess.ID, ex, client)
		want := state.SessionWaitingForInput
		if agent.TurnRunning {
			want = state.SessionRunning
		}
		if sess.State != want {
			if err := m.setState(ctx, sess.ID, want, "", ""); err != nil {
				m.log.Warn("recovered session state", "session", sess.ID, "error", err)
			}
		}
		return OutcomeContinued, nil
	}
	// The agent is gone: resumability decides.
	switch {
	case !ex.SupportsSessionResume:
		m.failAgent(ctx, sess, state.ReasonNotResumable, state.ResumeMessage(state.ReasonNotResumable))
		return OutcomeWorkspace, nil
	case !sess.HasResumeToken:
		m.failAgent(ctx, sess, state.ReasonMissingResumeToken, state.ResumeMessage(state.ReasonMissingResumeToken))
		return OutcomeWorkspace, nil
	case !autoResume:
		m.failAgent(ctx, sess, state.ReasonAgentNotRunning, "the agent stopped while the supervisor was away; resume the session to continue")
		return OutcomeWorkspace, nil
	}
	if sess.State != state.SessionStarting {
		if err := m.setState(ctx, sess.ID, state.SessionStarting, "", ""); err != nil {
			return OutcomeSkipped, err
		}
	}
	agentCfg := m.cfg.Agent(sess.Agent)
	if agentCfg == nil {
		m.failAgent(ctx, sess, state.ReasonAgentNotRunning, fmt.Sprintf("agent profile %q is no longer configured", sess.Agent))
		return OutcomeWorkspace, nil
	}
	sess, _ = m.store.Session(sess.ID)
	if err := m.startAgent(ctx, lctx, sess, ex, client, profile(agentCfg), sess.ResumeToken); err != nil {
		m.failAgent(ctx, sess, state.ReasonAgentNotRunning, err.Error())
		return OutcomeWorkspace, nil
	}
	return OutcomeResumed, nil
}

// recoverExecutor asks the runtime to recover an executor, retrying while
// the runtime is temporarily unavailable or the call times out.
func (m *Manager) recoverExecutor(ctx context.Context, rt runtime.Runtime, ex state.Executor) (runtime.LaunchResponse, error) {
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

// failAgent records a session whose agent is not running while its agentctl
// is healthy: ERROR with the reason; the executor stays ready.
func (m *Manager) failAgent(ctx context.Context, sess state.Session, reason, msg string) {
	m.fail(ctx, sess, "", "", reason, errors.New(msg))
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
func (m *Manager) provenGone(ctx context.Context, rt runtime.Runtime, ex state.Executor) (bool, error) {
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
