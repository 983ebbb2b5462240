package agentctl_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/shared/agentctl"
	"github.com/paddockhq/paddock/shared/nice"
	"github.com/paddockhq/paddock/shared/testkit"
)

// With -nice the agent, ACP or PTY, runs at that nice value in a session
// and scheduling group of its own, while agentctl keeps its priority and
// group: agentctl's relay and lease renewals come before its agent's work.
func TestAgentsRunAtTheNiceValue(t *testing.T) {
	own, err := nice.Of(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	want := min(own+7, nice.Max)
	for name, prof := range map[string]agentctl.Profile{"acp": acpProfile, "pty": ptyProfile} {
		t.Run(name, func(t *testing.T) {
			srv := startServeArgs(t, t.TempDir(), []string{"-nice", strconv.Itoa(want)})
			st, err := srv.c.StartAgent(ctx(t), prof, "")
			if err != nil {
				t.Fatal(err)
			}
			if st.PID == 0 {
				t.Fatalf("agent state has no pid: %+v", st)
			}
			if got, err := nice.Of(st.PID); err != nil || got != want {
				t.Fatalf("agent pid %d runs at nice %d (%v), want %d", st.PID, got, err, want)
			}
			if got, _ := nice.Of(srv.info.PID); got != own {
				t.Fatalf("agentctl itself runs at nice %d, want its starter's %d", got, own)
			}
			// The agent leads its own session, so it has a scheduling group
			// wherever the kernel has autogroups; agentctl shares this
			// test's, which may have none (init's session, on a fresh CI
			// machine).
			if _, ok, _ := nice.GroupOf(st.PID); ok {
				testkit.WaitFor(t, 5*time.Second, "the agent's scheduling group at its nice value", testkit.Cond(func() bool {
					n, _, _ := nice.GroupOf(st.PID)
					return n == want
				}))
			}
			if ownGroup, groups, _ := nice.GroupOf(os.Getpid()); groups {
				if n, _, _ := nice.GroupOf(srv.info.PID); n != ownGroup {
					t.Fatalf("agentctl's scheduling group is at nice %d, want its starter's %d", n, ownGroup)
				}
			}
		})
	}
}

// An out-of-range -nice stops agentctl serve with a clear message.
func TestServeRefusesANiceValueOutOfRange(t *testing.T) {
	for _, v := range []string{"-1", "20", "x"} {
		cmd := exec.Command(filepath.Join(binDir, "agentctl"), "serve", "-session", "s1", "-workspace", t.TempDir(), "-nice", v)
		cmd.Env = append(os.Environ(), "PADDOCK_AGENTCTL_SECRET="+testSecret)
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
			t.Fatalf("-nice %s: exit %v, want 2; output %s", v, err, out)
		}
		if !strings.Contains(string(out), "-nice") {
			t.Fatalf("-nice %s: output %q does not name the flag", v, out)
		}
	}
}
