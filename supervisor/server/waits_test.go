package server

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/shared/testkit"
	"github.com/paddockhq/paddock/supervisor/config"
)

// newDemoSession creates a task and a demo session on node 0 and returns the
// client and the session as the create answered (not waited for).
func newDemoSession(t *testing.T, c *testCluster, title string) (*client.Client, *api.Session) {
	t.Helper()
	return newSession(t, c, title, "demo")
}

func newSession(t *testing.T, c *testCluster, title, agent string) (*client.Client, *api.Session) {
	t.Helper()
	cl := c.client(0)
	task, err := cl.CreateTask(ctx(t), api.CreateTaskRequest{Title: title})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := cl.CreateSession(ctx(t), task.ID, api.CreateSessionRequest{Agent: agent, Runtime: "standalone"})
	if err != nil {
		t.Fatal(err)
	}
	return cl, sess
}

func waitSessionState(t *testing.T, cl *client.Client, id string, want api.SessionState) {
	t.Helper()
	testkit.WaitFor(t, 30*time.Second, fmt.Sprintf("session %s to be %s", id, want), testkit.Cond(func() bool {
		s, err := cl.GetSession(ctx(t), id)
		return err == nil && s.State == want
	}))
}

// lastAgentReply waits for the agent's complete reply to the last prompt.
func lastAgentReply(t *testing.T, cl *client.Client, id string) string {
	t.Helper()
	var reply string
	testkit.WaitFor(t, 30*time.Second, "the agent's reply", testkit.Cond(func() bool {
		s, err := cl.GetSession(ctx(t), id)
		if err != nil || s.State != api.SessionWaitingForInput {
			return false
		}
		msgs, err := cl.Messages(ctx(t), id)
		if err != nil || len(msgs) == 0 || msgs[len(msgs)-1].Role != api.RoleAgent || !msgs[len(msgs)-1].Complete {
			return false
		}
		reply = msgs[len(msgs)-1].Text
		return true
	}))
	return reply
}

// TestPromptToAStartingSessionWaitsForIt: a prompt sent right after the
// create, while the session is STARTING, is taken once the agent is up
// instead of being refused.
func TestPromptToAStartingSessionWaitsForIt(t *testing.T) {
	// The agent starts only once the test opens its gate (a file appears),
	// so the create surely answers STARTING and the prompt surely finds the
	// agent not up: a fixed delay in the agent's start raced a busy machine.
	gate := filepath.Join(t.TempDir(), "gate")
	c := newTestClusterWith(t, 1, "", func(_ int, cfg *config.Config) {
		cfg.Agents = append(cfg.Agents, &config.Agent{Name: "demo-gated", Protocol: "acp",
			Command: []string{"sh", "-c", `while [ ! -e "$0" ]; do sleep 0.02; done; exec paddock-demo-agent`, gate}})
	})
	cl, sess := newSession(t, c, "prompt while starting", "demo-gated")
	if sess.State != api.SessionStarting && sess.State != api.SessionCreated {
		t.Fatalf("the create answered %s; the agent cannot be up before the gate opens", sess.State)
	}
	prompted := make(chan error, 1)
	go func() { prompted <- cl.Prompt(ctx(t), sess.ID, "remember plums") }()
	// The prompt cannot be taken while the gate is shut; one that returns
	// now was refused (or taken by no agent).
	select {
	case err := <-prompted:
		t.Fatalf("the prompt returned before the agent could start: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := <-prompted; err != nil {
		t.Fatalf("prompt to a starting session: %v", err)
	}
	if got := lastAgentReply(t, cl, sess.ID); got != "ok, remembering plums" {
		t.Fatalf("reply %q", got)
	}
}

// TestResumeDuringAStopWaitsForTheDrain: a resume sent right after a stop
// is answered (the stop still draining the agent) waits for STOPPED and
// resumes, and the agent still remembers.
func TestResumeDuringAStopWaitsForTheDrain(t *testing.T) {
	c := newTestCluster(t, 1, "")
	cl, sess := newDemoSession(t, c, "resume while stopping")
	waitSessionState(t, cl, sess.ID, api.SessionWaitingForInput)
	if err := cl.Prompt(ctx(t), sess.ID, "remember figs"); err != nil {
		t.Fatal(err)
	}
	lastAgentReply(t, cl, sess.ID)
	for i := range 3 {
		stopped, err := cl.Stop(ctx(t), sess.ID)
		if err != nil {
			t.Fatalf("stop %d: %v", i, err)
		}
		if stopped.State == api.SessionStopped {
			t.Fatalf("stop %d answered STOPPED at once; the test needs a stop that is still draining", i)
		}
		if _, err := cl.Resume(ctx(t), sess.ID); err != nil {
			t.Fatalf("resume %d right after the stop: %v", i, err)
		}
		waitSessionState(t, cl, sess.ID, api.SessionWaitingForInput)
	}
	if err := cl.Prompt(ctx(t), sess.ID, "recall"); err != nil {
		t.Fatal(err)
	}
	if got := lastAgentReply(t, cl, sess.ID); got != "you asked me to remember: figs" {
		t.Fatalf("reply after the resumes %q", got)
	}
}

// TestResumeOfARunningSessionIsAConflict: with no stop under way, a resume
// of a session whose agent runs is refused at once, saying so.
func TestResumeOfARunningSessionIsAConflict(t *testing.T) {
	c := newTestCluster(t, 1, "")
	cl, sess := newDemoSession(t, c, "resume while running")
	waitSessionState(t, cl, sess.ID, api.SessionWaitingForInput)
	start := time.Now()
	_, err := cl.Resume(ctx(t), sess.ID)
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Code != "conflict" {
		t.Fatalf("resume of a running session: %v, want a conflict", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("the refusal took %s", d)
	}
	t.Logf("refusal: %v", err)
}

// TestTaskCloseReopenDelete: close makes a task DONE and it refuses new
// sessions while its running session carries on; reopen lets sessions in
// again; delete stops and deletes every session, then the task is gone.
func TestTaskCloseReopenDelete(t *testing.T) {
	c := newTestCluster(t, 1, "")
	cl, sess := newDemoSession(t, c, "close me")
	waitSessionState(t, cl, sess.ID, api.SessionWaitingForInput)

	task, err := cl.CloseTask(ctx(t), sess.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	if task.State != api.TaskDone {
		t.Fatalf("closed task is %s", task.State)
	}
	_, err = cl.CreateSession(ctx(t), task.ID, api.CreateSessionRequest{Agent: "demo", Runtime: "standalone"})
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Code != "conflict" {
		t.Fatalf("session on a closed task: %v, want a conflict", err)
	}
	if err := cl.Prompt(ctx(t), sess.ID, "remember pears"); err != nil {
		t.Fatalf("prompt to a session of a closed task: %v", err)
	}
	lastAgentReply(t, cl, sess.ID)
	if got, _ := cl.GetTask(ctx(t), task.ID); got.State != api.TaskDone {
		t.Fatalf("a turn moved the closed task to %s", got.State)
	}

	task, err = cl.ReopenTask(ctx(t), task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if task.State != api.TaskReview {
		t.Fatalf("reopened task with a waiting session is %s, want REVIEW", task.State)
	}
	second, err := cl.CreateSession(ctx(t), task.ID, api.CreateSessionRequest{Agent: "demo", Runtime: "standalone"})
	if err != nil {
		t.Fatalf("session on a reopened task: %v", err)
	}

	// Delete while the second session may still be starting.
	if _, err := cl.DeleteTask(ctx(t), task.ID); err != nil {
		t.Fatalf("delete task: %v", err)
	}
	if _, err := cl.GetTask(ctx(t), task.ID); !errors.As(err, &ae) || ae.Code != "not_found" {
		t.Fatalf("deleted task: %v, want not_found", err)
	}
	for _, id := range []string{sess.ID, second.ID} {
		if _, err := cl.GetSession(ctx(t), id); !errors.As(err, &ae) || ae.Code != "not_found" {
			t.Errorf("session %s of the deleted task: %v, want not_found", id, err)
		}
		if ex, err := cl.Executors(ctx(t), id); err != nil || len(ex) != 0 {
			t.Errorf("executors of session %s: %v, %v", id, ex, err)
		}
	}
	for _, id := range []string{"close", "reopen"} {
		var err error
		if id == "close" {
			_, err = cl.CloseTask(ctx(t), task.ID)
		} else {
			_, err = cl.ReopenTask(ctx(t), task.ID)
		}
		if !errors.As(err, &ae) || ae.Code != "not_found" {
			t.Errorf("%s of a deleted task: %v, want not_found", id, err)
		}
	}
}
