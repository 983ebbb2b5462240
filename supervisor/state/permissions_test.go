package state

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"testing"
	"time"

	"github.com/paddockhq/paddock/api"
)

func askPermission(id string, st api.PermissionState) api.Permission {
	return api.Permission{ID: id, ToolCallID: "tc-" + id, Title: "Run make", Kind: api.ToolExecute, State: st,
		Options:   []api.PermissionOption{{OptionID: "allow", Name: "Allow", Kind: api.OptionAllowOnce}, {OptionID: "reject", Name: "Reject", Kind: api.OptionRejectOnce}},
		CreatedAt: t0}
}

func answered(p api.Permission, option string) api.Permission {
	p.State, p.OptionID, p.AnsweredBy = api.PermissionAnswered, option, "user"
	return p
}

// eventTypes returns the types of the events a subscription holds now.
func eventTypes(sub *Subscription) []string {
	var out []string
	for {
		select {
		case e := <-sub.C:
			out = append(out, e.Type)
		default:
			return out
		}
	}
}

// A request recorded twice is one request with one event; once it has
// ended it never goes back to pending, and its first end is kept.
func TestPermissionUpsertIsIdempotentAndOnlyMovesForward(t *testing.T) {
	h := newHarness(t)
	h.taskAndSession()
	sub := h.store.Subscribe(EventFilter{SessionID: "s1"}, 0)
	defer sub.Close()
	up := func(p api.Permission) {
		h.t.Helper()
		h.mustApply(CmdUpsertPermission, &UpsertPermissionBody{SessionID: "s1", Permission: p})
	}
	up(askPermission("p1", api.PermissionPending))
	up(askPermission("p1", api.PermissionPending))
	if got := h.store.Permissions("s1"); len(got) != 1 || got[0].State != api.PermissionPending || got[0].SessionID != "s1" {
		t.Fatalf("after two upserts of a pending request: %+v", got)
	}
	if n := h.store.PendingPermissions("s1"); n != 1 {
		t.Fatalf("pending = %d, want 1", n)
	}
	up(answered(askPermission("p1", api.PermissionPending), "allow"))
	up(askPermission("p1", api.PermissionPending))                     // a late pending copy
	up(answered(askPermission("p1", api.PermissionPending), "reject")) // a second answer
	p, ok := h.store.Permission("s1", "p1")
	if !ok || p.State != api.PermissionAnswered || p.OptionID != "allow" || p.AnsweredAt == nil {
		t.Fatalf("after the answer: %+v", p)
	}
	if n := h.store.PendingPermissions("s1"); n != 0 {
		t.Fatalf("pending after the answer = %d, want 0", n)
	}
	if got, want := eventTypes(sub), []string{api.EventPermissionRequested, api.EventPermissionAnswered}; !reflect.DeepEqual(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	// A policy's answer is first seen ended: one answered event.
	up(answered(askPermission("p2", api.PermissionPending), "allow"))
	if got, want := eventTypes(sub), []string{api.EventPermissionAnswered}; !reflect.DeepEqual(got, want) {
		t.Fatalf("events of a policy's answer %v, want %v", got, want)
	}
	// A later request under an id an agentctl boot before used replaces it.
	again := askPermission("p1", api.PermissionPending)
	again.CreatedAt = t0.Add(time.Hour)
	up(again)
	if p, _ := h.store.Permission("s1", "p1"); p.State != api.PermissionPending || !p.CreatedAt.Equal(again.CreatedAt) || len(h.store.Permissions("s1")) != 2 {
		t.Fatalf("a reused id: %+v", h.store.Permissions("s1"))
	}
	if got, want := eventTypes(sub), []string{api.EventPermissionRequested}; !reflect.DeepEqual(got, want) {
		t.Fatalf("events of a reused id %v, want %v", got, want)
	}
	for _, bad := range []api.Permission{{State: api.PermissionPending}, {ID: "p3", State: "maybe"}} {
		if err := h.apply(CmdUpsertPermission, "", &UpsertPermissionBody{SessionID: "s1", Permission: bad}).Err; err == nil {
			t.Errorf("upsert of %+v was accepted", bad)
		}
	}
	if err := h.apply(CmdUpsertPermission, "", &UpsertPermissionBody{SessionID: "nope", Permission: askPermission("p9", api.PermissionPending)}).Err; err == nil {
		t.Error("upsert into an unknown session was accepted")
	}
}

// Permissions are listed oldest first, by created_at and then id.
func TestPermissionsAreListedOldestFirst(t *testing.T) {
	h := newHarness(t)
	h.taskAndSession()
	for _, id := range []string{"b", "a", "c"} {
		p := askPermission(id, api.PermissionPending)
		p.CreatedAt = t0
		if id == "c" {
			p.CreatedAt = t0.Add(-1)
		}
		h.mustApply(CmdUpsertPermission, &UpsertPermissionBody{SessionID: "s1", Permission: p})
	}
	var ids []string
	for _, p := range h.store.Permissions("s1") {
		ids = append(ids, p.ID)
	}
	if want := []string{"c", "a", "b"}; !reflect.DeepEqual(ids, want) {
		t.Fatalf("order %v, want %v", ids, want)
	}
}

// Cancelling ends only the pending requests, each with an answered event;
// a stop, an ERROR and a delete cancel them too, and a task's delete
// forgets them.
func TestPendingPermissionsAreCancelledWhenTheAgentIsGone(t *testing.T) {
	h := newHarness(t)
	h.taskAndSession()
	up := func(p api.Permission) {
		h.mustApply(CmdUpsertPermission, &UpsertPermissionBody{SessionID: "s1", Permission: p})
	}
	up(askPermission("p1", api.PermissionPending))
	up(answered(askPermission("p2", api.PermissionPending), "allow"))
	up(askPermission("p3", api.PermissionPending))
	sub := h.store.Subscribe(EventFilter{SessionID: "s1"}, 0)
	defer sub.Close()
	h.mustApply(CmdCancelPermissions, &CancelPermissionsBody{SessionID: "s1"})
	if got, want := eventTypes(sub), []string{api.EventPermissionAnswered, api.EventPermissionAnswered}; !reflect.DeepEqual(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	states := map[string]api.PermissionState{}
	for _, p := range h.store.Permissions("s1") {
		states[p.ID] = p.State
	}
	if want := map[string]api.PermissionState{"p1": api.PermissionCancelled, "p2": api.PermissionAnswered, "p3": api.PermissionCancelled}; !reflect.DeepEqual(states, want) {
		t.Fatalf("states %v, want %v", states, want)
	}
	h.mustApply(CmdCancelPermissions, &CancelPermissionsBody{SessionID: "s1"}) // nothing left: no events
	if got := eventTypes(sub); len(got) != 0 {
		t.Fatalf("a second cancel published %v", got)
	}

	for i, end := range []func(){
		func() { h.setState(api.SessionStopped, SetSessionStateBody{}) },
		func() { h.setState(api.SessionError, SetSessionStateBody{ErrorMessage: "gone"}) },
		func() { h.mustApply(CmdDeleteSession, &DeleteSessionBody{SessionID: "s1"}) },
	} {
		h.setState(api.SessionStarting, SetSessionStateBody{})
		h.setState(api.SessionWaitingForInput, SetSessionStateBody{})
		id := fmt.Sprintf("later-%d", i)
		up(askPermission(id, api.PermissionPending))
		end()
		if p, _ := h.store.Permission("s1", id); p.State != api.PermissionCancelled || h.store.PendingPermissions("s1") != 0 {
			t.Fatalf("after the session ended (%d): %+v", i, p)
		}
	}
	h.mustApply(CmdDeleteTask, &DeleteTaskBody{TaskID: "t1"})
	if got := h.store.Permissions("s1"); len(got) != 0 {
		t.Fatalf("permissions of a deleted task's session: %+v", got)
	}
}

// Permissions and tool and plan entries survive a snapshot and its restore.
func TestPermissionsAndTheAgentsWorkSurviveASnapshot(t *testing.T) {
	h := newHarness(t)
	h.taskAndSession()
	h.mustApply(CmdUpsertPermission, &UpsertPermissionBody{SessionID: "s1", Permission: askPermission("p1", api.PermissionPending)})
	h.mustApply(CmdUpsertPermission, &UpsertPermissionBody{SessionID: "s1", Permission: answered(askPermission("p2", api.PermissionPending), "reject")})
	tool, plan := toolMessage("1", api.ToolInProgress), planMessage("2")
	h.mustApply(CmdPutMessage, &PutMessageBody{SessionID: "s1", Source: "boot", Message: tool})
	h.mustApply(CmdPutMessage, &PutMessageBody{SessionID: "s1", Source: "boot", Message: plan})

	snap, err := h.fsm.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(sink.Bytes(), encodedWithEncodingJSON(t, h.store)) {
		t.Fatal("the persisted snapshot is not what encoding/json writes")
	}
	other := newHarness(t)
	if err := other.fsm.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if got, want := other.store.Permissions("s1"), h.store.Permissions("s1"); !reflect.DeepEqual(got, want) || len(got) != 2 {
		t.Fatalf("permissions after restore:\n%+v\nwant\n%+v", got, want)
	}
	msgs := other.store.Messages("s1")
	if len(msgs) != 2 || !reflect.DeepEqual(msgs[0].ToolCall, tool.ToolCall) || !reflect.DeepEqual(msgs[1].Plan, plan.Plan) {
		t.Fatalf("messages after restore: %+v", msgs)
	}
	if other.store.PendingPermissions("s1") != 1 {
		t.Fatalf("pending after restore = %d", other.store.PendingPermissions("s1"))
	}
}

func toolMessage(id string, status api.ToolCallStatus) api.Message {
	line := 3
	old := "a\n"
	return api.Message{ID: id, Role: api.RoleTool, Complete: status == api.ToolCompleted, ToolCall: &api.ToolCall{
		ID: "call-1", Title: "Edit notes.txt", Kind: api.ToolEdit, Status: status,
		Locations: []api.ToolLocation{{Path: "notes.txt", Line: &line}},
		Content:   []api.ToolContent{{Type: api.ContentDiff, Path: "notes.txt", OldText: &old, NewText: "b\n"}, {Type: api.ContentTerminal, Terminal: "cmd-1"}},
		RawInput:  json.RawMessage(`{"path":"notes.txt"}`),
	}}
}

func planMessage(id string) api.Message {
	return api.Message{ID: id, Role: api.RolePlan, Complete: true, Plan: &api.Plan{Entries: []api.PlanEntry{
		{Content: "read", Priority: "high", Status: "completed"}, {Content: "edit", Priority: "medium", Status: "pending"}}}}
}

// A tool entry is written whole: an update replaces its call, the events
// carry it, and Recorded sees a changed call as a change.
func TestToolAndPlanEntriesAreRecordedWhole(t *testing.T) {
	h := newHarness(t)
	h.taskAndSession()
	sub := h.store.Subscribe(EventFilter{SessionID: "s1"}, 0)
	defer sub.Close()
	h.mustApply(CmdPutMessage, &PutMessageBody{SessionID: "s1", Source: "boot", Message: toolMessage("1", api.ToolInProgress)})
	done := toolMessage("1", api.ToolCompleted)
	if h.store.Recorded(&PutMessageBody{SessionID: "s1", Source: "boot", Message: done}) {
		t.Fatal("Recorded says a tool call whose status changed is recorded")
	}
	h.mustApply(CmdPutMessage, &PutMessageBody{SessionID: "s1", Source: "boot", Message: done})
	if !h.store.Recorded(&PutMessageBody{SessionID: "s1", Source: "boot", Message: done}) {
		t.Fatal("Recorded misses the tool call as written")
	}
	msgs := h.store.Messages("s1")
	if len(msgs) != 1 || msgs[0].Role != api.RoleTool || !reflect.DeepEqual(msgs[0].ToolCall, done.ToolCall) || !msgs[0].Complete {
		t.Fatalf("messages %+v", msgs)
	}
	var last api.Event
	for n := 0; n < 2; n++ {
		last = <-sub.C
	}
	if m := last.Data["message"].(api.Message); last.Type != api.EventMessageUpdated || m.ToolCall == nil || m.ToolCall.Status != api.ToolCompleted {
		t.Fatalf("last event %s %+v", last.Type, last.Data)
	}
	// An unsourced put keeps them too.
	h.mustApply(CmdPutMessage, &PutMessageBody{SessionID: "s1", Message: planMessage("m9")})
	if msgs := h.store.Messages("s1"); len(msgs) != 2 || msgs[1].Plan == nil || len(msgs[1].Plan.Entries) != 2 {
		t.Fatalf("messages after an unsourced plan: %+v", msgs)
	}
}
