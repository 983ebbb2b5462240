package e2e

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	wire "github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/bench/harness"
	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/shared/runtime/runtimetest"
	"github.com/paddockhq/paddock/shared/testkit"
)

// TestServerFromAnotherDirectory starts a server from a directory
// unrelated to its config file: every relative path the file sets
// (data_dir, plugin_dir, the standalone plugin's workspace_root) is taken
// relative to the file's directory, so the server finds its plugins and
// keeps its data and workspaces beside the file.
func TestServerFromAnotherDirectory(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	etc, cwd := t.TempDir(), t.TempDir()
	if err := os.Symlink(binDir, filepath.Join(etc, "bin")); err != nil {
		t.Fatal(err)
	}
	ports := testkit.MustFreePorts(t, "127.0.0.1", 2)
	cfg := fmt.Sprintf(`node_name = "elsewhere"
data_dir   = "data"
plugin_dir = "bin/plugins"
bind_addr  = "127.0.0.1"
ports {
  http = %d
  raft = %d
}
plugin "standalone" {
  config {
    workspace_root = "./data/ws"
  }
}
agent "demo" {
  protocol = "acp"
  command  = ["paddock-demo-agent"]
}
`, ports[0], ports[1])
	path := filepath.Join(etc, "paddock.hcl")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	n := startNode(t, "elsewhere", cwd, path, fmt.Sprintf("127.0.0.1:%d", ports[0]))
	testkit.WaitFor(t, 30*time.Second, "the node to lead", testkit.Cond(func() bool {
		leads, err := n.Leads()
		return err == nil && leads
	}))
	api := apiClient(t, n)
	plugins, err := api.Plugins(testCtx(t))
	if err != nil || len(plugins) != 1 || !plugins[0].Healthy {
		t.Fatalf("plugins: %+v %v", plugins, err)
	}
	task, err := api.CreateTask(testCtx(t), wire.CreateTaskRequest{Title: "elsewhere"})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := api.CreateSession(testCtx(t), task.ID, wire.CreateSessionRequest{Agent: "demo", Runtime: "standalone"})
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 30*time.Second, "the session to wait for input", testkit.Cond(func() bool {
		s, err := api.GetSession(testCtx(t), sess.ID)
		return err == nil && s.State == wire.SessionWaitingForInput
	}))
	execs, err := api.Executors(testCtx(t), sess.ID)
	if err != nil || len(execs) != 1 {
		t.Fatalf("executors: %+v %v", execs, err)
	}
	if ws := execs[0].WorkspacePath; !strings.HasPrefix(ws, filepath.Join(etc, "data", "ws")+string(filepath.Separator)) {
		t.Errorf("workspace %s is not under the config file's data/ws", ws)
	}
	if _, err := os.Stat(filepath.Join(etc, "data", "raft", "raft.db")); err != nil { // bolt: raft_store unset
		t.Errorf("raft log not beside the config file: %v", err)
	}
	if _, err := os.Stat(filepath.Join(cwd, "data")); !os.IsNotExist(err) {
		t.Errorf("the server made a data directory in its working directory: %v", err)
	}
}

// TestMissingPluginBinary: a configured plugin without its executable stops
// the start with exit 1 and a message naming the file, the block and the
// way out; with optional = true the same server starts and lists it
// unhealthy.
func TestMissingPluginBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	dir := t.TempDir()
	ports := testkit.MustFreePorts(t, "127.0.0.1", 2)
	base := fmt.Sprintf("data_dir = \"data\"\nplugin_dir = %q\nports {\n  http = %d\n  raft = %d\n}\nplugin \"standalone\" {\n  config {\n    workspace_root = \"ws\"\n  }\n}\n",
		filepath.Join(binDir, "plugins"), ports[0], ports[1])
	path := filepath.Join(dir, "paddock.hcl")
	if err := os.WriteFile(path, []byte(base+"plugin \"nosuch\" {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(binDir, "paddock"), "server", "-config", path)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
			t.Fatalf("exit %v, want 1; output:\n%s", err, &out)
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("the server started without plugin nosuch's binary; output:\n%s", &out)
	}
	for _, want := range []string{"paddock.hcl:", `plugin "nosuch" is configured`, "paddock-runtime-nosuch", "optional = true"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, &out)
		}
	}
	runtimetest.KillProcessesUnder(dir)

	if err := os.WriteFile(path, []byte(base+"plugin \"nosuch\" {\n  optional = true\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	n := startNode(t, "optional", dir, path, fmt.Sprintf("127.0.0.1:%d", ports[0]))
	testkit.WaitFor(t, 30*time.Second, "the node to lead", testkit.Cond(func() bool {
		leads, err := n.Leads()
		return err == nil && leads
	}))
	list, err := apiClient(t, n).Plugins(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	health := map[string]bool{}
	for _, p := range list {
		health[p.Name] = p.Healthy
	}
	if !health["standalone"] || health["nosuch"] || len(list) != 2 {
		t.Errorf("plugins %+v: want standalone healthy and nosuch listed unhealthy", list)
	}
}

// TestDevServerHTTPPort: `paddock server -dev -http-port N -raft-port M`
// serves on N, with the runtime plugins found next to the executable
// (the working directory has no bin/plugins); a port out of range is
// refused.
func TestDevServerHTTPPort(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	dir := t.TempDir()
	bad := exec.Command(filepath.Join(binDir, "paddock"), "server", "-dev", "-http-port", "70000")
	bad.Dir = dir
	if out, err := bad.CombinedOutput(); err == nil || !strings.Contains(string(out), "-http-port 70000 is not a port") {
		t.Errorf("-http-port 70000: %v\n%s", err, out)
	}
	ports := testkit.MustFreePorts(t, "127.0.0.1", 2)
	port := ports[0]
	runtimetest.CleanupProcesses(t)
	p := &harness.Process{}
	if err := p.Start(dir, filepath.Join(dir, "server.log"), filepath.Join(binDir, "paddock"), "server", "-dev",
		"-http-port", fmt.Sprint(port), "-raft-port", fmt.Sprint(ports[1])); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "server.log"))
			t.Logf("server log:\n%s", b)
		}
	})
	testkit.WaitFor(t, 30*time.Second, "the dev server on its -http-port", testkit.Cond(func() bool {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/v1/health", port))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}))
	api, err := client.New(fmt.Sprintf("http://127.0.0.1:%d", port), "")
	if err != nil {
		t.Fatal(err)
	}
	list, err := api.Plugins(testCtx(t))
	if err != nil || len(list) != 1 || !list[0].Healthy {
		t.Errorf("dev server plugins: %+v %v", list, err)
	}
}

// TestMonitorAndPluginSchemaCLI runs `paddock monitor` and `paddock plugin
// schema` against a real server: the monitor prints the server's log lines
// as they happen, at debug though the server logs at info, including the
// session lifecycle; the schema is the standalone plugin's, with
// descriptions.
func TestMonitorAndPluginSchemaCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	c := startCluster(t, 1, false, standaloneConfig(t))
	leader := leaderOf(t, c)
	r := cliRunner{t: t, addr: leader.URL()}

	out := r.ok("plugin", "schema", "standalone")
	for _, want := range []string{`plugin "standalone" {`, "workspace_root = string", "# directory holding every session's workspace", "start_timeout = duration"} {
		if !strings.Contains(out, want) {
			t.Errorf("plugin schema output lacks %q:\n%s", want, out)
		}
	}
	if code, _, errOut := r.run("plugin", "schema", "nope"); code != 1 || !strings.Contains(errOut, `"nope"`) || !strings.Contains(errOut, "paddock plugin list") {
		t.Errorf("plugin schema nope: exit %d, %s", code, errOut)
	}
	if code, _, errOut := r.run("monitor", "-log-level", "loud"); code != 1 || !strings.Contains(errOut, "not one of trace, debug, info, warn, error") {
		t.Errorf("monitor -log-level loud: exit %d, %s", code, errOut)
	}

	lines := r.lines("monitor", "-log-level", "debug")
	// The server logs at info; the stream's own debug line shows its level.
	if l := waitLine(t, lines, "monitor attached"); !strings.Contains(l, "[DEBUG]") {
		t.Errorf("attach line %q is not a debug line", l)
	}
	api := apiClient(t, leader)
	task, err := api.CreateTask(testCtx(t), wire.CreateTaskRequest{Title: "monitor"})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := api.CreateSession(testCtx(t), task.ID, wire.CreateSessionRequest{Agent: "demo", Runtime: "standalone"})
	if err != nil {
		t.Fatal(err)
	}
	if l := waitLine(t, lines, "session created"); !strings.Contains(l, "[INFO]") || !strings.Contains(l, "session="+sess.ID) {
		t.Errorf("lifecycle line %q", l)
	}
	waitLine(t, lines, "session started")
}
