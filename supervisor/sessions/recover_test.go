package sessions

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"reflect"
	goruntime "runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/shared/agentctl"
	"github.com/paddockhq/paddock/shared/demoagent"
	"github.com/paddockhq/paddock/shared/runtime"
	"github.com/paddockhq/paddock/shared/testkit"
	"github.com/paddockhq/paddock/supervisor/state"
)

// Recovery outcomes over the real FSM: a previous leader (on n1) brought the
// session up; a new leader on n2 recovers it. Each test asserts the outcome
// and what the state machine holds afterwards.

// The owner answers and the agent is alive on the same agentctl: the new
// leader continues it without a raft write for the executor or the lease,
// and the conversation goes on.
func TestRecoverContinuesALiveAgent(t *testing.T) {
	w := newWorld(t, "n1", "n2")
	s := w.seedLive(liveOpts{id: "s1", node: "n1", remember: "apple"})
	m := w.leader("n2")

	out, err := m.Recover(recoverCtx(t), s.id, true)
	if err != nil || out != OutcomeContinued {
		t.Fatalf("Recover = %s, %v; want continued", out, err)
	}
	if got := w.session(s.id); got.State != api.SessionWaitingForInput || got.StateReason != "" {
		t.Errorf("session %s (%q), want WAITING_FOR_INPUT", got.State, got.StateReason)
	}
	if got := w.executor(s.executorID); !reflect.DeepEqual(seenNow(got, s.executor), s.executor) {
		t.Errorf("executor row changed (beyond last_seen_at):\n got %+v\nwant %+v", got, s.executor)
	}
	if l := w.lease(s.id); l.State != api.LeaseHeld || l.FencingToken != s.token || l.HolderNonce != s.nonce {
		t.Errorf("lease %+v, want held with token %d by nonce %s", l, s.token, s.nonce)
	}
	// The agentctl answered as recorded: no plugin is asked anything.
	if calls := w.rts["n1"].executorCalls(); len(calls) != 0 {
		t.Errorf("the owner's plugin was asked %v for an agentctl that answered as recorded", calls)
	}
	if calls := w.rts["n2"].executorCalls(); len(calls) != 0 {
		t.Errorf("the new leader's own plugin was asked %v; an executor belongs to its node", calls)
	}
	if !m.IsRunning(s.id) {
		t.Fatal("the session is not live on the new leader")
	}
	// agentctl_starting comes before agentctl_ready.
	var order []string
	for _, e := range w.r.events(s.id) {
		if (e.Type == api.EventAgentctlStarting || e.Type == api.EventAgentctlReady) && e.Data["recovery"] == true {
			order = append(order, e.Type)
		}
	}
	if want := []string{api.EventAgentctlStarting, api.EventAgentctlReady}; !reflect.DeepEqual(order, want) {
		t.Errorf("recovery events %v, want %v", order, want)
	}
	if err := m.Prompt(recoverCtx(t), s.id, "recall"); err != nil {
		t.Fatal(err)
	}
	w.agentSaid(s.id, "apple")

	// Recovered once, never twice.
	out, err = m.Recover(recoverCtx(t), s.id, true)
	if err != nil || out != OutcomeSkipped {
		t.Fatalf("second Recover = %s, %v; want skipped", out, err)
	}
	if calls := w.rts["n1"].executorCalls(); len(calls) != 0 {
		t.Errorf("a second Recover asked the runtime %v", calls)
	}
}

// The owner's server is down but its agentctl still answers with the
// recorded nonce (only the supervisor process died): the new leader
// reattaches over the recorded URL without any plugin call.
func TestRecoverReattachesWhenOnlyTheOwnersServerIsDown(t *testing.T) {
	w := newWorld(t, "n1", "n2")
	s := w.seedLive(liveOpts{id: "s1", node: "n1", remember: "plum"})
	w.down("n1")
	m := w.leader("n2")

	out, err := m.Recover(recoverCtx(t), s.id, true)
	if err != nil || out != OutcomeContinued {
		t.Fatalf("Recover = %s, %v; want continued", out, err)
	}
	for _, n := range []string{"n1", "n2"} {
		if calls := w.rts[n].executorCalls(); len(calls) != 0 {
			t.Errorf("runtime of %s was asked %v; a reattach needs no plugin", n, calls)
		}
	}
	if got := w.executor(s.executorID); got.Node != "n1" || got.Status != api.ExecutorReady || got.Nonce != s.nonce {
		t.Errorf("executor %+v, want ready on n1 with nonce %s", got, s.nonce)
	}
	if l := w.lease(s.id); l.State != api.LeaseHeld || l.FencingToken != s.token {
		t.Errorf("lease %+v, want held with token %d", l, s.token)
	}
	if err := m.Prompt(recoverCtx(t), s.id, "recall"); err != nil {
		t.Fatal(err)
	}
	w.agentSaid(s.id, "plum")
}

// The owner node and its agentctl are gone and the runtime is node-local
// without a shared workspace: the session waits for its node. No ERROR, no
// relaunch elsewhere, the lease kept (and not reclaimed when it expires),
// an agentctl_error event with reason node_unavailable naming the node.
func TestRecoverWaitsForAnUnavailableNode(t *testing.T) {
	w := newWorld(t, "n1", "n2")
	s := w.seedLive(liveOpts{id: "s1", node: "n1"})
	w.rts["n1"].proc(s.executorID).kill()
	w.down("n1")
	m := w.leader("n2")

	out, err := m.Recover(recoverCtx(t), s.id, true)
	if err != nil || out != OutcomeNodeUnavailable {
		t.Fatalf("Recover = %s, %v; want node_unavailable", out, err)
	}
	if got := w.session(s.id); got.State != api.SessionWaitingForInput || got.ErrorMessage != "" {
		t.Errorf("session %s %q, want its state kept (WAITING_FOR_INPUT, no error)", got.State, got.ErrorMessage)
	}
	if got := w.executor(s.executorID); got.Node != "n1" || got.Status != api.ExecutorReady {
		t.Errorf("executor %+v, want still ready on n1", got)
	}
	var reported bool
	for _, e := range w.r.events(s.id) {
		if e.Type == api.EventAgentctlError && e.Data["reason"] == api.ReasonNodeUnavailable && e.Data["node"] == "n1" {
			reported = true
			if msg, _ := e.Data["message"].(string); msg != state.NodeUnavailableMessage("n1") {
				t.Errorf("event message %q, want %q", msg, state.NodeUnavailableMessage("n1"))
			}
		}
		if e.Type == api.EventStateChanged && e.Data["to"] == string(api.SessionError) {
			t.Errorf("the session went to ERROR: %v", e.Data)
		}
	}
	if !reported {
		t.Errorf("no agentctl_error event with reason node_unavailable for n1 in %+v", w.r.events(s.id))
	}
	for _, n := range []string{"n1", "n2"} {
		if calls := w.rts[n].executorCalls(); len(calls) != 0 {
			t.Errorf("runtime of %s was asked %v; the session must not move", n, calls)
		}
	}
	if node, down := m.NodeUnavailable(s.id); !down || node != "n1" {
		t.Errorf("NodeUnavailable = %q, %v; want n1, true", node, down)
	}
	if err := m.Resume(recoverCtx(t), s.id); !errors.Is(err, state.ErrConflict) || !strings.Contains(err.Error(), "n1") {
		t.Errorf("Resume = %v; want a conflict naming n1", err)
	}
	// Past the lease's expiry (and a few lease-clock ticks) the lease is
	// still held: the session waits for its node instead of failing.
	expiry, ok := m.LeaseExpiry(s.id)
	if !ok {
		t.Fatal("the new leader does not track the session's lease")
	}
	renew, _ := m.leaseTimes()
	testkit.WaitFor(t, 10*time.Second, "the lease's expiry and two lease-clock ticks", testkit.Cond(func() bool { return time.Now().After(expiry.Add(2 * renew)) }))
	if l := w.lease(s.id); l.State != api.LeaseHeld || l.FencingToken != s.token {
		t.Errorf("lease %+v after its expiry, want still held with token %d", l, s.token)
	}
	if got := w.session(s.id); got.State != api.SessionWaitingForInput {
		t.Errorf("session %s after the lease expiry, want WAITING_FOR_INPUT", got.State)
	}
}

// The owner node is down, agentctl with it, and the runtime declares a
// shared workspace: this node's plugin takes the executor over (after the
// old holder's lease is waited out) and the agent resumes from its token
// with its memory.
func TestRecoverTakesOverASharedWorkspace(t *testing.T) {
	w := newWorld(t, "n1", "n2")
	for _, rt := range w.rts {
		rt.caps.Extra = map[string]bool{runtime.CapSharedWorkspace: true}
	}
	s := w.seedLive(liveOpts{id: "s1", node: "n1", remember: "pear", shared: workspaceDir(t)})
	w.rts["n1"].proc(s.executorID).kill()
	w.down("n1")
	m := w.leader("n2")

	out, err := m.Recover(recoverCtx(t), s.id, true)
	if err != nil || out != OutcomeResumed {
		t.Fatalf("Recover = %s, %v; want resumed", out, err)
	}
	ex := w.executor(s.executorID)
	if ex.Node != "n2" || ex.Status != api.ExecutorReady || ex.Nonce == s.nonce || ex.AgentctlURL == s.executor.AgentctlURL {
		t.Errorf("executor %+v, want ready on n2 with a new agentctl", ex)
	}
	if l := w.lease(s.id); l.State != api.LeaseHeld || l.FencingToken <= s.token || l.HolderNonce != ex.Nonce {
		t.Errorf("lease %+v, want held by nonce %s with a token above %d", l, ex.Nonce, s.token)
	}
	if got := w.rts["n2"].callsOf("recover"); got != 1 {
		t.Errorf("n2's runtime recovered %d times, want 1", got)
	}
	if got := w.rts["n2"].callsOf("inspect"); got != 0 {
		t.Errorf("n2's runtime was asked to inspect %d times; only the owner's plugin can prove a node-local executor gone", got)
	}
	if calls := w.rts["n1"].executorCalls(); len(calls) != 0 {
		t.Errorf("the down node's runtime was asked %v", calls)
	}
	if got := w.session(s.id); got.State != api.SessionWaitingForInput {
		t.Errorf("session %s, want WAITING_FOR_INPUT", got.State)
	}
	if err := m.Prompt(recoverCtx(t), s.id, "recall"); err != nil {
		t.Fatal(err)
	}
	w.agentSaid(s.id, "pear")
}

// The agent is gone and can resume: it is resumed from its token on its own
// node, with its memory. When agentctl itself was restarted the lease is
// claimed afresh (a higher token); when only the agent exited, the holder is
// the same agentctl and keeps its token.
func TestRecoverResumesAGoneAgent(t *testing.T) {
	cases := []struct {
		name      string
		gone      func(w *world, s live)
		newHolder bool
	}{
		{name: "agentctl restarted by its runtime", newHolder: true, gone: func(w *world, s live) {
			w.rts["n1"].proc(s.executorID).kill()
		}},
		{name: "agent exited, agentctl kept", gone: func(w *world, s live) {
			if _, err := s.client.StopAgent(context.Background()); err != nil {
				w.t.Fatal(err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, "n1", "n2")
			s := w.seedLive(liveOpts{id: "s1", node: "n1", remember: "fig"})
			tc.gone(w, s)
			m := w.leader("n2")

			out, err := m.Recover(recoverCtx(t), s.id, true)
			if err != nil || out != OutcomeResumed {
				t.Fatalf("Recover = %s, %v; want resumed", out, err)
			}
			ex := w.executor(s.executorID)
			if ex.Node != "n1" || ex.Status != api.ExecutorReady {
				t.Errorf("executor %+v, want ready on n1", ex)
			}
			l := w.lease(s.id)
			if l.State != api.LeaseHeld || l.HolderNonce != ex.Nonce {
				t.Errorf("lease %+v, want held by the executor's nonce %s", l, ex.Nonce)
			}
			if tc.newHolder && (l.FencingToken <= s.token || ex.Nonce == s.nonce) {
				t.Errorf("lease token %d (was %d), nonce %s (was %s): a restarted agentctl needs a new claim", l.FencingToken, s.token, ex.Nonce, s.nonce)
			}
			if !tc.newHolder && l.FencingToken != s.token {
				t.Errorf("lease token %d, want %d kept by the same agentctl", l.FencingToken, s.token)
			}
			if calls := w.rts["n2"].executorCalls(); len(calls) != 0 {
				t.Errorf("the new leader's own plugin was asked %v", calls)
			}
			if got := w.session(s.id); got.State != api.SessionWaitingForInput {
				t.Errorf("session %s, want WAITING_FOR_INPUT", got.State)
			}
			if err := m.Prompt(recoverCtx(t), s.id, "recall"); err != nil {
				t.Fatal(err)
			}
			w.agentSaid(s.id, "fig")
		})
	}
}

// The agent is gone and cannot (or may not) be resumed: agentctl is back
// for workspace access (executor ready), the session is ERROR with the
// reason, and the lease is released.
func TestRecoverGivesWorkspaceWhenTheAgentCannotResume(t *testing.T) {
	cases := []struct {
		name       string
		opts       liveOpts
		autoResume bool
		reason     string
	}{
		{name: "not resumable", opts: liveOpts{agent: "demo-noresume"}, autoResume: true, reason: api.ReasonNotResumable},
		{name: "no resume token", opts: liveOpts{noToken: true, remember: "fig"}, autoResume: true, reason: api.ReasonMissingResumeToken},
		// A row with no probe answer says nothing of resume: the recovery
		// asks the agent again, and its answer decides.
		{name: "never probed, no resume token", opts: liveOpts{agent: "demo-noresume", noToken: true, unprobed: true, remember: "fig"}, autoResume: true, reason: api.ReasonNotResumable},
		{name: "auto-resume off", autoResume: false, reason: api.ReasonAgentNotRunning},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, "n1", "n2")
			o := tc.opts
			o.id, o.node = "s1", "n1"
			s := w.seedLive(o)
			w.rts["n1"].proc(s.executorID).kill()
			m := w.leader("n2")

			out, err := m.Recover(recoverCtx(t), s.id, tc.autoResume)
			if err != nil || out != OutcomeWorkspace {
				t.Fatalf("Recover = %s, %v; want workspace", out, err)
			}
			if got := w.session(s.id); got.State != api.SessionError || got.StateReason != tc.reason {
				t.Errorf("session %s (%q: %s), want ERROR (%s)", got.State, got.StateReason, got.ErrorMessage, tc.reason)
			}
			ex := w.executor(s.executorID)
			if ex.Node != "n1" || ex.Status != api.ExecutorReady || ex.Nonce == s.nonce {
				t.Errorf("executor %+v, want ready on n1 with the restarted agentctl", ex)
			}
			if l := w.lease(s.id); l.State == api.LeaseHeld {
				t.Errorf("lease %+v still held with no agent running", l)
			}
			if m.IsRunning(s.id) {
				t.Error("a session with no agent is live")
			}
			c, err := m.Agentctl(s.id)
			if err != nil {
				t.Fatalf("no workspace access: %v", err)
			}
			if h, err := c.Health(recoverCtx(t)); err != nil || h.Nonce != ex.Nonce || h.AgentStatus == agentctl.StatusRunning {
				t.Errorf("workspace agentctl health %+v, %v", h, err)
			}
		})
	}
}

// A session whose agent never recorded a resume token and was never
// prompted (its first start was cut short) has no conversation to lose:
// the recovery starts its agent afresh instead of failing it.
func TestRecoverStartsAfreshASessionNeverPrompted(t *testing.T) {
	w := newWorld(t, "n1", "n2")
	s := w.seedLive(liveOpts{id: "s1", node: "n1", noToken: true})
	w.rts["n1"].proc(s.executorID).kill()
	m := w.leader("n2")

	out, err := m.Recover(recoverCtx(t), s.id, true)
	if err != nil || out != OutcomeResumed {
		t.Fatalf("Recover = %s, %v; want the agent started again", out, err)
	}
	got := w.session(s.id)
	if got.State != api.SessionWaitingForInput || !got.HasResumeToken {
		t.Fatalf("session %s (%q: %s), token %v; want WAITING_FOR_INPUT with a new token", got.State, got.StateReason, got.ErrorMessage, got.HasResumeToken)
	}
	if err := m.Prompt(recoverCtx(t), s.id, "remember kiwi"); err != nil {
		t.Fatal(err)
	}
}

// recorded seeds a session and executor as a previous leader left them,
// with no process behind them (for outcomes decided before agentctl is
// reached).
func (w *world) recorded(id string, sessState api.SessionState, ex api.Executor) (token uint64) {
	t := w.t
	t.Helper()
	w.r.must(t, state.CmdCreateTask, &state.CreateTaskBody{Task: api.Task{ID: "t-" + id, Title: id}})
	w.r.must(t, state.CmdCreateSession, &state.CreateSessionBody{Session: api.Session{ID: id, TaskID: "t-" + id, Agent: "demo", Runtime: "standalone"}, ResumeToken: "tok-" + id})
	w.r.must(t, state.CmdSetSessionState, &state.SetSessionStateBody{SessionID: id, State: api.SessionStarting})
	token = w.r.must(t, state.CmdClaimLease, &state.ClaimLeaseBody{SessionID: id, ExecutorID: ex.ID, Nonce: "nonce-" + id, TTL: w.cfg.Lease.TTL}).FencingToken
	ex.SessionID, ex.Runtime, ex.Secret = id, "standalone", secretForTests
	if ex.AgentctlURL == "" {
		ex.AgentctlURL = "http://127.0.0.1:1" // nothing listens
	}
	w.r.must(t, state.CmdPutExecutor, state.NewPutExecutor(ex))
	switch sessState {
	case api.SessionStarting:
	case api.SessionStopped:
		w.r.must(t, state.CmdSetSessionState, &state.SetSessionStateBody{SessionID: id, State: api.SessionWaitingForInput})
		w.r.must(t, state.CmdReleaseLease, &state.ReleaseLeaseBody{SessionID: id, FencingToken: token})
		w.r.must(t, state.CmdSetSessionState, &state.SetSessionStateBody{SessionID: id, State: api.SessionStopped})
	default:
		w.r.must(t, state.CmdSetSessionState, &state.SetSessionStateBody{SessionID: id, State: sessState})
	}
	return token
}

func handleOf(id string) []byte {
	return fmt.Appendf(nil, `{"id":%q,"session":%q,"workspace":"/nonexistent","state_dir":"/nonexistent"}`, id, id)
}

// The executor is gone or cannot be recovered: ERROR executor_lost (or
// agent_not_running for a failure the last leader half recorded), the
// executor row in error. A failure that does not prove the holder gone
// keeps the lease until it expires; an interrupted launch reclaims it.
func TestRecoverLosesAnUnrecoverableExecutor(t *testing.T) {
	cases := []struct {
		name      string
		state     api.SessionState
		ex        api.Executor
		onRecover func(fakeHandle) (runtime.LaunchResponse, error)
		reason    string
		lease     api.LeaseState
		runtime   bool // whether the owner's runtime is asked to recover
	}{
		{name: "runtime fails", state: api.SessionWaitingForInput,
			ex: api.Executor{ID: "ex-1", Node: "n1", Status: api.ExecutorReady, Handle: handleOf("ex-1"), Nonce: "nonce-s1"},
			onRecover: func(fakeHandle) (runtime.LaunchResponse, error) {
				return runtime.LaunchResponse{}, errors.New("handle paths are outside workspace_root")
			},
			reason: api.ReasonExecutorLost, lease: api.LeaseHeld, runtime: true},
		{name: "executor not found", state: api.SessionRunning,
			ex: api.Executor{ID: "ex-1", Node: "n1", Status: api.ExecutorReady, Handle: handleOf("ex-1"), Nonce: "nonce-s1"},
			onRecover: func(h fakeHandle) (runtime.LaunchResponse, error) {
				return runtime.LaunchResponse{}, fmt.Errorf("executor %s: %w", h.ID, runtime.ErrNotFound)
			},
			reason: api.ReasonExecutorLost, lease: api.LeaseHeld, runtime: true},
		{name: "launch interrupted before a handle", state: api.SessionStarting,
			ex:     api.Executor{ID: "ex-1", Node: "n1", Status: api.ExecutorStarting},
			reason: api.ReasonExecutorLost, lease: api.LeaseExpired},
		{name: "executor failed, session not recorded", state: api.SessionWaitingForInput,
			ex:     api.Executor{ID: "ex-1", Node: "n1", Status: api.ExecutorError, ErrorMessage: "agentctl died", Handle: handleOf("ex-1")},
			reason: api.ReasonAgentNotRunning, lease: api.LeaseHeld},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, "n1", "n2")
			w.rts["n1"].onRecover = tc.onRecover
			token := w.recorded("s1", tc.state, tc.ex)
			m := w.leader("n2")

			out, err := m.Recover(recoverCtx(t), "s1", true)
			if err != nil || out != OutcomeLost {
				t.Fatalf("Recover = %s, %v; want lost", out, err)
			}
			sess := w.session("s1")
			if sess.State != api.SessionError || sess.StateReason != tc.reason || sess.ErrorMessage == "" {
				t.Errorf("session %s (%q: %q), want ERROR (%s) with a message", sess.State, sess.StateReason, sess.ErrorMessage, tc.reason)
			}
			if ex := w.executor("ex-1"); ex.Status != api.ExecutorError || ex.Node != "n1" {
				t.Errorf("executor %+v, want error on n1", ex)
			}
			if l := w.lease("s1"); l.State != tc.lease || l.FencingToken != token {
				t.Errorf("lease %s token %d, want %s token %d", l.State, l.FencingToken, tc.lease, token)
			}
			if got := w.rts["n1"].callsOf("recover"); (got > 0) != tc.runtime {
				t.Errorf("owner's runtime recovered %d times, want asked=%v", got, tc.runtime)
			}
			if calls := w.rts["n2"].executorCalls(); len(calls) != 0 {
				t.Errorf("the new leader's own plugin was asked %v", calls)
			}
			var reported bool
			for _, e := range w.r.events("s1") {
				reported = reported || (e.Type == api.EventAgentctlError && e.Data["reason"] == tc.reason)
			}
			if !reported {
				t.Errorf("no agentctl_error event with reason %s", tc.reason)
			}
		})
	}
}

// Nothing to recover: the session is not active, never started, or
// unknown. Nothing is written and no runtime is asked.
func TestRecoverSkips(t *testing.T) {
	cases := []struct {
		name    string
		seed    func(w *world)
		wantErr error
	}{
		{name: "stopped session", seed: func(w *world) {
			w.recorded("s1", api.SessionStopped, api.Executor{ID: "ex-1", Node: "n1", Status: api.ExecutorStopped, Handle: handleOf("ex-1")})
		}},
		{name: "created, never started", seed: func(w *world) {
			w.r.must(w.t, state.CmdCreateTask, &state.CreateTaskBody{Task: api.Task{ID: "t1", Title: "x"}})
			w.r.must(w.t, state.CmdCreateSession, &state.CreateSessionBody{Session: api.Session{ID: "s1", TaskID: "t1", Agent: "demo", Runtime: "standalone"}})
		}},
		{name: "unknown session", seed: func(*world) {}, wantErr: state.ErrNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, "n1", "n2")
			tc.seed(w)
			m := w.leader("n2")
			before := w.r.store.LastIndex()
			out, err := m.Recover(recoverCtx(t), "s1", true)
			if out != OutcomeSkipped || !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("Recover = %s, %v; want skipped, %v", out, err, tc.wantErr)
			}
			if after := w.r.store.LastIndex(); after != before {
				t.Errorf("%d commands applied for a skipped session", after-before)
			}
			for _, n := range []string{"n1", "n2"} {
				if calls := w.rts[n].executorCalls(); len(calls) != 0 {
					t.Errorf("runtime of %s was asked %v", n, calls)
				}
			}
		})
	}
}

// A STOPPED session whose agentctl still serves its workspace: recovery
// reattaches it for workspace access and claims and starts nothing.
func TestRecoverReattachesAStoppedSessionsWorkspace(t *testing.T) {
	w := newWorld(t, "n1", "n2")
	s := w.seedLive(liveOpts{id: "s1", node: "n1"})
	if _, err := s.client.StopAgent(recoverCtx(t)); err != nil {
		t.Fatal(err)
	}
	w.r.must(t, state.CmdReleaseLease, &state.ReleaseLeaseBody{SessionID: s.id, FencingToken: s.token})
	w.r.must(t, state.CmdSetSessionState, &state.SetSessionStateBody{SessionID: s.id, State: api.SessionStopped, Reason: api.ReasonAgentNotRunning})
	m := w.leader("n2")

	out, err := m.Recover(recoverCtx(t), s.id, true)
	if err != nil || out != OutcomeWorkspace {
		t.Fatalf("Recover = %s, %v; want workspace", out, err)
	}
	if got := w.session(s.id); got.State != api.SessionStopped {
		t.Errorf("session %s, want STOPPED", got.State)
	}
	if l := w.lease(s.id); l.State != api.LeaseReleased || l.FencingToken != s.token {
		t.Errorf("lease %s token %d, want released token %d (nothing claimed)", l.State, l.FencingToken, s.token)
	}
	if ex := w.executor(s.executorID); ex.Status != api.ExecutorReady || ex.Nonce != s.nonce {
		t.Errorf("executor %+v, want ready with nonce %s", ex, s.nonce)
	}
	if m.IsRunning(s.id) {
		t.Error("a stopped session's agent was started")
	}
	if a, err := s.client.AgentState(recoverCtx(t)); err != nil || a.Status == agentctl.StatusRunning || a.Status == agentctl.StatusWaitingForInput {
		t.Errorf("agent state %+v, %v; want no agent", a, err)
	}
}

// TestRecoverSaysWhyARunningTurnWasCut: a session recorded RUNNING whose
// agent is gone when a new leader recovers it is resumed, and an
// agentctl_error event says the turn was cut short, and why when agentctl
// knows: its own self-fencing (no leader renewed the lease in time) or the
// agent stopping. Without it the reply just stops and the session waits.
func TestRecoverSaysWhyARunningTurnWasCut(t *testing.T) {
	cases := []struct {
		name  string
		gone  func(w *world, s live)
		event string
	}{
		{name: "agentctl fenced the agent", event: agentctl.EventLeaseExpired, gone: func(w *world, s live) {
			// No leader renews the lease (1 s here): agentctl stops the agent itself.
			testkit.WaitFor(w.t, 10*time.Second, "agentctl to fence its agent", testkit.Cond(func() bool {
				a, err := s.client.AgentState(context.Background())
				return err == nil && a.Status != agentctl.StatusWaitingForInput && a.Status != agentctl.StatusRunning
			}))
		}},
		{name: "the agent stopped", event: agentctl.EventAgentStopped, gone: func(w *world, s live) {
			if _, err := s.client.StopAgent(context.Background()); err != nil {
				w.t.Fatal(err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, "n1", "n2")
			s := w.seedLive(liveOpts{id: "s1", node: "n1", remember: "fig"})
			w.r.must(t, state.CmdSetSessionState, &state.SetSessionStateBody{SessionID: s.id, State: api.SessionRunning})
			tc.gone(w, s)
			m := w.leader("n2")
			out, err := m.Recover(recoverCtx(t), s.id, true)
			if err != nil || out != OutcomeResumed {
				t.Fatalf("Recover = %s, %v; want resumed", out, err)
			}
			var said string
			for _, e := range w.r.events(s.id) {
				if e.Type == api.EventAgentctlError && e.Data["turn_interrupted"] == true {
					said, _ = e.Data["agent_event"].(string)
				}
			}
			if said != tc.event {
				t.Fatalf("turn_interrupted event names %q, want %q", said, tc.event)
			}
			if got := w.session(s.id); got.State != api.SessionWaitingForInput {
				t.Errorf("session %s, want WAITING_FOR_INPUT after the resume", got.State)
			}
		})
	}
}

// TestPromptToASessionNotYetRecoveredAsksForItNext: a prompt to a session
// recorded live that this leader has not recovered yet asks for its
// recovery at once (the recovery pass's Expedite) and is delivered as soon
// as it is live, instead of waiting for the pass to reach it in its order.
func TestPromptToASessionNotYetRecoveredAsksForItNext(t *testing.T) {
	w := newWorld(t, "n1", "n2")
	s := w.seedLive(liveOpts{id: "s1", node: "n1", remember: "apple"})
	m := w.leader("n2")
	asked := make(chan string, 4)
	m.OnAwaitingRecovery(func(id string) {
		asked <- id
		go func() {
			if _, err := m.Recover(recoverCtx(t), id, true); err != nil {
				t.Errorf("recover %s: %v", id, err)
			}
		}()
	})
	began := time.Now()
	if err := m.Prompt(recoverCtx(t), s.id, "recall"); err != nil {
		t.Fatalf("prompt to a session not yet recovered: %v", err)
	}
	if took := time.Since(began); took >= liveWait {
		t.Fatalf("the prompt took %s, as long as a prompt waits for recovery", took)
	}
	if id := <-asked; id != s.id {
		t.Fatalf("asked to expedite %q, want %q", id, s.id)
	}
	w.agentSaid(s.id, "apple")
	// A prompt to a live session asks for nothing.
	testkit.WaitFor(t, 20*time.Second, "the turn to end", testkit.Cond(func() bool { return w.session(s.id).State == api.SessionWaitingForInput }))
	if err := m.Prompt(recoverCtx(t), s.id, "recall"); err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-asked:
		t.Fatalf("a prompt to a live session asked to expedite %s", id)
	default:
	}
}

// TestAPromptWaitsThroughARecoveryThatBringsTheAgentUp: a prompt waiting
// for its session's recovery goes on waiting while the recovery has the
// session STARTING (bringing its agent back up), and is delivered once the
// session waits for input, instead of failing as not running.
func TestAPromptWaitsThroughARecoveryThatBringsTheAgentUp(t *testing.T) {
	w := newWorld(t, "n1", "n2")
	s := w.seedLive(liveOpts{id: "s1", node: "n1", remember: "pear"})
	m := w.leader("n2")
	ctx := recoverCtx(t)
	done := make(chan error, 1)
	go func() { done <- m.Prompt(ctx, s.id, "recall") }()
	testkit.WaitFor(t, 10*time.Second, "the prompt to wait for the session to be live", testkit.Cond(func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.attached[s.id] != nil
	}))
	w.r.must(t, state.CmdSetSessionState, &state.SetSessionStateBody{SessionID: s.id, State: api.SessionStarting})
	select {
	case err := <-done:
		t.Fatalf("the prompt ended while its session was STARTING: %v", err)
	case <-time.After(300 * time.Millisecond): // longer than the wait's look at the state
	}
	if out, err := m.Recover(ctx, s.id, true); err != nil || out != OutcomeContinued {
		t.Fatalf("Recover = %s, %v; want the agent continued", out, err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the prompt after the recovery: %v", err)
	}
	w.agentSaid(s.id, "pear")
}

// TestARecoveryWaitsForTheAgentAPreviousLeaderWasStarting: a leader cut off
// while agentctl was starting its agent (a resume after the agent was lost)
// leaves the agent starting. The next leader's recovery must wait for that
// start and continue the agent it brings up: taken for gone, the recovery
// resumed it again, agentctl refused ("an agent is already running") and
// the session was failed with its agent alive (the chaos suite's lost
// session at 9a2073d).
func TestARecoveryWaitsForTheAgentAPreviousLeaderWasStarting(t *testing.T) {
	w := newWorld(t, "n1", "n2")
	s := w.seedLive(liveOpts{id: "s1", node: "n1"})
	ctx := recoverCtx(t)
	// The previous leader renews the lease until it is cut off; here, until
	// the new leader has taken the session over.
	renewing, stopRenewing := context.WithCancel(ctx)
	defer stopRenewing()
	go func() {
		for renewing.Err() == nil {
			_, _ = s.client.RenewLease(renewing, w.cfg.Lease.TTL)
			select {
			case <-renewing.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	if _, err := s.client.StopAgent(ctx); err != nil {
		t.Fatal(err)
	}
	demo := w.cfg.Agent("demo").Command
	slow := agentctl.Profile{Protocol: "acp", Command: []string{"/bin/sh", "-c", `sleep 1; exec "$0" "$@"`, demo[0], demo[1], demo[2]}}
	started := make(chan error, 1)
	go func() {
		_, err := s.client.StartAgent(ctx, slow, "")
		started <- err
	}()
	testkit.WaitFor(t, 10*time.Second, "agentctl to be starting the agent", testkit.Cond(func() bool {
		a, err := s.client.AgentState(ctx)
		return err == nil && a.Status == agentctl.StatusStarting
	}))
	m := w.leader("n2")
	out, err := m.Recover(ctx, s.id, true)
	stopRenewing()
	if err != nil {
		t.Fatalf("Recover = %s, %v", out, err)
	}
	if err := <-started; err != nil {
		t.Fatalf("the previous leader's start: %v", err)
	}
	if got := w.session(s.id); got.State != api.SessionWaitingForInput || out != OutcomeContinued {
		t.Fatalf("after the recovery: %s, session %s (%s); want the agent continued and the session waiting for input", out, got.State, got.ErrorMessage)
	}
	if err := m.Prompt(ctx, s.id, "hello"); err != nil {
		t.Fatalf("prompt after the recovery: %v", err)
	}
	testkit.WaitFor(t, 20*time.Second, "the turn to end", testkit.Cond(func() bool { return w.session(s.id).State == api.SessionWaitingForInput }))
}

// TestAWaitForALiveSessionWakesWhenItAttaches: what a prompt waiting for a
// session's recovery waits on (whenLive) is closed when the recovery
// registers the session live, so the prompt goes on at once rather than at
// its next look.
func TestAWaitForALiveSessionWakesWhenItAttaches(t *testing.T) {
	w := newWorld(t, "n1", "n2")
	s := w.seedLive(liveOpts{id: "s1", node: "n1"})
	m := w.leader("n2")
	e, attached := m.whenLive(s.id)
	if e != nil || attached == nil {
		t.Fatal("the session is live on a leader that has not recovered it")
	}
	if _, again := m.whenLive(s.id); again != attached {
		t.Fatal("two waits for one session were given different channels")
	}
	if out, err := m.Recover(recoverCtx(t), s.id, true); err != nil {
		t.Fatalf("Recover = %s, %v", out, err)
	}
	select {
	case <-attached:
	default:
		t.Fatal("the wait was not woken when the recovery registered the session live")
	}
	if e, _ := m.whenLive(s.id); e == nil {
		t.Fatal("the session is not live after its recovery")
	}
}

// TestAPromptLostWithItsLeaderIsNotRefusedAsARunningTurn: a leader that
// committed RUNNING for a prompt and lost its leadership before agentctl
// took the prompt leaves the session recorded RUNNING with no turn. A
// prompt sent again to the next leader before it has brought the session
// up must not be refused as "running a turn" (a client takes that as its
// earlier attempt delivered, and the reply never comes: the prompt storm's
// transcripts without any reply); it waits for the recovery, which sets
// the state from the agent's, and is delivered, its reply recorded whole.
func TestAPromptLostWithItsLeaderIsNotRefusedAsARunningTurn(t *testing.T) {
	w := newWorld(t, "n1", "n2")
	s := w.seedLive(liveOpts{id: "s1", node: "n1"})
	// The previous leader's RUNNING; its prompt never reached agentctl.
	w.r.must(t, state.CmdSetSessionState, &state.SetSessionStateBody{SessionID: s.id, State: api.SessionRunning, From: []api.SessionState{api.SessionWaitingForInput}})
	m := w.leader("n2")
	m.OnAwaitingRecovery(func(id string) {
		go func() {
			if _, err := m.Recover(recoverCtx(t), id, true); err != nil {
				t.Errorf("recover %s: %v", id, err)
			}
		}()
	})
	if err := m.Prompt(recoverCtx(t), s.id, "stream 50"); err != nil {
		t.Fatalf("prompt sent again after its leader lost the first: %v", err)
	}
	want := strings.Join(demoagent.StreamChunks(50), "")
	testkit.WaitFor(t, 20*time.Second, "the whole streamed reply and the turn's end", testkit.Cond(func() bool {
		for _, msg := range w.r.store.Messages(s.id) {
			if msg.Role == api.RoleAgent && msg.Complete && msg.Text == want {
				return w.session(s.id).State == api.SessionWaitingForInput
			}
		}
		return false
	}))
}

// TestAPromptThatWaitedAcrossALeadershipGoesOnUnderTheNext: a prompt
// waiting for its session's recovery while its node loses the leadership
// and wins it back goes on once the new leadership has recovered the
// session, and is delivered and answered. Sent under the context of the
// leadership it began in, it failed at once, its RUNNING could not be
// undone and the session stayed RUNNING with no turn behind a recovery
// that had already run (a session the chaos suite lost).
func TestAPromptThatWaitedAcrossALeadershipGoesOnUnderTheNext(t *testing.T) {
	w := newWorld(t, "n1", "n2")
	s := w.seedLive(liveOpts{id: "s1", node: "n1"})
	m, end := w.leaderUntil("n2")
	prompted := make(chan error, 1)
	go func() { prompted <- m.Prompt(recoverCtx(t), s.id, "remember sloe") }()
	testkit.WaitFor(t, 5*time.Second, "the prompt to wait for the session's recovery", testkit.Cond(func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.attached[s.id] != nil
	}))
	end()
	w.lead(m)
	continueSession(t, m, s.id)
	if err := <-prompted; err != nil {
		t.Fatalf("the prompt that waited across the leadership change: %v", err)
	}
	testkit.WaitFor(t, 20*time.Second, "the reply and the turn's end", testkit.Cond(func() bool {
		for _, msg := range w.r.store.Messages(s.id) {
			if msg.Role == api.RoleAgent && msg.Complete && msg.Text == "ok, remembering sloe" {
				return w.session(s.id).State == api.SessionWaitingForInput
			}
		}
		return false
	}))
}

// TestAResumeThatWaitedAcrossALeadershipGoesOnUnderTheNext: a resume
// waiting for its session's lifecycle lock while its node loses the
// leadership and wins it back launches under the new leadership, and the
// agent resumes with its memory. Launched under the context of the
// leadership it began in, its launch failed at once and the session was
// left in ERROR.
func TestAResumeThatWaitedAcrossALeadershipGoesOnUnderTheNext(t *testing.T) {
	w := newWorld(t, "n1")
	s := w.seedLive(liveOpts{id: "s1", node: "n1", remember: "quince"})
	m, end := w.leaderUntil("n1")
	continueSession(t, m, s.id)
	if err := m.Stop(recoverCtx(t), s.id); err != nil {
		t.Fatal(err)
	}
	w.waitState(s.id, api.SessionStopped)
	// Another lifecycle operation of the session holds its lock.
	lock := m.sessionLock(s.id)
	if err := lock.Lock(recoverCtx(t)); err != nil {
		t.Fatal(err)
	}
	resumed := make(chan error, 1)
	go func() { resumed <- m.Resume(recoverCtx(t), s.id) }()
	testkit.WaitFor(t, 5*time.Second, "the resume to wait for the session's lock", testkit.Cond(func() bool {
		return goroutineWaitsIn("sessions.(*Manager).begin", "sessions.(*sessionMutex).Lock")
	}))
	end()
	w.lead(m)
	lock.Unlock()
	if err := <-resumed; err != nil {
		t.Fatalf("the resume that waited across the leadership change: %v", err)
	}
	if sess := w.waitState(s.id, api.SessionWaitingForInput, api.SessionError); sess.State != api.SessionWaitingForInput {
		t.Fatalf("session %s after the resume: %s", sess.State, sess.ErrorMessage)
	}
	if err := m.Prompt(recoverCtx(t), s.id, "recall"); err != nil {
		t.Fatal(err)
	}
	w.agentSaid(s.id, "quince")
}

// goroutineWaitsIn reports whether some goroutine's stack holds every one
// of the given functions: a goroutine blocked inside a call the test
// cannot otherwise observe.
func goroutineWaitsIn(funcs ...string) bool {
	buf := make([]byte, 1<<20)
	buf = buf[:goruntime.Stack(buf, true)]
	for _, g := range strings.Split(string(buf), "\n\n") {
		all := true
		for _, f := range funcs {
			all = all && strings.Contains(g, f)
		}
		if all {
			return true
		}
	}
	return false
}

// TestAStopALeaderAnsweredIsFinishedByTheNext: a leader recorded a stop,
// answered it and was cut off before it stopped the agent. The next
// leader's recovery finishes the stop (it does not continue the session),
// refuses prompts meanwhile, and the session resumes later with its
// memory.
func TestAStopALeaderAnsweredIsFinishedByTheNext(t *testing.T) {
	w := newWorld(t, "n1", "n2")
	s := w.seedLive(liveOpts{id: "s1", node: "n1", remember: "medlar"})
	w.r.must(t, state.CmdRequestStop, &state.RequestStopBody{SessionID: s.id})
	m := w.leader("n2")
	if err := m.Prompt(recoverCtx(t), s.id, "recall"); !errors.Is(err, state.ErrConflict) || !strings.Contains(err.Error(), "being stopped") {
		t.Fatalf("a prompt to a session being stopped: %v, want a conflict saying so", err)
	}
	if out, err := m.Recover(recoverCtx(t), s.id, true); err != nil || out != OutcomeStopped {
		t.Fatalf("Recover = %s, %v; want stopped", out, err)
	}
	if sess := w.session(s.id); sess.State != api.SessionStopped || sess.StopRequested {
		t.Fatalf("session %s (stop requested %v), want STOPPED with the request done", sess.State, sess.StopRequested)
	}
	if l, ok := w.r.store.Lease(s.id); ok && l.State == api.LeaseHeld {
		t.Errorf("lease %+v still held after the stop", l)
	}
	if w.rts["n1"].proc(s.executorID).alive() {
		t.Error("the session's agentctl still runs after the stop")
	}
	if err := m.Resume(recoverCtx(t), s.id); err != nil {
		t.Fatal(err)
	}
	if sess := w.waitState(s.id, api.SessionWaitingForInput, api.SessionError); sess.State != api.SessionWaitingForInput {
		t.Fatalf("session %s after the resume: %s", sess.State, sess.ErrorMessage)
	}
	if err := m.Prompt(recoverCtx(t), s.id, "recall"); err != nil {
		t.Fatal(err)
	}
	w.agentSaid(s.id, "medlar")
}

// TestAStopThatFailsForAPassingReasonIsTriedAgain: the runtime plugin is
// unavailable when a recovery finishes a stop on record. The stop stays on
// record (the session is not failed), and the retry finishes it; a stop
// answered by this leader retries the same way.
func TestAStopThatFailsForAPassingReasonIsTriedAgain(t *testing.T) {
	w := newWorld(t, "n1", "n2")
	s := w.seedLive(liveOpts{id: "s1", node: "n1"})
	w.r.must(t, state.CmdRequestStop, &state.RequestStopBody{SessionID: s.id})
	var unavailable atomic.Int32
	unavailable.Store(1)
	for _, rt := range w.rts {
		rt.onStop = func(fakeHandle) error {
			if unavailable.Add(-1) >= 0 {
				return fmt.Errorf("plugin restarting: %w", runtime.ErrUnavailable)
			}
			return nil
		}
	}
	m := w.leader("n2")
	out, err := m.Recover(recoverCtx(t), s.id, true)
	if out != OutcomeSkipped || !Retryable(err) {
		t.Fatalf("Recover = %s, %v; want skipped with a retryable error", out, err)
	}
	if sess := w.session(s.id); !sess.StopRequested || !sess.State.Active() {
		t.Fatalf("after the failed step: session %s (stop requested %v, %q); want the stop still on record", sess.State, sess.StopRequested, sess.ErrorMessage)
	}
	if out, err := m.Recover(recoverCtx(t), s.id, true); err != nil || out != OutcomeStopped {
		t.Fatalf("the retry: Recover = %s, %v; want stopped", out, err)
	}
	if sess := w.session(s.id); sess.State != api.SessionStopped || sess.StopRequested {
		t.Fatalf("session %s (stop requested %v), want STOPPED", sess.State, sess.StopRequested)
	}

	// A stop this leader answers, of a session it has not attached (so
	// the stop goes through the runtime): the runtime fails twice, the
	// stop retries in the background and ends STOPPED.
	s2 := w.seedLive(liveOpts{id: "s2", node: "n1"})
	unavailable.Store(2)
	if err := m.Stop(recoverCtx(t), s2.id); err != nil {
		t.Fatal(err)
	}
	if sess := w.waitState(s2.id, api.SessionStopped, api.SessionError); sess.State != api.SessionStopped {
		t.Fatalf("session %s after a stop whose runtime was unavailable twice: %s", sess.State, sess.ErrorMessage)
	}
	if n := unavailable.Load(); n >= 0 {
		t.Errorf("the runtime's stop failed %d fewer times than programmed", n+1)
	}
}

// TestAStopWaitsForItsNode: a stop on record whose executor's node does not
// answer (no shared workspace, so nothing else may stop it) is neither
// failed nor given up: the session keeps its state, its lease and the stop
// request, and the recovery that runs when the node answers again finishes
// the stop. A stop answered while the node is down waits the same way.
func TestAStopWaitsForItsNode(t *testing.T) {
	w := newWorld(t, "n1", "n2")
	s := w.seedLive(liveOpts{id: "s1", node: "n1"})
	w.r.must(t, state.CmdRequestStop, &state.RequestStopBody{SessionID: s.id})
	w.rts["n1"].proc(s.executorID).kill()
	w.down("n1")
	m := w.leader("n2")
	if out, err := m.Recover(recoverCtx(t), s.id, true); err != nil || out != OutcomeNodeUnavailable {
		t.Fatalf("Recover = %s, %v; want node_unavailable", out, err)
	}
	if sess := w.session(s.id); sess.State != api.SessionWaitingForInput || !sess.StopRequested {
		t.Fatalf("session %s (stop requested %v, %q); want WAITING_FOR_INPUT with the stop still on record", sess.State, sess.StopRequested, sess.ErrorMessage)
	}
	if l := w.lease(s.id); l.State != api.LeaseHeld || l.FencingToken != s.token {
		t.Fatalf("lease %+v; want still held with token %d while the node is away", l, s.token)
	}
	for _, id := range w.ids {
		w.view(id).setDown("n1", false)
	}
	if out, err := m.Recover(recoverCtx(t), s.id, true); err != nil || out != OutcomeStopped {
		t.Fatalf("Recover once n1 answers = %s, %v; want stopped", out, err)
	}
	if sess := w.session(s.id); sess.State != api.SessionStopped || sess.StopRequested {
		t.Fatalf("session %s (stop requested %v), want STOPPED", sess.State, sess.StopRequested)
	}

	// A stop this leader answers while the node is down.
	s2 := w.seedLive(liveOpts{id: "s2", node: "n1"})
	w.rts["n1"].proc(s2.executorID).kill()
	w.down("n1")
	if err := m.Stop(recoverCtx(t), s2.id); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "the stop's drain to give way to the down node", testkit.Cond(func() bool {
		lock := m.sessionLock(s2.id)
		if !lock.TryLock() {
			return false
		}
		lock.Unlock()
		return true
	}))
	if sess := w.session(s2.id); sess.State != api.SessionWaitingForInput || !sess.StopRequested {
		t.Fatalf("session %s (stop requested %v, %q) after a stop while its node is down; want the stop still on record", sess.State, sess.StopRequested, sess.ErrorMessage)
	}
}

// TestAStopThatFailsKeepsTheLease: the runtime refuses to stop the
// executor (a failure that will not pass). The session is recorded in
// ERROR, but its agent is not proven stopped: the lease stays held until it
// expires (agentctl has fenced itself by then), and that expiry does not
// resume the session the user asked to stop.
func TestAStopThatFailsKeepsTheLease(t *testing.T) {
	w := newWorld(t, "n1", "n2")
	s := w.seedLive(liveOpts{id: "s1", node: "n1"})
	w.r.must(t, state.CmdRequestStop, &state.RequestStopBody{SessionID: s.id})
	w.rts["n1"].onStop = func(fakeHandle) error { return errors.New("the engine refused: container is paused") }
	m := w.leader("n2")
	if out, err := m.Recover(recoverCtx(t), s.id, true); err != nil || out != OutcomeLost {
		t.Fatalf("Recover = %s, %v; want lost", out, err)
	}
	sess := w.session(s.id)
	if sess.State != api.SessionError || sess.StopRequested || !strings.Contains(sess.ErrorMessage, "container is paused") {
		t.Fatalf("session %s (stop requested %v, %q); want ERROR saying why the stop failed", sess.State, sess.StopRequested, sess.ErrorMessage)
	}
	if l := w.lease(s.id); l.State != api.LeaseHeld || l.FencingToken != s.token {
		t.Fatalf("lease %+v after the failed stop; want still held with token %d", l, s.token)
	}
	expiry, ok := m.LeaseExpiry(s.id)
	if !ok {
		t.Fatal("the leader does not track the kept lease")
	}
	testkit.WaitFor(t, 20*time.Second, "the kept lease to be reclaimed at its expiry", testkit.Cond(func() bool {
		l := w.lease(s.id)
		return time.Now().After(expiry) && (l.State != api.LeaseHeld || l.FencingToken != s.token)
	}))
	// Its renewals ended with the failure: agentctl stopped the agent
	// itself before the expiry.
	c := agentctl.NewClient(w.rts["n1"].proc(s.executorID).info.URL, secretForTests, 5*time.Second)
	if st, err := c.AgentState(recoverCtx(t)); err != nil || st.Status == agentctl.StatusWaitingForInput || st.Status == agentctl.StatusRunning {
		t.Errorf("agent state %+v, %v after the lease expired; want it stopped by agentctl", st, err)
	}
	if got := w.rts["n1"].callsOf("launch") + w.rts["n2"].callsOf("launch"); got != 0 {
		t.Errorf("%d launches after the lease expired; a session whose stop failed is not resumed", got)
	}
	if sess := w.session(s.id); sess.State != api.SessionError {
		t.Errorf("session %s after the lease expired; want it left in ERROR", sess.State)
	}
}

// TestADeleteWaitsForTheSessionsNode: only the executor's node can destroy
// it (no shared workspace), so a delete while that node does not answer is
// refused as a conflict naming the node, and leaves the session as it was;
// once the node answers, the delete goes through.
func TestADeleteWaitsForTheSessionsNode(t *testing.T) {
	w := newWorld(t, "n1", "n2")
	s := w.seedLive(liveOpts{id: "s1", node: "n1"})
	w.rts["n1"].proc(s.executorID).kill()
	w.down("n1")
	m := w.leader("n2")
	err := m.Delete(recoverCtx(t), s.id, false)
	if !errors.Is(err, state.ErrConflict) || !strings.Contains(err.Error(), "node n1 does not answer") {
		t.Fatalf("Delete = %v; want a conflict naming n1", err)
	}
	if sess := w.session(s.id); sess.State != api.SessionWaitingForInput {
		t.Fatalf("session %s after the refused delete; want it as it was", sess.State)
	}
	for _, id := range w.ids {
		w.view(id).setDown("n1", false)
	}
	if err := m.Delete(recoverCtx(t), s.id, false); err != nil {
		t.Fatal(err)
	}
	if sess := w.session(s.id); sess.State != api.SessionCompleted {
		t.Fatalf("session %s after the delete; want COMPLETED", sess.State)
	}
	if w.rts["n1"].callsOf("destroy") != 1 {
		t.Errorf("n1's runtime destroyed the executor %d times, want once", w.rts["n1"].callsOf("destroy"))
	}
}

// TestAForcedDeleteDestroysTheExecutorWhenItsNodeAnswers: a session whose
// node never answers again can still be deleted, with force. It is
// COMPLETED at once, its lease ended and its executor marked
// destroy_pending; nothing is destroyed while the node does not answer, and
// when it answers, its runtime destroys the executor once and the mark is
// cleared. Deleting the task meanwhile keeps the marked executor, and its
// row goes once it is destroyed.
func TestAForcedDeleteDestroysTheExecutorWhenItsNodeAnswers(t *testing.T) {
	w := newWorld(t, "n1", "n2")
	s := w.seedLive(liveOpts{id: "s1", node: "n1"})
	w.rts["n1"].proc(s.executorID).kill()
	w.down("n1")
	m := w.leader("n2")
	err := m.Delete(recoverCtx(t), s.id, false)
	if !errors.Is(err, state.ErrConflict) || !strings.Contains(err.Error(), "with force") {
		t.Fatalf("Delete = %v; want a conflict that names the forced delete", err)
	}
	if err := m.Delete(recoverCtx(t), s.id, true); err != nil {
		t.Fatal(err)
	}
	sess := w.session(s.id)
	if sess.State != api.SessionCompleted {
		t.Fatalf("session %s after the forced delete; want COMPLETED", sess.State)
	}
	if l := w.lease(s.id); l.State == api.LeaseHeld {
		t.Errorf("lease %s after the forced delete; want it ended", l.State)
	}
	if ex := w.executor(s.executorID); !ex.DestroyPending || ex.Status != api.ExecutorStopped {
		t.Fatalf("executor %s destroy_pending=%v after the forced delete; want stopped and pending", ex.Status, ex.DestroyPending)
	}
	m.DestroyAbandoned(recoverCtx(t), "") // n1 still does not answer
	if n := w.rts["n1"].callsOf("destroy"); n != 0 {
		t.Fatalf("n1's runtime was asked to destroy %d times while it did not answer", n)
	}
	w.r.must(t, state.CmdDeleteTask, &state.DeleteTaskBody{TaskID: sess.TaskID})
	if ex := w.executor(s.executorID); !ex.DestroyPending {
		t.Fatal("deleting the task dropped the executor still to be destroyed")
	}
	for _, id := range w.ids {
		w.view(id).setDown("n1", false)
	}
	m.DestroyAbandoned(recoverCtx(t), "n1")
	if n := w.rts["n1"].callsOf("destroy"); n != 1 {
		t.Fatalf("n1's runtime destroyed the executor %d times once it answered, want once", n)
	}
	if _, ok := w.r.store.Executor(s.executorID); ok {
		t.Error("the destroyed executor of a deleted task is still on record")
	}
	m.DestroyAbandoned(recoverCtx(t), "n1")
	if n := w.rts["n1"].callsOf("destroy"); n != 1 {
		t.Errorf("a second pass destroyed it again (%d calls)", n)
	}
}

// earlierStart is an agentctl front whose first agent start is preceded by
// the same start sent straight to agentctl: the start of a previous leader,
// cut off (paused) with it on the way under the same lease token, that
// lands just before this leader's.
type earlierStart struct {
	proxy  *httputil.ReverseProxy
	target string
	sent   atomic.Bool
	status atomic.Int32 // the earlier start's answer
}

func (f *earlierStart) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && r.URL.Path == "/v1/agent/start" && !f.sent.Swap(true) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodPost, f.target+r.URL.Path, bytes.NewReader(body))
		req.Header = r.Header.Clone()
		if resp, err := http.DefaultClient.Do(req); err == nil {
			f.status.Store(int32(resp.StatusCode))
			resp.Body.Close()
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	f.proxy.ServeHTTP(w, r)
}

// TestAnAgentAPreviousLeaderStartedIsTakenOn: a recovery finds the
// session's agent stopped and resumes it, but a previous leader's resume
// (same agentctl, same lease token) lands first, so agentctl refuses this
// one: "an agent is already running". That agent is the session's: the
// recovery takes it on (the session waits for input, keeps its lease, and
// remembers), instead of failing the session with its agent alive and its
// lease released.
func TestAnAgentAPreviousLeaderStartedIsTakenOn(t *testing.T) {
	w := newWorld(t, "n1", "n2")
	s := w.seedLive(liveOpts{id: "s1", node: "n1", remember: "quince"})
	if _, err := s.client.StopAgent(recoverCtx(t)); err != nil {
		t.Fatal(err)
	}
	front := &earlierStart{target: s.executor.AgentctlURL}
	w.proxyAgentctl(s, func(p *httputil.ReverseProxy) http.Handler { front.proxy = p; return front })
	m := w.leader("n2")
	out, err := m.Recover(recoverCtx(t), s.id, true)
	if err != nil || (out != OutcomeResumed && out != OutcomeContinued) {
		t.Fatalf("Recover = %s, %v; want the agent taken on", out, err)
	}
	if got := front.status.Load(); got != http.StatusOK {
		t.Fatalf("the earlier start answered %d; the test needs it to have started the agent", got)
	}
	sess := w.session(s.id)
	if sess.State != api.SessionWaitingForInput {
		t.Fatalf("session %s (%q); want WAITING_FOR_INPUT with the agent the earlier start ran", sess.State, sess.ErrorMessage)
	}
	if l := w.lease(s.id); l.State != api.LeaseHeld {
		t.Fatalf("lease %+v; want still held by the running agent's agentctl", l)
	}
	if err := m.Prompt(recoverCtx(t), s.id, "recall"); err != nil {
		t.Fatal(err)
	}
	w.agentSaid(s.id, "quince")
}
