package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	wire "github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/bench/harness"
	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/shared/runtime"
)

const (
	areaSessions = "Sessions: start, prompts, agentctl (standalone runtime, demo agent)"
	areaLeases   = "Leases: dead-holder reclaim"
	areaPlugins  = "Plugins: RPC"
	// benchLeaseTTL is the lease TTL of the sessions suite's node, short so
	// that the at-TTL reclaim trials stay quick.
	benchLeaseTTL = 5 * time.Second
)

// SessionsSuite measures, on one node with the standalone runtime and the
// demo agent: session start (API call → WAITING_FOR_INPUT), the prompt round
// trip through the supervisor and agentctl, agentctl's RSS with one idle
// session, and lease reclaim after kill -9 (detected) or SIGSTOP (at TTL) of
// a session's agentctl.
func SessionsSuite(ctx context.Context, env Env) ([]Result, error) {
	c, _, stop, err := paddockCluster(env, "sessions", 1, false, fmt.Sprintf("lease {\n  ttl = %q\n}\n", benchLeaseTTL))
	if err != nil {
		return nil, err
	}
	defer stop()
	node, err := c.Leader(30 * time.Second)
	if err != nil {
		return nil, err
	}
	api := apiOf(node)
	task, err := api.CreateTask(ctx, wire.CreateTaskRequest{Title: "bench sessions"})
	if err != nil {
		return nil, fmt.Errorf("create task: %w", err)
	}
	nStart, nPrompt, nReclaim, nTTL := 50, 100, 10, 3
	if env.Quick {
		nStart, nPrompt, nReclaim, nTTL = 10, 20, 3, 1
	}
	var out []Result

	// Session start, one at a time.
	var starts []float64
	var ids []string
	for i := 0; i < nStart; i++ {
		t0 := time.Now()
		s, err := api.CreateSession(ctx, task.ID, wire.CreateSessionRequest{Agent: "demo", Runtime: "standalone"})
		if err != nil {
			return out, fmt.Errorf("create session: %w", err)
		}
		if err := waitSession(ctx, api, s.ID, wire.SessionWaitingForInput, 60*time.Second, 2*time.Millisecond); err != nil {
			return out, err
		}
		starts = append(starts, ms(time.Since(t0)))
		ids = append(ids, s.ID)
	}
	st := Summary(Result{Name: "session_start_ms", Area: areaSessions, Unit: "ms",
		Note: fmt.Sprintf("POST /v1/tasks/{id}/sessions until GET /v1/sessions/{id} says WAITING_FOR_INPUT (polled every 2 ms), %d sessions one after another on one node: plugin launch of agentctl, agent start, ACP initialize and new session", nStart)}, starts, false)
	out = append(out, st)
	env.Logf("session start p50 %.0fms", st.P50)
	// The sessions stay up (idle) while the rest runs; stop all but one to
	// measure one idle session's agentctl.
	sid := ids[0]
	for _, id := range ids[1:] {
		_, _ = api.Stop(ctx, id)
	}

	// Prompt round trip on one session.
	var rts []float64
	for i := 0; i < nPrompt; i++ {
		d, err := promptRoundTrip(ctx, api, sid, fmt.Sprintf("rt-%d", i))
		if err != nil {
			return out, err
		}
		rts = append(rts, ms(d))
	}
	rt := Summary(Result{Name: "prompt_round_trip_ms", Area: areaSessions, Unit: "ms",
		Note: fmt.Sprintf("POST /v1/sessions/{id}/prompt until the agent's complete reply is in GET …/messages and the session is WAITING_FOR_INPUT again (polled every 2 ms): supervisor → agentctl → demo agent (ACP, reply streamed in chunks) → agentctl → raft write; %d prompts", nPrompt)}, rts, false)
	out = append(out, rt)
	env.Logf("prompt round trip p50 %.1fms", rt.P50)

	// agentctl RSS with one idle session, and its demo agent's (agentctl's
	// child, forked from any of its threads).
	pid, err := agentctlPID(ctx, api, sid)
	if err != nil {
		return out, err
	}
	var rss, agentRSS []float64
	agents := 0
	for i := 0; i < 5; i++ {
		rss = append(rss, float64(rssKiB(pid))/1024)
		kids, kib := harness.ChildPIDs(pid), 0
		for _, ch := range kids {
			kib += rssKiB(ch)
		}
		agents = max(agents, len(kids))
		agentRSS = append(agentRSS, float64(kib)/1024)
		time.Sleep(200 * time.Millisecond)
	}
	agentNote := fmt.Sprintf("the demo agent it runs (VmRSS of agentctl's %d child process(es)) adds p50 %.1f MiB", agents, Percentile(agentRSS, 50))
	if agents == 0 || Percentile(agentRSS, 50) == 0 {
		agentNote = "the demo agent's RSS was not measured: no child process with an RSS found under agentctl"
	}
	out = append(out, Summary(Result{Name: "agentctl_rss_mib", Area: areaSessions, Unit: "MiB",
		Note: fmt.Sprintf("VmRSS of agentctl serve with one idle session (after %d prompts), 5 reads 200 ms apart; %s", nPrompt, agentNote)}, rss, false))

	// Lease reclaim.
	var detected, atTTL []float64
	for i := 0; i < nReclaim+nTTL; i++ {
		sigstop := i >= nReclaim
		d, err := leaseReclaim(ctx, api, sid, sigstop)
		if err != nil {
			return out, fmt.Errorf("lease reclaim trial %d: %w", i, err)
		}
		if sigstop {
			atTTL = append(atTTL, ms(d))
		} else {
			detected = append(detected, ms(d))
		}
	}
	lr := Summary(Result{Name: "lease_reclaim_ms", Area: areaLeases, Unit: "ms", Goal: "≤ 1000",
		Note: fmt.Sprintf("kill -9 of a running session's agentctl until GET /v1/sessions/{id}/lease no longer shows the old holder as held (polled every 5 ms); %d kills, session auto-resumed between trials", nReclaim)}, detected, false)
	out = append(out, Verdict(lr, lr.P99 <= 1000))
	env.Logf("lease reclaim (detected) p50 %.0fms", lr.P50)
	ttlGoal := ms(benchLeaseTTL + 2*time.Second)
	lt := Summary(Result{Name: "lease_reclaim_ttl_ms", Area: areaLeases, Unit: "ms", Goal: fmt.Sprintf("≤ TTL + 2 s = %.0f", ttlGoal),
		Note: fmt.Sprintf("SIGSTOP of a running session's agentctl (process alive, socket open, renewals stop) until the lease is no longer held by it; lease ttl = %s; %d trials", benchLeaseTTL, nTTL)}, atTTL, false)
	out = append(out, Verdict(lt, lt.P99 <= ttlGoal))

	// Plugin RPC.
	pr, err := pluginRPC(ctx, env)
	if err != nil {
		return out, fmt.Errorf("plugin rpc: %w", err)
	}
	return append(out, pr...), nil
}

// promptRoundTrip sends text and waits until the agent's complete reply to
// it is in the session's messages.
func promptRoundTrip(ctx context.Context, api *client.Client, id, text string) (time.Duration, error) {
	t0 := time.Now()
	if err := api.Prompt(ctx, id, text); err != nil {
		return 0, fmt.Errorf("prompt: %w", err)
	}
	err := waitUntil(ctx, 30*time.Second, 2*time.Millisecond, "the reply to "+text, func() bool {
		msgs, err := api.Messages(ctx, id)
		if err != nil || len(msgs) == 0 {
			return false
		}
		m := msgs[len(msgs)-1]
		if m.Role != wire.RoleAgent || !m.Complete || !strings.HasSuffix(m.Text, ": "+text) {
			return false
		}
		s, err := api.GetSession(ctx, id)
		return err == nil && s.State == wire.SessionWaitingForInput
	})
	return time.Since(t0), err
}

// leaseReclaim kills (or stops) the agentctl of session id and measures
// until the lease is no longer held by it; then lets the session recover.
func leaseReclaim(ctx context.Context, api *client.Client, id string, sigstop bool) (time.Duration, error) {
	var pid int
	var before *wire.Lease
	if err := waitUntil(ctx, 60*time.Second, 20*time.Millisecond, "a ready executor and a held lease", func() bool {
		s, err := api.GetSession(ctx, id)
		if err != nil || s.State != wire.SessionWaitingForInput {
			return false
		}
		if pid, err = agentctlPID(ctx, api, id); err != nil {
			return false
		}
		before, err = api.Lease(ctx, id)
		return err == nil && before.State == wire.LeaseHeld
	}); err != nil {
		return 0, err
	}
	t0 := time.Now()
	if sigstop {
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			return 0, fmt.Errorf("SIGSTOP %d: %w", pid, err)
		}
	} else {
		killWait(pid)
	}
	err := waitUntil(ctx, 60*time.Second, 5*time.Millisecond, "the lease to be reclaimed", func() bool {
		l, err := api.Lease(ctx, id)
		return err == nil && (l.State != wire.LeaseHeld || l.HolderNonce != before.HolderNonce || l.FencingToken != before.FencingToken)
	})
	d := time.Since(t0)
	if sigstop {
		killWait(pid)
	}
	if err != nil {
		return d, err
	}
	// Auto-resume brings the session back; resume it by hand if not.
	if err := waitSession(ctx, api, id, wire.SessionWaitingForInput, 5*time.Second, 20*time.Millisecond); err != nil {
		_, _ = api.Resume(ctx, id)
	}
	return d, nil
}

// pluginRPC measures Inspect round trips through go-plugin to the real
// standalone runtime plugin, each paired with a Capabilities call (no work in
// the plugin) as the transport baseline under the same load.
func pluginRPC(ctx context.Context, env Env) ([]Result, error) {
	n := 20000
	if env.Quick {
		n = 3000
	}
	root, err := os.MkdirTemp(env.Dir, "plugin-")
	if err != nil {
		return nil, err
	}
	c, err := runtime.NewClient(ctx, runtime.ClientConfig{Path: filepath.Join(env.Bin, "plugins", "paddock-runtime-standalone")})
	if err != nil {
		return nil, err
	}
	defer c.Kill()
	if diags, err := c.SetConfig(ctx, runtime.ConfigSource{Filename: "bench.hcl", Source: fmt.Appendf(nil, "workspace_root = %q\n", root)}); err != nil || diags.HasErrors() {
		return nil, fmt.Errorf("set config: %v %v", err, diags)
	}
	sdir := filepath.Join(root, "bench1")
	ws, stateDir := filepath.Join(sdir, "workspace"), filepath.Join(sdir, "state")
	for _, d := range []string{ws, stateDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	handle, _ := json.Marshal(map[string]any{"v": 1, "session_id": "bench1", "session_dir": sdir, "workspace": ws,
		"owns_workspace": true, "state_dir": stateDir, "pid": os.Getpid(), "nonce": "n", "url": "http://127.0.0.1:1"})
	if _, err := c.Inspect(ctx, handle); err != nil {
		return nil, fmt.Errorf("inspect: %w", err)
	}
	if _, err := c.Capabilities(ctx); err != nil {
		return nil, fmt.Errorf("capabilities: %w", err)
	}
	inspect, noop := make([]float64, 0, n), make([]float64, 0, n)
	timedInspect := func() error {
		t0 := time.Now()
		if _, err := c.Inspect(ctx, handle); err != nil {
			return fmt.Errorf("inspect: %w", err)
		}
		inspect = append(inspect, float64(time.Since(t0).Nanoseconds())/1000)
		return nil
	}
	timedNoop := func() error {
		t0 := time.Now()
		if _, err := c.Capabilities(ctx); err != nil {
			return fmt.Errorf("capabilities: %w", err)
		}
		noop = append(noop, float64(time.Since(t0).Nanoseconds())/1000)
		return nil
	}
	for i := 0; i < n; i++ {
		// The order alternates: a call right after another one on the same
		// connection finds the plugin's threads awake, one after a pause
		// does not.
		first, second := timedInspect, timedNoop
		if i%2 == 1 {
			first, second = timedNoop, timedInspect
		}
		if err := first(); err != nil {
			return nil, err
		}
		if err := second(); err != nil {
			return nil, err
		}
	}
	nr := Summary(Result{Name: "plugin_rpc_noop_us", Area: areaPlugins, Unit: "µs",
		Note: fmt.Sprintf("transport baseline for plugin_rpc_us: a Capabilities call (the plugin returns constants) through the same go-plugin connection, paired with each of the %d Inspect calls, the order alternating", n)}, noop, false)
	r := Summary(Result{Name: "plugin_rpc_us", Area: areaPlugins, Unit: "µs", Goal: "p50 ≤ 100 (go-plugin gRPC reference on a desktop CPU)"}, inspect, false)
	r.Note = fmt.Sprintf("Inspect round trip through go-plugin (gRPC over a Unix socket) to the real paddock-runtime-standalone process, %d sequential calls after one warm-up, each paired with one plugin_rpc_noop_us call (the order alternating); the plugin checks the JSON handle (decoded once, then cached), stats the workspace and reads /proc/PID/cmdline. "+
		"This run: Inspect p50 − no-op p50 = %+.0f µs; the rest is transport.", n, r.P50-nr.P50)
	if r.P50 > 100 && nr.P50 > 100 {
		r.Note += " The goal is missed in the transport: the no-op call alone is over 100 µs at p50."
	}
	return []Result{Verdict(r, r.P50 <= 100), nr}, nil
}
