package chaos

import (
	"context"
	"math/rand/v2"
	"time"

	wire "github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/bench/harness"
)

// replaceAfter is how long a session may stay unusable (never seen with a
// live agentctl to fault, nor answering a prompt) before the run adds a new
// session in its place.
const replaceAfter = 30 * time.Second

// sessionList is the run's sessions (sessions are added during the run).
func (r *runner) sessionList() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.sessions...)
}

// addSession adds a session to the run; during the fault phase it gets its
// prompter at once.
func (r *runner) addSession(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sessions = append(r.sessions, id)
	r.usableAt[id] = time.Now()
	if r.fwg != nil {
		r.startPrompter(len(r.sessions)-1, id)
	}
}

// startPrompter starts session i's prompter in the fault phase; r.mu held.
func (r *runner) startPrompter(i int, id string) {
	if r.o.PromptsPerSession <= 0 {
		return
	}
	ctx, rng := r.fctx, rand.New(rand.NewPCG(r.o.Seed, uint64(10+i)))
	r.fwg.Add(1)
	go func() { defer r.fwg.Done(); r.prompter(ctx, i, id, rng) }()
}

// usable records that a session could be faulted or answered at at.
func (r *runner) usable(id string, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if at.After(r.usableAt[id]) {
		r.usableAt[id] = at
	}
}

// replaceLost adds a new session for each one that stayed unusable for
// replaceAfter (at most Options.Sessions in a run), so that a session the
// cluster lost (or keeps recovering) does not starve the agentctl injector
// and the prompters for the rest of the run. Nothing is concluded here: the
// replaced session stays in the run and in the final checks, which find it
// lost if it never answers again.
func (r *runner) replaceLost(ctx context.Context, leader *harness.Node) {
	now := time.Now()
	r.mu.Lock()
	var lost []string
	for _, id := range r.sessions {
		if !r.replaced[id] && now.Sub(r.usableAt[id]) > replaceAfter && r.added+len(lost) < r.o.Sessions {
			lost = append(lost, id)
		}
	}
	r.mu.Unlock()
	api := r.api(leader)
	for _, id := range lost {
		s, err := boundedBy(ctx, 10*time.Second, func(c context.Context) (*wire.Session, error) {
			return api.CreateSession(c, r.task, wire.CreateSessionRequest{Agent: "demo", Runtime: "standalone"})
		})
		if err != nil {
			return // no leader for now: the next round tries again
		}
		r.mu.Lock()
		r.replaced[id] = true
		r.added++
		r.mu.Unlock()
		r.addSession(s.ID)
		r.logf("chaos: session %s unusable for %s (%s); added session %s", id, replaceAfter, r.describe(ctx, id), s.ID)
	}
}
