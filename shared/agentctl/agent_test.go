package agentctl_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/shared/agentctl"
	"github.com/paddockhq/paddock/shared/demoagent"
)

// runConversation drives launch → prompts → streamed updates → cancel → kill
// agentctl → restart → resume → recall → stop, for one profile.
func runConversation(t *testing.T, profile agentctl.Profile) {
	ws := t.TempDir()
	p := startServe(t, ws)
	c := p.c
	c.SetFencingToken(1)
	w := newWatcher(c)

	st, err := c.StartAgent(ctx(t), profile, "")
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	if st.Status != agentctl.StatusWaitingForInput || st.ResumeToken == "" || !agentctl.ValidToken(st.ResumeToken) || !st.SupportsSessionResume {
		t.Fatalf("state after start: %+v", st)
	}
	w.waitEvent(t, agentctl.EventAgentStarted, nil, 10*time.Second)

	if _, err := c.Prompt(ctx(t), "remember apple banana"); err != nil {
		t.Fatalf("prompt: %v", err)
	}
	w.waitEvent(t, agentctl.EventMessageUpdated, nil, 10*time.Second) // streamed chunks
	fin := turnOutcome(t, w.waitEvent(t, agentctl.EventTurnFinished, nil, 10*time.Second))
	if fin.Outcome != agentctl.OutcomeEndTurn || fin.Turn != 1 {
		t.Fatalf("turn finished: %+v", fin)
	}
	if m := lastAgentMessage(t, c); m.Text != "ok, remembering apple banana" || !m.Complete {
		t.Fatalf("agent message: %+v", m)
	}
	updates := 0
	for _, ev := range w.all(t) {
		if ev.Type == agentctl.EventMessageUpdated {
			updates++
		}
	}
	if updates < 2 {
		t.Fatalf("want several message_updated events (streamed chunks), got %d", updates)
	}

	// A long turn, cancelled; a prompt during it is refused.
	if _, err := c.Prompt(ctx(t), "sleep 30"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Prompt(ctx(t), "hello"); err == nil || apiErr(t, err).Status != 409 {
		t.Fatalf("prompt during a turn: want 409, got %v", err)
	}
	if s, _ := c.AgentState(ctx(t)); s.Status != agentctl.StatusRunning {
		t.Fatalf("state during turn: %+v", s)
	}
	// The health answer carries the agent's state: one round trip tells a
	// recovering supervisor who answers and that a turn runs.
	if h, err := c.Health(ctx(t)); err != nil || h.Agent == nil || h.Agent.Status != agentctl.StatusRunning || !h.Agent.TurnRunning || h.Agent.Turn != 2 || h.Agent.ResumeToken != st.ResumeToken {
		t.Fatalf("health during a turn: %+v (agent %+v), %v", h, h.Agent, err)
	}
	if err := c.Cancel(ctx(t)); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	fin = turnOutcome(t, w.waitEvent(t, agentctl.EventTurnFinished, nil, 10*time.Second))
	if fin.Outcome != agentctl.OutcomeCancelled {
		t.Fatalf("cancelled turn: %+v", fin)
	}
	token := st.ResumeToken
	oldNonce := p.info.Nonce

	// Kill agentctl; a new one on the same workspace resumes from the token.
	p.kill()
	p2 := startServe(t, ws)
	c2 := p2.c
	c2.SetFencingToken(1)
	if p2.info.Nonce == oldNonce {
		t.Fatal("restarted agentctl kept its nonce")
	}
	w2 := newWatcher(c2)
	st2, err := c2.StartAgent(ctx(t), profile, token)
	if err != nil {
		t.Fatalf("resume: %v", err)
	}
	if st2.ResumeToken != token {
		t.Fatalf("resumed with token %q, want %q", st2.ResumeToken, token)
	}
	// An ACP agent reports its model on session/new and session/load.
	wantModel := ""
	if profile.Protocol == "acp" {
		wantModel = "demo-1"
	}
	if st.Model != wantModel || st2.Model != wantModel {
		t.Fatalf("models %q (new) and %q (resumed), want %q", st.Model, st2.Model, wantModel)
	}
	if _, err := c2.Prompt(ctx(t), "recall"); err != nil {
		t.Fatal(err)
	}
	w2.waitEvent(t, agentctl.EventTurnFinished, nil, 10*time.Second)
	if m := lastAgentMessage(t, c2); m.Text != "you asked me to remember: apple, banana" {
		t.Fatalf("after resume: %+v", m)
	}
	if _, err := c2.Prompt(ctx(t), "hi"); err != nil {
		t.Fatal(err)
	}
	w2.waitEvent(t, agentctl.EventTurnFinished, nil, 10*time.Second)
	if m := lastAgentMessage(t, c2); m.Text != "turn 4: hi" {
		t.Fatalf("turn counter across resume: %+v", m)
	}

	if _, err := c2.StopAgent(ctx(t)); err != nil {
		t.Fatalf("stop: %v", err)
	}
	w2.waitEvent(t, agentctl.EventAgentStopped, nil, 10*time.Second)
	s, _ := c2.AgentState(ctx(t))
	if s.Status != agentctl.StatusExited || s.ExitCode == nil {
		t.Fatalf("state after stop: %+v", s)
	}
	healthy(t, c2)
}

func TestACPConversationSurvivesAgentctlRestart(t *testing.T) { runConversation(t, acpProfile) }

func TestPTYConversationSurvivesAgentctlRestart(t *testing.T) { runConversation(t, ptyProfile) }

// TestProbeAsksTheACPAgent probes the real demo agent with and without
// --no-resume. The answer is what the agent advertises in initialize
// (loadSession), agentctl remembers it for GET /v1/capabilities, and it is
// true to what the agent then does with its resume token.
func TestProbeAsksTheACPAgent(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want bool
	}{
		{"resumable", nil, true},
		{"--no-resume", []string{"--no-resume"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := startServe(t, t.TempDir())
			c := p.c
			c.SetFencingToken(1)
			prof := agentctl.Profile{Protocol: "acp", Command: append([]string{"paddock-demo-agent"}, tc.args...), Permission: "deny"}

			if caps, err := c.Capabilities(ctx(t)); err != nil || caps.SupportsSessionResume != nil {
				t.Fatalf("capabilities before any probe: %+v %v (want supports_session_resume unknown)", caps, err)
			}
			caps, err := c.Probe(ctx(t), prof)
			if err != nil {
				t.Fatal(err)
			}
			if caps.SupportsSessionResume == nil || *caps.SupportsSessionResume != tc.want || !caps.SupportsWorkspaceOnly {
				t.Fatalf("probe: %+v, want supports_session_resume=%v", caps, tc.want)
			}
			if caps, _ := c.Capabilities(ctx(t)); caps.SupportsSessionResume == nil || *caps.SupportsSessionResume != tc.want {
				t.Fatalf("capabilities after the probe: %+v, want supports_session_resume=%v", caps, tc.want)
			}

			// What the agent does agrees with the probe.
			w := newWatcher(c)
			st, err := c.StartAgent(ctx(t), prof, "")
			if err != nil || st.SupportsSessionResume != tc.want {
				t.Fatalf("start: %+v %v, want supports_session_resume=%v", st, err, tc.want)
			}
			if _, err := c.Prompt(ctx(t), "remember kiwi"); err != nil {
				t.Fatal(err)
			}
			w.waitEvent(t, agentctl.EventTurnFinished, nil, 10*time.Second)
			if _, err := c.StopAgent(ctx(t)); err != nil {
				t.Fatal(err)
			}
			_, err = c.StartAgent(ctx(t), prof, st.ResumeToken)
			if !tc.want {
				if ae := apiErr(t, err); ae.Status != 409 || !contains(ae.Message, "does not support session resume") {
					t.Fatalf("resume of an agent probed not resumable: %+v", ae)
				}
				return
			}
			if err != nil {
				t.Fatalf("resume of an agent probed resumable: %v", err)
			}
			if _, err := c.Prompt(ctx(t), "recall"); err != nil {
				t.Fatal(err)
			}
			w.waitEvent(t, agentctl.EventTurnFinished, nil, 10*time.Second)
			if m := lastAgentMessage(t, c); m.Text != "you asked me to remember: kiwi" {
				t.Fatalf("after resume: %+v", m)
			}
		})
	}
}

// TestProbeOfAProgramThatIsNotAnACPAgent: the probe runs the program, so a
// missing command is refused as a bad profile and a program that does not
// answer initialize is an error, never a guessed capability.
func TestProbeOfAProgramThatIsNotAnACPAgent(t *testing.T) {
	p := startServe(t, t.TempDir())
	p.c.SetFencingToken(1)
	_, err := p.c.Probe(ctx(t), agentctl.Profile{Protocol: "acp", Command: []string{"paddock-no-such-agent"}})
	if ae := apiErr(t, err); ae.Status != 422 || !contains(ae.Message, "not found") {
		t.Fatalf("probe of a missing command: %+v", ae)
	}
	// The demo agent in --tty mode prints a terminal UI, not JSON-RPC.
	caps, err := p.c.Probe(ctx(t), agentctl.Profile{Protocol: "acp", Command: []string{"paddock-demo-agent", "--tty"}})
	if err == nil {
		t.Fatalf("probe of a pty program as ACP answered %+v", caps)
	}
	if caps, _ := p.c.Capabilities(ctx(t)); caps.SupportsSessionResume != nil {
		t.Fatalf("a failed probe recorded a capability: %+v", caps)
	}
}

// TestProbePTYReportsTheProfileDeclaration: a pty agent has no handshake to
// ask, so the probe reports the profile's declaration (supports_session_resume
// with resume_args), whatever the command; the same command is resumable or
// not by declaration alone. TestPTYConversationSurvivesAgentctlRestart shows
// the declared profile really resumes; here an undeclared one is refused.
func TestProbePTYReportsTheProfileDeclaration(t *testing.T) {
	p := startServe(t, t.TempDir())
	p.c.SetFencingToken(1)
	cmd := []string{"paddock-demo-agent", "--tty"}
	resumeArgs := []string{"--resume", "{{resume_token}}"}
	cases := []struct {
		name    string
		profile agentctl.Profile
		want    bool
	}{
		{"declared with resume_args", ptyProfile, true},
		{"declared without resume_args", agentctl.Profile{Protocol: "pty", Command: cmd, SupportsSessionResume: true}, false},
		{"resume_args undeclared", agentctl.Profile{Protocol: "pty", Command: cmd, ResumeArgs: resumeArgs}, false},
		{"nothing declared", agentctl.Profile{Protocol: "pty", Command: cmd}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			caps, err := p.c.Probe(ctx(t), tc.profile)
			if err != nil {
				t.Fatal(err)
			}
			if caps.SupportsSessionResume == nil || *caps.SupportsSessionResume != tc.want || !caps.SupportsWorkspaceOnly {
				t.Fatalf("caps %+v, want supports_session_resume=%v", caps, tc.want)
			}
		})
	}
	undeclared := agentctl.Profile{Protocol: "pty", Command: cmd, NewArgs: []string{"--session-id", "{{resume_token}}"}}
	st, err := p.c.StartAgent(ctx(t), undeclared, "")
	if err != nil || st.SupportsSessionResume || st.ResumeToken != "" {
		t.Fatalf("start undeclared pty agent: %+v %v (want no resume token)", st, err)
	}
	if _, err := p.c.StopAgent(ctx(t)); err != nil {
		t.Fatal(err)
	}
	_, err = p.c.StartAgent(ctx(t), undeclared, "0123abcd-0000-4000-8000-0123456789ab")
	if ae := apiErr(t, err); ae.Status != 409 || !contains(ae.Message, "does not support session resume") {
		t.Fatalf("resume of an undeclared pty agent: %+v", ae)
	}
}

// A poll with compact=true that finds a whole streamed reply carries one
// update of the reply, the latest, with its whole text; a plain poll
// carries one per chunk. Nothing else is left out, and the next position
// is the same.
func TestCompactEventsCarryAStreamedReplyOnce(t *testing.T) {
	p := startServe(t, t.TempDir())
	c := p.c
	c.SetFencingToken(1)
	w := newWatcher(c)
	if _, err := c.StartAgent(ctx(t), acpProfile, ""); err != nil {
		t.Fatalf("start: %v", err)
	}
	const n = 100
	if _, err := c.Prompt(ctx(t), fmt.Sprintf("stream %d", n)); err != nil {
		t.Fatalf("prompt: %v", err)
	}
	w.waitEvent(t, agentctl.EventTurnFinished, nil, 30*time.Second)
	plain, err := c.Events(ctx(t), 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	compact, err := c.CompactEvents(ctx(t), 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if compact.Next != plain.Next {
		t.Fatalf("next %d compact, %d plain", compact.Next, plain.Next)
	}
	count := func(evs []agentctl.Event, typ string) int {
		k := 0
		for _, ev := range evs {
			if ev.Type == typ {
				k++
			}
		}
		return k
	}
	if u := count(plain.Events, agentctl.EventMessageUpdated); u < n/2 {
		t.Fatalf("plain poll: %d updates for %d chunks", u, n)
	}
	for _, typ := range []string{agentctl.EventAgentStarted, agentctl.EventMessageAdded, agentctl.EventTurnFinished} {
		if a, b := count(compact.Events, typ), count(plain.Events, typ); a != b {
			t.Errorf("%s: %d in the compact answer, %d in the plain one", typ, a, b)
		}
	}
	if u := count(compact.Events, agentctl.EventMessageUpdated); u != 1 {
		t.Fatalf("compact poll: %d updates of the reply, want 1", u)
	}
	want := strings.Join(demoagent.StreamChunks(n), "")
	for _, ev := range compact.Events {
		var d agentctl.MessageData
		if ev.Type == agentctl.EventMessageUpdated && (json.Unmarshal(ev.Data, &d) != nil || d.Message.Text != want) {
			t.Fatalf("the compact poll's update has %d of the reply's %d bytes", len(d.Message.Text), len(want))
		}
	}
}

// Gathering polls carry a streamed reply in about one answer per gather
// window, not one per chunk, and the answer that holds the turn's end
// comes when the turn ends.
func TestGatheringPollsCarryAStreamedReplyPerWindow(t *testing.T) {
	p := startServe(t, t.TempDir())
	c := p.c
	c.SetFencingToken(1)
	if _, err := c.StartAgent(ctx(t), acpProfile, ""); err != nil {
		t.Fatalf("start: %v", err)
	}
	since := uint64(1)
	if resp, err := c.Events(ctx(t), since, 0); err == nil {
		since = resp.Next
	}
	const n, gather = 100, 100 * time.Millisecond
	start := time.Now()
	if _, err := c.Prompt(ctx(t), fmt.Sprintf("stream %d", n)); err != nil {
		t.Fatalf("prompt: %v", err)
	}
	answers, chunks := 0, 0
	for done := false; !done; {
		resp, err := c.Poll(ctx(t), agentctl.EventsQuery{Since: since, Wait: 30 * time.Second, Compact: true, Gather: gather})
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		if resp.Gather != gather.String() {
			t.Fatalf("answer's gather %q, want %q", resp.Gather, gather)
		}
		answers++
		since = resp.Next
		for _, ev := range resp.Events {
			switch ev.Type {
			case agentctl.EventMessageUpdated:
				chunks++
			case agentctl.EventTurnFinished:
				done = true
			}
		}
		if time.Since(start) > time.Minute {
			t.Fatal("no turn end within a minute")
		}
	}
	took := time.Since(start)
	// One answer per read of the agent's output at most: one per window
	// once the read pace has grown to it, ~10 more while it grows over the
	// reply's first 0.4 s (acpagent's burstPace), and a few for the turn.
	if most := int(took/gather) + 14; answers > most {
		t.Fatalf("%d answers over %s of a %d-chunk reply (%d updates): more than one per %s window (%d)", answers, took, n, chunks, gather, most)
	}
	t.Logf("%d answers, %d updates over %s for %d chunks", answers, chunks, took.Round(time.Millisecond), n)
}
