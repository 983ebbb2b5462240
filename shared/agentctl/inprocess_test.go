package agentctl_test

import (
	"testing"
	"time"

	"github.com/paddockhq/paddock/shared/agentctl"
)

// TestInProcessServer runs the Server inside the test process (so -race
// covers the manager and the protocol drivers) against the real demo agent.
func TestInProcessServer(t *testing.T) {
	for _, prof := range []agentctl.Profile{acpProfile, ptyProfile} {
		t.Run(prof.Protocol, func(t *testing.T) {
			srv, _, c := inProcess(t, agentctl.Options{})
			c.SetFencingToken(1)
			w := newWatcher(c)
			if _, err := c.StartAgent(ctx(t), prof, ""); err != nil {
				t.Fatal(err)
			}
			if prof.Protocol == "pty" && srv.AgentTerminal() == nil {
				t.Fatal("no agent terminal for a pty agent")
			}
			for _, text := range []string{"remember x", "recall"} {
				if _, err := c.Prompt(ctx(t), text); err != nil {
					t.Fatal(err)
				}
				w.waitEvent(t, agentctl.EventTurnFinished, nil, 10*time.Second)
			}
			if m := lastAgentMessage(t, c); m.Text != "you asked me to remember: x" {
				t.Fatalf("%+v", m)
			}
			if _, err := c.Prompt(ctx(t), "sleep 20"); err != nil {
				t.Fatal(err)
			}
			if err := c.Cancel(ctx(t)); err != nil {
				t.Fatal(err)
			}
			if d := turnOutcome(t, w.waitEvent(t, agentctl.EventTurnFinished, nil, 10*time.Second)); d.Outcome != "cancelled" {
				t.Fatalf("%+v", d)
			}
			if _, err := c.StopAgent(ctx(t)); err != nil {
				t.Fatal(err)
			}
		})
	}
}
