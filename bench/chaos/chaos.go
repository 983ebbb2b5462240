// Package chaos runs a bounded fault loop against a real three-node Paddock
// cluster (kill -9 the leader, SIGSTOP/SIGCONT the leader, cut the leader off
// with network namespaces, kill -9 a session's agentctl) while a few
// sessions run on the standalone runtime, records every lease grant (the
// cluster's session.lease_changed events) and every agent execution
// (agentctl's execution journal plus a process watcher), and checks that no
// two executions of one session ever overlapped and that fencing tokens
// never went backwards. `make test` runs it with ~50 faults (e2e), `make
// bench` with 1,000 or more.
//
// It uses bench/harness and bench/netns; it must not import supervisor
// internals other than the state model and the public client.
package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/paddockhq/paddock/bench/harness"
	"github.com/paddockhq/paddock/bench/netns"
	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/supervisor/state"
)

// Fault kinds.
const (
	KillLeader    = "kill-leader"
	PauseLeader   = "pause-leader"
	CutLeader     = "partition-leader"
	KillAgentctl  = "kill-agentctl"
	defaultTTL    = 2 * time.Second
	defaultFaults = 50
)

// Options shape a run.
type Options struct {
	// Bin holds paddock, agentctl, paddock-demo-agent and plugins/.
	Bin string
	// Dir is a fresh working directory (nodes, workspaces).
	Dir string
	// Faults is how many faults to inject (default 50).
	Faults int
	// Sessions is how many sessions run (default 3).
	Sessions int
	// TTL is lease.ttl (default 2s).
	TTL time.Duration
	// Partitions: "auto" (default: when network namespaces work), "on"
	// (required; an error when unavailable) or "off".
	Partitions string
	// Seed makes the fault schedule repeatable (0: random).
	Seed uint64
	// MaxDuration bounds the fault loop; the run stops injecting faults
	// when it passes (default 1h).
	MaxDuration time.Duration
	// Out, when set, receives {"faults":N,"violations":M,...} as JSON.
	Out string
	// Logf, when set, receives progress lines.
	Logf func(format string, args ...any)
}

// Result is what a run found.
type Result struct {
	Faults     int            `json:"faults"`
	Violations int            `json:"violations"`
	ByKind     map[string]int `json:"by_kind"`
	Executions int            `json:"executions"`
	Grants     int            `json:"grants"`
	// Partitions tells whether network partitions were among the faults.
	Partitions bool          `json:"partitions"`
	Seconds    float64       `json:"seconds"`
	Details    []string      `json:"details,omitempty"`
	Seed       uint64        `json:"seed"`
	Took       time.Duration `json:"-"`
}

// runner is one run's state.
type runner struct {
	o        Options
	rng      *rand.Rand
	c        *harness.Cluster
	nw       *netns.Net
	root     string // standalone workspace_root
	sessions []string
	logf     func(string, ...any)

	mu     sync.Mutex
	down   map[*harness.Node]string // nodes currently killed/paused/cut, and how
	byKind map[string]int
}

// Run runs the fault loop and the checker. The error is for a run that could
// not be carried out (cluster never formed, …); violations are in Result.
func Run(ctx context.Context, o Options) (Result, error) {
	if o.Faults <= 0 {
		o.Faults = defaultFaults
	}
	if o.Sessions <= 0 {
		o.Sessions = 3
	}
	if o.TTL <= 0 {
		o.TTL = defaultTTL
	}
	if o.MaxDuration <= 0 {
		o.MaxDuration = time.Hour
	}
	if o.Partitions == "" {
		o.Partitions = "auto"
	}
	if o.Seed == 0 {
		o.Seed = rand.Uint64()
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	begin := time.Now()
	r := &runner{o: o, rng: rand.New(rand.NewPCG(o.Seed, 7)), logf: o.Logf, down: map[*harness.Node]string{}, byKind: map[string]int{}}
	res := Result{Seed: o.Seed, ByKind: r.byKind}
	if err := r.start(); err != nil {
		return res, err
	}
	defer r.stop()
	res.Partitions = r.nw != nil

	wctx, stopWatch := context.WithCancel(ctx)
	var wg sync.WaitGroup
	watcher := NewWatcher(r.root)
	grants := NewGrants()
	wg.Add(2)
	go func() { defer wg.Done(); watcher.Run(wctx, 25*time.Millisecond) }()
	go func() { defer wg.Done(); grants.Run(wctx, r.reachableURLs) }()
	defer func() { stopWatch(); wg.Wait() }()

	if err := r.createSessions(ctx); err != nil {
		return res, err
	}
	deadline := time.Now().Add(o.MaxDuration)
	for res.Faults < o.Faults && time.Now().Before(deadline) && ctx.Err() == nil {
		kind, err := r.inject(ctx)
		if err != nil {
			r.logf("fault %d (%s): %v", res.Faults+1, kind, err)
		}
		if kind != "" && err == nil {
			res.Faults++
			r.mu.Lock()
			r.byKind[kind]++
			r.mu.Unlock()
		}
		r.keepGoing(ctx)
		if res.Faults%10 == 0 {
			r.logf("%d faults injected (%v)", res.Faults, r.kinds())
		}
	}
	// Settle: heal everything, let the cluster bring every session back,
	// and let any lease run out, so the final state is checked too.
	r.healAll()
	leader, err := r.leader(ctx, 60*time.Second)
	if err != nil {
		return res, fmt.Errorf("no leader after healing: %w", err)
	}
	r.settle(ctx, leader, 90*time.Second)
	sleepCtx(ctx, o.TTL+time.Second)
	if err := grants.CatchUp(ctx, leader.URL(), 3*time.Second); err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, client.ErrStreamClosed) {
		r.logf("catch up events: %v", err)
	}
	execs, err := watcher.Executions()
	if err != nil {
		return res, err
	}
	gs := grants.All()
	vs := Check(execs, gs, time.Now())
	// At the end no session may have more than one agent alive.
	alive := map[string]int{}
	for _, e := range execs {
		if e.Alive {
			alive[e.SessionID]++
		}
	}
	for id, n := range alive {
		if n > 1 {
			vs = append(vs, Violation{id, fmt.Sprintf("%d agent executions alive at the end", n)})
		}
	}
	res.Executions, res.Grants, res.Violations = len(execs), len(gs), len(vs)
	for _, v := range vs {
		res.Details = append(res.Details, v.String())
	}
	res.Took = time.Since(begin)
	res.Seconds = res.Took.Seconds()
	if o.Out != "" {
		if err := writeJSON(o.Out, res); err != nil {
			return res, err
		}
	}
	return res, nil
}

func (r *runner) kinds() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for k, v := range r.byKind {
		out[k] = v
	}
	return out
}

// start builds the network (when partitions are on) and the cluster.
func (r *runner) start() error {
	o := r.o
	r.root = filepath.Join(o.Dir, "workspaces")
	if err := os.MkdirAll(r.root, 0o755); err != nil {
		return err
	}
	common := fmt.Sprintf(`
plugin_dir = %q
lease {
  ttl = %q
}
agent "demo" {
  protocol = "acp"
  command  = ["paddock-demo-agent"]
}
`, filepath.Join(o.Bin, "plugins"), o.TTL.String())
	plugin := func(listen string) string {
		return fmt.Sprintf("plugin \"standalone\" {\n  config {\n    workspace_root = %q\n    listen = %q\n  }\n}\n", r.root, listen)
	}
	usePart := o.Partitions == "on"
	if o.Partitions == "auto" {
		_, err := netns.IPPath()
		usePart = err == nil
	}
	if usePart {
		prefix := fmt.Sprintf("pc%d", os.Getpid()%100000)
		_ = netns.CleanStale(prefix)
		nw, err := netns.New(prefix, 3)
		if err != nil {
			return fmt.Errorf("network namespaces: %w", err)
		}
		r.nw = nw
		var hosts []harness.HostSpec
		for i, h := range nw.Hosts {
			hosts = append(hosts, harness.HostSpec{IP: h.IP, Wrap: nw.Wrapper(i), Extra: plugin(h.IP + ":0")})
		}
		c, err := harness.StartHosts(harness.Options{Bin: o.Bin, Dir: o.Dir, Extra: common}, hosts)
		if err != nil {
			nw.Close()
			return err
		}
		r.c = c
	} else {
		c, err := harness.Start(harness.Options{Bin: o.Bin, Dir: o.Dir, Size: 3, SeparateIPs: true, Extra: common + plugin("127.0.0.1:0")})
		if err != nil {
			return err
		}
		r.c = c
	}
	return nil
}

// stop continues paused nodes, kills everything the run started and removes
// the namespaces.
func (r *runner) stop() {
	for _, n := range r.c.Nodes {
		_ = n.Signal(syscall.SIGCONT)
	}
	r.c.Stop()
	harness.KillProcessesUnder(r.o.Dir)
	if r.nw != nil {
		_ = r.nw.Close()
	}
}

// reachableURLs are the API URLs of nodes neither down, paused nor cut.
func (r *runner) reachableURLs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, n := range r.c.Nodes {
		if _, down := r.down[n]; !down && n.Running() {
			out = append(out, n.URL())
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

// leader waits for a reachable node that says it leads.
func (r *runner) leader(ctx context.Context, bound time.Duration) (*harness.Node, error) {
	deadline := time.Now().Add(bound)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		r.mu.Lock()
		var cands []*harness.Node
		for _, n := range r.c.Nodes {
			if _, down := r.down[n]; !down && n.Running() {
				cands = append(cands, n)
			}
		}
		r.mu.Unlock()
		for _, n := range cands {
			if isLeader(n) {
				return n, nil
			}
		}
		sleepCtx(ctx, 50*time.Millisecond)
	}
	return nil, fmt.Errorf("no leader within %s", bound)
}

func (r *runner) api(n *harness.Node) *client.Client {
	c, _ := client.New(n.URL(), "", client.WithTimeout(5*time.Second))
	return c
}

// createSessions creates the sessions and waits until each runs.
func (r *runner) createSessions(ctx context.Context) error {
	leader, err := r.leader(ctx, 60*time.Second)
	if err != nil {
		return err
	}
	api := r.api(leader)
	task, err := api.CreateTask(ctx, client.CreateTaskRequest{Title: "chaos"})
	if err != nil {
		return fmt.Errorf("create task: %w", err)
	}
	for i := 0; i < r.o.Sessions; i++ {
		s, err := api.CreateSession(ctx, task.ID, client.CreateSessionRequest{Agent: "demo", Runtime: "standalone"})
		if err != nil {
			return fmt.Errorf("create session: %w", err)
		}
		r.sessions = append(r.sessions, s.ID)
	}
	if !r.settle(ctx, leader, 60*time.Second) {
		return errors.New("sessions never reached WAITING_FOR_INPUT")
	}
	return nil
}

// settle waits until every session waits for input (and resumes any that
// are ERROR or STOPPED); it reports whether they all did within bound.
func (r *runner) settle(ctx context.Context, leader *harness.Node, bound time.Duration) bool {
	deadline := time.Now().Add(bound)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if l, err := r.leader(ctx, 10*time.Second); err == nil {
			leader = l
		}
		if r.resumeStuck(ctx, leader) {
			return true
		}
		sleepCtx(ctx, 200*time.Millisecond)
	}
	return false
}

// resumeStuck resumes ERROR/STOPPED sessions; true when all are running.
func (r *runner) resumeStuck(ctx context.Context, leader *harness.Node) bool {
	api := r.api(leader)
	all := true
	for _, id := range r.sessions {
		s, err := api.GetSession(ctx, id)
		if err != nil {
			return false
		}
		switch s.State {
		case state.SessionWaitingForInput, state.SessionRunning:
			continue
		case state.SessionError, state.SessionStopped:
			_, _ = api.Resume(ctx, id)
		}
		all = false
	}
	return all
}

// keepGoing paces the loop: wait for a leader, resume stuck sessions, and
// now and then let everything come back before the next fault.
func (r *runner) keepGoing(ctx context.Context) {
	leader, err := r.leader(ctx, 20*time.Second)
	if err != nil {
		return
	}
	if r.rng.IntN(3) == 0 {
		r.settle(ctx, leader, 10*time.Second)
	} else {
		r.resumeStuck(ctx, leader)
	}
	sleepCtx(ctx, time.Duration(100+r.rng.IntN(600))*time.Millisecond)
}

// inject picks and injects one fault; it returns its kind.
func (r *runner) inject(ctx context.Context) (string, error) {
	kinds := []string{KillLeader, PauseLeader, KillAgentctl, KillAgentctl}
	if r.nw != nil {
		kinds = append(kinds, CutLeader, CutLeader)
	}
	kind := kinds[r.rng.IntN(len(kinds))]
	leader, err := r.leader(ctx, 20*time.Second)
	if err != nil {
		return kind, err
	}
	switch kind {
	case KillLeader:
		leader.Kill()
		r.setDown(leader, kind)
		// Restart it once the others have a leader (or a bound passed).
		_, _ = r.leader(ctx, 10*time.Second)
		r.setUp(leader)
		return kind, leader.Start()
	case PauseLeader:
		if err := leader.Signal(syscall.SIGSTOP); err != nil {
			return kind, err
		}
		r.setDown(leader, kind)
		sleepCtx(ctx, r.pause())
		r.setUp(leader)
		return kind, leader.Signal(syscall.SIGCONT)
	case CutLeader:
		i := r.index(leader)
		if err := r.nw.Cut(i); err != nil {
			return kind, err
		}
		r.setDown(leader, kind)
		sleepCtx(ctx, r.pause())
		r.setUp(leader)
		return kind, r.nw.Heal(i)
	case KillAgentctl:
		api := r.api(leader)
		id := r.sessions[r.rng.IntN(len(r.sessions))]
		exs, err := api.Executors(ctx, id)
		if err != nil || len(exs) == 0 {
			return kind, fmt.Errorf("executors of %s: %v", id, err)
		}
		pid := exs[0].PID
		if pid <= 0 || !isAgentctl(pid, id) {
			return kind, fmt.Errorf("session %s has no running agentctl (pid %d)", id, pid)
		}
		return kind, syscall.Kill(pid, syscall.SIGKILL)
	}
	return "", nil
}

// pause is how long a leader stays paused or cut: sometimes shorter than
// the TTL (it comes back as a deposed leader still holding leases),
// sometimes longer (its leases are reclaimed and resumed elsewhere).
func (r *runner) pause() time.Duration {
	return time.Duration(300+r.rng.IntN(int(r.o.TTL.Milliseconds())*2+1500)) * time.Millisecond
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
			_ = n.Start()
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
		return err
	}
	sort.Strings(res.Details)
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
