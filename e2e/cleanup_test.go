package e2e

import (
	"syscall"
	"testing"

	"github.com/paddockhq/paddock/shared/runtime/runtimetest"
)

// TestClusterCleanupEndsItsAgentctls: a session's agentctl and agent
// outlive the server processes by design; startCluster's cleanup must end
// them, or every run of these tests leaves them behind until agentctl's
// idle timeout.
func TestClusterCleanupEndsItsAgentctls(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	var root string
	var agentctl int
	t.Run("session", func(t *testing.T) {
		c := startCluster(t, 1, false, standaloneConfig(t))
		root = testRoot(t)
		api := apiClient(t, leaderOf(t, c))
		agentctl = agentctlPID(t, api, startDemoSession(t, api, "cleanup", "demo").ID)
	})
	if t.Failed() {
		return
	}
	if syscall.Kill(agentctl, 0) == nil && !isZombie(agentctl) {
		t.Errorf("agentctl %d outlived the test that started it", agentctl)
	}
	if left := runtimetest.ProcessesUnder(root); len(left) > 0 {
		t.Errorf("processes %v outlived the test that started them", left)
	}
}
