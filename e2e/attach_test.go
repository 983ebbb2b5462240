package e2e

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/shared/testkit"
)

// TestAttachInATerminal runs `paddock attach` in tmux against a real server:
// ctrl-] r asks before resetting the shell (n keeps it, y replaces it), a
// server restart under it prints "reconnected" and makes the program redraw,
// and ctrl-] detaches with the shell's prompt on a line of its own.
func TestAttachInATerminal(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	x := newTmux(t)
	c := startCluster(t, 1, false, standaloneConfig(t))
	node := leaderOf(t, c)
	cl := apiClient(t, node)
	s := startDemoSession(t, cl, "attach task", "demo")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the attach window:\n%s", x.run("capture-pane", "-p", "-t", "at"))
		}
	})
	x.start("at", t.TempDir(), filepath.Join(binDir, "paddock")+" attach "+s.ID[:8], "PADDOCK_ADDR="+node.URL(), "TERM=xterm-256color")
	shellPID := func(tag string) string {
		t.Helper()
		x.keys("at", "-l", `echo "`+tag+`=$$:"`)
		x.keys("at", "Enter")
		re := regexp.MustCompile(tag + `=(\d+):`)
		var m []string
		testkit.WaitFor(t, 30*time.Second, "the shell's "+tag+" line", testkit.Cond(func() bool {
			m = re.FindStringSubmatch(x.screen("at"))
			return m != nil
		}))
		return m[1]
	}
	first := shellPID("PA")

	x.keys("at", "C-]", "r")
	x.waitScreen("at", "[paddock] reset the terminal?")
	x.keys("at", "n")
	x.waitScreen("at", "[paddock] not reset")
	if p := shellPID("PB"); p != first {
		t.Fatalf("answering n changed the shell: %s, want %s", p, first)
	}
	x.keys("at", "C-]", "r")
	x.waitScreen("at", "[paddock] not reset", "[paddock] reset the terminal? ")
	x.keys("at", "y")
	x.waitScreen("at", "the terminal was reset: a new shell started")
	second := shellPID("PC")
	if second == first {
		t.Fatal("y did not replace the shell")
	}

	// The server restarts under attach; the shell lives in agentctl.
	x.keys("at", "-l", `trap 'echo RE"DRAWN"' WINCH; echo TRAP"SET"`)
	x.keys("at", "Enter")
	x.waitScreen("at", "TRAPSET") // the shell has the trap before the server goes
	node.Kill()
	x.waitScreen("at", "[paddock] connection lost; reconnecting")
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	x.waitScreen("at", "[paddock] reconnected")
	x.keys("at", "Enter") // the shell runs its trap once it reads a line
	x.waitScreen("at", "REDRAWN")
	if p := shellPID("PD"); p != second {
		t.Fatalf("the shell changed across the restart: %s, want %s", p, second)
	}

	x.keys("at", "C-]")
	screen := x.waitScreen("at", "EXIT=0")
	for _, l := range strings.Split(screen, "\n") {
		if strings.Contains(l, "EXIT=0") && !strings.HasPrefix(l, "EXIT=0") {
			t.Fatalf("after the detach the next output shares a line: %q", l)
		}
	}
}
