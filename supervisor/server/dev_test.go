package server

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/shared/testkit"
)

// A node whose data dir goes with it (paddock server -dev) destroys its
// sessions' agentctls when it stops: nothing could recover them after.
func TestADevNodeEndsItsAgentctlsAtExit(t *testing.T) {
	c := newTestCluster(t, 1, "")
	c.servers[0].DestroyExecutorsAtExit()
	cl, sess := newDemoSession(t, c, "dev")
	waitSessionState(t, cl, sess.ID, api.SessionWaitingForInput)
	execs, err := cl.Executors(ctx(t), sess.ID)
	if err != nil || len(execs) != 1 || execs[0].PID == 0 {
		t.Fatalf("executors of the session: %+v %v", execs, err)
	}
	pid := execs[0].PID
	c.stop(0)
	testkit.WaitFor(t, 15*time.Second, fmt.Sprintf("agentctl %d to end with its node", pid), testkit.Cond(func() bool {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		return err != nil || strings.Contains(string(stat), ") Z ")
	}))
}
