package sessions

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/shared/agentctl"
	"github.com/paddockhq/paddock/shared/runtime"
	"github.com/paddockhq/paddock/supervisor/state"
)

// Bounds of the lifecycle steps.
const (
	launchTimeout = 2 * time.Minute
	stopTimeout   = 10 * time.Second
)

// ErrNotResumable is returned by Resume for a session that cannot resume; its
// message is the status object's resume_message.
var ErrNotResumable = errors.New("session cannot be resumed")

// Start launches a newly created session: the lease is claimed and the
// session moves to STARTING before Start returns; the executor and agent
// come up in the background.
func (m *Manager) Start(ctx context.Context, sessionID string) error {
	return m.begin(ctx, sessionID, false, api.SessionCreated)
}

// Resume restarts a STOPPED or ERROR session's agent from its resume token
// (the agent continues its conversation). Validation and the lease claim happen before
// it returns, so a session with a live owner gets state.ErrConflict.
//
// A resume that arrives while a stop drains the session (the stop holds the
// session lock and STOPPED is not written yet) waits for the drain, up to
// drainWait, and then resumes.
func (m *Manager) Resume(ctx context.Context, sessionID string) error {
	sess, ok := m.store.Session(sessionID)
	if !ok {
		return fmt.Errorf("session %q %w", sessionID, state.ErrNotFound)
	}
	if sess.State == api.SessionWaitingForInput || sess.State == api.SessionRunning {
		sess = m.waitDrain(ctx, sess)
	}
	if ex, ok := m.store.Executor(sess.ExecutorID); ok && !m.IsRunning(sess.ID) && m.waitsForNode(ctx, ex) {
		node := ex.Node
		// Before the state: a session that waits for its node keeps the
		// state it had, and the node is what stands in the way.
		return fmt.Errorf("%w: %s", state.ErrConflict, state.NodeUnavailableMessage(node))
	}
	switch sess.State {
	case api.SessionStopped, api.SessionError:
	case api.SessionWaitingForInput, api.SessionRunning:
		return fmt.Errorf("%w: session %s is %s: its agent is running already", state.ErrConflict, sess.ID, sess.State)
	case api.SessionCreated, api.SessionStarting:
		return fmt.Errorf("%w: session %s is %s: its agent is being started already", state.ErrConflict, sess.ID, sess.State)
	case api.SessionCompleted:
		return fmt.Errorf("%w: session %s was deleted and cannot be resumed; create a new session", state.ErrConflict, sess.ID)
	default:
		return fmt.Errorf("%w: session %s is %s; only STOPPED or ERROR sessions can be resumed", state.ErrConflict, sess.ID, sess.State)
	}
	if _, ok := m.store.Task(sess.TaskID); !ok {
		return fmt.Errorf("task %q of session %s %w", sess.TaskID, sess.ID, state.ErrNotFound)
	}
	if m.cfg.Agent(sess.Agent) == nil {
		return fmt.Errorf("%w: agent profile %q of session %s is no longer configured; the session is intact but its agent is unavailable", ErrNotResumable, sess.Agent, sess.ID)
	}
	if reason := m.resumeBlocker(sess); reason != "" {
		return fmt.Errorf("%w: %s", ErrNotResumable, state.ResumeMessage(reason))
	}
	// Asked of the executor's own plugin (WorkspaceMissing): relaunching
	// into a workspace that is gone fails anyway, and later, as an ERROR.
	if path, missing := m.WorkspaceMissing(ctx, sess.ID); missing {
		return fmt.Errorf("%w: %s", ErrNotResumable, state.WorkspaceMissingMessage(path))
	}
	return m.begin(ctx, sessionID, true, api.SessionStopped, api.SessionError)
}

// waitDrain waits, while a lifecycle operation holds the session's lock and
// the session still looks active (a stop draining it), until the operation
// ends or leaves the session inactive. It returns the session as last read;
// an active session whose lock is free is running and is returned at once.
func (m *Manager) waitDrain(ctx context.Context, sess api.Session) api.Session {
	lock := m.sessionLock(sess.ID)
	out, err := m.waitSession(ctx, sess.ID, drainWait, func(s api.Session) bool {
		if s.State != api.SessionWaitingForInput && s.State != api.SessionRunning {
			return true
		}
		if lock.TryLock() {
			lock.Unlock()
			return true
		}
		return false
	})
	if err != nil && !errors.Is(err, state.ErrNotFound) {
		m.log.Info("resume waited for a stop that did not finish", "session", sess.ID, "state", out.State, "error", err)
	}
	if out.ID == "" {
		return sess
	}
	return out
}

// resumeBlocker returns the reason a session cannot resume, or "".
func (m *Manager) resumeBlocker(sess api.Session) string {
	supports := m.supportsResume(sess)
	switch {
	case supports != nil && !*supports:
		return api.ReasonNotResumable
	case !sess.HasResumeToken:
		return api.ReasonMissingResumeToken
	}
	return ""
}

// supportsResume is the agent's resume capability: probed by agentctl when
// a probe answered, else the profile's declaration (nil when unknown).
func (m *Manager) supportsResume(sess api.Session) *bool {
	if e, ok := m.store.Executor(sess.ExecutorID); ok {
		if v, probed := e.ProbedResume(); probed {
			return &v
		}
	}
	if a := m.cfg.Agent(sess.Agent); a != nil {
		return a.SupportsSessionResume
	}
	return nil
}

// begin claims the lease, moves the session to STARTING and launches in the
// background under the leader context.
func (m *Manager) begin(ctx context.Context, sessionID string, resume bool, from ...api.SessionState) error {
	lock := m.sessionLock(sessionID)
	if err := lock.Lock(ctx); err != nil {
		return err
	}
	// The leader context is taken after the wait for the lock: a wait
	// across a leadership change (this node losing and winning it back)
	// launches under the leadership current now, not the ended one, whose
	// cancelled context would fail the launch at once.
	lctx, err := m.leaderCtx(ctx)
	if err != nil {
		lock.Unlock()
		return err
	}
	sess, ok := m.store.Session(sessionID)
	if !ok {
		lock.Unlock()
		return fmt.Errorf("session %q %w", sessionID, state.ErrNotFound)
	}
	if !slices.Contains(from, sess.State) {
		lock.Unlock()
		if !resume {
			return nil // already started (by the API or by recovery): Start is idempotent
		}
		return fmt.Errorf("%w: session %s is %s; only STOPPED or ERROR sessions can be resumed", state.ErrConflict, sess.ID, sess.State)
	}
	executorID := sess.ExecutorID
	if executorID == "" {
		executorID = newExecutorID()
	}
	// The claim comes first: no gap between the ownership check and the
	// start. The holder nonce is per launch until agentctl reports its own,
	// so a second concurrent claim is refused.
	res, err := m.apply(ctx, state.CmdClaimLease, &state.ClaimLeaseBody{SessionID: sess.ID, ExecutorID: executorID, Nonce: "launch-" + newSecret()[:16], TTL: m.cfg.Lease.TTL})
	if err != nil {
		lock.Unlock()
		return err
	}
	token := res.FencingToken
	// The claim is committed: the caller giving up from here must not leave
	// a claimed lease behind a session that never starts.
	if err := m.move(lctx, sess.ID, api.SessionStarting, from...); err != nil {
		lock.Unlock()
		m.releaseLease(lctx, sess.ID, token)
		return err
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer lock.Unlock()
		ctx, cancel := context.WithTimeout(lctx, launchTimeout)
		defer cancel()
		sess, _ := m.store.Session(sessionID)
		m.launch(ctx, lctx, sess, executorID, token, resume)
	}()
	return nil
}

// launch finds the session's executor (placed, then launched or recovered
// by its node's plugin) under the lease begin claimed, and brings the
// executor and the agent up on the path recovery shares.
func (m *Manager) launch(ctx, lctx context.Context, sess api.Session, executorID string, token uint64, resume bool) {
	if m.cfg.Agent(sess.Agent) == nil {
		m.record(ctx, sess, failure{Err: fmt.Errorf("agent profile %q is not configured", sess.Agent)})
		return
	}
	// Placements are decided one at a time, and one onto a node with a
	// limits.max_sessions_per_node holds the next back until its executor
	// is recorded there (launchExecutor's first write calls placed): the
	// count the next placement goes by includes it, so creates that race
	// or come in a burst cannot take a node past its cap. The leader alone
	// places; a new leader counts what its predecessor recorded.
	m.placing.Lock()
	placed := sync.OnceFunc(m.placing.Unlock)
	node, err := m.place(ctx, sess)
	if err != nil || m.limitOf(node) == 0 {
		placed() // refused, or an uncapped node: nothing to count
	}
	if err != nil {
		m.record(ctx, sess, failure{Reason: api.ReasonExecutorLost, Err: err})
		return
	}
	rt, err := m.nodes.Runtime(node, sess.Runtime)
	if err != nil {
		placed()
		m.record(ctx, sess, failure{Reason: api.ReasonExecutorLost, Err: fmt.Errorf("runtime %q on node %s: %w", sess.Runtime, node, err)})
		return
	}
	task, _ := m.store.Task(sess.TaskID)
	m.publish(ctx, sess.ID, api.EventAgentctlStarting, map[string]any{"executor_id": executorID, "runtime": sess.Runtime, "node": node})

	ex, err := m.launchExecutor(ctx, rt, node, sess, task, executorID, token, placed)
	placed() // when its first write failed
	if err != nil {
		m.record(ctx, sess, failure{Reason: api.ReasonExecutorLost, Executor: executorID, Err: err})
		return
	}
	plan := planStart
	if resume {
		plan = planResume
	}
	b := &bringUp{sess: sess, ex: ex, recorded: ex, client: clientFor(ex, token), token: token, claimed: true, plan: plan}
	if _, err := m.bringUp(ctx, lctx, b); err != nil {
		m.record(ctx, sess, failure{Executor: executorID, Err: err})
	}
}

// launchExecutor reuses the session's previous executor when its runtime can
// recover it (same workspace, agentctl reattached or restarted), else
// launches a new one; the executor row is recorded (starting) either way,
// and placed is called once it is.
func (m *Manager) launchExecutor(ctx context.Context, rt runtime.Runtime, node string, sess api.Session, task api.Task, executorID string, token uint64, placed func()) (api.Executor, error) {
	ex := api.Executor{ID: executorID, SessionID: sess.ID, Runtime: sess.Runtime, Node: node, Status: api.ExecutorStarting}
	old, recorded := m.store.Executor(executorID)
	if recorded {
		// Keep what agentctl reported until it is probed again: a launch
		// cut off before the probe must not leave a resumable session
		// recorded as not resumable.
		ex.SupportsSessionResume, ex.ResumeProbed, ex.SupportsWorkspaceOnly = old.SupportsSessionResume, old.ResumeProbed, old.SupportsWorkspaceOnly
	}
	var resp runtime.LaunchResponse
	var err error
	// A handle is recovered only by its own node's plugin; an executor that
	// moves (shared workspace, its node gone) is launched afresh.
	if recorded && len(old.Handle) > 0 && old.Node == node {
		ex.Secret = old.Secret
		if _, err := m.apply(ctx, state.CmdSetExecutorState, &state.SetExecutorStateBody{ExecutorID: executorID, Status: api.ExecutorStarting}); err != nil {
			return ex, err
		}
		placed()
		resp, err = rt.Recover(ctx, old.Handle, old.Secret)
		if err != nil && !errors.Is(err, runtime.ErrNotFound) {
			return ex, fmt.Errorf("recover executor %s: %w", executorID, err)
		}
	}
	if ex.Secret == "" || errors.Is(err, runtime.ErrNotFound) || resp.AgentctlURL == "" {
		ex.Secret = newSecret()
		if _, err := m.apply(ctx, state.CmdPutExecutor, state.NewPutExecutor(ex)); err != nil {
			return ex, err
		}
		placed()
		resp, err = rt.Launch(ctx, runtime.LaunchRequest{
			SessionID: sess.ID, TaskID: sess.TaskID, ExecutorID: executorID, Cluster: m.name,
			Workspace:      runtime.Workspace{Path: task.Workspace.Path, Branch: task.Workspace.Branch},
			AgentctlSecret: ex.Secret, FencingToken: token, Options: launchOptions(sess, recorded && old.WorkspacePath != ""),
			Terminal: runtime.Terminal{Shell: m.cfg.Terminal.Shell, ReplayBytes: int(m.cfg.Terminal.ReplayBytes), IdleTimeout: m.cfg.Terminal.IdleTimeout},
		})
		if err != nil {
			return ex, fmt.Errorf("launch executor on runtime %q: %w", sess.Runtime, err)
		}
	}
	ex.Handle, ex.AgentctlURL, ex.PID, ex.Nonce, ex.ContainerID = resp.Handle, resp.AgentctlURL, resp.PID, resp.Nonce, resp.ContainerID
	ex.AgentctlFingerprint = resp.AgentctlFingerprint
	ex.WorkspacePath, ex.WorktreePath, ex.WorktreeBranch = resp.WorkspacePath, resp.WorktreePath, resp.WorktreeBranch
	if _, err := m.apply(ctx, state.CmdPutExecutor, state.NewPutExecutor(ex)); err != nil {
		return ex, err
	}
	return ex, nil
}

// attachOptions are what a recovery gives attach beyond a launch's needs.
type attachOptions struct {
	// settle, when set, is given what agentctl's retained events say of the
	// agent's latest turn once they are mirrored, and runs before the pump
	// relays anything newer (a state it writes cannot overtake a turn end
	// the pump records).
	settle func(turnSeen)
	// events, when set, delivers agentctl's retained events, read while
	// the recovery's writes committed (readEventsEarly).
	events <-chan eventsAnswer
}

// attach registers a live execution and starts its event pump, after
// mirroring the events agentctl retained (catchUp).
func (m *Manager) attach(lctx context.Context, sessionID string, ex api.Executor, client *agentctl.Client, o attachOptions) {
	pctx, cancel := context.WithCancel(lctx)
	e := &execution{sessionID: sessionID, executorID: ex.ID, client: client, nonce: ex.Nonce, cancel: cancel, done: make(chan struct{}), events: o.events}
	var seen turnSeen
	e.since, seen = m.catchUp(pctx, e)
	if o.settle != nil {
		o.settle(seen)
	}
	m.leases.set(sessionID, time.Now().Add(m.cfg.Lease.TTL))
	m.mu.Lock()
	if lctx.Err() != nil {
		// Leadership ended while this was being set up: Run has already
		// cleared the live table, and an execution registered now would
		// make the next term's recovery skip the session.
		m.mu.Unlock()
		cancel()
		return
	}
	if old := m.live[sessionID]; old != nil {
		old.cancel()
	}
	m.live[sessionID] = e
	if ch := m.attached[sessionID]; ch != nil {
		close(ch)
		delete(m.attached, sessionID)
	}
	m.mu.Unlock()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer close(e.done)
		m.pump(pctx, e)
	}()
}

// whenLive returns the session's live execution, or when there is none a
// channel closed when the session is next registered live. A channel
// nobody waits on any more stays until then: at most one per session.
func (m *Manager) whenLive(sessionID string) (*execution, <-chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.live[sessionID]; e != nil {
		return e, nil
	}
	ch := m.attached[sessionID]
	if ch == nil {
		ch = make(chan struct{})
		m.attached[sessionID] = ch
	}
	return nil, ch
}

// detach forgets a live execution and waits for its pump to stop.
func (m *Manager) detach(sessionID string) *execution {
	m.mu.Lock()
	e := m.live[sessionID]
	delete(m.live, sessionID)
	m.mu.Unlock()
	if e != nil {
		e.cancel()
		<-e.done
	}
	return e
}

// Prompt sends a prompt to the session's agent: WAITING_FOR_INPUT → RUNNING.
// A prompt to a session that is still starting waits (up to startWait) until
// it takes prompts. A prompt while a turn runs is a conflict.
func (m *Manager) Prompt(ctx context.Context, sessionID, text string) error {
	sess, ok := m.store.Session(sessionID)
	if !ok {
		return fmt.Errorf("session %q %w", sessionID, state.ErrNotFound)
	}
	if sess.State == api.SessionCreated || sess.State == api.SessionStarting {
		var err error
		sess, err = m.waitSession(ctx, sessionID, startWait, func(s api.Session) bool {
			return s.State != api.SessionCreated && s.State != api.SessionStarting
		})
		switch {
		case errors.Is(err, state.ErrNotFound):
			return err
		case err != nil:
			return fmt.Errorf("%w: session %s is still %s after %s; its agent is not ready for prompts yet", state.ErrConflict, sess.ID, sess.State, startWait)
		}
	}
	if sess.State == api.SessionRunning && m.live1(sessionID) == nil {
		// RUNNING that this leader has not brought up yet may be a
		// previous leader's prompt that never reached the agent (RUNNING
		// committed, then leadership lost before the prompt was sent).
		// Refused as a running turn, a prompt sent again would take it
		// for delivered and wait for a reply that never comes; the
		// recovery sets the state from the agent's, so wait for it.
		if _, err := m.leaderCtx(ctx); err == nil {
			m.waitLiveWhile(ctx, sessionID, api.SessionRunning)
			if sess, ok = m.store.Session(sessionID); !ok {
				return fmt.Errorf("session %q %w", sessionID, state.ErrNotFound)
			}
		}
	}
	if sess.StopRequested {
		return fmt.Errorf("%w: session %s is being stopped; resume it once it is STOPPED", state.ErrConflict, sess.ID)
	}
	switch sess.State {
	case api.SessionWaitingForInput:
	case api.SessionRunning:
		return fmt.Errorf("%w: session %s is running a turn; wait for it or cancel it", state.ErrConflict, sess.ID)
	case api.SessionError:
		return fmt.Errorf("%w: session %s is ERROR, its agent is not running: %s", state.ErrConflict, sess.ID, sess.ErrorMessage)
	case api.SessionStopped:
		return fmt.Errorf("%w: session %s is STOPPED; resume it to continue the conversation", state.ErrConflict, sess.ID)
	case api.SessionCompleted:
		return fmt.Errorf("%w: session %s was deleted; create a new session", state.ErrConflict, sess.ID)
	default:
		return fmt.Errorf("%w: session %s is %s; it takes prompts when WAITING_FOR_INPUT", state.ErrConflict, sess.ID, sess.State)
	}
	if _, err := m.leaderCtx(ctx); err != nil {
		return err
	}
	e := m.waitLiveWhile(ctx, sessionID, api.SessionWaitingForInput)
	if e == nil {
		return fmt.Errorf("%w: session %s", ErrNotRunning, sess.ID)
	}
	// The leader context is the one after the wait, which can outlast a
	// leadership (this node losing it and winning it back): RUNNING is
	// committed, the prompt sent and RUNNING undone all under one
	// leadership, so a later leader's recovery, which sets the state from
	// the agent's, comes after all three. Under the context of the
	// leadership before, the prompt was never sent, its undo was refused,
	// and the session stayed RUNNING behind a recovery that had already
	// run.
	lctx, err := m.leaderCtx(ctx)
	if err != nil {
		return err
	}
	if err := m.move(lctx, sess.ID, api.SessionRunning, api.SessionWaitingForInput); err != nil {
		return err
	}
	// RUNNING is committed: from here the prompt is delivered, or RUNNING
	// undone, even when the caller gives up (a timed-out request used to
	// leave the session RUNNING with no turn). Only the end of leadership
	// stops this; the next leader sets the state from the agent's.
	if _, err := e.client.Prompt(lctx, text); err != nil {
		var apiErr *agentctl.APIError
		refused := errors.As(err, &apiErr)
		if m.turnRuns(lctx, e, err) {
			// RUNNING stays: a turn runs. When agentctl's answer was lost
			// it is this prompt's; when agentctl refused the prompt, it is
			// one the state had missed.
			if !refused {
				return nil
			}
			return fmt.Errorf("%w: session %s is running a turn; wait for it or cancel it", state.ErrConflict, sess.ID)
		}
		if uerr := m.move(lctx, sess.ID, api.SessionWaitingForInput, api.SessionRunning); uerr != nil && !errors.Is(uerr, state.ErrConflict) {
			m.log.Warn("undo RUNNING after a failed prompt", "session", sess.ID, "error", uerr)
		}
		if refused && apiErr.Status == 409 {
			return fmt.Errorf("%w: %s", state.ErrConflict, apiErr.Message)
		}
		return fmt.Errorf("prompt session %s: %w", sess.ID, err)
	}
	return nil
}

// turnRuns reports whether agentctl runs a turn after a prompt call failed
// with err: the prompt was taken though its answer was lost (a timeout, a
// reset connection), or agentctl refused it because a turn the state had
// missed runs. Either way the committed RUNNING is the truth; undone, the
// session would wait for input while the reply streams and its turn's end
// would be refused. After the end of leadership the next leader decides.
func (m *Manager) turnRuns(lctx context.Context, e *execution, err error) bool {
	if lctx.Err() != nil {
		return false
	}
	agent, aerr := retryTimeouts(lctx, e.client.AgentState)
	if aerr != nil || !agent.TurnRunning {
		return false
	}
	m.log.Info("a turn runs after a failed prompt; the session stays RUNNING", "session", e.sessionID, "error", err)
	return true
}

// liveWait bounds how long a prompt waits for a session that recovery is
// still bringing back after a leader change.
const liveWait = 10 * time.Second

// waitLiveWhile returns the session's live execution, waiting up to
// liveWait while its executor is being recovered (status starting, or ready
// but not yet attached on this new leader) and the session stays in state
// while, or is STARTING: a recovery that brings the agent back up moves the
// session to STARTING, registers it live and then moves it to
// WAITING_FOR_INPUT, and the wait goes through that. The recovery pass is
// asked to take the session next. It returns nil when the wait ends
// without one.
func (m *Manager) waitLiveWhile(ctx context.Context, sessionID string, while api.SessionState) *execution {
	if e := m.live1(sessionID); e != nil {
		return e
	}
	if m.expedite != nil {
		m.expedite(sessionID)
	}
	ctx, cancel := context.WithTimeout(ctx, liveWait)
	defer cancel()
	// The tick is for the session's state, which changes without a live
	// registration; the registration itself wakes the wait at once.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		e, attached := m.whenLive(sessionID)
		sess, _ := m.store.Session(sessionID)
		starting := sess.State == api.SessionStarting
		switch {
		case e != nil && !starting:
			return e
		case e == nil && sess.State != while && !starting:
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-attached:
		case <-tick.C:
		}
	}
}

// Cancel cancels the running turn.
func (m *Manager) Cancel(ctx context.Context, sessionID string) error {
	if _, ok := m.store.Session(sessionID); !ok {
		return fmt.Errorf("session %q %w", sessionID, state.ErrNotFound)
	}
	e := m.live1(sessionID)
	if e == nil {
		return fmt.Errorf("%w: session %s", ErrNotRunning, sessionID)
	}
	return e.client.Cancel(ctx)
}

// Stop drains a session in the background: the agent stops, the executor is
// stopped, the lease is released, and only then the session is STOPPED.
func (m *Manager) Stop(ctx context.Context, sessionID string) error {
	lctx, err := m.leaderCtx(ctx)
	if err != nil {
		return err
	}
	sess, ok := m.store.Session(sessionID)
	if !ok {
		return fmt.Errorf("session %q %w", sessionID, state.ErrNotFound)
	}
	switch sess.State {
	case api.SessionCreated, api.SessionStarting, api.SessionWaitingForInput, api.SessionRunning:
	default:
		return fmt.Errorf("%w: session %s is %s; only a starting or running session can be stopped", state.ErrConflict, sess.ID, sess.State)
	}
	// The stop is on record before it is answered: a leader that takes
	// over before STOPPED is written finishes it (Recover) instead of
	// continuing the session.
	if !sess.StopRequested {
		if _, err := m.apply(ctx, state.CmdRequestStop, &state.RequestStopBody{SessionID: sessionID}); err != nil {
			return err
		}
	}
	// Take the session lock before answering when it is free, so a resume
	// right after the answer finds the drain under way and waits for it.
	lock := m.sessionLock(sessionID)
	locked := lock.TryLock()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		if !locked {
			if err := lock.Lock(lctx); err != nil {
				return // leadership ended: the next leader's recovery finds the session
			}
		}
		defer lock.Unlock()
		if s, ok := m.store.Session(sessionID); !ok || !s.StopRequested {
			return // a stop ahead of this one finished it (or a delete)
		}
		ctx, cancel := context.WithTimeout(lctx, launchTimeout)
		defer cancel()
		// A step that failed for a passing reason (the runtime plugin
		// restarting, a commit in doubt) is tried again while time is
		// left; the stop stays on record meanwhile.
		for i := 0; ; i++ {
			err := m.finishStop(ctx, sessionID)
			if err == nil {
				return
			}
			if nodeDown(err) {
				// The executor's node does not answer (the workspace is
				// not shared, so nothing else may stop it): the stop stays
				// on record, and the recovery that runs when the node
				// answers again finishes it.
				m.log.Info("the session's node does not answer; its stop finishes when it does", "session", sessionID, "error", err)
				return
			}
			if Retryable(err) {
				select {
				case <-ctx.Done():
				case <-time.After(backoff(i)):
					m.log.Info("stop step failed; retrying", "session", sessionID, "error", err)
					continue
				}
			}
			m.log.Warn("stop session", "session", sessionID, "error", err)
			m.stopFailed(lctx, sessionID, err) // out of time, not of leadership: recorded
			return
		}
	}()
	return nil
}

// finishStop drains a session being stopped and records it STOPPED. A
// failed drain records nothing: the stop stays on record, and the caller
// tries again or gives up with stopFailed. It runs under the session lock,
// for Stop and for a recovery that finds a stop a previous leader answered
// and did not finish.
func (m *Manager) finishStop(ctx context.Context, sessionID string) error {
	if err := m.drain(ctx, sessionID, false); err != nil {
		return err
	}
	if _, err := m.apply(ctx, state.CmdSetSessionState, &state.SetSessionStateBody{SessionID: sessionID, State: api.SessionStopped, Reason: api.ReasonAgentNotRunning}); err != nil {
		return fmt.Errorf("record stop: %w", err)
	}
	return nil
}

// stopFailed records a stop that could not be finished: the session is in
// ERROR with why (which ends the stop request), unless leadership ended
// first, in which case the next leader's recovery finishes the stop. The
// agent is not proven stopped: the executor's row goes to error, which ends
// its renewals, and the lease is kept until it expires (by then agentctl
// has stopped the agent itself). The failure has no reason: a session
// whose stop failed is not one the lease's expiry resumes.
func (m *Manager) stopFailed(ctx context.Context, sessionID string, err error) {
	sess, ok := m.store.Session(sessionID)
	if !ok || !sess.StopRequested {
		return
	}
	m.record(ctx, sess, failure{Executor: sess.ExecutorID, KeepLease: true, Err: fmt.Errorf("stop: %w", err)})
}

// drain stops the agent and the executor (or destroys it) and releases the
// lease. It runs under the session lock.
func (m *Manager) drain(ctx context.Context, sessionID string, destroy bool) error {
	sess, _ := m.store.Session(sessionID)
	agentStopped := false
	if e := m.live1(sessionID); e != nil {
		m.mu.Lock()
		e.stopping = true
		m.mu.Unlock()
		if _, err := e.client.StopAgent(ctx); err != nil {
			m.log.Warn("stop agent", "session", sessionID, "error", err)
		} else {
			agentStopped = true
		}
		m.detach(sessionID)
	}
	ex, ok := m.store.Executor(sess.ExecutorID)
	if ok && !destroy && agentStopped && ex.Status == api.ExecutorReady && ex.SupportsWorkspaceOnly {
		// A stop ends the agent, not the workspace: agentctl keeps serving
		// files, git and shells until the session is deleted, and a resume
		// starts the agent in it again.
		m.endLease(ctx, sessionID, false)
		return nil
	}
	if ok && len(ex.Handle) > 0 {
		rt, err := m.runtimeOf(ctx, ex)
		if err != nil {
			return fmt.Errorf("runtime %q: %w", ex.Runtime, err)
		}
		if destroy {
			err = rt.Destroy(ctx, ex.Handle)
		} else {
			err = rt.Stop(ctx, ex.Handle, stopTimeout)
		}
		if err != nil && !errors.Is(err, runtime.ErrNotFound) {
			return fmt.Errorf("stop executor %s: %w", ex.ID, err)
		}
		if _, err := m.apply(ctx, state.CmdSetExecutorState, &state.SetExecutorStateBody{ExecutorID: ex.ID, Status: api.ExecutorStopped}); err != nil {
			return err
		}
	}
	m.endLease(ctx, sessionID, false)
	return nil
}

func (m *Manager) releaseLease(ctx context.Context, sessionID string, token uint64) {
	if _, err := m.apply(ctx, state.CmdReleaseLease, &state.ReleaseLeaseBody{SessionID: sessionID, FencingToken: token}); err != nil {
		m.log.Warn("release lease", "session", sessionID, "error", err)
	}
}

// Delete ends a session for good: the agent stops, the executor is destroyed
// and the session is COMPLETED. Only the executor's node can destroy it
// (its workspace is there): while that node does not answer, Delete is a
// conflict, unless force is set. A forced delete completes the session at
// once and leaves its executor destroy_pending, destroyed by
// DestroyAbandoned when the node answers again (as Nomad's purge of a node
// that is gone for good lets its jobs go); an agent still running behind a
// partition stops itself once its lease is not renewed.
func (m *Manager) Delete(ctx context.Context, sessionID string, force bool) error {
	if _, err := m.leaderCtx(ctx); err != nil {
		return err
	}
	if _, ok := m.store.Session(sessionID); !ok {
		return fmt.Errorf("session %q %w", sessionID, state.ErrNotFound)
	}
	lock := m.sessionLock(sessionID)
	if err := lock.Lock(ctx); err != nil {
		return err
	}
	defer lock.Unlock()
	if sess, ok := m.store.Session(sessionID); ok && sess.State != api.SessionCompleted {
		if ex, ok := m.store.Executor(sess.ExecutorID); ok && len(ex.Handle) > 0 && m.waitsForNode(ctx, ex) {
			if !force {
				return fmt.Errorf("%w: session %s: its node %s does not answer (only it can remove the executor and workspace); delete it when the node is back, or with force to have them removed then (-force, ?force=true)",
					state.ErrConflict, sess.ID, ex.Node)
			}
			m.log.Warn("deleting a session whose node does not answer; its executor is destroyed when the node answers again", "session", sess.ID, "node", ex.Node, "executor", ex.ID)
			m.detach(sessionID)
			m.endLease(ctx, sessionID, true)
			_, err := m.apply(ctx, state.CmdDeleteSession, &state.DeleteSessionBody{SessionID: sessionID, Abandon: true})
			return err
		}
	}
	if err := m.drain(ctx, sessionID, true); err != nil {
		return err
	}
	_, err := m.apply(ctx, state.CmdDeleteSession, &state.DeleteSessionBody{SessionID: sessionID})
	return err
}

// DestroyAbandoned destroys the executors on node (every node that answers,
// when node is "") that a forced Delete left destroy_pending, and clears the
// mark of each it destroyed or its runtime no longer knows. One that fails
// keeps its mark for the next time the node answers or this leader starts.
func (m *Manager) DestroyAbandoned(ctx context.Context, node string) {
	if _, err := m.leaderCtx(ctx); err != nil {
		return
	}
	for _, ex := range m.store.Executors("") {
		if !ex.DestroyPending || (node != "" && ex.Node != node) || !m.nodes.Available(ex.Node) {
			continue
		}
		rt, err := m.nodes.Runtime(ex.Node, ex.Runtime)
		if err == nil {
			err = rt.Destroy(ctx, ex.Handle)
		}
		if err != nil && !errors.Is(err, runtime.ErrNotFound) {
			m.log.Warn("destroy the executor of a deleted session", "executor", ex.ID, "node", ex.Node, "error", err)
			continue
		}
		if _, err := m.apply(ctx, state.CmdSetExecutorState, &state.SetExecutorStateBody{ExecutorID: ex.ID, Status: api.ExecutorStopped, Destroyed: true}); err != nil {
			m.log.Warn("record the executor of a deleted session destroyed", "executor", ex.ID, "error", err)
			continue
		}
		m.log.Info("destroyed the executor of a session deleted while its node did not answer", "executor", ex.ID, "node", ex.Node, "session", ex.SessionID)
	}
}
