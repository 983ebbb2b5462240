package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	wire "github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/bench/harness"
	"github.com/paddockhq/paddock/client"
)

// callTimeout bounds one API call (a paused leader never answers).
const callTimeout = 3 * time.Second

// reachableURLs are the API URLs of nodes neither down, paused nor cut.
func (r *runner) reachableURLs() []string {
	var out []string
	for _, n := range r.candidates() {
		out = append(out, n.URL())
	}
	return out
}

// candidates are the running nodes neither killed, paused nor cut.
func (r *runner) candidates() []*harness.Node {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*harness.Node
	for _, n := range r.c.Nodes {
		if _, down := r.down[n]; !down && n.Running() {
			out = append(out, n)
		}
	}
	return out
}

var quick = &http.Client{Timeout: 500 * time.Millisecond}

// isLeader asks a node's /v1/health.
func isLeader(n *harness.Node) bool {
	resp, err := quick.Get(n.URL() + "/v1/health")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var h struct {
		Leader bool `json:"leader"`
	}
	return json.NewDecoder(resp.Body).Decode(&h) == nil && h.Leader
}

// answers reports whether a node's API answers at all.
func answers(n *harness.Node) bool {
	resp, err := quick.Get(n.URL() + "/v1/health")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// leader waits for a reachable node that says it leads, asking the last
// leader seen first.
func (r *runner) leader(ctx context.Context, bound time.Duration) (*harness.Node, error) {
	deadline := time.Now().Add(bound)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		cands := r.candidates()
		r.mu.Lock()
		last := r.last
		r.mu.Unlock()
		for i := range cands {
			if cands[i] == last {
				cands[0], cands[i] = cands[i], cands[0]
				break
			}
		}
		for _, n := range cands {
			if isLeader(n) {
				r.mu.Lock()
				r.last = n
				r.mu.Unlock()
				return n, nil
			}
		}
		sleepCtx(ctx, 50*time.Millisecond)
	}
	return nil, fmt.Errorf("no leader within %s", bound)
}

func (r *runner) api(n *harness.Node) *client.Client {
	c, _ := client.New(n.URL(), "", client.WithTimeout(callTimeout))
	return c
}

// bounded runs f with a context bounded by callTimeout (client.WithTimeout
// does not apply to a context that already has a deadline).
func bounded[T any](ctx context.Context, f func(context.Context) (T, error)) (T, error) {
	return boundedBy(ctx, callTimeout, f)
}

// boundedBy runs f with a context bounded by d.
func boundedBy[T any](ctx context.Context, d time.Duration, f func(context.Context) (T, error)) (T, error) {
	cctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return f(cctx)
}

// settle waits until every session waits for input or runs a turn (and
// resumes any that are ERROR or STOPPED); it reports whether they all did
// within bound.
func (r *runner) settle(ctx context.Context, bound time.Duration) bool {
	deadline := time.Now().Add(bound)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if l, err := r.leader(ctx, 10*time.Second); err == nil && r.resumeStuck(ctx, l) {
			return true
		}
		sleepCtx(ctx, 200*time.Millisecond)
	}
	return false
}

// awaitSessions waits until every session has been seen waiting for input
// or running a turn since it was called (or bound passed), so that the next
// leader fault hits a cluster that recovered from the last one: leader
// faults closer together than the lease TTL plus its grace keep every
// session's lease from expiring, and so every resume refused, for as long
// as they go on. Sightings by the session injector and the tender count
// too (a session the injector killed was up when it was picked). It
// reports whether all were seen.
func (r *runner) awaitSessions(ctx context.Context, bound time.Duration) bool {
	since := time.Now()
	deadline := since.Add(bound)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		if r.allUpSince(since) {
			return true
		}
		if l, err := r.leader(ctx, time.Until(deadline)); err == nil {
			api := r.api(l)
			at := time.Now()
			if ss, err := bounded(ctx, func(c context.Context) ([]wire.Session, error) { return api.ListSessions(c, r.task, "") }); err == nil {
				r.sawUp(ss, at)
			}
		}
		if r.allUpSince(since) {
			return true
		}
		sleepCtx(ctx, 150*time.Millisecond)
	}
	return false
}

// listSessions lists the run's sessions (bounded) and records those up.
func (r *runner) listSessions(ctx context.Context, api *client.Client) ([]wire.Session, error) {
	at := time.Now()
	ss, err := bounded(ctx, func(c context.Context) ([]wire.Session, error) { return api.ListSessions(c, r.task, "") })
	if err == nil {
		r.sawUp(ss, at)
	}
	return ss, err
}

// sawUp records the sessions of ss that wait for input or run a turn, as
// of at (when the listing was asked for).
func (r *runner) sawUp(ss []wire.Session, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range ss {
		if (s.State == wire.SessionWaitingForInput || s.State == wire.SessionRunning) && at.After(r.upAt[s.ID]) {
			r.upAt[s.ID] = at
		}
	}
}

// allUpSince reports whether every session was seen up after since.
func (r *runner) allUpSince(since time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range r.sessions {
		if !r.replaced[id] && !r.upAt[id].After(since) {
			return false
		}
	}
	return true
}

// resumeStuck resumes ERROR/STOPPED sessions; true when all are running.
func (r *runner) resumeStuck(ctx context.Context, leader *harness.Node) bool {
	api := r.api(leader)
	ss, err := r.listSessions(ctx, api)
	if err != nil {
		return false
	}
	by := map[string]wire.Session{}
	for _, s := range ss {
		by[s.ID] = s
	}
	all := true
	for _, id := range r.sessionList() {
		s, ok := by[id]
		if !ok {
			return false
		}
		switch s.State {
		case wire.SessionWaitingForInput, wire.SessionRunning:
			continue
		case wire.SessionError, wire.SessionStopped:
			// Refused while the lease still has a live owner (409) or while
			// leadership moves: the next round tries again.
			_, _ = bounded(ctx, func(c context.Context) (*wire.Session, error) { return api.Resume(c, id) })
		}
		all = false
	}
	return all
}

func (r *runner) setDown(n *harness.Node, how string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.down[n] = how
}

func (r *runner) setUp(n *harness.Node) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.down, n)
}

func (r *runner) index(n *harness.Node) int {
	for i, m := range r.c.Nodes {
		if m == n {
			return i
		}
	}
	return -1
}

// healAll undoes every fault still in effect and restarts dead nodes.
func (r *runner) healAll() {
	for i, n := range r.c.Nodes {
		_ = n.Signal(syscall.SIGCONT)
		if r.nw != nil {
			_ = r.nw.Heal(i)
		}
		if !n.Running() {
			if err := n.Start(); err != nil {
				r.logf("chaos: restart %s: %v", n.Name, err)
			}
		}
		r.setUp(n)
	}
}

// isAgentctl reports whether pid is an agentctl serving session id.
func isAgentctl(pid int, id string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && strings.Contains(string(b), "agentctl") && strings.Contains(string(b), id)
}

func writeJSON(path string, res Result) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("chaos result: %w", err)
	}
	sort.Strings(res.Details)
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return fmt.Errorf("chaos result: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("chaos result: %w", err)
	}
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
