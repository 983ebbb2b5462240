package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	wire "github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/shared/testkit"
)

// eventLog records every event of one task's stream, in arrival order.
type eventLog struct {
	mu     sync.Mutex
	events []wire.Event
	err    error
	done   chan struct{}
}

// recordEvents subscribes to GET /v1/events for a task and records what
// arrives until the test ends.
func recordEvents(t *testing.T, api *client.Client, taskID string) *eventLog {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := api.Events(ctx, client.EventFilter{TaskID: taskID}, 0)
	if err != nil {
		cancel()
		t.Fatalf("subscribe to events: %v", err)
	}
	l := &eventLog{done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for {
			ev, err := stream.Next()
			l.mu.Lock()
			if err != nil {
				l.err = err
				l.mu.Unlock()
				return
			}
			l.events = append(l.events, ev)
			l.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancel()
		stream.Close()
		<-l.done
	})
	return l
}

// since returns the events from position from on, and the position after them.
func (l *eventLog) since(from int) ([]wire.Event, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]wire.Event(nil), l.events[from:]...), len(l.events)
}

// waitUntil waits for an event of session id matching match at or after from,
// and returns the events of that session from from up to and including it,
// and the position after it.
func (l *eventLog) waitUntil(t *testing.T, from int, id, what string, match func(wire.Event) bool) ([]wire.Event, int) {
	t.Helper()
	var got []wire.Event
	next := from
	testkit.WaitFor(t, 60*time.Second, what, testkit.Cond(func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.err != nil {
			t.Fatalf("event stream ended while waiting for %s: %v", what, l.err)
		}
		got = got[:0]
		for i := from; i < len(l.events); i++ {
			ev := l.events[i]
			if ev.SessionID != id {
				continue
			}
			got = append(got, ev)
			if match(ev) {
				next = i + 1
				return true
			}
		}
		return false
	}))
	return got, next
}

// toState matches a session.state_changed event into want.
func toState(want wire.SessionState) func(wire.Event) bool {
	return func(ev wire.Event) bool {
		return ev.Type == wire.EventStateChanged && ev.Data["to"] == string(want)
	}
}

// step is one expected event: its type and, for state changes, the new state.
type step struct {
	typ string
	to  wire.SessionState
}

func (s step) String() string {
	if s.to != "" {
		return s.typ + "→" + string(s.to)
	}
	return s.typ
}

func describe(evs []wire.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		fmt.Fprintf(&b, "\n  %d %s %v", ev.Index, ev.Type, ev.Data)
	}
	return b.String()
}

// agentctlAndStates keeps the session.agentctl_* and session.state_changed
// events (the lifecycle), dropping message events.
func agentctlAndStates(evs []wire.Event) []wire.Event {
	var out []wire.Event
	for _, ev := range evs {
		if ev.Type == wire.EventStateChanged || strings.HasPrefix(ev.Type, "session.agentctl_") {
			out = append(out, ev)
		}
	}
	return out
}

// expectSequence checks that evs (the lifecycle events of one phase) are
// exactly want, in order, with increasing raft indexes.
func expectSequence(t *testing.T, phase string, evs []wire.Event, want []step) {
	t.Helper()
	evs = agentctlAndStates(evs)
	ok := len(evs) == len(want)
	for i := 0; ok && i < len(want); i++ {
		ok = evs[i].Type == want[i].typ && (want[i].to == "" || evs[i].Data["to"] == string(want[i].to))
		if i > 0 && evs[i].Index <= evs[i-1].Index {
			ok = false
		}
	}
	if !ok {
		t.Fatalf("%s: want lifecycle events %v, got:%s", phase, want, describe(evs))
	}
}

// only returns the events of type typ.
func only(evs []wire.Event, typ string) []wire.Event {
	var out []wire.Event
	for _, ev := range evs {
		if ev.Type == typ {
			out = append(out, ev)
		}
	}
	return out
}

// TestAgentctlEventsOnStartStopResume follows one session on the standalone
// runtime through start, stop and resume on a real server and checks that
// the session.agentctl_* events arrive on GET /v1/events in lifecycle order,
// with the executor, the runtime and the probed capabilities in their data.
func TestAgentctlEventsOnStartStopResume(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	c := startCluster(t, 1, false, standaloneConfig(t))
	api := apiClient(t, leaderOf(t, c))
	task, err := api.CreateTask(testCtx(t), wire.CreateTaskRequest{Title: "agentctl events"})
	if err != nil {
		t.Fatal(err)
	}
	log := recordEvents(t, api, task.ID)

	sess, err := api.CreateSession(testCtx(t), task.ID, wire.CreateSessionRequest{Agent: "demo", Runtime: "standalone"})
	if err != nil {
		t.Fatal(err)
	}
	launch := []step{
		{typ: wire.EventStateChanged, to: wire.SessionStarting},
		{typ: wire.EventAgentctlStarting},
		{typ: wire.EventAgentctlReady},
		{typ: wire.EventStateChanged, to: wire.SessionWaitingForInput},
	}

	// Start: CREATED, STARTING, agentctl starting then ready, WAITING_FOR_INPUT.
	evs, pos := log.waitUntil(t, 0, sess.ID, "the session to wait for input", toState(wire.SessionWaitingForInput))
	expectSequence(t, "start", evs, append([]step{{typ: wire.EventStateChanged, to: wire.SessionCreated}}, launch...))
	got, err := api.GetSession(testCtx(t), sess.ID)
	if err != nil {
		t.Fatal(err)
	}
	checkLaunchData(t, "start", evs, got.ExecutorID, true)
	if reply := promptAndWait(t, api, sess.ID, "remember apple banana"); reply != "ok, remembering apple banana" {
		t.Fatalf("reply %q", reply)
	}
	_, pos = log.since(pos) // the turn's state changes and messages

	// Stop: the session drains to STOPPED; agentctl reports nothing of its own.
	if _, err := api.Stop(testCtx(t), sess.ID); err != nil {
		t.Fatal(err)
	}
	evs, pos = log.waitUntil(t, pos, sess.ID, "the session to stop", toState(wire.SessionStopped))
	expectSequence(t, "stop", evs, []step{{typ: wire.EventStateChanged, to: wire.SessionStopped}})

	// Resume: a new agentctl on the same executor row, starting then ready,
	// and the agent remembers the first turn.
	if _, err := api.Resume(testCtx(t), sess.ID); err != nil {
		t.Fatal(err)
	}
	evs, _ = log.waitUntil(t, pos, sess.ID, "the session to resume", toState(wire.SessionWaitingForInput))
	expectSequence(t, "resume", evs, launch)
	checkLaunchData(t, "resume", evs, got.ExecutorID, true)
	if reply := promptAndWait(t, api, sess.ID, "recall"); reply != "you asked me to remember: apple, banana" {
		t.Fatalf("after resume: reply %q", reply)
	}

	// A session of an agent that cannot resume: agentctl_ready carries the
	// probed answer, false.
	nr, err := api.CreateSession(testCtx(t), task.ID, wire.CreateSessionRequest{Agent: "demo-noresume", Runtime: "standalone"})
	if err != nil {
		t.Fatal(err)
	}
	evs, _ = log.waitUntil(t, 0, nr.ID, "the no-resume session to wait for input", toState(wire.SessionWaitingForInput))
	expectSequence(t, "start without resume", evs, append([]step{{typ: wire.EventStateChanged, to: wire.SessionCreated}}, launch...))
	gotNR, err := api.GetSession(testCtx(t), nr.ID)
	if err != nil {
		t.Fatal(err)
	}
	checkLaunchData(t, "start without resume", evs, gotNR.ExecutorID, false)
}

// checkLaunchData checks the data of a launch's agentctl_starting and
// agentctl_ready events: the session's executor, the standalone runtime, a
// reachable agentctl URL and the capabilities agentctl probed.
func checkLaunchData(t *testing.T, phase string, evs []wire.Event, executorID string, resumable bool) {
	t.Helper()
	starting, ready := only(evs, wire.EventAgentctlStarting), only(evs, wire.EventAgentctlReady)
	if len(starting) != 1 || len(ready) != 1 {
		t.Fatalf("%s: want one agentctl_starting and one agentctl_ready:%s", phase, describe(evs))
	}
	if d := starting[0].Data; executorID == "" || d["executor_id"] != executorID || d["runtime"] != "standalone" {
		t.Fatalf("%s: agentctl_starting data %v, want executor %q on standalone", phase, d, executorID)
	}
	d := ready[0].Data
	if d["executor_id"] != executorID || !strings.HasPrefix(fmt.Sprint(d["agentctl_url"]), "http://") {
		t.Fatalf("%s: agentctl_ready data %v, want executor %q and its agentctl URL", phase, d, executorID)
	}
	if d["supports_session_resume"] != resumable || d["supports_workspace_only"] != true {
		t.Fatalf("%s: agentctl_ready data %v, want supports_session_resume=%v, supports_workspace_only=true", phase, d, resumable)
	}
	for _, ev := range evs {
		if ev.TaskID == "" || ev.Index == 0 {
			t.Fatalf("%s: event without task or index: %+v", phase, ev)
		}
	}
}

// TestAgentctlErrorEventWhenTheAgentCannotStart starts a session whose agent
// command does not exist: the probe fails on the executor, and the stream
// carries agentctl_starting, then agentctl_error with the cause, then ERROR,
// and never agentctl_ready.
func TestAgentctlErrorEventWhenTheAgentCannotStart(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	cfg := standaloneConfig(t) + `
agent "missing" {
  protocol = "acp"
  command  = ["paddock-no-such-agent"]
}
`
	c := startCluster(t, 1, false, cfg)
	api := apiClient(t, leaderOf(t, c))
	task, err := api.CreateTask(testCtx(t), wire.CreateTaskRequest{Title: "agentctl error"})
	if err != nil {
		t.Fatal(err)
	}
	log := recordEvents(t, api, task.ID)
	sess, err := api.CreateSession(testCtx(t), task.ID, wire.CreateSessionRequest{Agent: "missing", Runtime: "standalone"})
	if err != nil {
		t.Fatal(err)
	}
	evs, _ := log.waitUntil(t, 0, sess.ID, "the session to fail", toState(wire.SessionError))
	expectSequence(t, "failed start", evs, []step{
		{typ: wire.EventStateChanged, to: wire.SessionCreated},
		{typ: wire.EventStateChanged, to: wire.SessionStarting},
		{typ: wire.EventAgentctlStarting},
		{typ: wire.EventAgentctlError},
		{typ: wire.EventStateChanged, to: wire.SessionError},
	})
	msg := fmt.Sprint(only(evs, wire.EventAgentctlError)[0].Data["message"])
	if !strings.Contains(msg, "paddock-no-such-agent") || !strings.Contains(msg, "not found") {
		t.Fatalf("agentctl_error message %q does not name the missing command", msg)
	}
	if s := waitState(t, api, sess.ID, wire.SessionError); s.ErrorMessage != msg {
		t.Fatalf("session error_message %q, agentctl_error message %q", s.ErrorMessage, msg)
	}
}
