package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	wire "github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/bench/harness"
	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/shared/runtime/runtimetest"
	"github.com/paddockhq/paddock/shared/testkit"
)

// pluginPIDs lists the pids of this test's running processes whose
// executable is the named plugin binary.
func pluginPIDs(t *testing.T, name string) []int {
	t.Helper()
	want := filepath.Join(binDir, "plugins", "paddock-runtime-"+name)
	var out []int
	for _, pid := range runtimetest.ProcessesUnder(testRoot(t)) {
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		if err == nil && exe == want && !isZombie(pid) {
			out = append(out, pid)
		}
	}
	return out
}

func pluginHealthy(t *testing.T, api *client.Client, name string) (bool, int) {
	t.Helper()
	ps, err := api.Plugins(testCtx(t))
	if err != nil {
		return false, 0
	}
	for _, p := range ps {
		if p.Name == name {
			return p.Healthy, p.PID
		}
	}
	return false, 0
}

func TestPluginCrashAndSupervisorRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	c := startCluster(t, 1, false, standaloneConfig(t))
	node := leaderOf(t, c)
	api := apiClient(t, node)
	task, err := api.CreateTask(testCtx(t), wire.CreateTaskRequest{Title: "plugins"})
	if err != nil {
		t.Fatal(err)
	}
	sessions := startSessions(t, api, task.ID, 1, "demo")
	before := pluginPIDs(t, "standalone")
	if len(before) != 1 {
		t.Fatalf("standalone plugin processes: %v, want one", before)
	}
	// kill -9 the plugin: it is restarted and healthy, the session keeps working.
	killPID(t, before[0])
	testkit.WaitFor(t, 30*time.Second, "the plugin to be restarted and healthy", testkit.Cond(func() bool {
		ok, pid := pluginHealthy(t, api, "standalone")
		return ok && pid != before[0] && pid != 0
	}))
	if got := promptAndWait(t, api, sessions[0].id, "recall"); got != "you asked me to remember: "+sessions[0].word {
		t.Fatalf("after plugin restart: %q", got)
	}
	// kill -9 the supervisor and start it again: it reattaches to the
	// running plugin process instead of starting a duplicate.
	running := pluginPIDs(t, "standalone")
	node.Kill()
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	leaderOf(t, c)
	testkit.WaitFor(t, 30*time.Second, "the plugin to be healthy after the restart", testkit.Cond(func() bool {
		ok, _ := pluginHealthy(t, api, "standalone")
		return ok
	}))
	if after := pluginPIDs(t, "standalone"); len(after) != 1 || after[0] != running[0] {
		t.Fatalf("plugin processes after restart: %v, want the same single %v", after, running)
	}
	testkit.WaitFor(t, 30*time.Second, "the session to be recovered", testkit.Cond(func() bool {
		st, err := api.SessionStatus(testCtx(t), sessions[0].id)
		return err == nil && st.IsAgentRunning
	}))
	if got := promptAndWait(t, api, sessions[0].id, "recall"); got != "you asked me to remember: "+sessions[0].word {
		t.Fatalf("after supervisor restart: %q", got)
	}
}

func TestUnhealthyRuntimeIsRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	// A plugin block whose binary is not in plugin_dir: listed unhealthy,
	// and sessions on it are refused at once (nothing stuck in STARTING).
	// It is marked optional: a missing binary is otherwise an error at start.
	c := startCluster(t, 1, false, standaloneConfig(t)+"\nplugin \"ghost\" {\n  optional = true\n}\n")
	api := apiClient(t, leaderOf(t, c))
	if ok, _ := pluginHealthy(t, api, "ghost"); ok {
		t.Fatal("a plugin without a binary is reported healthy")
	}
	task, err := api.CreateTask(testCtx(t), wire.CreateTaskRequest{Title: "ghost"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = api.CreateSession(testCtx(t), task.ID, wire.CreateSessionRequest{Agent: "demo", Runtime: "ghost"})
	if !client.IsCode(err, "unavailable") {
		t.Fatalf("session on an unhealthy runtime: %v, want unavailable", err)
	}
	if ss, _ := api.ListSessions(testCtx(t), task.ID, ""); len(ss) != 0 {
		t.Fatalf("a refused session was recorded: %+v", ss)
	}
}

// startAgentctlHost runs `agentctl host` on 127.0.0.2 with a secret file.
func startAgentctlHost(t *testing.T, root, secretFile string, port int) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "agentctl"), "host", "-listen", fmt.Sprintf("127.0.0.2:%d", port), "-root", root, "-secret-file", secretFile)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	// The remote machine has the agents on its PATH.
	cmd.Env = append(os.Environ(), "PATH="+binDir+":"+os.Getenv("PATH"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
	return cmd
}

func TestRemoteRuntimeSurvivesSupervisorRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	root := t.TempDir()
	secretFile := filepath.Join(root, "host.secret")
	if err := os.WriteFile(secretFile, []byte("remote-host-secret-123456\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	port, err := harness.FreePort("127.0.0.2")
	if err != nil {
		t.Fatal(err)
	}
	startAgentctlHost(t, filepath.Join(root, "host"), secretFile, port)
	cfg := standaloneConfig(t) + fmt.Sprintf(`
plugin "remote" {
  config {
    host "box" {
      url         = "http://127.0.0.2:%d"
      secret_file = %q
    }
  }
}
`, port, secretFile)
	c := startCluster(t, 1, false, cfg)
	node := leaderOf(t, c)
	api := apiClient(t, node)
	testkit.WaitFor(t, 20*time.Second, "the remote plugin to be healthy", testkit.Cond(func() bool {
		ok, _ := pluginHealthy(t, api, "remote")
		return ok
	}))
	task, err := api.CreateTask(testCtx(t), wire.CreateTaskRequest{Title: "remote"})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := api.CreateSession(testCtx(t), task.ID, wire.CreateSessionRequest{Agent: "demo", Runtime: "remote", RuntimeOptions: map[string]string{"host": "box"}})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, api, sess.ID, wire.SessionWaitingForInput)
	if got := promptAndWait(t, api, sess.ID, "remember remote"); got != "ok, remembering remote" {
		t.Fatalf("remote reply %q", got)
	}
	exs, _ := api.Executors(testCtx(t), sess.ID)
	if len(exs) != 1 || !strings.HasPrefix(exs[0].AgentctlURL, "http://127.0.0.2:") {
		t.Fatalf("remote executor: %+v", exs)
	}
	node.Kill()
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	leaderOf(t, c)
	testkit.WaitFor(t, 60*time.Second, "the remote session to be recovered", testkit.Cond(func() bool {
		st, err := api.SessionStatus(testCtx(t), sess.ID)
		return err == nil && st.IsAgentRunning
	}))
	if got := promptAndWait(t, api, sess.ID, "recall"); got != "you asked me to remember: remote" {
		t.Fatalf("remote session after restart: %q", got)
	}
}
