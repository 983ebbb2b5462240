// Package recovery is the leader's startup recovery: when a node becomes
// leader (after a restart or a failover) it brings every recorded executor
// and session back without waiting for a user.
// It runs inside the leader loop, whose context is cancelled when
// leadership is lost, so two recoveries never run at once.
//
// The per-session steps live in supervisor/sessions (Manager.Recover); this
// package picks the sessions, applies the auto_resume policy, bounds the
// concurrency and reports what happened. After the recovery pass (see
// WithOrphans) the leader also removes executors no executor row owns, once
// and then periodically until leadership ends.
//
// It may import supervisor/config, plugins, sessions and state and
// shared/runtime; never the API, cluster or server packages.
package recovery

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/supervisor/config"
	"github.com/paddockhq/paddock/supervisor/sessions"
	"github.com/paddockhq/paddock/supervisor/state"
)

// workers bounds how many sessions recover at once. Recovering one is a
// handful of calls that mostly wait (plugin, agentctl, raft commits), so
// the bound is wide: after the election, 100 sessions took ~1.5 s with 32
// and ~0.7 s with 128 in back-to-back runs on the same loaded 2-core machine
// (~0.5 s with 128 in the quiet benchmark run).
const workers = 128

// workers is the pass's bound on sessions recovering at once.
func (r *Recovery) workers() int {
	if r.maxWorkers > 0 {
		return r.maxWorkers
	}
	return workers
}

// Sessions is what recovery needs from the session manager.
type Sessions interface {
	Recover(ctx context.Context, sessionID string, autoResume bool) (sessions.Outcome, error)
	Start(ctx context.Context, sessionID string) error
	// DestroyAbandoned destroys the executors of sessions deleted with
	// force while their node did not answer, on node ("": every node).
	DestroyAbandoned(ctx context.Context, node string)
}

// Report summarises one recovery run. Outcomes counts each finished
// session once, by its final outcome; Retried, Failed and Pending say how
// the run got there.
type Report struct {
	Started  time.Time
	Duration time.Duration
	Outcomes map[sessions.Outcome]int
	// Retried counts sessions that needed at least one retry after a
	// transient failure (sessions.Retryable) before their final outcome;
	// Retries counts those retries, all sessions together.
	Retried, Retries int
	// Failed counts sessions whose last step failed for a reason that is
	// not transient (their outcome is counted too; usually skipped).
	Failed int
	// Pending counts sessions left unfinished because leadership ended
	// (the next leader's recovery takes them).
	Pending int
}

// Recovery runs startup recovery on the leader.
type Recovery struct {
	store    *state.Store
	sessions Sessions
	policy   string
	log      hclog.Logger
	// maxWorkers overrides workers when > 0 (WithWorkers).
	maxWorkers int

	mu          sync.Mutex
	leaderCtx   context.Context // this term's context (nil before the first)
	last        *Report
	orphans     *orphans // nil: no orphan reconciling (see WithOrphans)
	lastOrphans *OrphanReport
	// runs are the passes in progress (see Expedite).
	runs map[*pass]struct{}
}

// pass is one recovery pass in progress: its candidates and which of them
// a worker (or Expedite) has taken.
type pass struct {
	ctx     context.Context
	byID    map[string]candidate
	taken   map[string]bool // guarded by Recovery.mu
	wg      sync.WaitGroup  // expedited recoveries
	mu      sync.Mutex      // guards rep
	rep     *Report
	recover func(candidate)
}

// New returns a Recovery over the local store.
func New(store *state.Store, s Sessions, cfg *config.Config, log hclog.Logger) *Recovery {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Recovery{store: store, sessions: s, policy: cfg.Recovery.AutoResume, log: log}
}

// WithWorkers bounds how many sessions one pass recovers at once (default
// 128).
func (r *Recovery) WithWorkers(n int) *Recovery {
	r.maxWorkers = n
	return r
}

// candidate is a session to recover and whether its agent may be resumed;
// start is set for a session recorded but never started (its leader changed
// between the two).
type candidate struct {
	sessionID  string
	autoResume bool
	start      bool
}

// candidates are the sessions whose current executor is starting or ready,
// and active sessions whose executor's failure was recorded without the
// session's (a leader change in between).
func (r *Recovery) candidates(node string) []candidate {
	var out []candidate
	for _, sess := range r.store.Sessions(state.SessionFilter{}) {
		if node != "" {
			if ex, ok := r.store.Executor(sess.ExecutorID); !ok || ex.Node != node {
				continue
			}
		}
		if sess.StopRequested && (sess.State == api.SessionCreated || sess.State.Active()) {
			// A stop the last leader answered and did not finish, whatever
			// became of its executor: Recover finishes it.
			out = append(out, candidate{sessionID: sess.ID})
			continue
		}
		if sess.State == api.SessionCreated && sess.ExecutorID == "" {
			out = append(out, candidate{sessionID: sess.ID, start: true})
			continue
		}
		if sess.State == api.SessionCompleted || sess.ExecutorID == "" {
			continue
		}
		ex, ok := r.store.Executor(sess.ExecutorID)
		halfFailed := ok && ex.Status == api.ExecutorError && sess.State.Active() // see sessions.Recover
		if !ok || (ex.Status != api.ExecutorStarting && ex.Status != api.ExecutorReady && !halfFailed) {
			continue
		}
		out = append(out, candidate{sessionID: sess.ID, autoResume: r.allows(sess.State)})
	}
	return out
}

// allows applies recovery.auto_resume: "all" resumes every recovered session
// whose agent is gone, "active" only those that were starting or running
// (not ones a user left in ERROR), "none" never.
func (r *Recovery) allows(s api.SessionState) bool {
	switch r.policy {
	case config.AutoResumeAll:
		return true
	case config.AutoResumeNone:
		return false
	}
	return s == api.SessionStarting || s == api.SessionWaitingForInput || s == api.SessionRunning
}

// Run recovers every candidate, retrying transient failures for as long as
// this node leads; it is a cluster.LeaderFunc. With WithOrphans it then
// reconciles orphaned executors until ctx ends.
func (r *Recovery) Run(ctx context.Context) {
	r.mu.Lock()
	r.leaderCtx = ctx
	r.mu.Unlock()
	r.recoverAll(ctx, "")
	r.sessions.DestroyAbandoned(ctx, "")
	r.mu.Lock()
	o := r.orphans
	r.mu.Unlock()
	if o != nil && ctx.Err() == nil {
		r.reconcileLoop(ctx, o)
	}
}

// retryBackoff paces the retries of one session's transient failures: the
// first comes soon (a leadership transfer is over within seconds), later
// ones back off to retryMax.
func retryBackoff(attempt int) time.Duration {
	return min(100*time.Millisecond<<min(attempt, 6), retryMax)
}

// retryMax is the longest pause between two attempts at one session.
const retryMax = 5 * time.Second

// result is what recovering one candidate came to.
type result struct {
	outcome sessions.Outcome
	retries int
	err     error // the last error; nil when the session finished cleanly
	pending bool  // leadership ended first
}

// recoverOne recovers (or starts) one candidate, retrying a transient
// failure with backoff for as long as this node leads (ctx): a failure that
// is not transient ends it, and one that is never counts as done.
func (r *Recovery) recoverOne(ctx context.Context, c candidate) result {
	var res result
	for {
		var err error
		if c.start {
			res.outcome, err = sessions.OutcomeStarted, r.sessions.Start(ctx, c.sessionID)
		} else {
			res.outcome, err = r.sessions.Recover(ctx, c.sessionID, c.autoResume)
		}
		res.err = err
		switch {
		case err == nil:
			return res
		case ctx.Err() != nil:
			res.pending = true
			return res
		case !sessions.Retryable(err):
			return res
		}
		r.log.Info("recovery step failed; retrying", "session", c.sessionID, "attempt", res.retries+1, "error", err)
		select {
		case <-ctx.Done():
			res.pending = true
			return res
		case <-time.After(retryBackoff(res.retries)):
		}
		res.retries++
	}
}

// RecoverNode runs a recovery pass over the sessions whose executor lives on
// node, on this leader: the node answers again after it was unavailable,
// and the sessions that waited for it come back by the usual rules
// (reattach, or resume from the token); the executors of sessions deleted
// with force meanwhile are destroyed. It does nothing when this node does
// not lead.
func (r *Recovery) RecoverNode(node string) {
	r.mu.Lock()
	ctx := r.leaderCtx
	r.mu.Unlock()
	if ctx == nil || ctx.Err() != nil {
		return
	}
	r.recoverAll(ctx, node)
	r.sessions.DestroyAbandoned(ctx, node)
}

// Expedite recovers a session that someone waits for (a prompt) now, ahead
// of the running pass's order, when a pass has it still to do: a pass of
// 1,000 sessions takes seconds, and a prompt to the last one in its order
// would wait all of them. It returns at once; the recovery counts in that
// pass's report. A session no pass holds, or one already taken, is left
// as it is.
func (r *Recovery) Expedite(sessionID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for p := range r.runs {
		c, ok := p.byID[sessionID]
		if !ok || p.taken[sessionID] || p.ctx.Err() != nil {
			continue
		}
		p.taken[sessionID] = true
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.recover(c)
		}()
		return
	}
}

// take marks a pass's candidate as handed to a worker; false when Expedite
// took it first.
func (r *Recovery) take(p *pass, id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p.taken[id] {
		return false
	}
	p.taken[id] = true
	return true
}

// recoverAll is one recovery pass: every candidate (on node, when not "")
// is recovered, or left pending when leadership ends.
func (r *Recovery) recoverAll(ctx context.Context, node string) {
	rep := &Report{Started: time.Now(), Outcomes: map[sessions.Outcome]int{}}
	list := r.candidates(node)
	r.log.Info("recovery started", "sessions", len(list), "auto_resume", r.policy, "node", node)
	p := &pass{ctx: ctx, byID: make(map[string]candidate, len(list)), taken: map[string]bool{}, rep: rep}
	for _, c := range list {
		p.byID[c.sessionID] = c
	}
	p.recover = func(c candidate) {
		res := r.recoverOne(ctx, c)
		p.mu.Lock()
		rep.record(res)
		p.mu.Unlock()
		if res.err != nil && !res.pending {
			r.log.Warn("recover session", "session", c.sessionID, "start", c.start, "outcome", res.outcome, "retries", res.retries, "error", res.err)
		}
	}
	r.mu.Lock()
	if r.runs == nil {
		r.runs = map[*pass]struct{}{}
	}
	r.runs[p] = struct{}{}
	r.mu.Unlock()
	work := make(chan candidate)
	var wg sync.WaitGroup
	for i := 0; i < min(r.workers(), len(list)); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range work {
				p.recover(c)
			}
		}()
	}
	pending := 0
feed:
	for _, c := range list {
		if !r.take(p, c.sessionID) {
			continue // expedited
		}
		select {
		case work <- c:
		case <-ctx.Done():
			pending++
			break feed
		}
	}
	close(work)
	r.mu.Lock()
	for _, c := range list { // left when leadership ended
		if !p.taken[c.sessionID] {
			p.taken[c.sessionID] = true
			pending++
		}
	}
	delete(r.runs, p)
	r.mu.Unlock()
	wg.Wait()
	p.wg.Wait()
	rep.Pending += pending
	rep.Duration = time.Since(rep.Started)
	if node == "" {
		r.mu.Lock()
		r.last = rep
		r.mu.Unlock()
	}
	r.log.Info("recovery finished", "duration", rep.Duration, "continued", rep.Outcomes[sessions.OutcomeContinued],
		"resumed", rep.Outcomes[sessions.OutcomeResumed], "workspace_only", rep.Outcomes[sessions.OutcomeWorkspace],
		"lost", rep.Outcomes[sessions.OutcomeLost], "started", rep.Outcomes[sessions.OutcomeStarted], "stopped", rep.Outcomes[sessions.OutcomeStopped],
		"skipped", rep.Outcomes[sessions.OutcomeSkipped], "retried", rep.Retried, "retries", rep.Retries,
		"failed", rep.Failed, "pending", rep.Pending, "cancelled", ctx.Err() != nil)
}

// record counts one candidate's result.
func (rep *Report) record(res result) {
	rep.Retries += res.retries
	if res.retries > 0 {
		rep.Retried++
	}
	switch {
	case res.pending:
		rep.Pending++
		return
	case res.err != nil:
		rep.Failed++
	}
	rep.Outcomes[res.outcome]++
}

// Last returns the report of the last completed run (nil before one).
func (r *Recovery) Last() *Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}
