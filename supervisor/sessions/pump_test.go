package sessions

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paddockhq/paddock/shared/demoagent"
	"github.com/paddockhq/paddock/shared/runtime"
	"github.com/paddockhq/paddock/supervisor/state"
)

// A session's timed flushes replicate at most maxFlushBytesPerSecond of
// message text: small messages flush every flushInterval, a large one
// holds the next flush back in proportion to its size.
func TestFlushDelayBoundsReplicatedBytes(t *testing.T) {
	now := time.Now()
	p := &pumper{}
	if d := p.flushDelay(now); d != flushInterval {
		t.Fatalf("first flush after %s, want %s", d, flushInterval)
	}
	cases := []struct {
		written int
		want    time.Duration
	}{
		{100, flushInterval},                         // well under the bound: ~10 writes/s
		{maxFlushBytesPerSecond / 10, flushInterval}, // exactly the bound at 10 writes/s
		{maxFlushBytesPerSecond, time.Second},
		{4 * maxFlushBytesPerSecond, 4 * time.Second},
	}
	for _, c := range cases {
		p.notBefore = now.Add(flushCost(c.written))
		if d := p.flushDelay(now); d != c.want {
			t.Errorf("after a flush of %d bytes: next in %s, want %s", c.written, d, c.want)
		}
		// A message that grows at the bound's rate is written every
		// flushCost: bytes per second stay under the bound.
		if rate := float64(c.written) / max(flushCost(c.written), flushInterval).Seconds(); rate > maxFlushBytesPerSecond+1 {
			t.Errorf("%d-byte writes replicate %.0f bytes/s", c.written, rate)
		}
	}
	// Chunks that come long after the last flush wait flushInterval only.
	p.notBefore = now.Add(time.Second)
	if d := p.flushDelay(now.Add(5 * time.Second)); d != flushInterval {
		t.Fatalf("late chunks wait %s, want %s", d, flushInterval)
	}
}

// A prompt that reaches agentctl while the replicated state says
// WAITING_FOR_INPUT (a previous leader's prompt still in flight when this
// leader took the session over, or one whose answer timed out after
// agentctl accepted it) starts a turn the session must show: RUNNING until
// the turn's end is recorded, so a client that waits for
// WAITING_FOR_INPUT and then reads the transcript finds the whole reply.
// The prompt storm's bench read 139 of 200 transcripts mid-stream this way
// after its leader changed 5 times.
func TestAPromptTheStateMissedStillRunsTheSession(t *testing.T) {
	w := newWorld(t, "n1", "n2")
	s := w.seedLive(liveOpts{id: "s1", node: "n1"})
	m := w.leader("n2")
	if out, err := m.Recover(recoverCtx(t), s.id, true); err != nil || out != OutcomeContinued {
		t.Fatalf("Recover = %s, %v; want continued", out, err)
	}
	if got := w.session(s.id).State; got != state.SessionWaitingForInput {
		t.Fatalf("session %s, want WAITING_FOR_INPUT", got)
	}
	const n = 2000 // ≥ 2 s at the test agent's 1 ms chunk delay
	prompt := fmt.Sprintf("stream %d", n)
	if _, err := s.client.Prompt(recoverCtx(t), prompt); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the prompt in the transcript", func() bool {
		for _, msg := range w.r.store.Messages(s.id) {
			if msg.Role == state.RoleUser && msg.Text == prompt {
				return true
			}
		}
		return false
	})
	waitFor(t, 60*time.Second, "the session to wait for input", func() bool {
		return w.session(s.id).State == state.SessionWaitingForInput
	})
	want := strings.Join(demoagent.StreamChunks(n), "")
	msgs := w.r.store.Messages(s.id)
	last := msgs[len(msgs)-1]
	if last.Role != state.RoleAgent || !last.Complete || last.Text != want {
		for _, msg := range msgs {
			t.Logf("%s %s complete=%v %q…", msg.ID, msg.Role, msg.Complete, msg.Text[:min(len(msg.Text), 40)])
		}
		t.Fatalf("WAITING_FOR_INPUT with the reply not recorded: last message %s (complete %v) has %d of %d bytes",
			last.Role, last.Complete, len(last.Text), len(want))
	}
	if got := w.session(s.id).LastTurnOutcome; got != state.TurnCompleted {
		t.Errorf("last turn outcome %q, want %q", got, state.TurnCompleted)
	}
}

// answerDropper stands in front of an agentctl and, while drop is set,
// passes prompts on but closes the connection instead of answering: the
// prompt is delivered, its answer lost.
type answerDropper struct {
	proxy *httputil.ReverseProxy
	drop  atomic.Bool
}

func (d *answerDropper) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/agent/prompt" || !d.drop.Load() {
		d.proxy.ServeHTTP(w, r)
		return
	}
	d.proxy.ServeHTTP(httptest.NewRecorder(), r)
	if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
		_ = conn.Close()
	}
}

// A prompt agentctl took whose answer was lost (a timeout, a reset
// connection) is not undone while its turn runs: the session stays RUNNING
// until the turn's end is recorded, and the prompt counts as delivered.
func TestAPromptWhoseAnswerWasLostKeepsItsTurn(t *testing.T) {
	w := newWorld(t, "n1", "n2")
	s := w.seedLive(liveOpts{id: "s1", node: "n1"})
	target, err := url.Parse(s.executor.AgentctlURL)
	if err != nil {
		t.Fatal(err)
	}
	dropper := &answerDropper{proxy: httputil.NewSingleHostReverseProxy(target)}
	front := httptest.NewServer(dropper)
	t.Cleanup(front.Close)
	w.rts["n1"].onRecover = func(h fakeHandle) (runtime.LaunchResponse, error) {
		resp := w.rts["n1"].proc(h.ID).response(h)
		resp.AgentctlURL = front.URL
		return resp, nil
	}
	m := w.leader("n2")
	if out, err := m.Recover(recoverCtx(t), s.id, true); err != nil || out != OutcomeContinued {
		t.Fatalf("Recover = %s, %v; want continued", out, err)
	}
	dropper.drop.Store(true)
	const n = 2000
	if err := m.Prompt(recoverCtx(t), s.id, fmt.Sprintf("stream %d", n)); err != nil {
		t.Fatalf("a prompt agentctl took failed: %v", err)
	}
	waitFor(t, 60*time.Second, "the session to wait for input", func() bool {
		return w.session(s.id).State == state.SessionWaitingForInput
	})
	want := strings.Join(demoagent.StreamChunks(n), "")
	msgs := w.r.store.Messages(s.id)
	if last := msgs[len(msgs)-1]; last.Role != state.RoleAgent || !last.Complete || last.Text != want {
		t.Fatalf("WAITING_FOR_INPUT with the reply not recorded: last message %s (complete %v) has %d of %d bytes",
			last.Role, last.Complete, len(last.Text), len(want))
	}
}

// A prompt agentctl refuses because a turn the state had missed runs (the
// session recorded WAITING_FOR_INPUT meanwhile) is a conflict, and leaves
// the session RUNNING until that turn's end is recorded.
func TestAPromptRefusedForARunningTurnLeavesItRunning(t *testing.T) {
	w := newWorld(t, "n1", "n2")
	s := w.seedLive(liveOpts{id: "s1", node: "n1"})
	m := w.leader("n2")
	if out, err := m.Recover(recoverCtx(t), s.id, true); err != nil || out != OutcomeContinued {
		t.Fatalf("Recover = %s, %v; want continued", out, err)
	}
	const n = 3000 // ≥ 3 s at the test agent's 1 ms chunk delay
	if _, err := s.client.Prompt(recoverCtx(t), fmt.Sprintf("stream %d", n)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the session to run the turn", func() bool {
		return w.session(s.id).State == state.SessionRunning
	})
	// The state misses the turn (as a recovery that asked the agent just
	// before the prompt reached it did before the pump settled it).
	w.r.must(t, state.CmdSetSessionState, &state.SetSessionStateBody{SessionID: s.id, State: state.SessionWaitingForInput})
	err := m.Prompt(recoverCtx(t), s.id, "hello")
	if !errors.Is(err, state.ErrConflict) {
		t.Fatalf("prompt during a running turn: %v, want a conflict", err)
	}
	if a, aerr := s.client.AgentState(recoverCtx(t)); aerr != nil || !a.TurnRunning {
		t.Skipf("the turn ended before the check (%v, %+v)", aerr, a)
	}
	if got := w.session(s.id).State; got != state.SessionRunning {
		t.Fatalf("session %s after the refused prompt while a turn runs, want RUNNING", got)
	}
	waitFor(t, 60*time.Second, "the session to wait for input", func() bool {
		return w.session(s.id).State == state.SessionWaitingForInput
	})
	want := strings.Join(demoagent.StreamChunks(n), "")
	msgs := w.r.store.Messages(s.id)
	if last := msgs[len(msgs)-1]; last.Role != state.RoleAgent || !last.Complete || last.Text != want {
		t.Fatalf("WAITING_FOR_INPUT with the reply not recorded: last message %s (complete %v) has %d of %d bytes",
			last.Role, last.Complete, len(last.Text), len(want))
	}
}
