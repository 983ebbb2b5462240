package sessions

import (
	"encoding/json"
	"net/http"
	"net/http/httputil"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/shared/agentctl"
	"github.com/paddockhq/paddock/shared/demoagent"
	"github.com/paddockhq/paddock/shared/testkit"
	"github.com/paddockhq/paddock/supervisor/state"
)

// workSession seeds a live session of the demo agent under permission
// "ask", with a file notes.txt in its workspace for a "work" turn.
func (w *world) workSession(id, node string) live {
	w.t.Helper()
	ws := workspaceDir(w.t)
	if err := os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("one\ntwo\n"), 0o600); err != nil {
		w.t.Fatal(err)
	}
	return w.seedLive(liveOpts{id: id, node: node, agent: "demo-ask", shared: ws})
}

// pendingPermission waits for the session to have one pending request in
// the replicated state and returns it.
func (w *world) pendingPermission(id string) api.Permission {
	w.t.Helper()
	testkit.WaitFor(w.t, 30*time.Second, "a pending permission request in the state", testkit.Cond(func() bool {
		return w.r.store.PendingPermissions(id) == 1
	}))
	for _, p := range w.r.store.Permissions(id) {
		if p.State == api.PermissionPending {
			return p
		}
	}
	w.t.Fatal("no pending request listed")
	return api.Permission{}
}

// An agent's permission request is replicated while it waits (the session
// stays RUNNING), its answer through agentctl reaches the agent and is
// recorded, and the turn's tool calls and plan are written whole, never
// as text additions.
func TestAPermissionRequestIsReplicatedAndItsAnswerReachesTheAgent(t *testing.T) {
	w := newWorld(t, "n1")
	s := w.workSession("s1", "n1")
	m := w.leader("n1")
	continueSession(t, m, s.id)
	before := len(w.r.proposedTogether())
	if err := m.Prompt(recoverCtx(t), s.id, "work notes.txt"); err != nil {
		t.Fatal(err)
	}
	p := w.pendingPermission(s.id)
	if p.Kind != api.ToolExecute || p.SessionID != s.id || len(p.Options) != 2 || p.ToolCallID != demoagent.WorkToolCallID(1, "run") {
		t.Fatalf("pending request %+v", p)
	}
	if st := w.session(s.id).State; st != api.SessionRunning {
		t.Fatalf("session %s while its agent waits for an answer, want RUNNING", st)
	}
	c, err := m.Agentctl(s.id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.AnswerPermission(recoverCtx(t), p.ID, demoagent.OptionAllowOnce, "user"); err != nil {
		t.Fatal(err)
	}
	w.agentSaid(s.id, "command allowed (allow_once)")
	testkit.WaitFor(t, 10*time.Second, "the session to wait for input", testkit.Cond(func() bool { return w.session(s.id).State == api.SessionWaitingForInput }))
	got, _ := w.r.store.Permission(s.id, p.ID)
	if got.State != api.PermissionAnswered || got.OptionID != demoagent.OptionAllowOnce || got.AnsweredBy != "user" || got.AnsweredAt == nil {
		t.Fatalf("the answered request is recorded as %+v", got)
	}
	var edit, plan *api.Message
	for _, msg := range w.r.store.Messages(s.id) {
		switch {
		case msg.ToolCall != nil && msg.ToolCall.ID == demoagent.WorkToolCallID(1, "edit"):
			edit = &msg
		case msg.Plan != nil:
			plan = &msg
		}
	}
	if edit == nil || edit.Role != api.RoleTool || edit.ToolCall.Kind != api.ToolEdit || edit.ToolCall.Status != api.ToolCompleted {
		t.Fatalf("the edit's tool entry: %+v", edit)
	}
	diff := false
	for _, c := range edit.ToolCall.Content {
		diff = diff || c.Type == api.ContentDiff && c.Path != ""
	}
	if !diff || plan == nil || plan.Role != api.RolePlan || len(plan.Plan.Entries) == 0 {
		t.Fatalf("edit content %+v, plan %+v", edit.ToolCall.Content, plan)
	}
	// Tool and plan entries are written whole.
	whole := map[string]bool{}
	for _, batch := range w.r.proposedTogether()[before:] {
		for _, prop := range batch {
			if b, ok := prop.Body.(*state.PutMessageBody); ok && (b.Message.ToolCall != nil || b.Message.Plan != nil) {
				whole[b.Message.ID] = true
			}
		}
	}
	for _, batch := range w.r.proposedTogether()[before:] {
		for _, prop := range batch {
			if b, ok := prop.Body.(*state.AppendMessageBody); ok && whole[b.MessageID] {
				t.Fatalf("a tool or plan entry was written as a text addition: %+v", b)
			}
		}
	}
	if len(whole) < 2 {
		t.Fatalf("%d tool or plan entries written, want several", len(whole))
	}
}

// A request made while no leader watched is found by the leader that
// takes the session over (agentctl's list, not only its bounded events),
// and a stop ends it cancelled. The list comes with the catch-up's read of
// the events (one round trip); an agentctl older than that (it ignores
// the poll's permissions parameter) is asked for it on its own.
func TestAPermissionRequestMadeWithoutALeaderIsFoundAndCancelledByAStop(t *testing.T) {
	for _, older := range []bool{false, true} {
		t.Run(map[bool]string{false: "listed with the events", true: "listed on its own"}[older], func(t *testing.T) {
			permissionFoundByTheNextLeader(t, older)
		})
	}
}

// listCounter stands in front of an agentctl and counts its GET
// /v1/agent/permissions calls; with older it drops a poll's permissions
// parameter, as an agentctl older than it would ignore it.
type listCounter struct {
	proxy *httputil.ReverseProxy
	older bool
	lists atomic.Int32
}

func (c *listCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/v1/agent/permissions":
		if r.Method == http.MethodGet {
			c.lists.Add(1)
		}
	case "/v1/events":
		if c.older {
			q := r.URL.Query()
			q.Del("permissions")
			r.URL.RawQuery = q.Encode()
		}
	}
	c.proxy.ServeHTTP(w, r)
}

func permissionFoundByTheNextLeader(t *testing.T, older bool) {
	w := newWorld(t, "n1", "n2")
	s := w.workSession("s1", "n1")
	counter := &listCounter{older: older}
	w.proxyAgentctl(s, func(p *httputil.ReverseProxy) http.Handler { counter.proxy = p; return counter })
	if _, err := s.client.Prompt(recoverCtx(t), "work notes.txt"); err != nil {
		t.Fatal(err)
	}
	var pid string
	testkit.WaitFor(t, 30*time.Second, "agentctl to hold a pending request", testkit.Cond(func() bool {
		list, err := s.client.Permissions(recoverCtx(t))
		if err != nil || len(list.Permissions) == 0 || list.Permissions[0].State != api.PermissionPending {
			return false
		}
		pid = list.Permissions[0].ID
		return true
	}))
	if n := w.r.store.PendingPermissions(s.id); n != 0 {
		t.Fatalf("%d pending before any leader", n)
	}
	m := w.leader("n2")
	continueSession(t, m, s.id)
	if p, ok := w.r.store.Permission(s.id, pid); !ok || p.State != api.PermissionPending || p.SessionID != s.id {
		t.Fatalf("after the take-over: %+v (recorded %v)", p, ok)
	}
	if n, want := counter.lists.Load(), map[bool]int32{false: 0, true: 1}[older]; n != want {
		t.Fatalf("the take-over listed the permission requests on their own %d times, want %d", n, want)
	}
	if err := m.Stop(recoverCtx(t), s.id); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 30*time.Second, "the session to stop", testkit.Cond(func() bool { return w.session(s.id).State == api.SessionStopped }))
	if p, _ := w.r.store.Permission(s.id, pid); p.State != api.PermissionCancelled || w.r.store.PendingPermissions(s.id) != 0 {
		t.Fatalf("after the stop: %+v", p)
	}
}

// A cancelled turn ends its pending request cancelled (agentctl answers
// the agent "cancelled" and publishes the end, which the pump records).
func TestACancelledTurnCancelsItsPermissionRequest(t *testing.T) {
	w := newWorld(t, "n1")
	s := w.workSession("s1", "n1")
	m := w.leader("n1")
	continueSession(t, m, s.id)
	if err := m.Prompt(recoverCtx(t), s.id, "work notes.txt"); err != nil {
		t.Fatal(err)
	}
	p := w.pendingPermission(s.id)
	if err := m.Cancel(recoverCtx(t), s.id); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 20*time.Second, "the request to be cancelled", testkit.Cond(func() bool {
		got, _ := w.r.store.Permission(s.id, p.ID)
		return got.State == api.PermissionCancelled
	}))
	testkit.WaitFor(t, 20*time.Second, "the session to wait for input", testkit.Cond(func() bool { return w.session(s.id).State == api.SessionWaitingForInput }))
	if got := w.session(s.id).LastTurnOutcome; got != api.TurnCancelled {
		t.Fatalf("last turn outcome %q, want cancelled", got)
	}
}

// A tool call or plan is written whole whatever was written of it before
// (an update may change anything in it), weighed by its encoded size;
// text still grows by additions.
func TestToolAndPlanEntriesAreWrittenWholeAndWeighedByTheirEncodedSize(t *testing.T) {
	p := &pumper{e: &execution{sessionID: "s1"}, source: "boot", proposed: map[string]string{"m1": "ab", "m2": "", "m3": "x"}}
	call := &api.ToolCall{ID: "c1", Title: "Edit", Kind: api.ToolEdit, Status: api.ToolInProgress,
		Content: []api.ToolContent{{Type: api.ContentDiff, Path: "a.txt", NewText: strings.Repeat("z", 500)}}}
	encoded, _ := json.Marshal(call)
	prop, n := p.messageWrite(agentctl.Message{ID: "m2", Role: string(api.RoleTool), ToolCall: call})
	if b, ok := prop.Body.(*state.PutMessageBody); prop.Type != state.CmdPutMessage || !ok || b.Message.ToolCall != call || n != len(encoded) {
		t.Fatalf("tool call write %d %+v weighing %d, want a whole put weighing %d", prop.Type, prop.Body, n, len(encoded))
	}
	plan := &api.Plan{Entries: []api.PlanEntry{{Content: "x", Priority: "high", Status: "pending"}}}
	if prop, _ := p.messageWrite(agentctl.Message{ID: "m3", Role: string(api.RolePlan), Text: "xy", Plan: plan}); prop.Type != state.CmdPutMessage {
		t.Fatalf("a plan whose text grew is written as %d, want a whole put", prop.Type)
	}
	if prop, n := p.messageWrite(agentctl.Message{ID: "m1", Role: string(api.RoleThought), Text: "abcd"}); prop.Type != state.CmdAppendMessage || n != 2 {
		t.Fatalf("a thought's growth is written as %d weighing %d, want an addition of 2 bytes", prop.Type, n)
	}
	p.recordWrite(agentctl.Message{ID: "m2", Role: string(api.RoleTool), ToolCall: call}, prop, nil)
	if _, ok := p.proposed["m2"]; ok {
		t.Fatal("a tool call's write is remembered for text additions")
	}
}
