package sessions

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"time"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/shared/agentctl"
	"github.com/paddockhq/paddock/supervisor/state"
)

// The bring-up of a session, shared by a launch (Start, Resume) and by
// recovery on a new leader. Each finds its executor its own way: a launch
// places the session and launches (or recovers) an executor through its
// node's plugin under a lease it has just claimed; recovery finds the
// recorded executor through its owner's plugin, or over agentctl's recorded
// address when the owner's server does not answer. From there one path
// runs, in one order:
//
//	health    agentctl answers (its boot nonce names the holder)
//	lease     the answering agentctl holds the session's lease
//	probe     a launched agentctl reports the agent's capabilities
//	ready     the executor row is ready; workspace access is on
//	agent     a live agent is continued, or one is started or resumed
//
// Every failure on the way is a failure value recorded by Manager.record.

// agentPlan says what the bring-up does with the session's agent.
type agentPlan int

const (
	// planStart starts a new agent (a first launch).
	planStart agentPlan = iota
	// planResume resumes the agent from the session's resume token.
	planResume
	// planRecover continues the agent when it is still alive, else resumes
	// it when auto_resume allows and the agent can, else records why not.
	planRecover
)

// bringUp is one bring-up of a session's executor and agent.
type bringUp struct {
	sess api.Session
	// ex is the executor as found; it is recorded ready once healthy.
	ex api.Executor
	// recorded is the executor row before this bring-up: an executor found
	// as recorded (the common case after a failover) costs no raft write,
	// and an agent survives only under the boot nonce recorded here.
	recorded api.Executor
	client   *agentctl.Client
	// token is the session's lease fencing token (0 when none is held).
	token uint64
	// claimed: this bring-up claimed the lease itself (a launch), so the
	// lease covers no agent yet and the agentctl it started is its holder.
	// Otherwise the recorded holder may still run its agent: a failure
	// keeps the lease, and a holder that is not the answering agentctl is
	// waited out unless holderGone.
	claimed bool
	// holderGone: the runtime proved the previous holder's agentctl gone.
	holderGone bool
	// batched: find found the recorded agentctl answering as recorded
	// (asRecorded), it already holds the lease, and the recovery's events are recorded in one batched command
	// (recordRecovered), agentctl_starting not yet published.
	batched bool
	// health is agentctl's answer when the finder already asked it (zero:
	// ask now).
	health agentctl.Health
	plan   agentPlan
	// autoResume lets planRecover resume an agent that is gone.
	autoResume bool
	// agent, when set, delivers the agent's state asked while the
	// bring-up's writes commit (see askAgentEarly).
	agent <-chan agentAnswer
	// events, when set, delivers agentctl's retained events read while the
	// bring-up's writes commit (see readEventsEarly).
	events <-chan eventsAnswer
}

// agentAnswer is agentctl's answer to an agent state request.
type agentAnswer struct {
	state agentctl.AgentState
	err   error
}

// askAgentEarly gives a recovered agentctl's agent state to the bring-up
// before it records the executor ready (one agentctl round trip fewer on
// the path), when nothing can make the bring-up wait before it uses the
// answer: the answering agentctl is the recorded one and already holds the
// session's lease. The health answer carries the agent's state (one round
// trip for both); an agentctl that predates that is asked while the
// bring-up's writes commit.
func (m *Manager) askAgentEarly(ctx context.Context, b *bringUp, health agentctl.Health) {
	nonce := health.Nonce
	if b.plan != planRecover || b.recorded.Nonce != nonce || b.token == 0 {
		return
	}
	if lease, held := m.store.Lease(b.sess.ID); !held || lease.HolderNonce != nonce {
		return
	}
	ch := make(chan agentAnswer, 1)
	b.agent = ch
	if health.Agent != nil {
		ch <- agentAnswer{state: *health.Agent}
		return
	}
	go func() {
		st, err := retryTimeouts(ctx, b.client.AgentState)
		ch <- agentAnswer{st, err}
	}()
}

// eventsAnswer is agentctl's answer to a read of its retained events.
type eventsAnswer struct {
	resp agentctl.EventsResponse
	err  error
}

// readEventsEarly reads a batched recovery's retained agentctl events for
// its catch-up while the recovery's command commits (one agentctl round
// trip off the session's path): the read does not depend on the commit,
// and the pump carries on from the answer's position, so nothing agentctl
// adds after the read is missed. A recovery the command refuses drops the
// answer.
func (m *Manager) readEventsEarly(ctx context.Context, b *bringUp) {
	ch := make(chan eventsAnswer, 1)
	b.events = ch
	go func() {
		resp, err := b.client.CatchUp(ctx)
		ch <- eventsAnswer{resp, err}
	}()
}

// retainedEvents is the catch-up's read of every event agentctl retained:
// the one read ahead (readEventsEarly) when there is one.
func (e *execution) retainedEvents(ctx context.Context) (agentctl.EventsResponse, error) {
	if e.events == nil {
		return e.client.CatchUp(ctx)
	}
	select {
	case a := <-e.events:
		return a.resp, a.err
	case <-ctx.Done():
		return agentctl.EventsResponse{}, ctx.Err()
	}
}

// bringUp runs the shared path from a found executor to a running agent.
// A failure it decided is recorded and its outcome returned with no error;
// an error is a step that failed with nothing recorded (Retryable when
// transient), for the caller to retry or record.
func (m *Manager) bringUp(ctx, lctx context.Context, b *bringUp) (Outcome, error) {
	sess, ex := b.sess, b.ex
	health := b.health
	if health.Nonce == "" {
		var err error
		if health, err = m.waitHealthy(ctx, b.client); err != nil {
			m.record(ctx, sess, failure{Reason: api.ReasonExecutorLost, Executor: ex.ID, KeepLease: !b.claimed,
				Err: fmt.Errorf("agentctl at %s is not healthy: %w", ex.AgentctlURL, err)})
			return OutcomeLost, nil
		}
	}
	ex.Nonce, ex.Status, ex.ErrorMessage = health.Nonce, api.ExecutorReady, ""
	if !b.claimed && (sess.State == api.SessionStopped || m.errorStays(b)) {
		// A stopped session keeps its agentctl for workspace access: it is
		// reattached, and nothing is claimed or started. So does a session
		// in ERROR that this recovery does not resume: its error stays as
		// recorded (a restart records nothing new for it), and the row's
		// last_seen_at says its agentctl was found.
		return OutcomeWorkspace, m.putExecutor(ctx, ex, b.recorded, true)
	}
	m.askAgentEarly(ctx, b, health)
	ready := map[string]any{"executor_id": ex.ID, "agentctl_url": ex.AgentctlURL,
		"supports_session_resume": ex.SupportsSessionResume, "supports_workspace_only": ex.SupportsWorkspaceOnly}
	if !b.claimed {
		ready["recovery"], ready["nonce_changed"] = true, b.recorded.Nonce != health.Nonce
	}
	if b.batched {
		m.readEventsEarly(ctx, b)
		recorded, err := m.recordBatched(ctx, lctx, b, ex, ready)
		if err != nil {
			return OutcomeSkipped, err
		}
		if recorded {
			b.ex = ex
			return m.runAgent(ctx, lctx, b)
		}
		// Refused (the lease moved on since find read it): recorded the
		// usual way, which sees the lease as it is now, and its catch-up
		// reads the events once that is done.
		b.events = nil
		m.publish(ctx, sess.ID, api.EventAgentctlStarting, startingData(b.recorded))
	}
	if err := m.holdLease(ctx, b, health.Nonce); err != nil {
		return OutcomeSkipped, err
	}
	if b.claimed {
		caps, err := b.client.Probe(ctx, profile(m.cfg.Agent(sess.Agent)))
		if err != nil {
			m.record(ctx, sess, failure{Executor: ex.ID, Err: fmt.Errorf("probe agent %q: %w", sess.Agent, err)})
			return OutcomeLost, nil
		}
		ex.SupportsWorkspaceOnly = caps.SupportsWorkspaceOnly
		ex.SupportsSessionResume = caps.SupportsSessionResume != nil && *caps.SupportsSessionResume
		ex.ResumeProbed = caps.SupportsSessionResume != nil
		ready["supports_session_resume"], ready["supports_workspace_only"] = ex.SupportsSessionResume, ex.SupportsWorkspaceOnly
	}
	if err := m.putExecutor(ctx, ex, b.recorded, !b.claimed); err != nil {
		return OutcomeSkipped, err
	}
	// Workspace access (shell, files) is on from here, agent or not.
	m.publish(ctx, sess.ID, api.EventAgentctlReady, ready)
	b.ex = ex
	return m.runAgent(ctx, lctx, b)
}

// recordBatched records a batched recovery (see bringUp.batched): the
// executor row when it changed, agentctl_starting and agentctl_ready, in
// the next recover_executors command, as a compare-and-set on the lease
// find saw held by the answering agentctl. It reports false when the
// command refused the item (the lease moved on); an error is a commit that
// failed for a cluster reason (Retryable), with nothing known recorded.
func (m *Manager) recordBatched(ctx, lctx context.Context, b *bringUp, ex api.Executor, ready map[string]any) (bool, error) {
	item := state.RecoveredExecutor{SessionID: b.sess.ID, ExecutorID: ex.ID, FencingToken: b.token, Nonce: ex.Nonce,
		Events: []state.RecoveredEvent{{Type: api.EventAgentctlStarting, Data: startingData(b.recorded)}, {Type: api.EventAgentctlReady, Data: ready}}}
	// The row is always in the item, changed or not: it refreshes the
	// executor's last_seen_at (its agentctl was found alive), in the same
	// command as the events.
	item.Executor = state.NewPutExecutor(ex)
	err := m.recordRecovered(ctx, lctx, item)
	if err != nil && (Retryable(err) || ctx.Err() != nil) {
		return false, err
	}
	if err != nil {
		m.log.Info("batched recovery refused; recording it alone", "session", b.sess.ID, "error", err)
		return false, nil
	}
	return true, nil
}

// holdLease makes the answering agentctl (boot nonce) the holder of the
// session's lease. A lease this bring-up claimed is given the nonce. A
// recorded lease held by another agentctl is reclaimed and claimed afresh
// with a strictly higher token, after waiting it out unless the runtime
// proved its holder gone: a holder alive out of reach (a partition) has
// stopped its agent itself by then.
func (m *Manager) holdLease(ctx context.Context, b *bringUp, nonce string) error {
	if b.claimed {
		if _, err := m.apply(ctx, state.CmdSetLeaseNonce, &state.SetLeaseNonceBody{SessionID: b.sess.ID, FencingToken: b.token, Nonce: nonce}); err != nil {
			return fmt.Errorf("record lease holder: %w", err)
		}
		return nil
	}
	lease, held := m.store.Lease(b.sess.ID)
	if b.token != 0 && held && lease.HolderNonce == nonce {
		return nil
	}
	if b.token != 0 && !b.holderGone {
		if err := m.waitLeaseExpiry(ctx, b.sess.ID); err != nil {
			return err
		}
	}
	token, err := m.reclaimAndClaim(ctx, b.sess.ID, b.ex.ID, nonce)
	if err != nil {
		return err
	}
	b.token = token
	b.client.SetFencingToken(token)
	return nil
}

// putExecutor records ex unless it is the row as recorded; with refresh
// (a recovery found the executor's agentctl alive) it records it anyway,
// which sets its last_seen_at.
func (m *Manager) putExecutor(ctx context.Context, ex, recorded api.Executor, refresh bool) error {
	if !refresh && reflect.DeepEqual(ex, recorded) {
		return nil
	}
	_, err := m.apply(ctx, state.CmdPutExecutor, state.NewPutExecutor(ex))
	return err
}

// runAgent is the bring-up's last step: it continues, starts or resumes the
// agent by b.plan, or records why it cannot (the workspace stays usable).
func (m *Manager) runAgent(ctx, lctx context.Context, b *bringUp) (Outcome, error) {
	sess, ex := b.sess, b.ex
	resume := b.plan == planResume
	if b.plan == planRecover {
		// A timed-out answer is asked again: taking it for a gone agent
		// would start a second one beside it.
		var agent agentctl.AgentState
		var err error
		if b.agent != nil {
			a := <-b.agent
			agent, err = a.state, a.err
		} else {
			agent, err = retryTimeouts(ctx, b.client.AgentState)
		}
		if err == nil && agent.Status == agentctl.StatusStarting {
			agent, err = m.agentStarted(ctx, b.client)
		}
		if err != nil && ctx.Err() == nil && Retryable(err) {
			return OutcomeSkipped, fmt.Errorf("agent state of session %s: %w", sess.ID, err)
		}
		if err == nil && b.recorded.Nonce == ex.Nonce && (agent.Status == agentctl.StatusWaitingForInput || agent.Status == agentctl.StatusRunning) {
			settle := func(seen turnSeen) { m.settleRecovered(ctx, sess.ID, b.client, agent, seen) }
			m.attach(lctx, sess.ID, ex, b.client, attachOptions{settle: settle, events: b.events})
			return OutcomeContinued, nil
		}
		if sess.State == api.SessionRunning {
			m.publish(ctx, sess.ID, api.EventAgentctlError, m.cutTurn(ctx, b.client))
		}
		// The agent is gone: whether it can resume is asked again.
		ex = m.reprobe(ctx, sess, ex, b.client)
		b.ex = ex
		if !b.autoResume && ex.SupportsSessionResume && sess.HasResumeToken {
			return m.agentFailed(ctx, sess, api.ReasonAgentNotRunning, "the agent stopped while the supervisor was away; resume the session to continue")
		}
		resume = true
	}
	// The agent is gone, or is to be resumed: resumability decides (an
	// agent whose probe never answered is tried: agentctl refuses a resume
	// it cannot do).
	supports, probed := ex.ProbedResume()
	if resume && !sess.HasResumeToken && !m.hasPrompt(sess.ID) {
		// No token and no prompt: the agent never began a conversation (a
		// leader change or a slow agent cut its first start short), so
		// there is nothing to resume and nothing to lose by starting it
		// afresh, rather than failing a session nobody has used yet.
		m.log.Info("no conversation to resume yet; starting the agent afresh", "session", sess.ID)
		resume = false
	}
	switch {
	case resume && probed && !supports:
		return m.agentFailed(ctx, sess, api.ReasonNotResumable, state.ResumeMessage(api.ReasonNotResumable))
	case resume && !sess.HasResumeToken:
		return m.agentFailed(ctx, sess, api.ReasonMissingResumeToken, state.ResumeMessage(api.ReasonMissingResumeToken))
	}
	if sess.State != api.SessionStarting {
		if err := m.move(ctx, sess.ID, api.SessionStarting); err != nil {
			return OutcomeSkipped, err
		}
	}
	agentCfg := m.cfg.Agent(sess.Agent)
	if agentCfg == nil {
		return m.agentFailed(ctx, sess, api.ReasonAgentNotRunning, fmt.Sprintf("agent profile %q is no longer configured", sess.Agent))
	}
	sess, _ = m.store.Session(sess.ID)
	resumeToken := ""
	if resume {
		resumeToken = sess.ResumeToken
	}
	if err := m.startAgent(ctx, lctx, sess, ex, b.client, profile(agentCfg), resumeToken); err != nil {
		if m.agentctlGone(ctx, b.client) {
			// agentctl itself stopped answering between its health check
			// and the start (it died, or is out of reach), so this is a
			// lost executor, not a failed agent: as when a pump loses one,
			// the lease is kept until it expires (an agentctl out of reach
			// fences itself by then) and reclaimExpired resumes the session.
			m.record(ctx, sess, failure{Reason: api.ReasonAgentNotRunning, Executor: ex.ID, KeepLease: true, Err: err})
			return OutcomeLost, nil
		}
		adopted, aerr := m.adoptRunningAgent(ctx, lctx, sess, ex, b.client, err)
		switch {
		case aerr != nil:
			return OutcomeSkipped, aerr
		case !adopted:
			return m.agentFailed(ctx, sess, api.ReasonAgentNotRunning, err.Error())
		}
	}
	if b.plan == planRecover {
		return OutcomeResumed, nil
	}
	return OutcomeStarted, nil
}

// hasPrompt reports whether the session's transcript holds a prompt.
func (m *Manager) hasPrompt(id string) bool {
	for _, msg := range m.store.Messages(id) {
		if msg.Role == api.RoleUser {
			return true
		}
	}
	return false
}

// agentStarted waits while agentctl starts an agent and returns its state
// once the start has ended, for up to launchTimeout. An agent is starting
// when a recovery finds it so because a previous leader's start (or
// resume) was under way when that leader was cut off: taken for gone, the
// recovery would start another, which agentctl refuses ("an agent is
// already running"), and the session would be failed with its agent alive.
func (m *Manager) agentStarted(ctx context.Context, c *agentctl.Client) (agentctl.AgentState, error) {
	ctx, cancel := context.WithTimeout(ctx, launchTimeout)
	defer cancel()
	for {
		agent, err := retryTimeouts(ctx, c.AgentState)
		if err != nil || agent.Status != agentctl.StatusStarting {
			return agent, err
		}
		select {
		case <-ctx.Done():
			return agent, fmt.Errorf("the agent was still starting after %s: %w", launchTimeout, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// cutTurn is the agentctl_error event a recovery records when the agent of
// a session that was running a turn is gone: without it, a client would see
// the reply stop and the session wait again with nothing saying why. It
// names agentctl's self-fencing (the lease was not renewed in time: the
// leader was gone or starved for longer than the lease's margin) when
// agentctl's retained events hold it.
func (m *Manager) cutTurn(ctx context.Context, c *agentctl.Client) map[string]any {
	data := map[string]any{"agent_event": agentctl.EventAgentStopped, "turn_interrupted": true,
		"message": "the agent stopped during a turn while no leader watched it; its reply ends where the transcript does"}
	rctx, cancel := context.WithTimeout(ctx, m.cfg.Recovery.HealthTimeout)
	defer cancel()
	evs, err := c.Events(rctx, 0, 0)
	if err != nil {
		return data
	}
	fenced := false // the last agent agentctl started was stopped by self-fencing
	for _, ev := range evs.Events {
		switch ev.Type {
		case agentctl.EventAgentStarted:
			fenced = false
		case agentctl.EventLeaseExpired:
			fenced = true
		}
	}
	if fenced {
		data["agent_event"] = agentctl.EventLeaseExpired
		data["message"] = "agentctl stopped the agent during a turn when its lease was not renewed in time (no leader reached it for longer than the lease allows); its reply ends where the transcript does"
	}
	return data
}

// agentctlGone reports whether agentctl no longer answers its health check.
func (m *Manager) agentctlGone(ctx context.Context, c *agentctl.Client) bool {
	hctx, cancel := context.WithTimeout(ctx, m.cfg.Recovery.HealthTimeout)
	defer cancel()
	_, err := c.Health(hctx)
	return err != nil && ctx.Err() == nil
}

// agentFailed records a session whose agent is not running while its
// agentctl is healthy: ERROR with the reason, the executor ready (the
// workspace stays usable), the lease released.
func (m *Manager) agentFailed(ctx context.Context, sess api.Session, reason, msg string) (Outcome, error) {
	m.record(ctx, sess, failure{Reason: reason, Err: errors.New(msg)})
	return OutcomeWorkspace, nil
}

// waitHealthy polls agentctl's health until it answers, the bound passes or
// ctx ends.
func (m *Manager) waitHealthy(ctx context.Context, c *agentctl.Client) (agentctl.Health, error) {
	ctx, cancel := context.WithTimeout(ctx, max(5*m.cfg.Recovery.HealthTimeout, 10*time.Second))
	defer cancel()
	for {
		hctx, hcancel := context.WithTimeout(ctx, m.cfg.Recovery.HealthTimeout)
		h, err := c.Health(hctx)
		hcancel()
		if err == nil {
			return h, nil
		}
		select {
		case <-ctx.Done():
			return agentctl.Health{}, fmt.Errorf("%w (last answer: %w)", ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// startAgent starts (or resumes) the agent in a healthy agentctl, stores the
// resume token, registers the live execution with its event pump and moves
// the session to WAITING_FOR_INPUT.
func (m *Manager) startAgent(ctx, lctx context.Context, sess api.Session, ex api.Executor, client *agentctl.Client, prof agentctl.Profile, resumeToken string) error {
	// Arm agentctl's self-fencing before the agent exists: if this leader
	// is cut off right after the start, the agent still stops in time.
	if _, err := client.RenewLease(ctx, m.cfg.Lease.TTL); err != nil {
		return fmt.Errorf("arm the lease on agentctl: %w", err)
	}
	m.leases.set(sess.ID, time.Now().Add(m.cfg.Lease.TTL))
	st, err := client.StartAgent(ctx, prof, resumeToken)
	if err != nil {
		if resumeToken != "" {
			return fmt.Errorf("resume agent %q with its token: %w", sess.Agent, err)
		}
		return fmt.Errorf("start agent %q: %w", sess.Agent, err)
	}
	return m.runsIn(ctx, lctx, sess, ex, client, st)
}

// adoptRunningAgent handles a start agentctl refused (409) because an agent
// runs there already. The agentctl holds the session's lease, so that
// agent is the session's: a previous leader, cut off (paused, say) with its
// own start of the agent on the way under the same lease token, started it
// after this leader found none. It is taken on as this start's, once any
// start still under way has ended, rather than the session failed with its
// agent alive and its lease released. It reports whether it took it on; an
// error is a step that failed with the agent found running (nothing to
// record as a failure: the caller retries or leaves it to the next leader).
func (m *Manager) adoptRunningAgent(ctx, lctx context.Context, sess api.Session, ex api.Executor, client *agentctl.Client, startErr error) (bool, error) {
	var apiErr *agentctl.APIError
	if !errors.As(startErr, &apiErr) || apiErr.Status != http.StatusConflict {
		return false, nil
	}
	agent, err := retryTimeouts(ctx, client.AgentState)
	if err == nil && agent.Status == agentctl.StatusStarting {
		agent, err = m.agentStarted(ctx, client)
	}
	if err != nil || (agent.Status != agentctl.StatusWaitingForInput && agent.Status != agentctl.StatusRunning) {
		return false, nil
	}
	m.log.Info("the session's agentctl runs an agent a previous leader started; taking it on", "session", sess.ID, "pid", agent.PID, "start_error", startErr)
	sess, _ = m.store.Session(sess.ID)
	if err := m.runsIn(ctx, lctx, sess, ex, client, agent); err != nil {
		return false, fmt.Errorf("take on the agent running in agentctl: %w", err)
	}
	return true, nil
}

// runsIn records that the session's agent runs in client's agentctl as st
// describes it (its resume token, its execution), registers the live
// execution with its event pump and moves the session to
// WAITING_FOR_INPUT.
func (m *Manager) runsIn(ctx, lctx context.Context, sess api.Session, ex api.Executor, client *agentctl.Client, st agentctl.AgentState) error {
	if st.ResumeToken != "" && st.ResumeToken != sess.ResumeToken {
		if _, err := m.apply(ctx, state.CmdSetResumeToken, &state.SetResumeTokenBody{SessionID: sess.ID, ResumeToken: st.ResumeToken}); err != nil {
			return err
		}
	}
	ex.AgentExecutionID = fmt.Sprintf("%s/%s/%d", ex.ID, ex.Nonce, st.PID)
	if _, err := m.apply(ctx, state.CmdPutExecutor, state.NewPutExecutor(ex)); err != nil {
		return err
	}
	m.attach(lctx, sess.ID, ex, client, attachOptions{})
	return m.move(ctx, sess.ID, api.SessionWaitingForInput, api.SessionStarting)
}

// settleRecovered sets a continued session's state from its agent's: RUNNING
// while a turn runs, else WAITING_FOR_INPUT. The agent's state was asked
// earlier in the bring-up; when the events agentctl kept, read since, say
// otherwise (a previous leader's prompt reached agentctl after that answer,
// or the turn ended soon after it), agentctl is asked again: a prompt the
// events show may also be a line typed in a pty agent's terminal, which
// runs no turn of agentctl's. The move is a compare-and-set on the state
// as now recorded (catchUp may have recorded a turn end already).
func (m *Manager) settleRecovered(ctx context.Context, id string, client *agentctl.Client, agent agentctl.AgentState, seen turnSeen) {
	running := agent.TurnRunning
	if (seen == turnOpen && !running) || (seen == turnEnded && running) {
		fresh, err := retryTimeouts(ctx, client.AgentState)
		if err != nil {
			m.log.Warn("recovered session state", "session", id, "error", err)
			return
		}
		running = fresh.TurnRunning
	}
	want := api.SessionWaitingForInput
	if running {
		want = api.SessionRunning
	}
	sess, ok := m.store.Session(id)
	if !ok || sess.State == want {
		return
	}
	if err := m.move(ctx, id, want, sess.State); err != nil {
		m.log.Warn("recovered session state", "session", id, "error", err)
	}
}

// errorStays reports whether a recovery leaves a session in ERROR as it is
// recorded: no auto_resume for it, and no lease held (so no agent runs
// under one: agentctl stops an agent whose lease is not renewed). Such a
// session's agentctl is reattached for the workspace only; claiming a
// lease and recording its error again on every restart would add an
// agentctl_error event (and move its timestamps) with nothing changed.
func (m *Manager) errorStays(b *bringUp) bool {
	if b.sess.State != api.SessionError || b.autoResume || b.plan != planRecover {
		return false
	}
	l, ok := m.store.Lease(b.sess.ID)
	return !ok || l.State != api.LeaseHeld
}

// reprobe asks a recovered agentctl's probe whether the session's agent
// resumes sessions, and records its answer in the executor row when it
// differs from the one recorded (at launch, or by an earlier recovery):
// the agent may have been upgraded or reconfigured since, and the resume
// that follows (or the not_resumable it records) goes by the agent as it
// is now. It is asked only when the agent is gone (a probe runs the agent
// once to read its capabilities, so a recovery that continues a live agent
// keeps that agent's recorded answer: it is the same process). A probe that
// fails leaves the recorded answer.
func (m *Manager) reprobe(ctx context.Context, sess api.Session, ex api.Executor, c *agentctl.Client) api.Executor {
	agentCfg := m.cfg.Agent(sess.Agent)
	if agentCfg == nil {
		return ex
	}
	caps, err := c.Probe(ctx, profile(agentCfg))
	if err != nil {
		m.log.Warn("probe the agent again on recovery; keeping the recorded answer", "session", sess.ID, "error", err)
		return ex
	}
	probed := ex
	probed.SupportsWorkspaceOnly = caps.SupportsWorkspaceOnly
	probed.SupportsSessionResume = caps.SupportsSessionResume != nil && *caps.SupportsSessionResume
	probed.ResumeProbed = caps.SupportsSessionResume != nil
	if reflect.DeepEqual(probed, ex) {
		return ex
	}
	if _, err := m.apply(ctx, state.CmdPutExecutor, state.NewPutExecutor(probed)); err != nil {
		m.log.Warn("record the agent's probe", "session", sess.ID, "error", err)
		return ex
	}
	m.log.Info("the agent's probe changed since it was recorded", "session", sess.ID,
		"supports_session_resume", probed.SupportsSessionResume, "was", ex.SupportsSessionResume)
	return probed
}
