package server

import (
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/shared/demoagent"
	"github.com/paddockhq/paddock/shared/testkit"
)

// workSessionOn starts a session of the demo agent (permission "ask", the
// default) on node i with a notes.txt in its workspace, and asks it to
// work on that file: it waits until the agent's request to run a command
// is pending, and returns the session and the request.
func workSessionOn(t *testing.T, c *testCluster, cl *client.Client, i int) (string, api.Permission) {
	t.Helper()
	testkit.WaitFor(t, 15*time.Second, "every server to be registered", testkit.Cond(func() bool {
		for _, srv := range c.servers {
			if srv != nil && len(srv.Node.Store().Nodes()) < len(c.servers) {
				return false
			}
		}
		return true
	}))
	task, err := cl.CreateTask(ctx(t), api.CreateTaskRequest{Title: "work"})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := cl.CreateSession(ctx(t), task.ID, api.CreateSessionRequest{Agent: "demo", Runtime: "standalone",
		RuntimeOptions: map[string]string{"node": c.cfgs[i].NodeName}})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, cl, sess.ID, api.SessionWaitingForInput)
	if err := cl.WriteFile(ctx(t), sess.ID, "notes.txt", strings.NewReader("one\ntwo\n")); err != nil {
		t.Fatal(err)
	}
	if err := cl.Prompt(ctx(t), sess.ID, "work notes.txt"); err != nil {
		t.Fatal(err)
	}
	var pending api.Permission
	testkit.WaitFor(t, 30*time.Second, "a pending permission request", testkit.Cond(func() bool {
		list, err := cl.Permissions(ctx(t), sess.ID)
		if err != nil || len(list) != 1 || list[0].State != api.PermissionPending {
			return false
		}
		pending = list[0]
		return true
	}))
	return sess.ID, pending
}

// A pending permission request is listed and counted by the status object
// while the session stays RUNNING; answers that cannot be taken are 400
// (an option not offered), 404 (no such request) and 403 (the read-only
// token); after the leader stops, an answer sent to a follower reaches the
// agent, is recorded, and a second answer is 409.
func TestAPermissionAnsweredThroughAFollowerAfterTheLeaderStopsReachesTheAgent(t *testing.T) {
	c := newTestClusterWith(t, 3, testToken, withReadToken)
	leader := c.waitLeader(-1)
	node := (leader + 1) % 3 // the session's node outlives the leader
	other := (leader + 2) % 3
	cl := c.client(node)
	id, p := workSessionOn(t, c, cl, node)
	if p.Kind != api.ToolExecute || p.SessionID != id || p.ToolCallID != demoagent.WorkToolCallID(1, "run") || len(p.Options) != 2 {
		t.Fatalf("pending request %+v", p)
	}
	st, err := cl.SessionStatus(ctx(t), id)
	if err != nil || st.PendingPermissions != 1 || st.State != api.SessionRunning || st.Commands == nil {
		t.Fatalf("status while the request waits: %+v, %v", st, err)
	}

	readOnly, err := client.New("http://"+c.servers[other].HTTPAddr(), testReadToken)
	if err != nil {
		t.Fatal(err)
	}
	if list, err := readOnly.Permissions(ctx(t), id); err != nil || len(list) != 1 {
		t.Fatalf("the read-only token lists %v, %v", list, err)
	}
	for _, bad := range []struct {
		name     string
		cl       *client.Client
		pid, opt string
		code     string
	}{
		{"read-only token", readOnly, p.ID, demoagent.OptionAllowOnce, "forbidden"},
		{"unknown request", cl, "no-such-request", demoagent.OptionAllowOnce, "not_found"},
		{"option not offered", cl, p.ID, "allow_forever", "bad_request"},
	} {
		if _, err := bad.cl.AnswerPermission(ctx(t), id, bad.pid, bad.opt); !client.IsCode(err, bad.code) {
			t.Errorf("%s: %v, want %s", bad.name, err, bad.code)
		}
	}
	if got, _ := cl.Permissions(ctx(t), id); len(got) != 1 || got[0].State != api.PermissionPending {
		t.Fatalf("refused answers changed the request: %+v", got)
	}

	c.stop(leader)
	c.waitLeader(leader)
	answered, err := c.client(other).AnswerPermission(ctx(t), id, p.ID, demoagent.OptionAllowOnce)
	if err != nil {
		t.Fatalf("answer through n%d after the leader stopped: %v", other+1, err)
	}
	if answered.State != api.PermissionAnswered || answered.OptionID != demoagent.OptionAllowOnce || answered.AnsweredBy != "user" || answered.AnsweredAt == nil {
		t.Fatalf("answer %+v", answered)
	}
	testkit.WaitFor(t, 30*time.Second, "the agent's reply naming the option chosen", testkit.Cond(func() bool {
		msgs, err := cl.Messages(ctx(t), id)
		if err != nil {
			return false
		}
		for _, m := range msgs {
			if m.Role == api.RoleAgent && m.Complete && strings.Contains(m.Text, "command allowed (allow_once)") {
				return true
			}
		}
		return false
	}))
	waitState(t, cl, id, api.SessionWaitingForInput)
	if _, err := cl.AnswerPermission(ctx(t), id, p.ID, demoagent.OptionRejectOnce); !client.IsCode(err, "conflict") {
		t.Fatalf("a second answer: %v, want conflict", err)
	}
	if st, err := cl.SessionStatus(ctx(t), id); err != nil || st.PendingPermissions != 0 {
		t.Fatalf("status after the answer: %+v, %v", st, err)
	}
	terms, err := cl.Terminals(ctx(t), id)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, term := range terms {
		found = found || term.Owner == "agent" && strings.HasPrefix(term.Name, "cmd-")
	}
	if !found {
		t.Fatalf("terminals %+v lack the agent's command", terms)
	}
	if _, err := cl.SetMode(ctx(t), id, "no-such-mode"); !client.IsCode(err, "bad_request") {
		t.Fatalf("an unknown mode: %v, want bad_request", err)
	}
	modes, err := cl.SetMode(ctx(t), id, "plan")
	if err != nil || modes.CurrentModeID != "plan" {
		t.Fatalf("set mode plan: %+v, %v", modes, err)
	}
	testkit.WaitFor(t, 10*time.Second, "the status to show the plan mode", testkit.Cond(func() bool {
		st, err := cl.SessionStatus(ctx(t), id)
		return err == nil && st.Modes != nil && st.Modes.CurrentModeID == "plan" && len(st.Commands) > 0
	}))
	t.Logf("session %s answered through n%d", id, other+1)
}
