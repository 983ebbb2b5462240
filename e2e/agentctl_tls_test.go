package e2e

import (
	"strings"
	"testing"

	"github.com/paddockhq/paddock/api/termproto"
	"github.com/paddockhq/paddock/client"
)

// TestSessionOverAgentctlTLS: with the standalone runtime's agentctl_tls,
// agentctl serves HTTPS with its own key; the executor records its
// fingerprint, and a whole session runs through the pinned connection:
// the agent's turns, the workspace API and a terminal.
func TestSessionOverAgentctlTLS(t *testing.T) {
	cfg := strings.Replace(standaloneConfig(t), "shared_workspace_root = true", "shared_workspace_root = true\n    agentctl_tls = true", 1)
	node, sid := termClusterOn(t, cfg, "demo")
	api, err := client.New(node.URL(), termToken)
	if err != nil {
		t.Fatal(err)
	}
	s, err := api.GetSession(testCtx(t), sid)
	if err != nil {
		t.Fatal(err)
	}
	ex, err := api.Executor(testCtx(t), s.ExecutorID)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ex.AgentctlURL, "https://") || len(ex.AgentctlFingerprint) != 64 {
		t.Fatalf("executor %s: agentctl_url %q fingerprint %q, want https and a SHA-256 fingerprint", ex.ID, ex.AgentctlURL, ex.AgentctlFingerprint)
	}
	if got := promptAndWait(t, api, sid, "hello over tls"); got != "turn 1: hello over tls" {
		t.Fatalf("reply %q", got)
	}
	if err := api.WriteFile(testCtx(t), sid, "tls.txt", strings.NewReader("pinned")); err != nil {
		t.Fatal(err)
	}
	if b, err := api.ReadFile(testCtx(t), sid, "tls.txt"); err != nil || string(b) != "pinned" {
		t.Fatalf("read back %q %v", b, err)
	}
	c, _ := termAttach(t, node, sid, "shell", termproto.Hello{})
	c.Input("echo over-$((6*7))\r")
	c.WaitOutput("over-42")
}
