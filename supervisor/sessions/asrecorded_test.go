package sessions

import (
	"encoding/json"
	"errors"
	"net/url"
	"reflect"
	"testing"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/shared/runtime"
)

// Recovery's fast path (asRecorded): an agentctl that answers at its
// recorded address with its recorded boot nonce is continued with no plugin
// call on the session's path, its events recorded in one batched command;
// any other agentctl goes through the plugin.

// The owner's plugin would fail every call, and recovery continues the
// live agent all the same: the plugin is not asked anything, the executor
// row and the lease stay as recorded, and the conversation goes on.
func TestRecoverContinuesAnAgentctlAnsweringAsRecordedWithoutThePlugin(t *testing.T) {
	w := newWorld(t, "n1", "n2")
	s := w.seedLive(liveOpts{id: "s1", node: "n1", remember: "quince"})
	rt := w.rts["n1"]
	broken := errors.New("the plugin is not to be asked")
	rt.onRecover = func(fakeHandle) (runtime.LaunchResponse, error) { return runtime.LaunchResponse{}, broken }
	rt.onInspect = func(fakeHandle) (runtime.InspectResponse, error) { return runtime.InspectResponse{}, broken }
	m := w.leader("n2")

	out, err := m.Recover(recoverCtx(t), s.id, true)
	if err != nil || out != OutcomeContinued {
		t.Fatalf("Recover = %s, %v; want continued", out, err)
	}
	if calls := rt.executorCalls(); len(calls) != 0 {
		t.Errorf("the plugin was asked %v on the fast path", calls)
	}
	if got := w.executor(s.executorID); !reflect.DeepEqual(seenNow(got, s.executor), s.executor) {
		t.Errorf("executor row changed (beyond last_seen_at):\n got %+v\nwant %+v", got, s.executor)
	}
	if l := w.lease(s.id); l.FencingToken != s.token || l.HolderNonce != s.nonce || l.State != api.LeaseHeld {
		t.Errorf("lease %+v, want kept with token %d by nonce %s", l, s.token, s.nonce)
	}
	// agentctl_starting and agentctl_ready, in order, in one command.
	var order []string
	var index uint64
	for _, e := range w.r.events(s.id) {
		if (e.Type == api.EventAgentctlStarting || e.Type == api.EventAgentctlReady) && e.Data["recovery"] == true {
			if index != 0 && e.Index != index {
				t.Errorf("%s at raft index %d, agentctl_starting at %d: not one command", e.Type, e.Index, index)
			}
			index = e.Index
			order = append(order, e.Type)
		}
	}
	if len(order) != 2 || order[0] != api.EventAgentctlStarting || order[1] != api.EventAgentctlReady {
		t.Errorf("recovery events %v, want agentctl_starting then agentctl_ready", order)
	}
	if err := m.Prompt(recoverCtx(t), s.id, "recall"); err != nil {
		t.Fatal(err)
	}
	w.agentSaid(s.id, "quince")
}

// An agentctl that does not answer as recorded takes the slow path: the
// owner's plugin is inspected (to prove the holder gone) and asked to
// recover before the session is brought up. A restarted agentctl that
// answers at the recorded address under another boot nonce is not the
// lease holder: it gets a new claim (a higher token) and the agent is
// resumed, not continued. A dead one is restarted by the plugin.
func TestRecoverAsksThePluginWhenAgentctlDoesNotAnswerAsRecorded(t *testing.T) {
	cases := []struct {
		name string
		gone func(t *testing.T, w *world, s live)
	}{
		{name: "restarted at the recorded address", gone: func(t *testing.T, w *world, s live) {
			rt := w.rts["n1"]
			old := rt.proc(s.executorID)
			old.kill()
			u, err := url.Parse(s.executor.AgentctlURL)
			if err != nil {
				t.Fatal(err)
			}
			var h fakeHandle
			if err := json.Unmarshal(s.executor.Handle, &h); err != nil {
				t.Fatal(err)
			}
			p, err := startAgentctl(t, h, secretForTests, u.Host)
			if err != nil {
				t.Fatal(err)
			}
			if p.info.URL != s.executor.AgentctlURL || p.info.Nonce == s.nonce {
				t.Fatalf("restarted agentctl at %s with nonce %s; want %s with a new nonce", p.info.URL, p.info.Nonce, s.executor.AgentctlURL)
			}
			rt.mu.Lock()
			rt.procs[s.executorID] = p
			rt.mu.Unlock()
		}},
		{name: "dead", gone: func(t *testing.T, w *world, s live) {
			w.rts["n1"].proc(s.executorID).kill()
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, "n1", "n2")
			s := w.seedLive(liveOpts{id: "s1", node: "n1", remember: "medlar"})
			tc.gone(t, w, s)
			m := w.leader("n2")

			out, err := m.Recover(recoverCtx(t), s.id, true)
			if err != nil || out != OutcomeResumed {
				t.Fatalf("Recover = %s, %v; want resumed", out, err)
			}
			rt := w.rts["n1"]
			if rt.callsOf("inspect") != 1 || rt.callsOf("recover") != 1 {
				t.Errorf("plugin calls on the path %v, want one inspect and one recover", rt.executorCalls())
			}
			ex := w.executor(s.executorID)
			l := w.lease(s.id)
			if ex.Nonce == s.nonce || l.HolderNonce != ex.Nonce || l.FencingToken <= s.token {
				t.Errorf("executor nonce %s (was %s), lease %+v (token was %d): want a new holder with a higher token", ex.Nonce, s.nonce, l, s.token)
			}
			for _, e := range w.r.events(s.id) {
				if e.Type == api.EventAgentctlReady && e.Data["recovery"] == true && e.Data["nonce_changed"] != true {
					t.Errorf("agentctl_ready %v does not say the nonce changed", e.Data)
				}
			}
			if err := m.Prompt(recoverCtx(t), s.id, "recall"); err != nil {
				t.Fatal(err)
			}
			w.agentSaid(s.id, "medlar")
		})
	}
}

// A continued agentctl's catch-up mirrors the messages it kept that the
// state lacks (a turn while no leader watched) and rewrites none the state
// already holds as they are: the next leader's recovery of the same
// agentctl commits no message (each would be a commit on its path).
func TestRecoverMirrorsOnlyMessagesTheStateLacks(t *testing.T) {
	w := newWorld(t, "n1", "n2")
	s := w.seedLive(liveOpts{id: "s1", node: "n1", remember: "sloe"})
	m, end := w.leaderUntil("n2")
	continueSession(t, m, s.id)
	w.agentSaid(s.id, "sloe")
	end()
	before := w.r.store.Messages(s.id)
	mark := w.r.store.LastIndex()

	m = w.leader("n1")
	if out, err := m.Recover(recoverCtx(t), s.id, true); err != nil || out != OutcomeContinued {
		t.Fatalf("second Recover = %s, %v; want continued", out, err)
	}
	for _, e := range w.r.events(s.id) {
		if e.Index > mark && (e.Type == api.EventMessageAdded || e.Type == api.EventMessageUpdated) {
			t.Errorf("the second recovery rewrote a recorded message: %s %v", e.Type, e.Data)
		}
	}
	if after := w.r.store.Messages(s.id); !reflect.DeepEqual(after, before) {
		t.Errorf("messages changed:\n got %+v\nwant %+v", after, before)
	}
	if err := m.Prompt(recoverCtx(t), s.id, "recall"); err != nil {
		t.Fatal(err)
	}
	w.agentSaid(s.id, "you asked me to remember: sloe")
}
