package e2e

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	wire "github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/shared/testkit"
)

// agentPIDOf returns the pid of the agent process agentctl (pid) runs: its
// child whose executable is the demo agent.
func agentPIDOf(t *testing.T, agentctl int) int {
	t.Helper()
	var found int
	testkit.WaitFor(t, 10*time.Second, fmt.Sprintf("the agent under agentctl %d", agentctl), testkit.Cond(func() bool {
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || isZombie(pid) {
				continue
			}
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			if err != nil {
				continue
			}
			// pid (comm) state ppid …: comm may hold spaces, so split after ')'.
			s := string(b)
			fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
			if len(fields) < 2 {
				continue
			}
			ppid, _ := strconv.Atoi(fields[1])
			exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
			if ppid == agentctl && strings.HasSuffix(exe, "paddock-demo-agent") {
				found = pid
				return true
			}
		}
		return false
	}))
	return found
}

// TestAutoResumePolicies runs recovery.auto_resume against a real server
// restart. Two sessions: A's agent dies while the server runs (A is ERROR,
// agent_not_running, left so); B's agent dies while the server is down.
// "all" resumes both; "none" resumes neither (both ERROR, workspace kept).
func TestAutoResumePolicies(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	for _, policy := range []string{"all", "none"} {
		t.Run(policy, func(t *testing.T) {
			c := startCluster(t, 1, false, standaloneConfig(t)+fmt.Sprintf("recovery {\n  auto_resume = %q\n}\n", policy))
			node := leaderOf(t, c)
			api := apiClient(t, node)
			task, err := api.CreateTask(testCtx(t), wire.CreateTaskRequest{Title: "auto_resume " + policy})
			if err != nil {
				t.Fatal(err)
			}
			ss := startSessions(t, api, task.ID, 2, "demo") // each remembers its word
			a, b := ss[0], ss[1]
			aAgentctl, bAgentctl := agentctlPID(t, api, a.id), agentctlPID(t, api, b.id)

			killPID(t, agentPIDOf(t, aAgentctl))
			testkit.WaitFor(t, 30*time.Second, "A to be ERROR after its agent died", testkit.Cond(func() bool {
				st, err := api.SessionStatus(testCtx(t), a.id)
				return err == nil && st.State == wire.SessionError
			}))

			node.Kill()
			killPID(t, agentPIDOf(t, bAgentctl))
			if err := node.Start(); err != nil {
				t.Fatal(err)
			}
			node = leaderOf(t, c)
			api = apiClient(t, node)
			for _, s := range ss {
				if policy == "all" {
					testkit.WaitFor(t, 60*time.Second, "session "+s.id+" resumed", testkit.Cond(func() bool {
						st, err := api.SessionStatus(testCtx(t), s.id)
						return err == nil && st.IsAgentRunning && st.State == wire.SessionWaitingForInput
					}))
					if got, want := promptAndWait(t, api, s.id, "recall"), "you asked me to remember: "+s.word; got != want {
						t.Fatalf("recall after an auto-resume: %q, want %q", got, want)
					}
					continue
				}
				testkit.WaitFor(t, 60*time.Second, "session "+s.id+" left in ERROR with its workspace", testkit.Cond(func() bool {
					st, err := api.SessionStatus(testCtx(t), s.id)
					return err == nil && st.State == wire.SessionError && !st.IsAgentRunning &&
						st.ResumeReason != nil && *st.ResumeReason == wire.ReasonAgentNotRunning
				}))
				if err := api.WriteFile(testCtx(t), s.id, "still-here.txt", stringsReader("yes")); err != nil {
					t.Fatalf("workspace of a session auto_resume none left alone: %v", err)
				}
			}
			if policy == "none" {
				// Not resumed means no agent was started behind the scenes.
				if syscall.Kill(aAgentctl, 0) != nil || syscall.Kill(bAgentctl, 0) != nil {
					t.Fatal("an agentctl died; only the agents were killed")
				}
			}
		})
	}
}
