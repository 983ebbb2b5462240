// Package chaos runs a bounded fault loop against a real three-node Paddock
// cluster while sessions run on the standalone runtime and talk to the demo
// agent, and checks what the cluster did:
//
//   - no two agent executions of one session ever overlapped, fencing tokens
//     never went backwards, and every execution ran under a granted token
//     (every lease grant is recorded from the cluster's
//     session.lease_changed events, every agent execution from agentctl's
//     execution journal plus a process watcher; see Check);
//   - prompts sent during the run were answered, or their turn was cut
//     short by the end of the agent execution that ran it, and after the
//     final settle every session still answers, remembering every word it
//     confirmed in order (see CheckPrompts); a session that never answers is
//     a lost session.
//
// # Concurrency
//
// Faults come from two injectors that run at the same time:
//
//   - the leader injector (one goroutine, one fault at a time, since a
//     three-node cluster tolerates one node down): kill -9 the leader and
//     restart it, SIGSTOP the leader for a hold and SIGCONT it, cut the
//     leader off the network for a hold (network namespaces, when available)
//     and heal it; after each fault it waits for a leader (and, after a kill,
//     for the restarted node's API), then until every session has been seen
//     waiting for input or running again (at most 2·TTL+4 s), then
//     100–400 ms. Without that wait, leader faults closer together than the
//     lease TTL plus its grace keep every lease from expiring, so every
//     session stays ERROR with a "live owner" for as long as they go on, and
//     later faults hit nothing but recovery;
//   - the session injector (one goroutine): every 150–500 ms it kill -9s
//     the agentctl of a random session that is WAITING_FOR_INPUT or RUNNING
//     (so not mid-resume) with a ready executor whose process really is
//     that session's agentctl and has run for half a second at least (so a
//     session just brought back can take a prompt before its next fault);
//     when none qualifies it looks again 100 ms later.
//
// Besides them, one prompter per session sends "remember WORD" prompts (one
// at a time, a fresh word each, 200–800 ms apart, at most
// Options.PromptsPerSession of them) and verifies the answers, and a tender
// resumes sessions left ERROR or STOPPED. Both injectors count into
// Result.Faults and Result.ByKind; the session injector stops at
// Options.Faults, the leader injector once Options.Faults are reached and it
// has injected at least Options.MinLeaderFaults itself, and both stop at
// Options.MaxDuration. A leader fault under way when the run stops still
// finishes its hold and is undone.
//
// # Holds
//
// A pause or cut lasts either less than the lease TTL (0.6 s to TTL−0.3 s:
// a new leader is elected, as raft's timeouts are 300 ms, and the old one
// comes back deposed while its leases and its agentctls' leases are still
// valid) or longer than it (TTL+0.2 s to TTL+1.2 s: the leases expire,
// agentctl self-fences and the sessions are resumed elsewhere), half of
// each. The earlier loop held for 0.3 s to 2·TTL+1.8 s uniformly (3 s on
// average); these two bands keep both cases at about 1.9 s on average.
//
// The session fault count dominates the total (ByKind tells them apart);
// MinLeaderFaults keeps the leader faults a sizeable share.
//
// A session that stays unusable for 30 s (never seen with a live agentctl
// to fault, nor answering a prompt) gets a new session added in its place,
// up to Options.Sessions of them, so that sessions the cluster loses do not
// starve the injector and the prompters; the old session stays in the run
// and in the final checks.
//
// # The end of a run
//
// Once the fault phase is over every fault is undone, the sessions are
// given Options.FinalBound (60 s) to come back (resumed when ERROR or
// STOPPED), the prompts still open are resolved (30 s), every session is
// asked "recall" (45 s), any lease left is let run out, and the lease
// events are caught up before Check and CheckPrompts run. Result.Operations counts what was checked:
// agent executions, lease changes, answered prompts and answered recalls;
// prompts refused, failed or unanswered are not counted.
//
// `make test` runs it with ~50 faults (e2e), `make bench` with 1,000.
//
// It uses bench/harness and bench/netns; it must not import supervisor
// internals other than the state model and the public client.
package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	wire "github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/bench/harness"
	"github.com/paddockhq/paddock/bench/netns"
	"github.com/paddockhq/paddock/client"
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
	// MinLeaderFaults is how many of them at least are leader faults
	// (default Faults/10): the leader injector goes on past Faults until
	// it has injected that many.
	MinLeaderFaults int
	// Sessions is how many sessions run (default 3).
	Sessions int
	// PromptsPerSession bounds the prompts sent to each session (default
	// 40; negative: none). Every turn is kept in the conversation, which a
	// resumed agent replays, so the bound keeps resumes cheap.
	PromptsPerSession int
	// TTL is lease.ttl (default 2s).
	TTL time.Duration
	// Partitions: "auto" (default: when network namespaces work), "on"
	// (required; an error when unavailable) or "off".
	Partitions string
	// Seed makes the fault schedule repeatable as far as concurrent
	// injectors allow (0: random).
	Seed uint64
	// MaxDuration bounds the fault loop; the run stops injecting faults
	// when it passes (default 1h).
	MaxDuration time.Duration
	// FinalBound bounds the end of a run: the settle gets FinalBound, the
	// prompts still open half of it, the final recall three quarters
	// (default 60 s).
	FinalBound time.Duration
	// RaftStore is the servers' server.raft_store: "bolt", "wal" or ""
	// (unset: the default store, bolt, on their new data_dirs).
	RaftStore string
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
	// Operations counts what was checked: executions, lease changes,
	// answered prompts and final recalls.
	Operations int `json:"operations"`
	Executions int `json:"executions"`
	Grants     int `json:"grants"`
	// PromptsSent were accepted (202); PromptsAnswered of them were
	// answered with the expected reply; PromptsUnanswered were not (each
	// must have lost its turn to the end of the agent execution running it:
	// CheckPrompts). Prompts refused or failed are not counted.
	PromptsSent       int `json:"prompts_sent"`
	PromptsAnswered   int `json:"prompts_answered"`
	PromptsUnanswered int `json:"prompts_unanswered"`
	// Recalls is how many sessions answered the final recall.
	Recalls int `json:"recalls"`
	// Sessions is how many sessions the run had, SessionsAdded of them
	// added in place of sessions that stayed unusable (see replaceLost).
	Sessions      int `json:"sessions"`
	SessionsAdded int `json:"sessions_added"`
	// Partitions tells whether network partitions were among the faults.
	Partitions bool `json:"partitions"`
	// FaultSeconds is how long the fault phase lasted; FaultsPerMinute is
	// Faults over it.
	FaultSeconds    float64       `json:"fault_seconds"`
	FaultsPerMinute float64       `json:"faults_per_minute"`
	Seconds         float64       `json:"seconds"`
	Details         []string      `json:"details,omitempty"`
	Seed            uint64        `json:"seed"`
	Took            time.Duration `json:"-"`
}

// runner is one run's state.
type runner struct {
	o        Options
	c        *harness.Cluster
	nw       *netns.Net
	root     string // standalone workspace_root
	task     string
	sessions []string
	logf     func(string, ...any)

	// stopFaults ends the fault phase (target reached).
	stopFaults context.CancelFunc

	mu           sync.Mutex
	down         map[*harness.Node]string // nodes currently killed/paused/cut, and how
	last         *harness.Node            // the last node seen leading
	byKind       map[string]int
	faults       int
	leaderFaults int
	prompts      []Prompt            // resolved prompts
	outstanding  map[string]*Prompt  // session → prompt awaiting its outcome
	words        map[string][]string // session → every word sent
	promptErrs   int
	noTarget     int                  // session injector lookups that found no session to fault
	upAt         map[string]time.Time // session → when last seen waiting for input or running
	usableAt     map[string]time.Time // session → when last seen faultable or answering
	replaced     map[string]bool      // sessions a new one was added for
	added        int                  // sessions added in place of unusable ones

	// fctx and fwg own the fault phase's goroutines (prompters of sessions
	// added during it too); nil before it starts.
	fctx context.Context
	fwg  *sync.WaitGroup
}

// Run runs the fault loop and the checker. The error is for a run that could
// not be carried out (cluster never formed, …); violations are in Result.
func Run(ctx context.Context, o Options) (Result, error) {
	o = withDefaults(o)
	begin := time.Now()
	r := &runner{o: o, logf: o.Logf, down: map[*harness.Node]string{}, byKind: map[string]int{},
		outstanding: map[string]*Prompt{}, words: map[string][]string{}, upAt: map[string]time.Time{},
		usableAt: map[string]time.Time{}, replaced: map[string]bool{}}
	res := Result{Seed: o.Seed, ByKind: map[string]int{}}
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

	// The fault phase: injectors, prompters and the tender, all stopped by
	// fctx (target reached, MaxDuration passed or ctx ended).
	faultBegin := time.Now()
	fctx, stopFaults := context.WithDeadline(ctx, faultBegin.Add(o.MaxDuration))
	r.stopFaults = stopFaults
	var fwg sync.WaitGroup
	rng := func(stream uint64) *rand.Rand { return rand.New(rand.NewPCG(o.Seed, stream)) }
	fwg.Add(3)
	r.mu.Lock()
	r.fctx, r.fwg = fctx, &fwg
	for i, id := range r.sessions {
		r.startPrompter(i, id)
	}
	r.mu.Unlock()
	go func() { defer fwg.Done(); r.leaderInjector(ctx, fctx, rng(1)) }()
	go func() { defer fwg.Done(); r.sessionInjector(fctx, rng(2)) }()
	go func() { defer fwg.Done(); r.tender(fctx) }()
	progress := time.NewTicker(15 * time.Second)
	done := make(chan struct{})
	go func() { fwg.Wait(); close(done) }()
	for waiting := true; waiting; {
		select {
		case <-done:
			waiting = false
		case <-progress.C:
			r.logf("chaos: %d faults %v, %d prompts answered, sessions %s (%s)", r.faultCount(), r.kinds(), r.answered(), r.states(ctx), time.Since(faultBegin).Round(time.Second))
		}
	}
	progress.Stop()
	stopFaults()
	faultTook := time.Since(faultBegin)
	r.mu.Lock()
	noTarget, promptErrs := r.noTarget, r.promptErrs
	r.mu.Unlock()
	r.logf("chaos: fault phase over: %d faults %v in %s; the session injector found no session to fault %d times; %d prompts refused or failed",
		r.faultCount(), r.kinds(), faultTook.Round(time.Second), noTarget, promptErrs)

	// Settle: heal everything, let the cluster bring every session back,
	// check the prompts still open and every session's memory, and let any
	// lease run out, so the final state is checked too.
	r.healAll()
	leader, err := r.leader(ctx, 60*time.Second)
	if err != nil {
		return res, fmt.Errorf("no leader after healing: %w", err)
	}
	if !r.settle(ctx, o.FinalBound) {
		r.logf("chaos: not every session waits for input after the settle")
	}
	r.resolveOutstanding(ctx, o.FinalBound/2)
	recalls := r.finalRecalls(ctx, o.FinalBound*3/4)
	sleepCtx(ctx, o.TTL+time.Second)
	if l, err := r.leader(ctx, 10*time.Second); err == nil {
		leader = l
	}
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
	r.mu.Lock()
	prompts := append([]Prompt(nil), r.prompts...)
	words := map[string][]string{}
	for id, w := range r.words {
		words[id] = append([]string(nil), w...)
	}
	for k, v := range r.byKind {
		res.ByKind[k] = v
	}
	res.Faults = r.faults
	r.mu.Unlock()
	sessions := r.sessionList()
	vs = append(vs, CheckPrompts(sessions, prompts, execs, words, recalls)...)

	for _, p := range prompts {
		if p.Answered {
			res.PromptsAnswered++
		} else {
			res.PromptsUnanswered++
		}
	}
	res.PromptsSent = len(prompts)
	res.Sessions, res.SessionsAdded = len(sessions), r.added
	for _, id := range sessions {
		if _, ok := recalls[id]; ok {
			res.Recalls++
		}
	}
	res.Executions, res.Grants, res.Violations = len(execs), len(gs), len(vs)
	res.Operations = res.Executions + res.Grants + res.PromptsAnswered + res.Recalls
	for _, v := range vs {
		res.Details = append(res.Details, v.String())
	}
	res.FaultSeconds = faultTook.Seconds()
	if res.FaultSeconds > 0 {
		res.FaultsPerMinute = float64(res.Faults) / faultTook.Minutes()
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

func withDefaults(o Options) Options {
	if o.Faults <= 0 {
		o.Faults = defaultFaults
	}
	if o.MinLeaderFaults <= 0 {
		o.MinLeaderFaults = o.Faults / 10
	}
	if o.Sessions <= 0 {
		o.Sessions = 3
	}
	if o.PromptsPerSession == 0 {
		o.PromptsPerSession = 40
	}
	if o.TTL <= 0 {
		o.TTL = defaultTTL
	}
	if o.MaxDuration <= 0 {
		o.MaxDuration = time.Hour
	}
	if o.FinalBound <= 0 {
		o.FinalBound = time.Minute
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
	return o
}

// count records an injected fault; once the target is reached (and the
// leader injector's share), it ends the fault phase.
func (r *runner) count(kind string) {
	r.mu.Lock()
	r.faults++
	r.byKind[kind]++
	if kind != KillAgentctl {
		r.leaderFaults++
	}
	done := r.faults >= r.o.Faults && r.leaderFaults >= r.o.MinLeaderFaults
	n := r.faults
	r.mu.Unlock()
	if n%50 == 0 {
		r.logf("chaos: %d faults injected (%v)", n, r.kinds())
	}
	if done {
		r.stopFaults()
	}
}

// reached reports whether the total fault target is reached.
func (r *runner) reached() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.faults >= r.o.Faults
}

func (r *runner) faultCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.faults
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

func (r *runner) answered() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, p := range r.prompts {
		if p.Answered {
			n++
		}
	}
	return n
}

// states summarises the sessions' states, for progress lines.
func (r *runner) states(ctx context.Context) string {
	l, err := r.leader(ctx, time.Second)
	if err != nil {
		return "(no leader)"
	}
	api := r.api(l)
	ss, err := bounded(ctx, func(c context.Context) ([]wire.Session, error) { return api.ListSessions(c, r.task, "") })
	if err != nil {
		return "(" + err.Error() + ")"
	}
	n := map[wire.SessionState]int{}
	for _, s := range ss {
		n[s.State]++
	}
	return fmt.Sprint(n)
}

// start builds the network (when partitions are on) and the cluster.
func (r *runner) start() error {
	o := r.o
	r.root = filepath.Join(o.Dir, "workspaces")
	if err := os.MkdirAll(r.root, 0o755); err != nil {
		return fmt.Errorf("workspace root: %w", err)
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
	serverExtra := ""
	if o.RaftStore != "" {
		serverExtra = fmt.Sprintf("  raft_store = %q", o.RaftStore)
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
		c, err := harness.StartHosts(harness.Options{Bin: o.Bin, Dir: o.Dir, Extra: common, ServerExtra: serverExtra}, hosts)
		if err != nil {
			_ = nw.Close()
			return fmt.Errorf("start cluster: %w", err)
		}
		r.c = c
	} else {
		c, err := harness.Start(harness.Options{Bin: o.Bin, Dir: o.Dir, Size: 3, SeparateIPs: true, Extra: common + plugin("127.0.0.1:0"), ServerExtra: serverExtra})
		if err != nil {
			return fmt.Errorf("start cluster: %w", err)
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

// createSessions creates the sessions and waits until each runs.
func (r *runner) createSessions(ctx context.Context) error {
	leader, err := r.leader(ctx, 60*time.Second)
	if err != nil {
		return err
	}
	api := r.api(leader)
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	task, err := api.CreateTask(cctx, wire.CreateTaskRequest{Title: "chaos"})
	if err != nil {
		return fmt.Errorf("create task: %w", err)
	}
	r.task = task.ID
	for i := 0; i < r.o.Sessions; i++ {
		s, err := api.CreateSession(cctx, task.ID, wire.CreateSessionRequest{Agent: "demo", Runtime: "standalone"})
		if err != nil {
			return fmt.Errorf("create session: %w", err)
		}
		r.addSession(s.ID)
	}
	if !r.settle(ctx, 60*time.Second) {
		return errors.New("sessions never reached WAITING_FOR_INPUT")
	}
	return nil
}
