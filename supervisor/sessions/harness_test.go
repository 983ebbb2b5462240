package sessions

// The package's test harness: the manager over the real FSM (no raft), a
// fake runtime per node that runs real `agentctl serve` processes, and the
// demo agent behind them.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/raft"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/shared/agentctl"
	"github.com/paddockhq/paddock/shared/demoagent"
	"github.com/paddockhq/paddock/shared/runtime"
	"github.com/paddockhq/paddock/shared/runtime/runtimetest"
	"github.com/paddockhq/paddock/shared/testkit"
	"github.com/paddockhq/paddock/supervisor/config"
	"github.com/paddockhq/paddock/supervisor/nodes"
	"github.com/paddockhq/paddock/supervisor/state"
)

// binDir holds agentctl and paddock-demo-agent ($PADDOCK_BIN, else built).
var binDir string

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	if d := os.Getenv("PADDOCK_BIN"); d != "" {
		_, e1 := os.Stat(filepath.Join(d, "agentctl"))
		_, e2 := os.Stat(filepath.Join(d, "paddock-demo-agent"))
		if e1 == nil && e2 == nil {
			binDir = d
			return m.Run()
		}
	}
	dir, err := os.MkdirTemp("", "sessions-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	for _, pkg := range []string{"github.com/paddockhq/paddock/cmd/agentctl", "github.com/paddockhq/paddock/cmd/paddock-demo-agent"} {
		cmd := exec.Command("go", "build", "-o", dir+"/", pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n%s", pkg, err, out)
			return 1
		}
	}
	binDir = dir
	return m.Run()
}

// replicated is the cluster's state machine without raft: every command is
// encoded as the leader encodes it and applied by the real FSM.
type replicated struct {
	mu    sync.Mutex
	fsm   *state.FSM
	store *state.Store
	idx   uint64
	// batches records each LeaderApplyAll call's commands, in order.
	batches [][]state.Proposal
}

// proposedTogether returns the commands of every LeaderApplyAll call so far.
func (r *replicated) proposedTogether() [][]state.Proposal {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.batches)
}

func newReplicated() *replicated {
	s := state.NewStore()
	// Indices start above 1 so Subscribe(…, 1) replays every event.
	return &replicated{fsm: state.NewFSM(s), store: s, idx: 100}
}

func (r *replicated) apply(typ state.CommandType, body any) (*state.Result, error) {
	data, err := state.Command{Type: typ, Now: time.Now(), Body: body}.Encode()
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.idx++
	return r.fsm.Apply(&raft.Log{Index: r.idx, Type: raft.LogCommand, Data: data}).(*state.Result), nil
}

// must applies a command a test sets up state with.
func (r *replicated) must(t testing.TB, typ state.CommandType, body any) *state.Result {
	t.Helper()
	res, err := r.apply(typ, body)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		t.Fatalf("apply %d %+v: %v", typ, body, err)
	}
	return res
}

// events returns the retained events of a session.
func (r *replicated) events(sessionID string) []api.Event {
	sub := r.store.Subscribe(state.EventFilter{SessionID: sessionID}, 1)
	defer sub.Close()
	var out []api.Event
	for {
		select {
		case e, ok := <-sub.C:
			if !ok {
				return out
			}
			out = append(out, e)
		default:
			return out
		}
	}
}

// fsmCluster is one node's view of the replicated state: a leader whose
// LeaderApply goes straight to the FSM.
type fsmCluster struct {
	id string
	r  *replicated
}

func (c fsmCluster) ID() string          { return c.id }
func (c fsmCluster) Store() *state.Store { return c.r.store }
func (c fsmCluster) LeaderApply(_ context.Context, typ state.CommandType, body any) (*state.Result, error) {
	return c.r.apply(typ, body)
}
func (c fsmCluster) LeaderApplyAll(ctx context.Context, props []state.Proposal) ([]*state.Result, error) {
	c.r.mu.Lock()
	c.r.batches = append(c.r.batches, slices.Clone(props))
	c.r.mu.Unlock()
	return applyEach(ctx, c, props)
}

// applyEach is LeaderApplyAll for a test cluster: each command in turn,
// stopping at the first that fails.
func applyEach(ctx context.Context, c Cluster, props []state.Proposal) ([]*state.Result, error) {
	var results []*state.Result
	for _, p := range props {
		res, err := c.LeaderApply(ctx, p.Type, p.Body)
		if err != nil {
			return results, err
		}
		results = append(results, res)
	}
	return results, nil
}

// fakeNodes serves each node's fake runtime; a node that is down answers
// as supervisor/nodes does (ErrNodeUnavailable joined with the cause).
type fakeNodes struct {
	self  string
	mu    sync.Mutex
	rts   map[string]*fakeRuntime
	order []string
	down  map[string]bool
	sick  map[string]bool // answers, but its plugin is unhealthy
	caps  map[string]int  // limits.max_sessions_per_node as each node reported it
}

func (n *fakeNodes) MaxSessions(node string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.caps[node]
}

func (n *fakeNodes) setDown(node string, down bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.down[node] = down
}

func (n *fakeNodes) Runtime(node, name string) (runtime.Runtime, error) {
	if node == "" {
		node = n.self
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	rt, ok := n.rts[node]
	if !ok || n.down[node] {
		return nil, errors.Join(nodes.ErrNodeUnavailable, fmt.Errorf("node %s at 127.0.0.1:1: connection refused", node))
	}
	if name != "standalone" {
		return nil, fmt.Errorf("runtime %q is not loaded on node %s", name, node)
	}
	return rt, nil
}

func (n *fakeNodes) Available(node string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	_, ok := n.rts[node]
	return node == "" || (ok && !n.down[node])
}

func (n *fakeNodes) Usable(string) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for _, id := range n.order {
		if !n.down[id] && !n.sick[id] {
			out = append(out, id)
		}
	}
	return out
}

// fakeHandle is what fakeRuntime puts in an executor's handle: enough for
// any node's fake to restart agentctl on the same workspace (as a shared
// workspace_root allows).
type fakeHandle struct {
	ID        string `json:"id"`
	Session   string `json:"session"`
	Workspace string `json:"workspace"`
	StateDir  string `json:"state_dir"`
}

// fakeRuntime is one node's runtime plugin: by default a small standalone
// runtime running real agentctl processes (Recover reattaches a live one
// and restarts a dead one); the function fields program other answers.
type fakeRuntime struct {
	t    testing.TB
	node string
	caps runtime.Capabilities

	// Programmable answers; nil keeps the default behaviour.
	onLaunch  func(runtime.LaunchRequest) (runtime.LaunchResponse, error)
	onRecover func(fakeHandle) (runtime.LaunchResponse, error)
	onInspect func(fakeHandle) (runtime.InspectResponse, error)
	onStop    func(fakeHandle) error

	mu       sync.Mutex
	calls    []string
	launches []runtime.LaunchRequest
	procs    map[string]*agentctlProc // by executor id
}

func (f *fakeRuntime) record(op string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, op)
}

// callsOf counts the calls of op ("launch", "recover", …).
func (f *fakeRuntime) callsOf(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if c == op {
			n++
		}
	}
	return n
}

// executorCalls lists every call that acts on an executor (not Capabilities).
func (f *fakeRuntime) executorCalls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.DeleteFunc(slices.Clone(f.calls), func(c string) bool { return c == "capabilities" })
}

func (f *fakeRuntime) proc(id string) *agentctlProc {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.procs[id]
}

func (f *fakeRuntime) Info(context.Context) (runtime.Info, error) {
	return runtime.Info{Name: "standalone", Version: "test", APIVersion: runtime.APIVersion}, nil
}
func (f *fakeRuntime) ConfigSchema(context.Context) (runtime.Schema, error) {
	return runtime.Schema{}, nil
}
func (f *fakeRuntime) SetConfig(context.Context, runtime.ConfigSource) (hcl.Diagnostics, error) {
	return nil, nil
}
func (f *fakeRuntime) Capabilities(context.Context) (runtime.Capabilities, error) {
	f.record("capabilities")
	return f.caps, nil
}

func (f *fakeRuntime) Launch(_ context.Context, req runtime.LaunchRequest) (runtime.LaunchResponse, error) {
	f.record("launch")
	f.mu.Lock()
	f.launches = append(f.launches, req)
	f.mu.Unlock()
	if f.onLaunch != nil {
		return f.onLaunch(req)
	}
	ws := req.Workspace.Path
	if ws == "" {
		ws = workspaceDir(f.t)
	}
	h := fakeHandle{ID: req.ExecutorID, Session: req.SessionID, Workspace: ws, StateDir: f.t.TempDir()}
	return f.start(h, req.AgentctlSecret)
}

func (f *fakeRuntime) start(h fakeHandle, secret string) (runtime.LaunchResponse, error) {
	p, err := startAgentctl(f.t, h, secret, "127.0.0.1:0")
	if err != nil {
		return runtime.LaunchResponse{}, fmt.Errorf("%w: %v", runtime.ErrUnavailable, err)
	}
	f.mu.Lock()
	f.procs[h.ID] = p
	f.mu.Unlock()
	return p.response(h), nil
}

func decodeHandle(b []byte) (fakeHandle, error) {
	var h fakeHandle
	if err := json.Unmarshal(b, &h); err != nil || h.ID == "" {
		return h, fmt.Errorf("handle %q: %w", b, runtime.ErrNotFound)
	}
	return h, nil
}

func (f *fakeRuntime) Recover(_ context.Context, handle []byte, secret string) (runtime.LaunchResponse, error) {
	f.record("recover")
	h, err := decodeHandle(handle)
	if err != nil {
		return runtime.LaunchResponse{}, err
	}
	if f.onRecover != nil {
		return f.onRecover(h)
	}
	if p := f.proc(h.ID); p != nil && p.alive() {
		return p.response(h), nil
	}
	return f.start(h, secret)
}

func (f *fakeRuntime) Inspect(_ context.Context, handle []byte) (runtime.InspectResponse, error) {
	f.record("inspect")
	h, err := decodeHandle(handle)
	if err != nil {
		return runtime.InspectResponse{}, err
	}
	if f.onInspect != nil {
		return f.onInspect(h)
	}
	p := f.proc(h.ID)
	switch {
	case p == nil:
		return runtime.InspectResponse{}, fmt.Errorf("executor %s: %w", h.ID, runtime.ErrNotFound)
	case p.alive():
		return runtime.InspectResponse{State: runtime.StateRunning, PID: p.info.PID, AgentctlURL: p.info.URL}, nil
	default:
		return runtime.InspectResponse{State: runtime.StateExited, PID: p.info.PID}, nil
	}
}

func (f *fakeRuntime) Stop(_ context.Context, handle []byte, _ time.Duration) error {
	f.record("stop")
	if h, err := decodeHandle(handle); err == nil {
		if f.onStop != nil {
			if err := f.onStop(h); err != nil {
				return err
			}
		}
		if p := f.proc(h.ID); p != nil {
			p.kill()
		}
	}
	return nil
}

func (f *fakeRuntime) Destroy(ctx context.Context, handle []byte) error {
	f.record("destroy")
	if h, err := decodeHandle(handle); err == nil {
		if p := f.proc(h.ID); p != nil {
			p.kill()
		}
	}
	return nil
}

// agentctlProc is a real `agentctl serve` in its own process group (its
// agent included), so kill takes the whole "machine" down.
type agentctlProc struct {
	cmd  *exec.Cmd
	info agentctl.Info
	done chan struct{}
}

// startAgentctl starts agentctl for h listening on listen (host:port).
func startAgentctl(t testing.TB, h fakeHandle, secret, listen string) (*agentctlProc, error) {
	cmd := exec.Command(filepath.Join(binDir, "agentctl"), "serve", "-session", h.Session, "-workspace", h.Workspace,
		"-state-dir", h.StateDir, "-listen", listen, "-log-file", filepath.Join(h.StateDir, "agentctl.log"))
	cmd.Env = append(os.Environ(), "PADDOCK_AGENTCTL_SECRET="+secret, "PATH="+binDir+":"+os.Getenv("PATH"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &agentctlProc{cmd: cmd, done: make(chan struct{})}
	t.Cleanup(p.kill)
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		for sc.Scan() { // drain stdout until agentctl exits
		}
		_ = cmd.Wait()
		close(p.done)
	}()
	select {
	case l, ok := <-lines:
		if !ok {
			return nil, errors.New("agentctl exited before printing its info line")
		}
		if err := json.Unmarshal([]byte(l), &p.info); err != nil {
			return nil, fmt.Errorf("agentctl info line %q: %w", l, err)
		}
	case <-time.After(15 * time.Second):
		p.kill()
		return nil, errors.New("agentctl printed no info line")
	}
	return p, nil
}

func (p *agentctlProc) response(h fakeHandle) runtime.LaunchResponse {
	b, _ := json.Marshal(h)
	return runtime.LaunchResponse{Handle: b, AgentctlURL: p.info.URL, PID: p.info.PID, Nonce: p.info.Nonce, WorkspacePath: h.Workspace}
}

// alive reports whether agentctl still runs: a killed one is dead from the
// moment it exits, before this process has reaped it (a runtime asked
// right after the kill must not see it running).
func (p *agentctlProc) alive() bool {
	select {
	case <-p.done:
		return false
	default:
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] != 'Z'
}

// kill ends agentctl and its agent at once (a machine going down).
func (p *agentctlProc) kill() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
	}
}

// world is a cluster of nodes over one replicated state.
type world struct {
	t     *testing.T
	r     *replicated
	nodes map[string]*fakeNodes // each node's view (self differs)
	rts   map[string]*fakeRuntime
	ids   []string
	cfg   *config.Config
}

const secretForTests = "sessions-test-secret-0123456789"

// testConfig is a configuration with the demo agent profiles and short
// lease times (a lease waited out costs ~1.5 s).
func testConfig() *config.Config {
	c := config.Default()
	c.Lease.TTL = time.Second
	c.Server.ElectionTimeout = 100 * time.Millisecond
	c.Recovery.HealthTimeout = time.Second
	demo := filepath.Join(binDir, "paddock-demo-agent")
	c.Agents = []*config.Agent{
		{Name: "demo", Protocol: "acp", Command: []string{demo, "--chunk-delay", "1ms"}, Permission: "deny"},
		{Name: "demo-noresume", Protocol: "acp", Command: []string{demo, "--chunk-delay", "1ms", "--no-resume"}, Permission: "deny"},
		{Name: "demo-ask", Protocol: "acp", Command: []string{demo, "--chunk-delay", "1ms"}, Permission: "ask"},
	}
	return c
}

func newWorld(t *testing.T, ids ...string) *world {
	// First, so that it runs last: after the managers have stopped.
	runtimetest.CleanupProcesses(t)
	w := &world{t: t, r: newReplicated(), nodes: map[string]*fakeNodes{}, rts: map[string]*fakeRuntime{}, ids: ids, cfg: testConfig()}
	for _, id := range ids {
		w.rts[id] = &fakeRuntime{t: t, node: id, caps: runtime.Capabilities{NodeLocal: true, SurvivesSupervisorRestart: true}, procs: map[string]*agentctlProc{}}
	}
	return w
}

// view is node self's Nodes; every view shares the runtimes and which
// nodes are down.
func (w *world) view(self string) *fakeNodes {
	if n, ok := w.nodes[self]; ok {
		return n
	}
	n := &fakeNodes{self: self, rts: w.rts, order: w.ids, down: map[string]bool{}, sick: map[string]bool{}, caps: map[string]int{}}
	w.nodes[self] = n
	return n
}

// down marks a node down in every view.
func (w *world) down(node string) {
	for _, id := range w.ids {
		w.view(id).setDown(node, true)
	}
}

// leader starts a Manager leading on node self; it stops at cleanup.
func (w *world) leader(self string) *Manager {
	m, _ := w.leaderUntil(self)
	return m
}

// leaderUntil starts a Manager leading on node self until end is called
// (or cleanup): end returns once its leader work has stopped.
func (w *world) leaderUntil(self string) (m *Manager, end func()) {
	t := w.t
	logs := &logBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("manager %s log:\n%s", self, logs.String())
		}
	})
	m = New(Options{Cluster: fsmCluster{id: self, r: w.r}, Nodes: w.view(self), Config: w.cfg,
		Logger: hclog.New(&hclog.LoggerOptions{Name: "sessions-" + self, Level: hclog.Info, Output: logs})})
	return m, w.lead(m)
}

// lead runs m's leader work (one leadership) until end is called (or
// cleanup): end returns once it has stopped. A manager led again is its
// node winning the leadership back.
func (w *world) lead(m *Manager) (end func()) {
	t := w.t
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.Run(ctx)
	}()
	end = func() {
		cancel()
		<-done
	}
	t.Cleanup(end)
	if _, err := m.leaderCtx(context.Background()); err != nil {
		t.Fatal(err)
	}
	return end
}

// logBuffer keeps a manager's log, shown when its test fails (goroutines
// may still log while the test ends).
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// live is a session a previous leader brought up on node.
type live struct {
	id, executorID string
	node           string
	token          uint64 // the lease's fencing token
	nonce          string // agentctl's boot nonce
	client         *agentctl.Client
	executor       api.Executor // the row as recorded
}

type liveOpts struct {
	id       string
	node     string
	agent    string // profile; "demo" when empty
	noToken  bool   // the resume token is never recorded
	unprobed bool   // the executor row holds no probe answer (one that failed)
	remember string // told to the agent before the failover
	shared   string // workspace directory (a fresh one when empty)
}

// seedLive records a session the way a leader's launch does, with a real
// agentctl started by node's runtime and a real agent in it; the leader
// that did it is gone (no Manager runs).
func (w *world) seedLive(o liveOpts) live {
	t := w.t
	t.Helper()
	if o.agent == "" {
		o.agent = "demo"
	}
	ws := o.shared
	if ws == "" {
		ws = workspaceDir(t)
	}
	taskID := "t-" + o.id
	exID := "ex-" + o.id
	w.r.must(t, state.CmdCreateTask, &state.CreateTaskBody{Task: api.Task{ID: taskID, Title: o.id, Workspace: api.Workspace{Path: ws}}})
	w.r.must(t, state.CmdCreateSession, &state.CreateSessionBody{Session: api.Session{ID: o.id, TaskID: taskID, Agent: o.agent, Runtime: "standalone"}})
	w.r.must(t, state.CmdSetSessionState, &state.SetSessionStateBody{SessionID: o.id, State: api.SessionStarting})
	token := w.r.must(t, state.CmdClaimLease, &state.ClaimLeaseBody{SessionID: o.id, ExecutorID: exID, Nonce: "launch-" + o.id, TTL: w.cfg.Lease.TTL}).FencingToken
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := w.rts[o.node].Launch(ctx, runtime.LaunchRequest{SessionID: o.id, TaskID: taskID, ExecutorID: exID, Workspace: runtime.Workspace{Path: ws}, AgentctlSecret: secretForTests, FencingToken: token})
	if err != nil {
		t.Fatal(err)
	}
	w.rts[o.node].mu.Lock()
	w.rts[o.node].calls = nil // the previous leader's calls are not the test's
	w.rts[o.node].launches = nil
	w.rts[o.node].mu.Unlock()
	c := agentctl.NewClient(resp.AgentctlURL, secretForTests, 10*time.Second)
	c.SetFencingToken(token)
	h, err := c.Health(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w.r.must(t, state.CmdSetLeaseNonce, &state.SetLeaseNonceBody{SessionID: o.id, FencingToken: token, Nonce: h.Nonce})
	prof := profile(w.cfg.Agent(o.agent))
	caps, err := c.Probe(ctx, prof)
	if err != nil {
		t.Fatal(err)
	}
	ex := api.Executor{ID: exID, SessionID: o.id, Runtime: "standalone", Node: o.node, Status: api.ExecutorReady,
		AgentctlURL: resp.AgentctlURL, PID: resp.PID, Nonce: h.Nonce, Secret: secretForTests, Handle: resp.Handle, WorkspacePath: resp.WorkspacePath,
		SupportsSessionResume: caps.SupportsSessionResume != nil && *caps.SupportsSessionResume && !o.unprobed, ResumeProbed: caps.SupportsSessionResume != nil && !o.unprobed, SupportsWorkspaceOnly: caps.SupportsWorkspaceOnly}
	w.r.must(t, state.CmdPutExecutor, state.NewPutExecutor(ex))
	if _, err := c.RenewLease(ctx, w.cfg.Lease.TTL); err != nil {
		t.Fatal(err)
	}
	st, err := c.StartAgent(ctx, prof, "")
	if err != nil {
		t.Fatal(err)
	}
	if st.ResumeToken != "" && !o.noToken {
		w.r.must(t, state.CmdSetResumeToken, &state.SetResumeTokenBody{SessionID: o.id, ResumeToken: st.ResumeToken})
	}
	w.r.must(t, state.CmdSetSessionState, &state.SetSessionStateBody{SessionID: o.id, State: api.SessionWaitingForInput})
	if o.remember != "" {
		// The transcript holds the prompt as the leader's pump recorded it.
		w.r.must(t, state.CmdPutMessage, &state.PutMessageBody{SessionID: o.id,
			Message: api.Message{ID: "seed-" + o.id, Role: api.RoleUser, Text: "remember " + o.remember, Complete: true, CreatedAt: time.Now(), UpdatedAt: time.Now()}})
		if _, err := c.Prompt(ctx, "remember "+o.remember); err != nil {
			t.Fatal(err)
		}
		testkit.WaitFor(t, 30*time.Second, "the remember turn to end", testkit.Cond(func() bool {
			a, err := c.AgentState(ctx)
			return err == nil && a.Turn >= 1 && !a.TurnRunning && a.Status == agentctl.StatusWaitingForInput
		}))
	}
	recorded, _ := w.r.store.Executor(exID)
	return live{id: o.id, executorID: exID, node: o.node, token: token, nonce: h.Nonce, client: c, executor: recorded}
}

// lease returns a session's lease (failing when there is none).
func (w *world) lease(id string) api.Lease {
	w.t.Helper()
	l, ok := w.r.store.Lease(id)
	if !ok {
		w.t.Fatalf("session %s has no lease", id)
	}
	return l
}

func (w *world) session(id string) api.Session {
	w.t.Helper()
	s, ok := w.r.store.Session(id)
	if !ok {
		w.t.Fatalf("no session %s", id)
	}
	return s
}

func (w *world) executor(id string) api.Executor {
	w.t.Helper()
	e, ok := w.r.store.Executor(id)
	if !ok {
		w.t.Fatalf("no executor %s", id)
	}
	return e
}

// agentSaid waits until the session's conversation holds a complete agent
// message containing text.
func (w *world) agentSaid(id, text string) {
	w.t.Helper()
	testkit.WaitFor(w.t, 20*time.Second, fmt.Sprintf("an agent message %q in session %s", text, id), testkit.Cond(func() bool {
		for _, msg := range w.r.store.Messages(id) {
			if msg.Role == api.RoleAgent && msg.Complete && strings.Contains(msg.Text, text) {
				return true
			}
		}
		return false
	}))
}

// recoverCtx bounds one Recover call of a test.
func recoverCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// workspaceDir is a temporary workspace; at cleanup, every process still
// working in it is killed before it is removed (an agent outlives its
// killed agentctl for a moment and may still be saving its conversation
// there).
func workspaceDir(t testing.TB) string {
	dir := t.TempDir()
	runtimetest.CleanupProcesses(t)
	return dir
}

// continueSession has m recover session id as a leader that took over, and
// fails the test unless the recovery continued the session's running agent.
func continueSession(t *testing.T, m *Manager, id string) {
	t.Helper()
	if out, err := m.Recover(recoverCtx(t), id, true); err != nil || out != OutcomeContinued {
		t.Fatalf("Recover = %s, %v; want continued", out, err)
	}
}

// streamedWhole waits for session id to wait for input after a "stream n"
// prompt and fails the test unless its last message is the whole reply,
// complete; it returns the reply.
func (w *world) streamedWhole(t *testing.T, id string, n int) string {
	t.Helper()
	testkit.WaitFor(t, 60*time.Second, "the session to wait for input", testkit.Cond(func() bool {
		return w.session(id).State == api.SessionWaitingForInput
	}))
	want := strings.Join(demoagent.StreamChunks(n), "")
	msgs := w.r.store.Messages(id)
	if last := msgs[len(msgs)-1]; last.Role != api.RoleAgent || !last.Complete || last.Text != want {
		for _, msg := range msgs {
			t.Logf("%s %s complete=%v %q…", msg.ID, msg.Role, msg.Complete, msg.Text[:min(len(msg.Text), 40)])
		}
		t.Fatalf("WAITING_FOR_INPUT with the reply not recorded whole: last message %s (complete %v) has %d of %d bytes",
			last.Role, last.Complete, len(last.Text), len(want))
	}
	return want
}
