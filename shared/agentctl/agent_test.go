package agentctl_test

import (
	"testing"
	"time"

	"github.com/paddockhq/paddock/shared/agentctl"
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

func TestProbe(t *testing.T) {
	p := startServe(t, t.TempDir())
	p.c.SetFencingToken(1)
	cases := []struct {
		name    string
		profile agentctl.Profile
		want    bool
	}{
		{"acp resumable", acpProfile, true},
		{"acp --no-resume", agentctl.Profile{Protocol: "acp", Command: []string{"paddock-demo-agent", "--no-resume"}}, false},
		{"pty declared", ptyProfile, true},
		{"pty undeclared", agentctl.Profile{Protocol: "pty", Command: []string{"paddock-demo-agent", "--tty", "--no-resume"}}, false},
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
	// Starting the non-resumable agent works; resuming it is refused.
	noResume := agentctl.Profile{Protocol: "acp", Command: []string{"paddock-demo-agent", "--no-resume"}}
	st, err := p.c.StartAgent(ctx(t), noResume, "")
	if err != nil || st.SupportsSessionResume {
		t.Fatalf("start --no-resume: %+v %v", st, err)
	}
	if caps, _ := p.c.Capabilities(ctx(t)); caps.SupportsSessionResume == nil || *caps.SupportsSessionResume {
		t.Fatalf("capabilities after start: %+v", caps)
	}
	if _, err := p.c.StopAgent(ctx(t)); err != nil {
		t.Fatal(err)
	}
	_, err = p.c.StartAgent(ctx(t), noResume, st.ResumeToken)
	if ae := apiErr(t, err); ae.Status != 409 || !contains(ae.Message, "does not support session resume") {
		t.Fatalf("resume of non-resumable: %+v", ae)
	}
}
