package state

import (
	"errors"
	"testing"
	"time"

	"github.com/paddockhq/paddock/api"
)

// recovered is a recover_executors item for session id's held lease.
func recovered(id, executor string, token uint64, nonce string) RecoveredExecutor {
	return RecoveredExecutor{SessionID: id, ExecutorID: executor, FencingToken: token, Nonce: nonce,
		Events: []RecoveredEvent{{Type: api.EventAgentctlStarting, Data: map[string]any{"recovery": true}}, {Type: api.EventAgentctlReady, Data: map[string]any{"recovery": true}}}}
}

// One recover_executors command records many sessions' recoveries: each
// session's events in order and its changed executor row. An item whose
// lease moved on (another token, another holder nonce, another executor,
// or released) refuses the whole command, and nothing of it is applied.
func TestRecoverExecutorsIsACompareAndSetOnEveryLease(t *testing.T) {
	h := newHarness(t)
	h.taskAndSession()
	h.mustApply(CmdCreateSession, &CreateSessionBody{Session: api.Session{ID: "s2", TaskID: "t1", Agent: "demo", Runtime: "standalone"}})
	tokens := map[string]uint64{}
	for _, id := range []string{"s1", "s2"} {
		ex := api.Executor{ID: "e-" + id, SessionID: id, Status: api.ExecutorReady, Nonce: "n-" + id, AgentctlURL: "http://old"}
		h.mustApply(CmdPutExecutor, NewPutExecutor(ex))
		tokens[id] = h.mustApply(CmdClaimLease, &ClaimLeaseBody{SessionID: id, ExecutorID: ex.ID, Nonce: ex.Nonce, TTL: time.Second}).FencingToken
	}
	sub := h.store.Subscribe(EventFilter{}, 0)
	defer sub.Close()

	for name, bad := range map[string]RecoveredExecutor{
		"older token":     recovered("s2", "e-s2", tokens["s2"]-1, "n-s2"),
		"other nonce":     recovered("s2", "e-s2", tokens["s2"], "n-restarted"),
		"other executor":  recovered("s2", "e-other", tokens["s2"], "n-s2"),
		"no nonce":        recovered("s2", "e-s2", tokens["s2"], ""),
		"unknown session": recovered("s9", "e-s9", tokens["s2"], "n-s2"),
		"row of another":  {SessionID: "s2", ExecutorID: "e-s2", FencingToken: tokens["s2"], Nonce: "n-s2", Executor: NewPutExecutor(api.Executor{ID: "e-s1", SessionID: "s2", Nonce: "n-s2"})},
		"row's nonce":     {SessionID: "s2", ExecutorID: "e-s2", FencingToken: tokens["s2"], Nonce: "n-s2", Executor: NewPutExecutor(api.Executor{ID: "e-s2", SessionID: "s2", Nonce: "n-new"})},
	} {
		row := api.Executor{ID: "e-s1", SessionID: "s1", Status: api.ExecutorReady, Nonce: "n-s1", AgentctlURL: "http://changed"}
		good := recovered("s1", "e-s1", tokens["s1"], "n-s1")
		good.Executor = NewPutExecutor(row)
		r := h.apply(CmdRecoverExecutors, "", &RecoverExecutorsBody{Items: []RecoveredExecutor{good, bad}})
		if !errors.Is(r.Err, ErrConflict) && !errors.Is(r.Err, ErrNotFound) && !errors.Is(r.Err, ErrInvalid) {
			t.Fatalf("%s: applied (%v), want refused", name, r.Err)
		}
		if ex, _ := h.store.Executor("e-s1"); ex.AgentctlURL != "http://old" {
			t.Fatalf("%s: a refused command changed s1's executor: %+v", name, ex)
		}
	}
	if r := h.apply(CmdRecoverExecutors, "", &RecoverExecutorsBody{Items: []RecoveredExecutor{recovered("s1", "e-s1", tokens["s1"], "n-s1"), recovered("s1", "e-s1", tokens["s1"], "n-s1")}}); !errors.Is(r.Err, ErrInvalid) {
		t.Fatalf("one session twice: %v, want invalid", r.Err)
	}
	if r := h.apply(CmdRecoverExecutors, "", &RecoverExecutorsBody{}); !errors.Is(r.Err, ErrInvalid) {
		t.Fatalf("no items: %v, want invalid", r.Err)
	}
	select {
	case e := <-sub.C:
		t.Fatalf("a refused command published %+v", e)
	default:
	}

	row := api.Executor{ID: "e-s1", SessionID: "s1", Status: api.ExecutorReady, Nonce: "n-s1", AgentctlURL: "http://changed"}
	one := recovered("s1", "e-s1", tokens["s1"], "n-s1")
	one.Executor = NewPutExecutor(row)
	r := h.mustApply(CmdRecoverExecutors, &RecoverExecutorsBody{Items: []RecoveredExecutor{one, recovered("s2", "e-s2", tokens["s2"], "n-s2")}})
	if ex, _ := h.store.Executor("e-s1"); ex.AgentctlURL != "http://changed" {
		t.Fatalf("s1's executor row not replaced: %+v", ex)
	}
	if ex, _ := h.store.Executor("e-s2"); ex.AgentctlURL != "http://old" {
		t.Fatalf("s2's executor row changed without a row: %+v", ex)
	}
	var got []string
	for range 4 {
		e := <-sub.C
		if e.Index != r.Index {
			t.Fatalf("event %+v not at the command's index %d", e, r.Index)
		}
		got = append(got, e.SessionID+" "+e.Type)
	}
	want := []string{"s1 " + api.EventAgentctlStarting, "s1 " + api.EventAgentctlReady, "s2 " + api.EventAgentctlStarting, "s2 " + api.EventAgentctlReady}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("events %v, want %v", got, want)
		}
	}
	if l, _ := h.store.Lease("s1"); l.FencingToken != tokens["s1"] || l.State != api.LeaseHeld {
		t.Fatalf("the lease changed: %+v", l)
	}

	// A lease reclaimed (its holder expired) is never recovered under.
	h.mustApply(CmdReclaimLease, &ReleaseLeaseBody{SessionID: "s2", FencingToken: tokens["s2"]})
	if r := h.apply(CmdRecoverExecutors, "", &RecoverExecutorsBody{Items: []RecoveredExecutor{recovered("s2", "e-s2", tokens["s2"], "n-s2")}}); !errors.Is(r.Err, ErrConflict) {
		t.Fatalf("recovery under a reclaimed lease: %v, want conflict", r.Err)
	}
}
