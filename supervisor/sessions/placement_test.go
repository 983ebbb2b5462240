package sessions

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/shared/runtime"
	"github.com/paddockhq/paddock/shared/testkit"
	"github.com/paddockhq/paddock/supervisor/state"
)

// Placement over the real FSM: where Start and Resume put a session's
// executor, seen from which node's runtime launched it and the executor row.

// newSession records a task and a CREATED session with runtime options.
func (w *world) newSession(id string, opts map[string]string) {
	w.t.Helper()
	w.r.must(w.t, state.CmdCreateTask, &state.CreateTaskBody{Task: api.Task{ID: "t-" + id, Title: id, Workspace: api.Workspace{Path: workspaceDir(w.t)}}})
	w.r.must(w.t, state.CmdCreateSession, &state.CreateSessionBody{Session: api.Session{ID: id, TaskID: "t-" + id, Agent: "demo", Runtime: "standalone", RuntimeOptions: opts}})
}

// load records n executors of runtime rt in status st on node, each with
// its own session (placement counts live executors per node).
func (w *world) load(node, rt string, st api.ExecutorStatus, n int) {
	w.t.Helper()
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("load-%s-%s-%s-%d", node, rt, st, i)
		w.newSession(id, nil)
		w.r.must(w.t, state.CmdPutExecutor, state.NewPutExecutor(api.Executor{ID: "ex-" + id, SessionID: id, Runtime: rt, Node: node, Status: st}))
	}
}

// waitState waits until a session reaches one of states and returns it.
func (w *world) waitState(id string, states ...api.SessionState) api.Session {
	w.t.Helper()
	var s api.Session
	testkit.WaitFor(w.t, 30*time.Second, fmt.Sprintf("session %s to reach %v", id, states), testkit.Cond(func() bool {
		s = w.session(id)
		for _, st := range states {
			if s.State == st {
				return true
			}
		}
		return false
	}))
	return s
}

// launchedOn returns the nodes whose runtime was asked to launch.
func (w *world) launchedOn() []string {
	var out []string
	for _, id := range w.ids {
		if w.rts[id].callsOf("launch") > 0 {
			out = append(out, id)
		}
	}
	return out
}

// runtime_options.node puts the executor on that node (a follower here),
// whose plugin launches it; the placement key is not passed to the plugin.
func TestStartPlacesOnTheRequestedNode(t *testing.T) {
	w := newWorld(t, "n1", "n2", "n3")
	w.newSession("s1", map[string]string{OptionNode: "n3", "image": "x"})
	m := w.leader("n1")
	if err := m.Start(context.Background(), "s1"); err != nil {
		t.Fatal(err)
	}
	sess := w.waitState("s1", api.SessionWaitingForInput, api.SessionError)
	if sess.State != api.SessionWaitingForInput {
		t.Fatalf("session %s: %s", sess.State, sess.ErrorMessage)
	}
	if got := w.launchedOn(); !reflect.DeepEqual(got, []string{"n3"}) {
		t.Errorf("launched on %v, want [n3]", got)
	}
	ex := w.executor(sess.ExecutorID)
	if ex.Node != "n3" || ex.Status != api.ExecutorReady {
		t.Errorf("executor %+v, want ready on n3", ex)
	}
	if l := w.lease("s1"); l.State != api.LeaseHeld || l.HolderNonce != ex.Nonce || l.HolderExecutorID != ex.ID {
		t.Errorf("lease %+v, want held by %s (nonce %s)", l, ex.ID, ex.Nonce)
	}
	if got := w.rts["n3"].launches[0].Options; !reflect.DeepEqual(got, map[string]string{"image": "x"}) {
		t.Errorf("launch options %v, want only the session's own (no node, no existing workspace)", got)
	}
	if node := m.NodeOf("s1"); node != "n3" {
		t.Errorf("NodeOf = %q, want n3", node)
	}
}

// A requested node that cannot take the session refuses it with a clear
// message: nothing is launched anywhere, the session is ERROR and its
// lease released.
func TestStartRefusesAnUnusableNode(t *testing.T) {
	cases := []struct {
		name  string
		node  string
		setup func(w *world)
	}{
		{name: "node down", node: "n3", setup: func(w *world) { w.down("n3") }},
		{name: "plugin unhealthy", node: "n3", setup: func(w *world) { w.view("n1").sick["n3"] = true }},
		{name: "unknown node", node: "n9", setup: func(*world) {}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, "n1", "n2", "n3")
			tc.setup(w)
			w.newSession("s1", map[string]string{OptionNode: tc.node})
			m := w.leader("n1")
			if err := m.Start(context.Background(), "s1"); err != nil {
				t.Fatal(err)
			}
			sess := w.waitState("s1", api.SessionError, api.SessionWaitingForInput)
			if sess.State != api.SessionError || !strings.Contains(sess.ErrorMessage, fmt.Sprintf("node %q cannot take the session", tc.node)) {
				t.Errorf("session %s %q, want ERROR naming node %s", sess.State, sess.ErrorMessage, tc.node)
			}
			if got := w.launchedOn(); len(got) != 0 {
				t.Errorf("launched on %v", got)
			}
			if l := w.lease("s1"); l.State == api.LeaseHeld {
				t.Errorf("lease %+v still held by a session that never launched", l)
			}
		})
	}
}

// Without runtime_options.node, the executor goes to the usable node with
// the fewest live (starting or ready) executors of its runtime; among
// equals, to the leader itself.
func TestStartPlacesOnTheLeastLoadedNode(t *testing.T) {
	cases := []struct {
		name  string
		self  string
		setup func(w *world)
		want  string
	}{
		{name: "fewest live executors of the runtime", self: "n1", want: "n2", setup: func(w *world) {
			w.load("n1", "standalone", api.ExecutorReady, 2)
			// Only live executors of this runtime count.
			w.load("n2", "standalone", api.ExecutorReady, 1)
			w.load("n2", "standalone", api.ExecutorStopped, 2)
			w.load("n2", "standalone", api.ExecutorError, 2)
			w.load("n2", "docker", api.ExecutorReady, 3)
			w.load("n3", "standalone", api.ExecutorStarting, 2)
		}},
		{name: "the leader among equals", self: "n3", want: "n3", setup: func(w *world) {
			for _, n := range []string{"n1", "n2", "n3"} {
				w.load(n, "standalone", api.ExecutorReady, 1)
			}
		}},
		{name: "a node that does not answer is never chosen", self: "n1", want: "n3", setup: func(w *world) {
			w.load("n1", "standalone", api.ExecutorReady, 2)
			w.load("n3", "standalone", api.ExecutorReady, 1)
			w.down("n2")
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, "n1", "n2", "n3")
			tc.setup(w)
			w.newSession("s1", nil)
			m := w.leader(tc.self)
			if err := m.Start(context.Background(), "s1"); err != nil {
				t.Fatal(err)
			}
			sess := w.waitState("s1", api.SessionWaitingForInput, api.SessionError)
			if sess.State != api.SessionWaitingForInput {
				t.Fatalf("session %s: %s", sess.State, sess.ErrorMessage)
			}
			if got := w.launchedOn(); !reflect.DeepEqual(got, []string{tc.want}) {
				t.Errorf("launched on %v, want [%s]", got, tc.want)
			}
			if ex := w.executor(sess.ExecutorID); ex.Node != tc.want {
				t.Errorf("executor on %q, want %s", ex.Node, tc.want)
			}
		})
	}
}

// A resumed session stays on its node (its workspace is there) even when
// another node is less loaded; a relaunch there says the workspace must
// exist, and the agent resumes with its memory.
func TestResumeStaysOnItsNode(t *testing.T) {
	w := newWorld(t, "n1", "n2")
	s := w.seedLive(liveOpts{id: "s1", node: "n1", remember: "kiwi"})
	// The session was stopped (executor stopped, lease released), then its
	// executor vanished with the machine's restart.
	w.rts["n1"].proc(s.executorID).kill()
	w.r.must(t, state.CmdSetExecutorState, &state.SetExecutorStateBody{ExecutorID: s.executorID, Status: api.ExecutorStopped})
	w.r.must(t, state.CmdReleaseLease, &state.ReleaseLeaseBody{SessionID: s.id, FencingToken: s.token})
	w.r.must(t, state.CmdSetSessionState, &state.SetSessionStateBody{SessionID: s.id, State: api.SessionStopped, Reason: api.ReasonAgentNotRunning})
	w.rts["n1"].onRecover = func(h fakeHandle) (runtime.LaunchResponse, error) {
		return runtime.LaunchResponse{}, fmt.Errorf("executor %s: %w", h.ID, runtime.ErrNotFound)
	}
	w.load("n1", "standalone", api.ExecutorReady, 3)
	m := w.leader("n2")

	if err := m.Resume(context.Background(), s.id); err != nil {
		t.Fatal(err)
	}
	sess := w.waitState(s.id, api.SessionWaitingForInput, api.SessionError)
	if sess.State != api.SessionWaitingForInput {
		t.Fatalf("session %s: %s", sess.State, sess.ErrorMessage)
	}
	if got := w.launchedOn(); !reflect.DeepEqual(got, []string{"n1"}) {
		t.Errorf("launched on %v, want [n1] (the session's node)", got)
	}
	if got := w.rts["n1"].callsOf("recover"); got != 1 {
		t.Errorf("the old executor was recovered %d times before the relaunch, want 1", got)
	}
	if got := w.rts["n1"].launches[0].Options[runtime.OptionExistingWorkspace]; got != "true" {
		t.Errorf("relaunch options %v, want %s=true", w.rts["n1"].launches[0].Options, runtime.OptionExistingWorkspace)
	}
	ex := w.executor(s.executorID)
	if ex.Node != "n1" || ex.Status != api.ExecutorReady {
		t.Errorf("executor %+v, want ready on n1", ex)
	}
	if l := w.lease(s.id); l.State != api.LeaseHeld || l.FencingToken <= s.token {
		t.Errorf("lease %+v, want held with a token above %d", l, s.token)
	}
	if err := m.Prompt(context.Background(), s.id, "recall"); err != nil {
		t.Fatal(err)
	}
	w.agentSaid(s.id, "kiwi")
}

// A session whose executor's node is down and whose runtime declares a
// shared workspace may be resumed on a survivor (issue 14: "may declare it
// and then be relaunched on a survivor"; place() says so).
func TestResumeMovesOffADownNodeWithASharedWorkspace(t *testing.T) {
	w := newWorld(t, "n1", "n2")
	for _, rt := range w.rts {
		rt.caps.Extra = map[string]bool{runtime.CapSharedWorkspace: true}
	}
	s := w.seedLive(liveOpts{id: "s1", node: "n1", remember: "lime", shared: workspaceDir(t)})
	w.rts["n1"].proc(s.executorID).kill()
	w.r.must(t, state.CmdSetExecutorState, &state.SetExecutorStateBody{ExecutorID: s.executorID, Status: api.ExecutorError, ErrorMessage: "lost"})
	w.r.must(t, state.CmdReclaimLease, &state.ReleaseLeaseBody{SessionID: s.id, FencingToken: s.token})
	w.r.must(t, state.CmdSetSessionState, &state.SetSessionStateBody{SessionID: s.id, State: api.SessionError, Reason: api.ReasonExecutorLost, ErrorMessage: "lost"})
	w.down("n1")
	m := w.leader("n2")

	if err := m.Resume(context.Background(), s.id); err != nil {
		t.Fatalf("Resume = %v; want the session relaunched on n2", err)
	}
	sess := w.waitState(s.id, api.SessionWaitingForInput, api.SessionError)
	if sess.State != api.SessionWaitingForInput {
		t.Fatalf("session %s: %s", sess.State, sess.ErrorMessage)
	}
	if ex := w.executor(s.executorID); ex.Node != "n2" {
		t.Errorf("executor on %q, want n2", ex.Node)
	}
	if err := m.Prompt(context.Background(), s.id, "recall"); err != nil {
		t.Fatal(err)
	}
	w.agentSaid(s.id, "lime")
}

// launchOptions passes the session's options without the placement key,
// adds OptionExistingWorkspace for a workspace an earlier launch made, and
// leaves the session's own map alone.
func TestLaunchOptions(t *testing.T) {
	cases := []struct {
		name     string
		opts     map[string]string
		existing bool
		want     map[string]string
	}{
		{name: "none", want: map[string]string{}},
		{name: "node dropped", opts: map[string]string{OptionNode: "n2", "image": "x"}, want: map[string]string{"image": "x"}},
		{name: "existing workspace", opts: map[string]string{OptionNode: "n2"}, existing: true, want: map[string]string{runtime.OptionExistingWorkspace: "true"}},
		{name: "both kept", opts: map[string]string{"image": "x"}, existing: true, want: map[string]string{"image": "x", runtime.OptionExistingWorkspace: "true"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := maps.Clone(tc.opts)
			got := launchOptions(api.Session{RuntimeOptions: tc.opts}, tc.existing)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("launchOptions = %v, want %v", got, tc.want)
			}
			if !maps.Equal(tc.opts, before) {
				t.Errorf("the session's options changed: %v, were %v", tc.opts, before)
			}
		})
	}
}

// A down node's errors are recognised however supervisor/nodes wraps them.
func TestNodeDownRecognisesJoinedErrors(t *testing.T) {
	w := newWorld(t, "n1", "n2")
	w.down("n1")
	_, err := w.view("n2").Runtime("n1", "standalone")
	if !nodeDown(err) || !errors.Is(err, ErrNodeUnavailable) {
		t.Fatalf("nodeDown(%v) = false", err)
	}
	if nodeDown(fmt.Errorf("plugin: %w", runtime.ErrUnavailable)) {
		t.Fatal("an unavailable runtime is not a down node")
	}
}

// Each node takes new executors up to its own limits.max_sessions_per_node
// (the leader's from its config, the others' as their probes reported
// them), counted over every runtime: placement skips a node at its cap,
// and a session that must go to one (runtime_options.node), or that finds
// every node at its cap, is refused with ErrNodeFull. A resume that
// recovers the session's own executor adds none, so its node's cap does
// not refuse it.
func TestPlacementKeepsWithinEachNodesSessionLimit(t *testing.T) {
	w := newWorld(t, "n1", "n2", "n3")
	w.cfg.Limits.MaxSessionsPerNode = 2 // the leader's own (n1)
	for _, id := range w.ids {
		w.view(id).caps["n2"] = 1 // n3 reported no cap
	}
	w.load("n1", "standalone", api.ExecutorReady, 2)
	w.load("n2", "docker", api.ExecutorReady, 1)
	w.load("n3", "standalone", api.ExecutorReady, 5)
	w.load("n1", "standalone", api.ExecutorStopped, 3) // not live: not counted
	m := w.leader("n1")

	w.newSession("s1", nil)
	if err := m.Start(context.Background(), "s1"); err != nil {
		t.Fatal(err)
	}
	sess := w.waitState("s1", api.SessionWaitingForInput, api.SessionError)
	if sess.State != api.SessionWaitingForInput {
		t.Fatalf("session %s: %s", sess.State, sess.ErrorMessage)
	}
	if ex := w.executor(sess.ExecutorID); ex.Node != "n3" {
		t.Fatalf("executor on %q; want n3, the only node under its cap (n1 and n2 are at theirs)", ex.Node)
	}
	for _, node := range []string{"n1", "n2"} {
		err := m.CheckRoom(context.Background(), api.Session{Runtime: "standalone", RuntimeOptions: map[string]string{OptionNode: node}})
		if !errors.Is(err, ErrNodeFull) || !strings.Contains(err.Error(), "node "+node+" ") || !strings.Contains(err.Error(), "max_sessions_per_node") {
			t.Errorf("a session placed on %s: %v; want ErrNodeFull naming the node and the limit", node, err)
		}
	}
	if err := m.CheckRoom(context.Background(), api.Session{Runtime: "standalone"}); err != nil {
		t.Errorf("a session with n3 uncapped: %v", err)
	}
	for _, id := range w.ids {
		w.view(id).caps["n3"] = 6 // s1 made it six
	}
	err := m.CheckRoom(context.Background(), api.Session{Runtime: "standalone"})
	if !errors.Is(err, ErrNodeFull) || !strings.Contains(err.Error(), "every node") {
		t.Errorf("every node at its cap: %v; want ErrNodeFull saying so", err)
	}
	// The resume of a session whose live executor is on n1 (at its cap)
	// brings that executor back: it is not refused.
	own := w.session("load-n1-standalone-ready-0")
	if own.ExecutorID == "" {
		t.Fatal("the loaded session has no executor recorded")
	}
	if err := m.CheckRoom(context.Background(), own); err != nil {
		t.Errorf("resume on its own executor at n1's cap: %v", err)
	}
}

// Starts that come at once, each placed before any of their executors is
// recorded, still keep a node within its limits.max_sessions_per_node: the
// ones past the cap end in ERROR with ErrNodeFull's message, and no more
// executors than the cap were ever live on the node.
func TestABurstOfStartsKeepsWithinTheSessionLimit(t *testing.T) {
	w := newWorld(t, "n1")
	const limit, starts = 3, 24
	w.cfg.Limits.MaxSessionsPerNode = limit
	m := w.leader("n1")
	for i := 0; i < starts; i++ {
		w.newSession(fmt.Sprintf("b%d", i), nil)
	}
	errs := make(chan error, starts)
	for i := 0; i < starts; i++ {
		go func() { errs <- m.Start(context.Background(), fmt.Sprintf("b%d", i)) }()
	}
	for i := 0; i < starts; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	running, full := 0, 0
	for i := 0; i < starts; i++ {
		sess := w.waitState(fmt.Sprintf("b%d", i), api.SessionWaitingForInput, api.SessionError)
		switch {
		case sess.State == api.SessionWaitingForInput:
			running++
		case strings.Contains(sess.ErrorMessage, "max_sessions_per_node"):
			full++
		default:
			t.Errorf("session %s: %s: %s", sess.ID, sess.State, sess.ErrorMessage)
		}
	}
	live := 0
	for _, ex := range w.r.store.Executors("") {
		if ex.Node == "n1" && (ex.Status == api.ExecutorStarting || ex.Status == api.ExecutorReady) {
			live++
		}
	}
	if running != limit || full != starts-limit || live != limit {
		t.Fatalf("%d starts against a cap of %d: %d running, %d refused as full, %d live executors on the node", starts, limit, running, full, live)
	}
}
