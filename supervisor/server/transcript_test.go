package server

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/api/termproto"
	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/shared/term/termtest"
	"github.com/paddockhq/paddock/shared/testkit"
	"github.com/paddockhq/paddock/supervisor/config"
)

// withTTYAgent adds the pty profile of the demo agent, as the quick start's
// demo-tty, and turns auto-resume off so a killed agent's session stays put.
func withTTYAgent(_ int, cfg *config.Config) {
	yes := true
	cfg.Agents = append(cfg.Agents, &config.Agent{
		Name: "demo-tty", Protocol: "pty", Command: []string{"paddock-demo-agent", "--tty"},
		NewArgs: []string{"--session-id", "{{resume_token}}"}, ResumeArgs: []string{"--resume", "{{resume_token}}"},
		SupportsSessionResume: &yes,
	})
	cfg.Recovery.AutoResume = config.AutoResumeNone
}

// transcriptSession starts a session of agent and waits until it takes prompts.
func transcriptSession(t *testing.T, cl *client.Client, agent string) string {
	t.Helper()
	task, err := cl.CreateTask(ctx(t), api.CreateTaskRequest{Title: "transcript " + agent})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := cl.CreateSession(ctx(t), task.ID, api.CreateSessionRequest{Agent: agent, Runtime: "standalone"})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, cl, sess.ID, api.SessionWaitingForInput)
	return sess.ID
}

func waitState(t *testing.T, cl *client.Client, id string, want api.SessionState) {
	t.Helper()
	testkit.WaitFor(t, 30*time.Second, fmt.Sprintf("session %s to be %s", id, want), testkit.Cond(func() bool {
		s, err := cl.GetSession(ctx(t), id)
		return err == nil && s.State == want
	}))
}

// turn prompts and waits until the reply is complete and the session takes
// prompts again.
func turn(t *testing.T, cl *client.Client, id, prompt, reply string) {
	t.Helper()
	if err := cl.Prompt(ctx(t), id, prompt); err != nil {
		t.Fatalf("prompt %q: %v", prompt, err)
	}
	testkit.WaitFor(t, 30*time.Second, fmt.Sprintf("the reply %q", reply), testkit.Cond(func() bool {
		msgs, err := cl.Messages(ctx(t), id)
		if err != nil || len(msgs) == 0 {
			return false
		}
		last := msgs[len(msgs)-1]
		return last.Role == api.RoleAgent && last.Text == reply && last.Complete
	}))
	waitState(t, cl, id, api.SessionWaitingForInput)
}

// lastTurnOutcome reads the status object's last_turn_outcome as raw JSON
// (nil for null; an absent field fails the test and reads as "<absent>").
func lastTurnOutcome(t *testing.T, c *testCluster, id string) any {
	t.Helper()
	code, _, body := rawCall(t, "GET", "http://"+c.servers[0].HTTPAddr()+"/v1/sessions/"+id+"/status", "", "", nil)
	if code != 200 {
		t.Fatalf("status: %d %s", code, body)
	}
	var fields map[string]any
	if err := json.Unmarshal(body, &fields); err != nil {
		t.Fatal(err)
	}
	v, ok := fields["last_turn_outcome"]
	if !ok {
		t.Errorf("status has no last_turn_outcome: %s", body)
		return "<absent>"
	}
	return v
}

type wantMsg struct {
	role api.Role
	text string
}

// checkTranscript asserts the conversation is exactly want, in order, with
// unique ids and created_at never going back.
func checkTranscript(t *testing.T, msgs []api.Message, want []wantMsg) {
	t.Helper()
	dump := func() string {
		var b strings.Builder
		for _, m := range msgs {
			fmt.Fprintf(&b, "\n  %s %s %q complete=%v created=%s", m.ID, m.Role, m.Text, m.Complete, m.CreatedAt.Format(time.RFC3339Nano))
		}
		return b.String()
	}
	if len(msgs) != len(want) {
		t.Fatalf("%d messages, want %d:%s", len(msgs), len(want), dump())
	}
	ids := map[string]bool{}
	for i, m := range msgs {
		if m.Role != want[i].role || !strings.Contains(m.Text, want[i].text) {
			t.Errorf("message %d is %s %q, want %s containing %q:%s", i, m.Role, m.Text, want[i].role, want[i].text, dump())
		}
		if ids[m.ID] {
			t.Errorf("message id %s is used twice:%s", m.ID, dump())
		}
		ids[m.ID] = true
		if i > 0 && m.CreatedAt.Before(msgs[i-1].CreatedAt) {
			t.Errorf("message %d was created before the one it follows:%s", i, dump())
		}
	}
}

// Every turn survives a stop and a resume, for ACP and pty agents: the
// transcript holds both turns once each, in order, with unique ids.
func TestTranscriptSurvivesStopAndResume(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	c := newTestClusterWith(t, 1, "", withTTYAgent)
	cl := c.client(0)
	for _, agent := range []string{"demo", "demo-tty"} {
		t.Run(agent, func(t *testing.T) {
			id := transcriptSession(t, cl, agent)
			if got := lastTurnOutcome(t, c, id); got != nil {
				t.Errorf("last_turn_outcome before any turn = %v, want null", got)
			}
			turn(t, cl, id, "remember cats", "ok, remembering cats")
			if _, err := cl.Stop(ctx(t), id); err != nil {
				t.Fatal(err)
			}
			waitState(t, cl, id, api.SessionStopped)
			if _, err := cl.Resume(ctx(t), id); err != nil {
				t.Fatal(err)
			}
			waitState(t, cl, id, api.SessionWaitingForInput)
			turn(t, cl, id, "recall", "you asked me to remember: cats")
			msgs, err := cl.Messages(ctx(t), id)
			if err != nil {
				t.Fatal(err)
			}
			checkTranscript(t, msgs, []wantMsg{
				{api.RoleUser, "remember cats"}, {api.RoleAgent, "ok, remembering cats"},
				{api.RoleUser, "recall"}, {api.RoleAgent, "you asked me to remember: cats"},
			})
			if got := lastTurnOutcome(t, c, id); got != "completed" {
				t.Errorf("last_turn_outcome = %v, want completed", got)
			}
		})
	}
}

// agentPID finds the demo agent among the children of the session's agentctl.
func agentPID(t *testing.T, cl *client.Client, sessionID string) int {
	t.Helper()
	sess, err := cl.GetSession(ctx(t), sessionID)
	if err != nil {
		t.Fatal(err)
	}
	ex, err := cl.Executor(ctx(t), sess.ExecutorID)
	if err != nil {
		t.Fatal(err)
	}
	if ex.PID == 0 {
		t.Fatalf("executor %s has no local pid", ex.ID)
	}
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", ex.PID))
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, field := range strings.Fields(string(b)) {
			pid, _ := strconv.Atoi(field)
			cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			if strings.Contains(string(cmdline), "paddock-demo-agent") {
				return pid
			}
		}
	}
	t.Fatalf("no paddock-demo-agent among the children of agentctl %d", ex.PID)
	return 0
}

// A turn cut short by the agent's death stays in the transcript: the user's
// message, then a system message saying it was interrupted and why; the
// status says interrupted.
func TestTurnCutShortByTheAgentsDeathIsRecorded(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	c := newTestClusterWith(t, 1, "", withTTYAgent)
	cl := c.client(0)
	for _, agent := range []string{"demo", "demo-tty"} {
		t.Run(agent, func(t *testing.T) {
			id := transcriptSession(t, cl, agent)
			turn(t, cl, id, "remember dogs", "ok, remembering dogs")
			if err := cl.Prompt(ctx(t), id, "sleep 60"); err != nil {
				t.Fatal(err)
			}
			testkit.WaitFor(t, 30*time.Second, "the prompt in the transcript", testkit.Cond(func() bool {
				msgs, err := cl.Messages(ctx(t), id)
				return err == nil && len(msgs) == 3 && msgs[2].Text == "sleep 60"
			}))
			if err := syscall.Kill(agentPID(t, cl, id), syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			waitState(t, cl, id, api.SessionError)
			var msgs []api.Message
			testkit.WaitFor(t, 10*time.Second, "a system message", testkit.Cond(func() bool {
				var err error
				msgs, err = cl.Messages(ctx(t), id)
				return err == nil && len(msgs) > 0 && msgs[len(msgs)-1].Role == api.RoleSystem
			}))
			checkTranscript(t, msgs, []wantMsg{
				{api.RoleUser, "remember dogs"}, {api.RoleAgent, "ok, remembering dogs"},
				{api.RoleUser, "sleep 60"},
				{api.RoleSystem, "interrupted"},
			})
			if sys := msgs[len(msgs)-1]; !strings.Contains(sys.Text, "exited") || !sys.Complete {
				t.Errorf("system message %q does not say why the turn was interrupted (or is not complete)", sys.Text)
			}
			if got := lastTurnOutcome(t, c, id); got != "interrupted" {
				t.Errorf("last_turn_outcome = %v, want interrupted", got)
			}
		})
	}
}

// The status reports each turn's outcome as it ends: completed, cancelled.
func TestLastTurnOutcome(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	c := newTestClusterWith(t, 1, "", withTTYAgent)
	cl := c.client(0)
	for _, agent := range []string{"demo", "demo-tty"} {
		t.Run(agent, func(t *testing.T) {
			id := transcriptSession(t, cl, agent)
			turn(t, cl, id, "hello", "turn 1: hello")
			if got := lastTurnOutcome(t, c, id); got != "completed" {
				t.Errorf("after a whole turn, last_turn_outcome = %v, want completed", got)
			}
			if err := cl.Prompt(ctx(t), id, "sleep 30"); err != nil {
				t.Fatal(err)
			}
			if err := cl.Cancel(ctx(t), id); err != nil {
				t.Fatal(err)
			}
			waitState(t, cl, id, api.SessionWaitingForInput)
			testkit.WaitFor(t, 10*time.Second, "last_turn_outcome cancelled", testkit.Cond(func() bool { return lastTurnOutcome(t, c, id) == "cancelled" }))
			turn(t, cl, id, "again", "turn 3: again")
			if got := lastTurnOutcome(t, c, id); got != "completed" {
				t.Errorf("after another turn, last_turn_outcome = %v, want completed", got)
			}
		})
	}
}

// A turn typed at a pty agent's prompt in its terminal (paddock attach
// -name agent) is part of the conversation: the typed line (as the agent
// received it, erased characters removed) is a user message, the reply an
// agent message, in order with the prompted turns.
func TestTurnTypedInTheAgentTerminalIsInTheTranscript(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	c := newTestClusterWith(t, 1, "", withTTYAgent)
	cl := c.client(0)
	id := transcriptSession(t, cl, "demo-tty")
	turn(t, cl, id, "remember cats", "ok, remembering cats")

	url := "ws://" + c.servers[0].HTTPAddr() + "/v1/sessions/" + id + "/terminal?name=agent"
	term1, resp, err := termtest.Dial(t, url, nil, termtest.Hello(t, termproto.Hello{}))
	if err != nil {
		t.Fatalf("attach the agent terminal: %v (%v)", err, resp)
	}
	term1.Timeout = 15 * time.Second
	term1.WaitMsg("attached")
	term1.Input("remember dogz\x7fs\r")
	testkit. // a typo, erased
			WaitFor(t, 30*time.Second, "the typed turn's reply", testkit.Cond(func() bool {
			msgs, err := cl.Messages(ctx(t), id)
			return err == nil && len(msgs) == 4 && msgs[3].Text == "ok, remembering dogs" && msgs[3].Complete
		}))
	turn(t, cl, id, "recall", "you asked me to remember: cats, dogs")
	msgs, err := cl.Messages(ctx(t), id)
	if err != nil {
		t.Fatal(err)
	}
	checkTranscript(t, msgs, []wantMsg{
		{api.RoleUser, "remember cats"}, {api.RoleAgent, "ok, remembering cats"},
		{api.RoleUser, "remember dogs"}, {api.RoleAgent, "ok, remembering dogs"},
		{api.RoleUser, "recall"}, {api.RoleAgent, "you asked me to remember: cats, dogs"},
	})
	if msgs[2].Text != "remember dogs" {
		t.Errorf("typed line recorded as %q, want %q", msgs[2].Text, "remember dogs")
	}
}
