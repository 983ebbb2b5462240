package sessions

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/shared/agentctl"
	"github.com/paddockhq/paddock/shared/runtime"
	"github.com/paddockhq/paddock/supervisor/config"
	"github.com/paddockhq/paddock/supervisor/state"
)

// Sentinel errors; the API maps them to HTTP statuses.
var (
	// ErrNotLeader: session work runs on the leader only.
	ErrNotLeader = errors.New("this node is not the leader")
	// ErrNotRunning: the session has no live agent execution.
	ErrNotRunning = errors.New("session has no running agent")
	// ErrUnavailable: the runtime or agentctl cannot be reached.
	ErrUnavailable = errors.New("unavailable")
)

// Cluster is what the manager needs from the raft node. LeaderApply fails
// instead of forwarding when this node no longer leads.
type Cluster interface {
	ID() string
	LeaderApply(ctx context.Context, typ state.CommandType, body any) (*state.Result, error)
	// LeaderApplyAll commits commands in order, proposing each before the
	// one ahead of it has committed; it stops at the first that fails and
	// returns the results of those before it.
	LeaderApplyAll(ctx context.Context, props []state.Proposal) ([]*state.Result, error)
	Store() *state.Store
}

// Runtimes gives access to loaded runtime plugins by name.
type Runtimes interface {
	Get(name string) (runtime.Runtime, error)
}

// Nodes reaches every node's runtime plugins (supervisor/nodes): an
// executor of a node-local runtime is managed only by its owner's plugin.
type Nodes interface {
	// Runtime returns runtime name on node ("" or this node: the local one).
	Runtime(node, name string) (runtime.Runtime, error)
	// Available reports whether node answers.
	Available(node string) bool
	// Usable lists the nodes that answer and whose plugin name is healthy.
	Usable(name string) []string
	// MaxSessions is another node's limits.max_sessions_per_node as it
	// reported it (0: no cap); this node's own is read from its config.
	MaxSessions(node string) int
}

// Options configure a Manager.
type Options struct {
	Cluster Cluster
	// Nodes routes runtime calls to executors' owners. When nil, Runtimes
	// (this node's plugins) serve every call: a single node.
	Nodes    Nodes
	Runtimes Runtimes
	Config   *config.Config
	Logger   hclog.Logger
	// ClusterName labels executors (e.g. Docker containers) of this cluster.
	ClusterName string
}

// Manager runs sessions on the leader.
type Manager struct {
	cluster Cluster
	store   *state.Store
	nodes   Nodes
	cfg     *config.Config
	log     hclog.Logger
	name    string

	mu   sync.Mutex
	ctx  context.Context // the leader context; nil when not leading
	live map[string]*execution
	// attached holds, per session, a channel closed when the session is
	// next registered live (whenLive): a prompt that waits for a
	// recovery wakes when it attaches instead of at its next look.
	attached map[string]chan struct{}
	wg       sync.WaitGroup
	locks    map[string]*sessionMutex
	leases   leaseClock
	// recovered queues recoveries for one batched commit (recovered.go).
	recovered recoveredQueue
	// placing serializes placements onto capped nodes (see launch).
	placing sync.Mutex
	// expedite, when set, asks a running recovery pass to recover a
	// session now: a prompt waits for it (see OnAwaitingRecovery).
	expedite func(sessionID string)
}

// execution is one live agent execution: its agentctl client and the pump
// that mirrors its events.
type execution struct {
	sessionID  string
	executorID string
	client     *agentctl.Client
	nonce      string
	since      uint64 // agentctl event position the pump starts from
	// events, when set, delivers agentctl's retained events read ahead of
	// the catch-up (see readEventsEarly); nil: the catch-up reads them.
	events <-chan eventsAnswer
	cancel context.CancelFunc
	done   chan struct{}
	// stopping is set while a user stop drains the agent, so its exit is not
	// reported as a failure.
	stopping bool
	// facts are the commands and modes the agent announced.
	facts agentFacts
}

// New returns a manager; it does nothing until Run is called on the leader.
func New(o Options) *Manager {
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if o.ClusterName == "" {
		o.ClusterName = "paddock"
	}
	if o.Nodes == nil {
		o.Nodes = localNodes{self: o.Cluster.ID(), rt: o.Runtimes}
	}
	return &Manager{cluster: o.Cluster, store: o.Cluster.Store(), nodes: o.Nodes, cfg: o.Config, log: o.Logger,
		name: o.ClusterName, live: map[string]*execution{}, attached: map[string]chan struct{}{}, locks: map[string]*sessionMutex{},
		leases: leaseClock{expiry: map[string]time.Time{}, polled: map[string]time.Time{}}}
}

// OnAwaitingRecovery sets what a prompt calls when its session is recorded
// live but not yet recovered on this leader (recovery.Recovery.Expedite),
// so that the session it waits for is recovered next rather than in its
// turn. Set it before Run.
func (m *Manager) OnAwaitingRecovery(f func(sessionID string)) { m.expedite = f }

// Run is the manager's leader work: it serves until ctx (leadership) ends,
// then stops every pump and forgets the live cache (agents keep running in
// their agentctl; the next leader's recovery picks them up).
func (m *Manager) Run(ctx context.Context) {
	m.startLeaseClock()
	m.mu.Lock()
	m.ctx = ctx
	m.mu.Unlock()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.keepLeases(ctx)
	}()
	<-ctx.Done()
	m.mu.Lock()
	m.ctx = nil
	live := m.live
	m.live = map[string]*execution{}
	m.mu.Unlock()
	for _, e := range live {
		e.cancel()
	}
	m.wg.Wait()
}

// leaderWait bounds how long a request waits for the leader loop to start
// the manager (a node that just won an election runs its barrier first).
const leaderWait = 5 * time.Second

// leaderCtx returns the leader context, waiting briefly (up to leaderWait,
// while ctx lives) for a new leader's loop to start; ErrNotLeader when this
// node does not lead.
func (m *Manager) leaderCtx(ctx context.Context) (context.Context, error) {
	wait := time.NewTimer(leaderWait)
	defer wait.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		m.mu.Lock()
		lctx := m.ctx
		m.mu.Unlock()
		if lctx != nil && lctx.Err() == nil {
			return lctx, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %w", ErrNotLeader, ctx.Err())
		case <-wait.C:
			return nil, ErrNotLeader
		case <-tick.C:
		}
	}
}

// sessionLock serialises lifecycle operations of one session on this leader.
func (m *Manager) sessionLock(id string) *sessionMutex {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.locks[id]
	if !ok {
		l = &sessionMutex{ch: make(chan struct{}, 1)}
		m.locks[id] = l
	}
	return l
}

// sessionMutex is a session's lifecycle lock. Unlike a sync.Mutex, waiting
// for it ends with the waiter's context: a request or a recovery step gives
// up instead of blocking behind a launch that may take minutes.
type sessionMutex struct{ ch chan struct{} }

// Lock takes the lock, or returns ctx's error when ctx ends first.
func (l *sessionMutex) Lock(ctx context.Context) error {
	select {
	case l.ch <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for the session's lifecycle lock: %w", ctx.Err())
	}
}

// TryLock takes the lock when it is free.
func (l *sessionMutex) TryLock() bool {
	select {
	case l.ch <- struct{}{}:
		return true
	default:
		return false
	}
}

// Unlock releases the lock.
func (l *sessionMutex) Unlock() { <-l.ch }

// Live returns the live execution of a session, if any.
func (m *Manager) live1(id string) *execution {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.live[id]
}

// IsRunning reports whether the session has a live agent execution here.
func (m *Manager) IsRunning(sessionID string) bool { return m.live1(sessionID) != nil }

// apply commits a command and returns its domain error, if any. A command
// raft refused without appending it (a leadership transfer pending, a full
// apply queue) is tried again with backoff until it commits, this node
// stops leading or ctx ends, so leader work carries on through a transfer
// that fails. Other cluster failures come back as Retryable.
func (m *Manager) apply(ctx context.Context, typ state.CommandType, body any) (*state.Result, error) {
	for i := 0; ; i++ {
		res, err := m.cluster.LeaderApply(ctx, typ, body)
		if err == nil {
			return res, res.Err
		}
		if !notApplied(err) || ctx.Err() != nil {
			return nil, &applyError{err: err}
		}
		if i == 0 {
			m.log.Info("command refused while leadership is being transferred; retrying", "type", typ, "error", err)
		}
		select {
		case <-ctx.Done():
			return nil, &applyError{err: err}
		case <-time.After(applyBackoff(i)):
		}
	}
}

// applyAll commits commands in their order as apply does each, and returns
// each one's error (nil when it committed without a domain error). They
// are proposed together, so a chain of writes waits for about one commit.
// From the first that raft refused before appending it on, the rest go
// one at a time through apply, which waits the refusal out; each must be
// safe to write twice (a message put, a compare-and-set state change),
// since one after the refused command may have reached the log.
func (m *Manager) applyAll(ctx context.Context, props []state.Proposal) []error {
	errs := make([]error, len(props))
	results, err := m.cluster.LeaderApplyAll(ctx, props)
	for i, res := range results {
		errs[i] = res.Err
	}
	rest := props[len(results):]
	if err != nil && !notApplied(err) {
		for i := range rest {
			errs[len(results)+i] = &applyError{err: err}
		}
		return errs
	}
	for i, p := range rest {
		_, errs[len(results)+i] = m.apply(ctx, p.Type, p.Body)
	}
	return errs
}

// applyBackoff paces retries of a refused command: a transfer ends within
// raft's transport timeout (5 s), so short steps resume work soon after.
func applyBackoff(attempt int) time.Duration {
	return min(20*time.Millisecond<<min(attempt, 4), 250*time.Millisecond)
}

// move moves a session to a state with no message or reason; from
// (optional) makes it a compare-and-set. A state with a message or a reason
// (ERROR, STOPPED) is written with its SetSessionStateBody.
func (m *Manager) move(ctx context.Context, id string, to api.SessionState, from ...api.SessionState) error {
	_, err := m.apply(ctx, state.CmdSetSessionState, &state.SetSessionStateBody{SessionID: id, State: to, From: from, NotActivity: notActivity(ctx)})
	return err
}

// quietKey marks a context whose session state changes are not the
// session's activity.
type quietKey struct{}

// withoutActivity marks ctx so that the state changes made under it leave
// the session's last_activity_at as it is: a recovery's (a restart or a
// failover is nobody's activity). The pump of a recovered session runs
// under the leader's context, so what its agent does still counts.
func withoutActivity(ctx context.Context) context.Context {
	return context.WithValue(ctx, quietKey{}, true)
}

// notActivity reports whether ctx was marked withoutActivity.
func notActivity(ctx context.Context) bool {
	quiet, _ := ctx.Value(quietKey{}).(bool)
	return quiet
}

// publish records a session event that is not a state change. A publish
// that fails for a transient reason is tried again while ctx lives (apply
// already waits out a leadership transfer); it is given up only when ctx
// ends (leadership lost: the next leader's recovery reports the session
// afresh) or on a domain refusal.
func (m *Manager) publish(ctx context.Context, id, typ string, data map[string]any) {
	body := &state.PublishEventBody{SessionID: id, Type: typ, Data: data}
	for i := 0; ; i++ {
		_, err := m.apply(ctx, state.CmdPublishEvent, body)
		if err == nil {
			return
		}
		if !Retryable(err) || ctx.Err() != nil || i >= publishRetries {
			m.log.Warn("publish event", "session", id, "type", typ, "attempts", i+1, "error", err)
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff(i)):
		}
	}
}

// publishRetries bounds the retries of one event whose failure is not a
// pending transfer (apply waits those out): a leader that keeps failing to
// commit is about to lose leadership.
const publishRetries = 8

// profile converts a configured agent into agentctl's profile.
func profile(a *config.Agent) agentctl.Profile {
	p := agentctl.Profile{Protocol: a.Protocol, Command: a.Command, NewArgs: a.NewArgs, ResumeArgs: a.ResumeArgs, Permission: a.Permission,
		AutoAllow: a.AutoAllow, PermissionTimeout: a.PermissionTimeout}
	if a.SupportsSessionResume != nil {
		p.SupportsSessionResume = *a.SupportsSessionResume
	}
	return p
}

func newSecret() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func newExecutorID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "ex-" + hex.EncodeToString(b[:])
}

// agentctlTimeout bounds one agentctl call.
const agentctlTimeout = 15 * time.Second

// clientFor builds an agentctl client for an executor row.
func clientFor(e api.Executor, token uint64) *agentctl.Client {
	c := agentctl.NewClient(e.AgentctlURL, e.Secret, agentctlTimeout)
	if e.AgentctlFingerprint != "" {
		c = agentctl.NewPinnedClient(e.AgentctlURL, e.Secret, e.AgentctlFingerprint, agentctlTimeout)
	}
	c.SetFencingToken(token)
	return c
}

// Agentctl returns a client for the agentctl of a session's executor, for
// workspace access from any node (works with no agent running).
func (m *Manager) Agentctl(sessionID string) (*agentctl.Client, error) {
	sess, ok := m.store.Session(sessionID)
	if !ok {
		return nil, fmt.Errorf("session %q %w", sessionID, state.ErrNotFound)
	}
	e, ok := m.store.Executor(sess.ExecutorID)
	if !ok || e.AgentctlURL == "" {
		return nil, fmt.Errorf("session %s has no executor yet: %w", sessionID, ErrUnavailable)
	}
	if e.Status != api.ExecutorReady && e.Status != api.ExecutorStarting {
		return nil, fmt.Errorf("executor of session %s is %s: %w", sessionID, e.Status, ErrUnavailable)
	}
	var token uint64
	if l, ok := m.store.Lease(sessionID); ok {
		token = l.FencingToken
	}
	return clientFor(e, token), nil
}
