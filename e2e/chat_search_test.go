package e2e

import (
	"path/filepath"
	"testing"

	"github.com/paddockhq/paddock/api"
)

// TestChatReverseSearch runs `paddock chat` in tmux: ctrl-r and a word
// find an earlier prompt (the line shows the shell's reverse-i-search), and
// Enter sends it again.
func TestChatReverseSearch(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	x := newTmux(t)
	node := leaderOf(t, startCluster(t, 1, false, standaloneConfig(t)))
	cl := apiClient(t, node)
	s := startDemoSession(t, cl, "search", "demo")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the chat window:\n%s", x.run("capture-pane", "-p", "-S", "-100", "-t", "search"))
		}
	})
	x.start("search", t.TempDir(), filepath.Join(binDir, "paddock")+" chat "+s.ID, "PADDOCK_ADDR="+node.URL(), "TERM=xterm-256color")
	x.waitScreen("search", "Chat with session "+s.ID)
	for i, p := range []string{"remember plums", "recall"} {
		x.keys("search", "-l", p)
		x.keys("search", "Enter")
		waitTurnEnd(t, cl, s.ID, i+1)
	}

	x.keys("search", "C-r")
	x.keys("search", "-l", "plu")
	x.waitScreen("search", "(reverse-i-search)`plu': remember plums")
	x.keys("search", "Enter")
	waitTurnEnd(t, cl, s.ID, 3)
	msgs, err := cl.Messages(testCtx(t), s.ID)
	if err != nil {
		t.Fatal(err)
	}
	var prompts []string
	for _, m := range msgs {
		if m.Role == api.RoleUser {
			prompts = append(prompts, m.Text)
		}
	}
	if len(prompts) != 3 || prompts[2] != "remember plums" {
		t.Fatalf("the prompts sent: %q, want the third to be the one found", prompts)
	}
	x.keys("search", "C-d")
	x.waitScreen("search", "Left the chat")
}
