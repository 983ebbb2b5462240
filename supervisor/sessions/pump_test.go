package sessions

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/shared/testkit"
	"github.com/paddockhq/paddock/supervisor/state"
)

// A session's timed flushes replicate at most maxFlushBytesPerSecond of
// message text: small messages flush every flushInterval, a large one
// holds the next flush back in proportion to its size. Chunks after a
// quiet spell are written at the next tick of the flushes' grid.
func TestFlushDelayBoundsReplicatedBytes(t *testing.T) {
	tick := time.Now().Truncate(flushInterval) // a tick of the flushes' grid
	p := &pumper{}
	if d := p.flushDelay(tick.Add(7 * time.Millisecond)); d != flushGrid-7*time.Millisecond {
		t.Fatalf("first flush after %s, want %s (the next tick)", d, flushGrid-7*time.Millisecond)
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
		// A flush that ran 2 ms after its tick.
		flushed := tick.Add(2 * time.Millisecond)
		p.lastFlush, p.notBefore = flushed, flushed.Add(flushCost(c.written))
		if d := p.flushDelay(flushed); d != c.want-2*time.Millisecond {
			t.Errorf("after a flush of %d bytes: next in %s, want %s", c.written, d, c.want-2*time.Millisecond)
		}
		// Chunks that come 30 ms after it wait for the rest.
		if d := p.flushDelay(flushed.Add(30 * time.Millisecond)); d != c.want-32*time.Millisecond {
			t.Errorf("after a flush of %d bytes: chunks 30 ms later wait %s, want %s", c.written, d, c.want-32*time.Millisecond)
		}
		// A message that grows at the bound's rate is written every
		// flushCost: bytes per second stay under the bound.
		if rate := float64(c.written) / max(flushCost(c.written), flushInterval).Seconds(); rate > maxFlushBytesPerSecond+1 {
			t.Errorf("%d-byte writes replicate %.0f bytes/s", c.written, rate)
		}
	}
	// Chunks that come long after the last flush are written at the next
	// tick.
	p.lastFlush, p.notBefore = tick, tick.Add(time.Second)
	if d := p.flushDelay(tick.Add(5*time.Second + 3*time.Millisecond)); d != flushGrid-3*time.Millisecond {
		t.Fatalf("late chunks wait %s, want %s", d, flushGrid-3*time.Millisecond)
	}
}

// Flushes fall on one wall-clock grid, whatever each session's phase: the
// leader's streaming sessions propose their writes together and raft
// commits them in a few batches. A session still writes about once per
// flushInterval.
func TestFlushesOfAllSessionsFallOnTheSameTicks(t *testing.T) {
	tick := time.Now().Truncate(flushInterval)
	ms := time.Millisecond
	for _, c := range []struct {
		name             string
		lastFlush, chunk time.Duration // after tick; lastFlush < 0: none
		want             time.Duration // the flush, after tick
	}{
		{"the first chunks", -1, 3 * ms, flushGrid},
		{"the first chunks, just after a tick", -1, flushGrid + 1*ms, 2 * flushGrid},
		{"a flush's next", 1 * ms, 40 * ms, flushInterval},
		{"a late flush's next", 9 * ms, 95 * ms, flushInterval},
		{"chunks a while after a flush", 1 * ms, 140 * ms, 150 * ms},
		{"after a flush between ticks", 40 * ms, 60 * ms, 150 * ms},
	} {
		p := &pumper{}
		if c.lastFlush >= 0 {
			p.lastFlush = tick.Add(c.lastFlush)
		}
		at := tick.Add(c.chunk)
		flushed := at.Add(p.flushDelay(at))
		if got := flushed.Sub(tick); got != c.want {
			t.Errorf("%s: flush at tick+%s, want tick+%s", c.name, got, c.want)
		}
		if gap := flushed.Sub(p.lastFlush); c.lastFlush >= 0 && gap < flushInterval-flushGrid/2 {
			t.Errorf("%s: writes %s apart, want at least %s", c.name, gap, flushInterval-flushGrid/2)
		}
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
	continueSession(t, m, s.id)
	if got := w.session(s.id).State; got != api.SessionWaitingForInput {
		t.Fatalf("session %s, want WAITING_FOR_INPUT", got)
	}
	const n = 2000 // ≥ 2 s at the test agent's 1 ms chunk delay
	prompt := fmt.Sprintf("stream %d", n)
	if _, err := s.client.Prompt(recoverCtx(t), prompt); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 20*time.Second, "the prompt in the transcript", testkit.Cond(func() bool {
		for _, msg := range w.r.store.Messages(s.id) {
			if msg.Role == api.RoleUser && msg.Text == prompt {
				return true
			}
		}
		return false
	}))
	w.streamedWhole(t, s.id, n)
	if got := w.session(s.id).LastTurnOutcome; got != api.TurnCompleted {
		t.Errorf("last turn outcome %q, want %q", got, api.TurnCompleted)
	}
}

// answerDropper stands in front of an agentctl and, while drop is set,
// passes prompts on but closes the connection instead of answering: the
// prompt is delivered, its answer lost.
type answerDropper struct {
	proxy   *httputil.ReverseProxy
	drop    atomic.Bool
	dropped atomic.Int64 // answers lost so far
}

func (d *answerDropper) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/agent/prompt" || !d.drop.Load() {
		d.proxy.ServeHTTP(w, r)
		return
	}
	d.proxy.ServeHTTP(httptest.NewRecorder(), r)
	d.dropped.Add(1)
	if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
		_ = conn.Close()
	}
}

// agentctlBehind records s's agentctl at url (a proxy in front of it), so
// that a new leader's recovery, which continues the agentctl answering at
// its recorded address, talks to it through the proxy.
func (w *world) agentctlBehind(s live, url string) {
	w.t.Helper()
	ex := s.executor
	ex.AgentctlURL = url
	w.r.must(w.t, state.CmdPutExecutor, state.NewPutExecutor(ex))
}

// proxyAgentctl puts a front, built around a reverse proxy to s's
// agentctl, between the leader and that agentctl (as its recorded address).
func (w *world) proxyAgentctl(s live, front func(*httputil.ReverseProxy) http.Handler) {
	w.t.Helper()
	target, err := url.Parse(s.executor.AgentctlURL)
	if err != nil {
		w.t.Fatal(err)
	}
	srv := httptest.NewServer(front(httputil.NewSingleHostReverseProxy(target)))
	w.t.Cleanup(srv.Close)
	w.agentctlBehind(s, srv.URL)
}

// A prompt agentctl took whose answer was lost (a timeout, a reset
// connection) is not undone while its turn runs: the session stays RUNNING
// until the turn's end is recorded, and the prompt counts as delivered.
func TestAPromptWhoseAnswerWasLostKeepsItsTurn(t *testing.T) {
	w := newWorld(t, "n1", "n2")
	s := w.seedLive(liveOpts{id: "s1", node: "n1"})
	dropper := &answerDropper{}
	w.proxyAgentctl(s, func(p *httputil.ReverseProxy) http.Handler { dropper.proxy = p; return dropper })
	m := w.leader("n2")
	continueSession(t, m, s.id)
	dropper.drop.Store(true)
	const n = 2000
	if err := m.Prompt(recoverCtx(t), s.id, fmt.Sprintf("stream %d", n)); err != nil {
		t.Fatalf("a prompt agentctl took failed: %v", err)
	}
	if dropper.dropped.Load() == 0 {
		t.Fatal("the prompt's answer was not dropped: the prompt did not go through the proxy")
	}
	w.streamedWhole(t, s.id, n)
}

// A prompt agentctl refuses because a turn the state had missed runs (the
// session recorded WAITING_FOR_INPUT meanwhile) is a conflict, and leaves
// the session RUNNING until that turn's end is recorded.
func TestAPromptRefusedForARunningTurnLeavesItRunning(t *testing.T) {
	w := newWorld(t, "n1", "n2")
	s := w.seedLive(liveOpts{id: "s1", node: "n1"})
	m := w.leader("n2")
	continueSession(t, m, s.id)
	const n = 3000 // ≥ 3 s at the test agent's 1 ms chunk delay
	if _, err := s.client.Prompt(recoverCtx(t), fmt.Sprintf("stream %d", n)); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 20*time.Second, "the session to run the turn", testkit.Cond(func() bool {
		return w.session(s.id).State == api.SessionRunning
	}))
	// The state misses the turn (as a recovery that asked the agent just
	// before the prompt reached it did before the pump settled it).
	w.r.must(t, state.CmdSetSessionState, &state.SetSessionStateBody{SessionID: s.id, State: api.SessionWaitingForInput})
	err := m.Prompt(recoverCtx(t), s.id, "hello")
	if !errors.Is(err, state.ErrConflict) {
		t.Fatalf("prompt during a running turn: %v, want a conflict", err)
	}
	if a, aerr := s.client.AgentState(recoverCtx(t)); aerr != nil || !a.TurnRunning {
		t.Skipf("the turn ended before the check (%v, %+v)", aerr, a)
	}
	if got := w.session(s.id).State; got != api.SessionRunning {
		t.Fatalf("session %s after the refused prompt while a turn runs, want RUNNING", got)
	}
	w.streamedWhole(t, s.id, n)
}

// refuseStream answers a request for agentctl's event stream as an
// agentctl older than the stream does (404), and reports whether it was
// one.
func refuseStream(w http.ResponseWriter, r *http.Request) bool {
	if r.URL.Path != "/v1/events/stream" {
		return false
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusNotFound)
	_, _ = io.WriteString(w, `{"error":{"code":"not_found","message":"no route for GET /v1/events/stream"}}`)
	return true
}

// eventsCounter stands in front of an agentctl and counts the requests for
// its events (event streams opened, or polls) and the bytes they answered.
// With polled it refuses the stream (refuseStream), so the pump polls; with
// noGather it also drops the polls' gather parameter, so the agentctl
// answers as one that predates it (at once, and without "gather").
type eventsCounter struct {
	proxy    *httputil.ReverseProxy
	polled   bool
	noGather bool
	requests atomic.Int64
	bytes    atomic.Int64
	frames   atomic.Int64 // lines the stream answered
}

func (c *eventsCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if c.polled && refuseStream(w, r) {
		return
	}
	if r.URL.Path == "/v1/events/stream" {
		c.requests.Add(1)
		c.proxy.ServeHTTP(&countingWriter{ResponseWriter: w, n: &c.bytes, lines: &c.frames}, r)
		return
	}
	if r.URL.Path != "/v1/events" {
		c.proxy.ServeHTTP(w, r)
		return
	}
	c.requests.Add(1)
	if c.noGather {
		q := r.URL.Query()
		q.Del("gather")
		r.URL.RawQuery = q.Encode()
	}
	c.proxy.ServeHTTP(&countingWriter{ResponseWriter: w, n: &c.bytes}, r)
}

type countingWriter struct {
	http.ResponseWriter
	n     *atomic.Int64
	lines *atomic.Int64 // nil: not counted
}

func (w *countingWriter) Write(b []byte) (int, error) {
	w.n.Add(int64(len(b)))
	if w.lines != nil {
		w.lines.Add(int64(bytes.Count(b, []byte{'\n'})))
	}
	return w.ResponseWriter.Write(b)
}

// Flush passes a streamed answer's flushes on (the proxy flushes each
// frame of the event stream).
func (w *countingWriter) Flush() { http.NewResponseController(w.ResponseWriter).Flush() }

// A streamed reply reaches the pump through agentctl's event stream in a
// few frames per flush interval, and its text crosses the stream once (each
// frame carries what the reply added): not a frame per chunk, and not the
// whole text so far per frame (bytes quadratic in the reply's length). An
// agentctl older than the stream is polled: a few polls per flush
// interval, each carrying the reply's latest text once, whether the
// agentctl gathers the chunks or not (the pump spaces its polls then). The
// transcript gets every chunk, in order, either way.
func TestAStreamedReplyCostsAFewFramesPerFlush(t *testing.T) {
	for _, c := range []struct {
		name    string
		counter *eventsCounter
	}{
		{"agentctl with the event stream", &eventsCounter{}},
		{"gathering agentctl, polled", &eventsCounter{polled: true}},
		{"agentctl without gather, polled", &eventsCounter{polled: true, noGather: true}},
	} {
		t.Run(c.name, func(t *testing.T) { streamedReplyCost(t, c.counter) })
	}
}

func streamedReplyCost(t *testing.T, counter *eventsCounter) {
	w := newWorld(t, "n1", "n2")
	s := w.seedLive(liveOpts{id: "s1", node: "n1"})
	w.proxyAgentctl(s, func(p *httputil.ReverseProxy) http.Handler { counter.proxy = p; return counter })
	m := w.leader("n2")
	continueSession(t, m, s.id)
	const n = 2000 // ≥ 2 s at the test agent's 1 ms chunk delay
	requests0, frames0, bytes0 := counter.requests.Load(), counter.frames.Load(), counter.bytes.Load()
	started := time.Now()
	if err := m.Prompt(recoverCtx(t), s.id, fmt.Sprintf("stream %d", n)); err != nil {
		t.Fatal(err)
	}
	want := w.streamedWhole(t, s.id, n)
	took := time.Since(started)
	requests, frames, bytes := counter.requests.Load()-requests0, counter.frames.Load()-frames0, counter.bytes.Load()-bytes0
	if counter.requests.Load() == 0 {
		t.Fatal("no events request went through the counting proxy: the pump did not read this agentctl through it")
	}
	answers := frames
	if counter.polled {
		answers = requests
	}
	t.Logf("%d chunks in %s: %d events requests, %d frames, %d bytes answered (the reply is %d bytes)", n, took.Round(time.Millisecond), requests, frames, bytes, len(want))
	// agentctl answers after each read of the agent's output: one per
	// flush interval once its read pace has grown to that, ~10 more while
	// it grows over the reply's first 0.4 s, and a few for the turn.
	if limit := int64(took/flushInterval) + 20; answers > limit {
		t.Errorf("%d answers (polls or frames) in %s, want at most %d (one per %s, and the reads of the first 0.4 s)", answers, took.Round(time.Millisecond), limit, flushInterval)
	}
	if !counter.polled {
		// The pump may open its stream just after the session continued.
		if requests > 1 {
			t.Errorf("%d event streams opened during the turn, want at most one (one carries the whole turn)", requests)
		}
		// Each frame's envelope and its delta's fields are ~300 bytes.
		if limit := int64(len(want)) + 400*frames; bytes > limit {
			t.Errorf("the stream carried %d bytes, want at most %d (the reply once, and each frame's envelope)", bytes, limit)
		}
		return
	}
	if limit := 2 * (int64(took/flushInterval) + 10) * int64(len(want)); bytes > limit {
		t.Errorf("the polls answered %d bytes, want at most %d (the reply's latest text once per poll)", bytes, limit)
	}
}

// A session recorded WAITING_FOR_INPUT while its reply still streams (a
// prompt undone after agentctl's answer and the check of its turn both
// failed on a starved machine, though agentctl had taken it) runs again at
// the pump's next flush: a reader waiting for input would otherwise take
// the partial reply for the whole. The make bench prompt storm read 140 of
// 200 transcripts mid-stream this way.
func TestASessionRecordedWaitingMidReplyRunsAgain(t *testing.T) {
	w := newWorld(t, "n1", "n2")
	s := w.seedLive(liveOpts{id: "s1", node: "n1"})
	m := w.leader("n2")
	continueSession(t, m, s.id)
	const n = 5000 // ≥ 5 s at the test agent's 1 ms chunk delay
	if err := m.Prompt(recoverCtx(t), s.id, fmt.Sprintf("stream %d", n)); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 20*time.Second, "the reply to stream", testkit.Cond(func() bool {
		msgs := w.r.store.Messages(s.id)
		return len(msgs) > 0 && msgs[len(msgs)-1].Role == api.RoleAgent
	}))
	w.r.must(t, state.CmdSetSessionState, &state.SetSessionStateBody{SessionID: s.id, State: api.SessionWaitingForInput, From: []api.SessionState{api.SessionRunning}})
	testkit.WaitFor(t, 3*time.Second, "the session to run again", testkit.Cond(func() bool {
		return w.session(s.id).State == api.SessionRunning
	}))
	if a, err := s.client.AgentState(recoverCtx(t)); err != nil || !a.TurnRunning {
		t.Skipf("the turn ended before the check (%v, %+v)", err, a)
	}
	w.streamedWhole(t, s.id, n)
	if got := w.session(s.id).LastTurnOutcome; got != api.TurnCompleted {
		t.Errorf("last turn outcome %q, want %q", got, api.TurnCompleted)
	}
}

// A turn's end is proposed with its reply's last write, after it: the two
// wait for about one commit instead of one each, and the log holds the
// whole reply before the session waits for input again.
func TestATurnsEndIsProposedWithItsReply(t *testing.T) {
	w := newWorld(t, "n1")
	s := w.seedLive(liveOpts{id: "s1", node: "n1"})
	m := w.leader("n1")
	continueSession(t, m, s.id)
	if err := m.move(recoverCtx(t), s.id, api.SessionRunning, api.SessionWaitingForInput); err != nil {
		t.Fatal(err)
	}
	if _, err := s.client.Prompt(recoverCtx(t), "hello"); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 20*time.Second, "the session to wait for input", testkit.Cond(func() bool {
		return w.session(s.id).State == api.SessionWaitingForInput
	}))
	var ends [][]state.Proposal
	for _, batch := range w.r.proposedTogether() {
		for _, p := range batch {
			if b, ok := p.Body.(*state.SetSessionStateBody); ok && b.State == api.SessionWaitingForInput {
				ends = append(ends, batch)
			}
		}
	}
	if len(ends) != 1 {
		t.Fatalf("the turn's end was proposed in %d LeaderApplyAll calls, want 1: %v", len(ends), ends)
	}
	end := ends[0]
	last := end[len(end)-1]
	if b, ok := last.Body.(*state.SetSessionStateBody); !ok || b.State != api.SessionWaitingForInput {
		t.Fatalf("the turn's end is not the last command of its call: %v", end)
	}
	// The reply's last write is whole (the reply came in one read) or
	// what it added since a write of its first chunks (read at once after
	// the quiet spell, and flushed before the rest came).
	agentReply := false
	for _, p := range end[:len(end)-1] {
		switch b := p.Body.(type) {
		case *state.PutMessageBody:
			agentReply = agentReply || (b.Message.Role == api.RoleAgent && b.Message.Complete)
		case *state.AppendMessageBody:
			agentReply = agentReply || b.Complete
		}
	}
	if !agentReply {
		t.Fatalf("the turn's end was proposed without the reply's last write: %v", end)
	}
	msgs := w.r.store.Messages(s.id)
	if got := msgs[len(msgs)-1]; got.Role != api.RoleAgent || !got.Complete {
		t.Fatalf("last message %+v, want the complete reply", got)
	}
}

// A streamed reply's writes carry what it added since the last one, not
// its whole text so far: the message text the pump proposes for a reply
// written ~20 times is about the reply's length, not ten times it.
func TestAStreamedReplyIsReplicatedOnce(t *testing.T) {
	w := newWorld(t, "n1", "n2")
	s := w.seedLive(liveOpts{id: "s1", node: "n1"})
	m := w.leader("n2")
	continueSession(t, m, s.id)
	before := len(w.r.proposedTogether())
	const n = 2000 // ≥ 2 s at the test agent's 1 ms chunk delay: ~20 timed flushes
	if err := m.Prompt(recoverCtx(t), s.id, fmt.Sprintf("stream %d", n)); err != nil {
		t.Fatal(err)
	}
	want := w.streamedWhole(t, s.id, n)
	writes, appends, text := 0, 0, 0
	for _, batch := range w.r.proposedTogether()[before:] {
		for _, p := range batch {
			switch b := p.Body.(type) {
			case *state.PutMessageBody:
				if b.Message.Role == api.RoleAgent {
					writes, text = writes+1, text+len(b.Message.Text)
				}
			case *state.AppendMessageBody:
				writes, appends, text = writes+1, appends+1, text+len(b.Text)
			}
		}
	}
	t.Logf("%d writes of the reply (%d additions), %d bytes of text for a %d-byte reply", writes, appends, text, len(want))
	if writes < 5 || appends < writes-2 {
		t.Fatalf("%d writes of the reply, %d of them additions; want several, all but the first additions", writes, appends)
	}
	if text > len(want)+len(want)/4 {
		t.Errorf("the writes carried %d bytes of text for a %d-byte reply, want about the reply's length", text, len(want))
	}
}

// An addition the state cannot take (its message holds less text than the
// addition follows: here another write cut it short mid-stream) is written
// again as the whole message, and the reply ends up whole.
func TestAnAdditionTheStateCannotTakeIsWrittenWhole(t *testing.T) {
	w := newWorld(t, "n1", "n2")
	s := w.seedLive(liveOpts{id: "s1", node: "n1"})
	m := w.leader("n2")
	continueSession(t, m, s.id)
	before := len(w.r.proposedTogether())
	const n = 3000 // ≥ 3 s at the test agent's 1 ms chunk delay
	if err := m.Prompt(recoverCtx(t), s.id, fmt.Sprintf("stream %d", n)); err != nil {
		t.Fatal(err)
	}
	var mid string
	testkit.WaitFor(t, 30*time.Second, "a first addition to the reply", testkit.Cond(func() bool {
		for _, batch := range w.r.proposedTogether()[before:] {
			for _, p := range batch {
				if b, ok := p.Body.(*state.AppendMessageBody); ok {
					mid = b.MessageID
					return true
				}
			}
		}
		return false
	}))
	cut := len(w.r.proposedTogether())
	w.r.must(t, state.CmdPutMessage, &state.PutMessageBody{SessionID: s.id, Source: s.nonce, Message: api.Message{ID: mid, Role: api.RoleAgent, Text: "x"}})
	w.streamedWhole(t, s.id, n)
	rewritten := false
	for _, batch := range w.r.proposedTogether()[cut:] {
		for _, p := range batch {
			if b, ok := p.Body.(*state.PutMessageBody); ok && b.Message.ID == mid {
				rewritten = true
			}
		}
	}
	if !rewritten {
		t.Fatal("the reply was never written whole again after its text was cut")
	}
}
