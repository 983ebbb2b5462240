package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/bench/harness"
	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/shared/demoagent"
	"github.com/paddockhq/paddock/shared/testkit"
)

// The agent's work end to end, on real server processes: an ACP agent's
// plan, thoughts and tool calls in the transcript, and its permission
// requests answered by people (docs/API.md, "The agent's work").

const (
	workToken     = "e2e-agentwork-token"
	workReadToken = "e2e-agentwork-read-token"
)

// workConfig is standaloneConfig with an ACL (a full and a read-only
// token) and a demo profile whose permission requests time out after 1s.
func workConfig(t *testing.T, extra ...string) string {
	return workConfigFrom(standaloneConfig(t), extra...)
}

func workConfigFrom(base string, extra ...string) string {
	return base + fmt.Sprintf(`
acl {
  token      = %q
  read_token = %q
}
agent "demo-timeout" {
  protocol           = "acp"
  command            = ["paddock-demo-agent"]
  permission_timeout = "1s"
}
`, workToken, workReadToken) + strings.Join(extra, "\n")
}

// tokenClient is a client of node n with token.
func tokenClient(t *testing.T, n *harness.Node, token string) *client.Client {
	t.Helper()
	c, err := client.New(n.URL(), token)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// workSession creates a task and an agent session on the standalone
// runtime (on node, when given), waits until it waits for input and
// writes notes.txt (two lines) into its workspace.
func workSession(t *testing.T, c *client.Client, agent, node string) *api.Session {
	t.Helper()
	task, err := c.CreateTask(testCtx(t), api.CreateTaskRequest{Title: "agent work " + agent})
	if err != nil {
		t.Fatal(err)
	}
	req := api.CreateSessionRequest{Agent: agent, Runtime: "standalone"}
	if node != "" {
		req.RuntimeOptions = map[string]string{"node": node}
	}
	s, err := c.CreateSession(testCtx(t), task.ID, req)
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, c, s.ID, api.SessionWaitingForInput)
	if err := c.WriteFile(testCtx(t), s.ID, "notes.txt", strings.NewReader("first line\nsecond line\n")); err != nil {
		t.Fatal(err)
	}
	return s
}

// waitPending waits until the session has a pending permission request
// for tool call toolCallID and returns it.
func waitPending(t *testing.T, c *client.Client, sessionID, toolCallID string, opts ...client.CallOption) api.Permission {
	t.Helper()
	var found api.Permission
	testkit.WaitFor(t, 30*time.Second, "a pending permission request for "+toolCallID, testkit.Cond(func() bool {
		list, err := c.Permissions(testCtx(t), sessionID, opts...)
		if err != nil {
			return false
		}
		for _, p := range list {
			if p.ToolCallID == toolCallID && p.State == api.PermissionPending {
				found = p
				return true
			}
		}
		return false
	}))
	return found
}

// permissionNamed returns the session's request id.
func permissionNamed(t *testing.T, c *client.Client, sessionID, id string, opts ...client.CallOption) api.Permission {
	t.Helper()
	list, err := c.Permissions(testCtx(t), sessionID, opts...)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range list {
		if p.ID == id {
			return p
		}
	}
	t.Fatalf("session %s lists no permission %s: %+v", sessionID, id, list)
	return api.Permission{}
}

// waitWorkEnd waits until the session waits for input again with a reply
// whose last line is last, and returns the reply.
func waitWorkEnd(t *testing.T, c *client.Client, sessionID, last string) string {
	t.Helper()
	var reply string
	testkit.WaitFor(t, 30*time.Second, fmt.Sprintf("the turn to end with %q", last), testkit.Cond(func() bool {
		s, err := c.GetSession(testCtx(t), sessionID)
		if err != nil || s.State != api.SessionWaitingForInput {
			return false
		}
		reply = lastAgentText(t, c, sessionID)
		return strings.HasSuffix(reply, last)
	}))
	return reply
}

// toolEntries indexes the transcript's tool entries by tool call id,
// failing the test when a tool call has more than one entry.
func toolEntries(t *testing.T, msgs []api.Message) map[string]api.Message {
	t.Helper()
	byID := map[string]api.Message{}
	for _, m := range msgs {
		if m.Role != api.RoleTool {
			continue
		}
		if m.ToolCall == nil {
			t.Fatalf("tool entry %s has no tool_call", m.ID)
		}
		if prev, dup := byID[m.ToolCall.ID]; dup {
			t.Fatalf("tool call %s has two entries: %s and %s", m.ToolCall.ID, prev.ID, m.ID)
		}
		byID[m.ToolCall.ID] = m
	}
	return byID
}

// roleCount counts the transcript's entries of role.
func roleCount(msgs []api.Message, role api.Role) int {
	n := 0
	for _, m := range msgs {
		if m.Role == role {
			n++
		}
	}
	return n
}

// wantStatus fails unless err is an API error with HTTP status want.
func wantStatus(t *testing.T, what string, err error, want int) {
	t.Helper()
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != want {
		t.Fatalf("%s: %v, want HTTP %d", what, err, want)
	}
}

// workEvents collects a session's events from one stream.
type workEvents struct {
	mu     sync.Mutex
	events []api.Event
	err    error
}

// watchEvents opens an event stream of the session (replaying from since,
// when > 0) and collects its events until the test ends.
func watchEvents(t *testing.T, c *client.Client, sessionID string, since uint64) *workEvents {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := c.Events(ctx, client.EventFilter{SessionID: sessionID}, since)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	l := &workEvents{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			e, err := stream.Next()
			l.mu.Lock()
			if err != nil {
				l.err = err
				l.mu.Unlock()
				return
			}
			l.events = append(l.events, e)
			l.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancel()
		stream.Close()
		<-done
	})
	return l
}

// eventPermission is the permission of a permission event.
func eventPermission(e api.Event) (id string, st api.PermissionState, option string) {
	p, _ := e.Data["permission"].(map[string]any)
	id, _ = p["id"].(string)
	s, _ := p["state"].(string)
	option, _ = p["option_id"].(string)
	return id, api.PermissionState(s), option
}

// waitPermissionEvent waits until the log holds an event of type typ for
// request id in state st and returns its option.
func (l *workEvents) waitPermissionEvent(t *testing.T, typ, id string, st api.PermissionState) string {
	t.Helper()
	var option string
	testkit.WaitFor(t, 30*time.Second, fmt.Sprintf("event %s of %s (%s)", typ, id, st), testkit.Cond(func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, e := range l.events {
			if e.Type != typ {
				continue
			}
			if pid, s, o := eventPermission(e); pid == id && s == st {
				option = o
				return true
			}
		}
		if l.err != nil {
			t.Fatalf("event stream ended: %v", l.err)
		}
		return false
	}))
	return option
}

var cmdTerminal = regexp.MustCompile(`^cmd-[0-9]+$`)

// TestAgentWorkWithTheDemoAgent: the demo agent's "work notes.txt" turns
// on one node: its plan, thought and tool calls (read, edit with its
// diff, execute with its terminal) in the transcript, one entry per tool
// call; its permission request pending while the session stays RUNNING
// and answered allow_once, reject_once, by the profile's timeout, and
// cancelled with the turn; bad answers refused; the work kept, without
// duplicates, across a stop and a resume (session/load replays it).
func TestAgentWorkWithTheDemoAgent(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	start := time.Now()
	c := startClusterWith(t, harness.Options{Size: 1, Extra: workConfig(t), Token: workToken})
	n := leaderOf(t, c)
	cl := tokenClient(t, n, workToken)
	reader := tokenClient(t, n, workReadToken)

	s := workSession(t, cl, "demo", "")
	timeoutSession := workSession(t, cl, "demo-timeout", "")
	events := watchEvents(t, reader, s.ID, 0)
	t.Logf("sessions ready after %v", time.Since(start).Round(time.Millisecond))

	// Turn 1: the work, then allow_once.
	if err := cl.Prompt(testCtx(t), s.ID, "work notes.txt"); err != nil {
		t.Fatal(err)
	}
	run1 := demoagent.WorkToolCallID(1, "run")
	p1 := waitPending(t, cl, s.ID, run1)
	if p1.Kind != api.ToolExecute || p1.Title != "Run: wc -l notes.txt" || p1.SessionID != s.ID || p1.OptionID != "" || p1.AnsweredAt != nil {
		t.Fatalf("pending request %+v", p1)
	}
	if len(p1.Options) != 2 || p1.Options[0] != (api.PermissionOption{OptionID: "allow_once", Name: "Allow once", Kind: api.OptionAllowOnce}) ||
		p1.Options[1] != (api.PermissionOption{OptionID: "reject_once", Name: "Reject", Kind: api.OptionRejectOnce}) {
		t.Fatalf("options %+v", p1.Options)
	}
	// The read token sees it too, and the requested event reached a
	// subscriber.
	if got := permissionNamed(t, reader, s.ID, p1.ID); got.State != api.PermissionPending {
		t.Fatalf("through the read token: %+v", got)
	}
	events.waitPermissionEvent(t, api.EventPermissionRequested, p1.ID, api.PermissionPending)
	st, err := cl.SessionStatus(testCtx(t), s.ID)
	if err != nil || st.PendingPermissions != 1 || st.State != api.SessionRunning {
		t.Fatalf("status while the request waits: %+v %v, want RUNNING with 1 pending", st, err)
	}

	// While it waits the transcript holds the plan, the thought, the read,
	// the edit with its diff and the pending run, each once.
	msgs, err := cl.Messages(testCtx(t), s.ID)
	if err != nil {
		t.Fatal(err)
	}
	checkWorkTranscript(t, msgs, 1, false)

	answered, err := cl.AnswerPermission(testCtx(t), s.ID, p1.ID, "allow_once")
	if err != nil {
		t.Fatalf("allow_once: %v", err)
	}
	if answered.State != api.PermissionAnswered || answered.OptionID != "allow_once" || answered.AnsweredBy != "user" || answered.AnsweredAt == nil {
		t.Fatalf("answer: %+v", answered)
	}
	reply := waitWorkEnd(t, cl, s.ID, "work done: notes.txt edited; command allowed (allow_once)")
	if !strings.Contains(reply, "wc -l notes.txt: 3 ") {
		t.Fatalf("reply %q lacks wc's count of 3 lines", reply)
	}
	events.waitPermissionEvent(t, api.EventPermissionAnswered, p1.ID, api.PermissionAnswered)
	msgs, err = cl.Messages(testCtx(t), s.ID)
	if err != nil {
		t.Fatal(err)
	}
	checkWorkTranscript(t, msgs, 1, true)
	run := toolEntries(t, msgs)[run1].ToolCall
	if run.Status != api.ToolCompleted || len(run.Content) == 0 || run.Content[0].Type != api.ContentTerminal || !cmdTerminal.MatchString(run.Content[0].Terminal) {
		t.Fatalf("the run after allow_once: %+v, want completed with a cmd-N terminal", run)
	}
	if st, err := cl.SessionStatus(testCtx(t), s.ID); err != nil || st.PendingPermissions != 0 {
		t.Fatalf("status after the answer: %+v %v", st, err)
	}
	// The command ran in a named terminal of the session, the agent's.
	terms, err := cl.Terminals(testCtx(t), s.ID)
	if err != nil {
		t.Fatal(err)
	}
	var term *api.Terminal
	for i := range terms {
		if terms[i].Name == run.Content[0].Terminal {
			term = &terms[i]
		}
	}
	if term == nil || term.Owner != "agent" || strings.Join(term.Command, " ") != "wc -l notes.txt" || term.Running || term.ExitCode == nil || *term.ExitCode != 0 {
		t.Fatalf("terminals %+v, want %s: the agent's wc -l notes.txt, exited 0", terms, run.Content[0].Terminal)
	}
	data, err := cl.ReadFile(testCtx(t), s.ID, "notes.txt")
	if err != nil || string(data) != "first line\nsecond line\n"+demoagent.EditedLine(1)+"\n" {
		t.Fatalf("notes.txt after turn 1: %q %v", data, err)
	}
	// A second answer is a conflict; an unknown request is not found.
	_, err = cl.AnswerPermission(testCtx(t), s.ID, p1.ID, "reject_once")
	wantStatus(t, "a second answer", err, http.StatusConflict)
	_, err = cl.AnswerPermission(testCtx(t), s.ID, "no-such-request", "allow_once")
	wantStatus(t, "an unknown request", err, http.StatusNotFound)
	t.Logf("turn 1 (allow_once) done after %v", time.Since(start).Round(time.Millisecond))

	// Turn 2: bad answers are refused and leave the request pending; then
	// reject_once.
	if err := cl.Prompt(testCtx(t), s.ID, "work notes.txt"); err != nil {
		t.Fatal(err)
	}
	run2 := demoagent.WorkToolCallID(2, "run")
	p2 := waitPending(t, cl, s.ID, run2)
	_, err = cl.AnswerPermission(testCtx(t), s.ID, p2.ID, "allow_always")
	wantStatus(t, "an option not offered", err, http.StatusBadRequest)
	_, err = reader.AnswerPermission(testCtx(t), s.ID, p2.ID, "allow_once")
	wantStatus(t, "an answer with the read token", err, http.StatusForbidden)
	if got := permissionNamed(t, cl, s.ID, p2.ID); got.State != api.PermissionPending {
		t.Fatalf("after refused answers: %+v, want still pending", got)
	}
	if answered, err := cl.AnswerPermission(testCtx(t), s.ID, p2.ID, "reject_once"); err != nil || answered.State != api.PermissionAnswered || answered.OptionID != "reject_once" {
		t.Fatalf("reject_once: %+v %v", answered, err)
	}
	waitWorkEnd(t, cl, s.ID, "work done: notes.txt edited; command rejected (reject_once)")
	msgs, err = cl.Messages(testCtx(t), s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if run := toolEntries(t, msgs)[run2].ToolCall; run == nil || run.Status != api.ToolFailed {
		t.Fatalf("the run after reject_once: %+v, want failed", run)
	}
	t.Logf("turn 2 (reject_once) done after %v", time.Since(start).Round(time.Millisecond))

	// Turn 3: a cancel while the request waits cancels it and the turn.
	if err := cl.Prompt(testCtx(t), s.ID, "work notes.txt"); err != nil {
		t.Fatal(err)
	}
	p3 := waitPending(t, cl, s.ID, demoagent.WorkToolCallID(3, "run"))
	if err := cl.Cancel(testCtx(t), s.ID); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	events.waitPermissionEvent(t, api.EventPermissionAnswered, p3.ID, api.PermissionCancelled)
	waitWorkEnd(t, cl, s.ID, "work done: notes.txt edited; permission cancelled")
	if got := permissionNamed(t, cl, s.ID, p3.ID); got.State != api.PermissionCancelled || got.OptionID != "" {
		t.Fatalf("after the cancel: %+v, want cancelled", got)
	}
	testkit.WaitFor(t, 10*time.Second, "the turn to be recorded cancelled", testkit.Cond(func() bool {
		st, err := cl.SessionStatus(testCtx(t), s.ID)
		return err == nil && st.LastTurnOutcome != nil && *st.LastTurnOutcome == api.TurnCancelled && st.PendingPermissions == 0
	}))
	_, err = cl.AnswerPermission(testCtx(t), s.ID, p3.ID, "allow_once")
	wantStatus(t, "an answer to a cancelled request", err, http.StatusConflict)
	t.Logf("turn 3 (cancel) done after %v", time.Since(start).Round(time.Millisecond))

	// The demo-timeout profile: nobody answers, so after 1s the reject
	// option is chosen and the request is recorded timed_out.
	if err := cl.Prompt(testCtx(t), timeoutSession.ID, "work notes.txt"); err != nil {
		t.Fatal(err)
	}
	waitWorkEnd(t, cl, timeoutSession.ID, "work done: notes.txt edited; command rejected (reject_once)")
	list, err := cl.Permissions(testCtx(t), timeoutSession.ID)
	if err != nil || len(list) != 1 || list[0].State != api.PermissionTimedOut || list[0].OptionID != "reject_once" || list[0].AnsweredAt == nil {
		t.Fatalf("permissions of the demo-timeout session: %+v %v, want one timed_out with reject_once", list, err)
	}
	t.Logf("timeout turn done after %v", time.Since(start).Round(time.Millisecond))

	// The permissions list keeps every request, oldest first.
	list, err = cl.Permissions(testCtx(t), s.ID)
	if err != nil || len(list) != 3 || list[0].ID != p1.ID || list[1].ID != p2.ID || list[2].ID != p3.ID {
		t.Fatalf("permissions: %+v %v, want p1, p2, p3", list, err)
	}

	// Stop and resume: session/load replays the history, which adds no
	// entry: the transcript is what it was.
	before, err := cl.Messages(testCtx(t), s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Stop(testCtx(t), s.ID); err != nil {
		t.Fatal(err)
	}
	waitState(t, cl, s.ID, api.SessionStopped)
	if _, err := cl.Resume(testCtx(t), s.ID); err != nil {
		t.Fatalf("resume: %v", err)
	}
	waitState(t, cl, s.ID, api.SessionWaitingForInput)
	// The resumed agent loaded the conversation (it counts on from turn
	// 3); its replay is long over once it has answered a turn, so a
	// replayed entry taken for a new one would show below.
	if got := promptAndWait(t, cl, s.ID, "hello"); got != "turn 4: hello" {
		t.Fatalf("the first reply after the resume: %q, want turn 4", got)
	}
	after, err := cl.Messages(testCtx(t), s.ID)
	if err != nil {
		t.Fatal(err)
	}
	beforeTools, afterTools := toolEntries(t, before), toolEntries(t, after)
	if len(afterTools) != len(beforeTools) || len(beforeTools) != 9 {
		t.Fatalf("tool entries: %d before the stop, %d after the resume, want 9", len(beforeTools), len(afterTools))
	}
	for id, m := range beforeTools {
		a, ok := afterTools[id]
		if !ok || a.ID != m.ID || a.ToolCall.Status != m.ToolCall.Status || len(a.ToolCall.Content) != len(m.ToolCall.Content) {
			t.Fatalf("tool call %s: %+v before, %+v after", id, m.ToolCall, a.ToolCall)
		}
	}
	for _, role := range []api.Role{api.RolePlan, api.RoleThought} {
		if b, a := roleCount(before, role), roleCount(after, role); b != 3 || a != 3 {
			t.Fatalf("%s entries: %d before the stop, %d after the resume, want 3 (one a turn)", role, b, a)
		}
	}
	// Only the recall turn was added: its prompt and reply.
	if len(after) != len(before)+2 {
		for _, m := range after[len(before):] {
			t.Logf("added: %s %q", m.Role, m.Text)
		}
		t.Fatalf("%d entries before the stop, %d after the resume and one turn, want +2", len(before), len(after))
	}
	if perms, err := cl.Permissions(testCtx(t), s.ID); err != nil || len(perms) != 3 {
		t.Fatalf("permissions after the resume: %+v %v", perms, err)
	}
	t.Logf("stop and resume done after %v", time.Since(start).Round(time.Millisecond))
}

// checkWorkTranscript checks turn K of "work notes.txt" in msgs: its plan
// entry (three steps), its thought, its read and edit tool calls (the edit
// with its diff) and its run, once each, and the run completed or pending.
func checkWorkTranscript(t *testing.T, msgs []api.Message, turn int, done bool) {
	t.Helper()
	var plans, thoughts int
	for _, m := range msgs {
		switch m.Role {
		case api.RolePlan:
			if m.Plan == nil || len(m.Plan.Entries) != 3 || m.Plan.Entries[0].Content != "Read notes.txt" {
				t.Fatalf("plan entry %+v", m.Plan)
			}
			plans++
		case api.RoleThought:
			if !strings.Contains(m.Text, "notes.txt") {
				t.Fatalf("thought %q", m.Text)
			}
			thoughts++
		}
	}
	if plans != turn || thoughts != turn {
		t.Fatalf("%d plan and %d thought entries after turn %d, want %d each", plans, thoughts, turn, turn)
	}
	tools := toolEntries(t, msgs)
	read, edit, run := tools[demoagent.WorkToolCallID(turn, "read")], tools[demoagent.WorkToolCallID(turn, "edit")], tools[demoagent.WorkToolCallID(turn, "run")]
	if read.ToolCall == nil || read.ToolCall.Kind != api.ToolRead || read.ToolCall.Status != api.ToolCompleted {
		t.Fatalf("read tool call %+v", read.ToolCall)
	}
	if edit.ToolCall == nil || edit.ToolCall.Kind != api.ToolEdit || edit.ToolCall.Status != api.ToolCompleted {
		t.Fatalf("edit tool call %+v", edit.ToolCall)
	}
	var diff *api.ToolContent
	for i, c := range edit.ToolCall.Content {
		if c.Type == api.ContentDiff {
			diff = &edit.ToolCall.Content[i]
		}
	}
	if diff == nil || filepath.Base(diff.Path) != "notes.txt" || !strings.Contains(diff.NewText, demoagent.EditedLine(turn)) ||
		diff.OldText == nil || strings.Contains(*diff.OldText, demoagent.EditedLine(turn)) {
		t.Fatalf("edit content %+v, want a diff of notes.txt adding %q", edit.ToolCall.Content, demoagent.EditedLine(turn))
	}
	if run.ToolCall == nil || run.ToolCall.Kind != api.ToolExecute {
		t.Fatalf("run tool call %+v", run.ToolCall)
	}
	if !done && run.ToolCall.Status != api.ToolPending {
		t.Fatalf("run tool call %+v while the request waits, want pending", run.ToolCall)
	}
}

// TestAPermissionAnsweredThroughAFollowerAfterTheLeaderIsKilled: a request
// pending when the leader is kill -9'd stays pending on the new leader and
// every node; an answer sent to a follower reaches the agent (its session
// on a node that survives), and a client connecting afterwards sees the
// request answered.
func TestAPermissionAnsweredThroughAFollowerAfterTheLeaderIsKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("process cluster")
	}
	start := time.Now()
	c := startClusterWith(t, harness.Options{Size: 3, SeparateIPs: true, Extra: workConfig(t), Token: workToken})
	leader := leaderOf(t, c)
	home := otherNode(c, leader)
	cl := tokenClient(t, leader, workToken)
	testkit.WaitFor(t, 30*time.Second, "every node to be a server with its runtime", testkit.Cond(func() bool {
		hs, err := cl.Nodes(testCtx(t))
		ok := 0
		for _, h := range hs {
			if h.Available && h.Plugins["standalone"] {
				ok++
			}
		}
		return err == nil && ok == 3
	}))
	s := workSession(t, cl, "demo", home.Name)
	if exs, err := cl.Executors(testCtx(t), s.ID); err != nil || len(exs) != 1 || exs[0].Node != home.Name {
		t.Fatalf("executors %+v %v, want one on %s", exs, err, home.Name)
	}
	if err := cl.Prompt(testCtx(t), s.ID, "work notes.txt"); err != nil {
		t.Fatal(err)
	}
	p := waitPending(t, cl, s.ID, demoagent.WorkToolCallID(1, "run"))
	// Every node has it (its own state), before the leader dies.
	for _, n := range c.Nodes {
		waitPending(t, tokenClient(t, n, workToken), s.ID, p.ToolCallID, client.Stale())
	}
	t.Logf("request pending after %v", time.Since(start).Round(time.Millisecond))

	leader.Kill()
	newLeader := leaderOf(t, c)
	if newLeader == leader {
		t.Fatal("the killed node is still the leader")
	}
	t.Logf("new leader %s after %v", newLeader.Name, time.Since(start).Round(time.Millisecond))
	for _, n := range c.Running() {
		if got := permissionNamed(t, tokenClient(t, n, workToken), s.ID, p.ID); got.State != api.PermissionPending {
			t.Fatalf("on %s after the failover: %+v, want pending", n.Name, got)
		}
	}
	if st, err := tokenClient(t, newLeader, workToken).SessionStatus(testCtx(t), s.ID); err != nil || st.PendingPermissions != 1 || st.State != api.SessionRunning {
		t.Fatalf("status after the failover: %+v %v", st, err)
	}

	// Answer through the surviving node that does not lead.
	via := otherNode(c, leader, newLeader)
	fc := tokenClient(t, via, workToken)
	var answered *api.Permission
	testkit.WaitFor(t, 30*time.Second, "an answer through "+via.Name+" to be taken", testkit.Cond(func() bool {
		var err error
		answered, err = fc.AnswerPermission(testCtx(t), s.ID, p.ID, "allow_once")
		if err != nil {
			t.Logf("answer through %s: %v", via.Name, err)
		}
		// The request is not answered twice: a retry after an answer
		// that was taken is a conflict (and ends the wait below).
		var ae *client.APIError
		if errors.As(err, &ae) && ae.Status == http.StatusConflict {
			answered = nil
			return true
		}
		return err == nil
	}))
	if answered != nil && (answered.State != api.PermissionAnswered || answered.OptionID != "allow_once" || answered.AnsweredBy != "user") {
		t.Fatalf("answer through %s: %+v", via.Name, answered)
	}
	waitWorkEnd(t, fc, s.ID, "work done: notes.txt edited; command allowed (allow_once)")
	t.Logf("turn done after %v", time.Since(start).Round(time.Millisecond))

	// A client that comes afterwards, to any node: a fresh GET, and a new
	// event stream replaying the session's events.
	for _, n := range c.Running() {
		nc := tokenClient(t, n, workReadToken)
		testkit.WaitFor(t, 10*time.Second, n.Name+" to show the request answered", testkit.Cond(func() bool {
			list, err := nc.Permissions(testCtx(t), s.ID, client.Stale())
			return err == nil && len(list) == 1 && list[0].State == api.PermissionAnswered && list[0].OptionID == "allow_once"
		}))
		if st, err := nc.SessionStatus(testCtx(t), s.ID); err != nil || st.PendingPermissions != 0 {
			t.Fatalf("status on %s: %+v %v", n.Name, st, err)
		}
	}
	late := watchEvents(t, tokenClient(t, via, workReadToken), s.ID, 1)
	if got := late.waitPermissionEvent(t, api.EventPermissionAnswered, p.ID, api.PermissionAnswered); got != "allow_once" {
		t.Fatalf("the replayed answered event says option %q", got)
	}
	msgs, err := fc.Messages(testCtx(t), s.ID)
	if err != nil {
		t.Fatal(err)
	}
	checkWorkTranscript(t, msgs, 1, true)
	if run := toolEntries(t, msgs)[p.ToolCallID].ToolCall; run.Status != api.ToolCompleted {
		t.Fatalf("the run after the answer: %+v", run)
	}
	t.Logf("done after %v", time.Since(start).Round(time.Millisecond))
}

// TestAgentWorkWithTheTypeScriptSDKAgent: an agent Paddock did not write,
// on the official TypeScript ACP SDK (e2e/testdata/ts-agent): its plan,
// its edit tool call with a diff, and its permission request, answered
// allow_once (it then writes its file through fs/write_text_file) and
// reject_once.
func TestAgentWorkWithTheTypeScriptSDKAgent(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	ci := os.Getenv("CI") == "true"
	node, err := exec.LookPath("node")
	if err != nil {
		if ci {
			t.Fatal("node is not installed; the TypeScript SDK agent needs it in CI")
		}
		t.Skip("node is not installed")
	}
	agentJS := repoFile(t, "e2e/testdata/ts-agent/agent.mjs")
	if _, err := os.Stat(filepath.Join(filepath.Dir(agentJS), "node_modules", "@agentclientprotocol", "sdk")); err != nil {
		if ci {
			t.Fatalf("ts-agent's dependencies are not installed (run npm ci in e2e/testdata/ts-agent): %v", err)
		}
		t.Skipf("ts-agent's dependencies are not installed (cd e2e/testdata/ts-agent && npm ci): %v", err)
	}
	start := time.Now()
	c := startClusterWith(t, harness.Options{Size: 1, Token: workToken, Extra: workConfigFrom(standaloneConfig(t), fmt.Sprintf(`
agent "ts" {
  protocol = "acp"
  command  = [%q, %q]
}
`, node, agentJS))})
	cl := tokenClient(t, leaderOf(t, c), workToken)
	s := workSession(t, cl, "ts", "")
	t.Logf("session ready after %v", time.Since(start).Round(time.Millisecond))

	// Turn 1: allowed.
	if err := cl.Prompt(testCtx(t), s.ID, "write your file"); err != nil {
		t.Fatal(err)
	}
	p := waitPending(t, cl, s.ID, "ts-1-run")
	if p.Kind != api.ToolExecute || p.Title != "Run: write ts-agent.txt" || len(p.Options) != 3 || p.Options[1].OptionID != "allow_once" || p.Options[1].Kind != api.OptionAllowOnce {
		t.Fatalf("pending request %+v", p)
	}
	if st, err := cl.SessionStatus(testCtx(t), s.ID); err != nil || st.PendingPermissions != 1 || st.State != api.SessionRunning {
		t.Fatalf("status while the request waits: %+v %v", st, err)
	}
	msgs, err := cl.Messages(testCtx(t), s.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := "written by paddock-ts-agent (turn 1)\n"
	checkTSTranscript(t, msgs, 1)
	if _, err := cl.AnswerPermission(testCtx(t), s.ID, p.ID, "allow_once"); err != nil {
		t.Fatalf("allow_once: %v", err)
	}
	reply := waitWorkEnd(t, cl, s.ID, "ts-agent: allowed allow_once")
	if !strings.Contains(reply, "wrote ts-agent.txt") {
		t.Fatalf("reply %q: the agent did not write through fs/write_text_file", reply)
	}
	if data, err := cl.ReadFile(testCtx(t), s.ID, "ts-agent.txt"); err != nil || string(data) != want {
		t.Fatalf("ts-agent.txt: %q %v, want %q", data, err, want)
	}
	msgs, err = cl.Messages(testCtx(t), s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if run := toolEntries(t, msgs)["ts-1-run"].ToolCall; run == nil || run.Status != api.ToolCompleted {
		t.Fatalf("ts-1-run after allow_once: %+v", run)
	}
	t.Logf("turn 1 (allow_once) done after %v", time.Since(start).Round(time.Millisecond))

	// Turn 2: rejected; the file stays as turn 1 wrote it.
	if err := cl.Prompt(testCtx(t), s.ID, "again"); err != nil {
		t.Fatal(err)
	}
	p2 := waitPending(t, cl, s.ID, "ts-2-run")
	if _, err := cl.AnswerPermission(testCtx(t), s.ID, p2.ID, "reject_once"); err != nil {
		t.Fatalf("reject_once: %v", err)
	}
	waitWorkEnd(t, cl, s.ID, "ts-agent: rejected reject_once")
	msgs, err = cl.Messages(testCtx(t), s.ID)
	if err != nil {
		t.Fatal(err)
	}
	checkTSTranscript(t, msgs, 2)
	if run := toolEntries(t, msgs)["ts-2-run"].ToolCall; run == nil || run.Status != api.ToolFailed {
		t.Fatalf("ts-2-run after reject_once: %+v", run)
	}
	if data, err := cl.ReadFile(testCtx(t), s.ID, "ts-agent.txt"); err != nil || string(data) != want {
		t.Fatalf("ts-agent.txt after the rejected turn: %q %v, want %q", data, err, want)
	}
	if st, err := cl.SessionStatus(testCtx(t), s.ID); err != nil || st.PendingPermissions != 0 {
		t.Fatalf("status after both turns: %+v %v", st, err)
	}
	t.Logf("turn 2 (reject_once) done after %v", time.Since(start).Round(time.Millisecond))
}

// checkTSTranscript checks the ts-agent's turns 1..turns in msgs: a plan
// entry each, and tool call ts-N-edit of kind edit with its diff (a new
// file) once each.
func checkTSTranscript(t *testing.T, msgs []api.Message, turns int) {
	t.Helper()
	var plans int
	for _, m := range msgs {
		if m.Role == api.RolePlan {
			if m.Plan == nil || len(m.Plan.Entries) != 3 || m.Plan.Entries[0].Content != "Propose ts-agent.txt" {
				t.Fatalf("plan entry %+v", m.Plan)
			}
			plans++
		}
	}
	if plans != turns {
		t.Fatalf("%d plan entries after %d turns", plans, turns)
	}
	if n := roleCount(msgs, api.RoleThought); n != turns {
		t.Fatalf("%d thought entries after %d turns", n, turns)
	}
	tools := toolEntries(t, msgs)
	for k := 1; k <= turns; k++ {
		edit := tools[fmt.Sprintf("ts-%d-edit", k)].ToolCall
		if edit == nil || edit.Kind != api.ToolEdit || edit.Status != api.ToolCompleted || len(edit.Content) != 1 {
			t.Fatalf("ts-%d-edit: %+v", k, edit)
		}
		d := edit.Content[0]
		if d.Type != api.ContentDiff || filepath.Base(d.Path) != "ts-agent.txt" || d.OldText != nil ||
			d.NewText != fmt.Sprintf("written by paddock-ts-agent (turn %d)\n", k) {
			t.Fatalf("ts-%d-edit content %+v", k, d)
		}
		if len(edit.Locations) != 1 || filepath.Base(edit.Locations[0].Path) != "ts-agent.txt" {
			t.Fatalf("ts-%d-edit locations %+v", k, edit.Locations)
		}
		if run := tools[fmt.Sprintf("ts-%d-run", k)].ToolCall; run == nil || run.Kind != api.ToolExecute {
			t.Fatalf("ts-%d-run: %+v", k, run)
		}
	}
}
