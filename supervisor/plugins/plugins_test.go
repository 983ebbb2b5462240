package plugins_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/paddockhq/paddock/shared/runtime"
	"github.com/paddockhq/paddock/shared/runtime/runtimetest"
	"github.com/paddockhq/paddock/shared/testkit"
	"github.com/paddockhq/paddock/supervisor/config"
	"github.com/paddockhq/paddock/supervisor/plugins"
)

var (
	testPluginBin string // supervisor/plugins/testdata/testplugin
	standaloneBin string // plugins/standalone
	exampleBin    string // examples/runtime-subprocess
)

const helperEnv = "PLUGINS_TEST_HELPER" // set: this process is a helper supervisor

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(helperSupervisor())
	}
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	flag.Parse()
	if f := flag.Lookup("test.fuzz"); f != nil && f.Value.String() != "" {
		return m.Run() // fuzzing needs no plugin binaries
	}
	dir, err := os.MkdirTemp("", "plugins-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	testPluginBin, err = runtimetest.GoBuild(dir, "testplugin", "github.com/paddockhq/paddock/supervisor/plugins/testdata/testplugin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	standaloneBin, err = runtimetest.GoBuild(dir, "standalone", "github.com/paddockhq/paddock/plugins/standalone")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	exampleBin, err = runtimetest.GoBuild(dir, "subprocess", "github.com/paddockhq/paddock/examples/runtime-subprocess")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// helperSupervisor runs a Manager in a separate process so that a test can
// kill -9 "the supervisor". It prints "PID <plugin pid>" per plugin and then
// waits to be killed.
func helperSupervisor() int {
	cfg, err := config.Parse([]byte(os.Getenv("HELPER_CONFIG")), "helper.hcl")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	m, err := plugins.New(plugins.Options{Dir: os.Getenv("HELPER_PLUGIN_DIR"), DataDir: os.Getenv("HELPER_DATA_DIR"), Plugins: cfg.Plugins})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := m.Start(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for _, s := range m.List() {
		fmt.Printf("PID %s %d %v\n", s.Name, s.PID, s.Healthy)
	}
	_, _ = io.Copy(io.Discard, os.Stdin) // until killed (or stdin closes)
	return 0
}

// env is one test's plugin_dir and data_dir.
type env struct {
	t       *testing.T
	pluginD string
	dataD   string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	root := t.TempDir()
	e := &env{t: t, pluginD: filepath.Join(root, "bin", "plugins"), dataD: filepath.Join(root, "data")}
	if err := os.MkdirAll(e.pluginD, 0o755); err != nil {
		t.Fatal(err)
	}
	return e
}

// install copies src into plugin_dir as paddock-runtime-<name>.
func (e *env) install(src, name string) string {
	e.t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		e.t.Fatal(err)
	}
	dst := filepath.Join(e.pluginD, plugins.BinaryPrefix+name)
	if err := os.WriteFile(dst, data, 0o755); err != nil {
		e.t.Fatal(err)
	}
	return dst
}

func (e *env) write(name, content string, mode os.FileMode) string {
	e.t.Helper()
	dst := filepath.Join(e.pluginD, plugins.BinaryPrefix+name)
	if err := os.WriteFile(dst, []byte(content), mode); err != nil {
		e.t.Fatal(err)
	}
	return dst
}

// blocks parses HCL with plugin blocks through the real config loader, so
// that plugin config positions are true file positions.
func blocks(t *testing.T, src string) []*config.Plugin {
	t.Helper()
	cfg, err := config.Parse([]byte(src), "plugins.hcl")
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return cfg.Plugins
}

func (e *env) manager(src string, mutate ...func(*plugins.Options)) *plugins.Manager {
	e.t.Helper()
	opts := plugins.Options{
		Dir: e.pluginD, DataDir: e.dataD, Plugins: blocks(e.t, src),
		Logger:            hclog.New(&hclog.LoggerOptions{Name: "plugins", Output: testWriter{e.t}, Level: hclog.Debug}),
		LoadTimeout:       3 * time.Second,
		RestartBackoffMin: 50 * time.Millisecond,
		RestartBackoffMax: time.Second,
		HealthInterval:    500 * time.Millisecond,
	}
	for _, f := range mutate {
		f(&opts)
	}
	m, err := plugins.New(opts)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(m.Close)
	return m
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func start(t *testing.T, m *plugins.Manager) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
}

func status(t *testing.T, m *plugins.Manager, name string) plugins.Status {
	t.Helper()
	for _, s := range m.List() {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("plugin %s not listed in %+v", name, m.List())
	return plugins.Status{}
}

// pidsOf lists live (non-zombie) processes whose executable is path.
func pidsOf(t *testing.T, path string) []int {
	t.Helper()
	want, err := filepath.EvalSymlinks(path)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err != nil || strings.TrimSuffix(exe, " (deleted)") != want {
			continue
		}
		if alive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// alive reports whether pid runs and is not a zombie.
func alive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(data), ')')
	return i > 0 && i+2 < len(data) && data[i+2] != 'Z' && data[i+2] != 'X'
}

func checkGet(t *testing.T, m *plugins.Manager, name string) {
	t.Helper()
	rt, err := m.Get(name)
	if err != nil {
		t.Fatalf("Get(%s): %v", name, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := rt.Info(ctx)
	if err != nil {
		t.Fatalf("Info through Get(%s): %v", name, err)
	}
	if info.Name != name {
		t.Fatalf("Get(%s) reached plugin %q", name, info.Name)
	}
}

const standaloneHCL = `
plugin "standalone" {
  config {
    workspace_root = "%s"
  }
}
`

func TestLoadStandalone(t *testing.T) {
	e := newEnv(t)
	bin := e.install(standaloneBin, "standalone")
	m := e.manager(fmt.Sprintf(standaloneHCL, filepath.Join(e.dataD, "ws")))
	start(t, m)

	s := status(t, m, "standalone")
	if !s.Healthy || s.Error != "" || s.PID <= 0 || s.APIVersion != runtime.APIVersion || s.Version == "" {
		t.Fatalf("status %+v", s)
	}
	if !s.Capabilities.SupportsWorkspaceOnly || !s.Capabilities.SurvivesSupervisorRestart || !s.Capabilities.NodeLocal {
		t.Errorf("capabilities %+v", s.Capabilities)
	}
	if got := pidsOf(t, bin); len(got) != 1 || got[0] != s.PID {
		t.Errorf("processes of %s: %v, status pid %d", bin, got, s.PID)
	}
	checkGet(t, m, "standalone")

	// JSON shape of GET /v1/plugins.
	raw, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var generic map[string]any
	if err := json.Unmarshal(raw, &generic); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"name", "version", "api_version", "capabilities", "healthy", "error", "pid"} {
		if _, ok := generic[k]; !ok {
			t.Errorf("JSON %s lacks %q", raw, k)
		}
	}
	caps, _ := generic["capabilities"].(map[string]any)
	for _, k := range []string{"supports_workspace_only", "survives_supervisor_restart", "node_local"} {
		if caps[k] != true {
			t.Errorf("JSON capabilities %v: %s is not true", caps, k)
		}
	}

	// Reattach file and log file in data_dir/plugins.
	if _, err := os.Stat(filepath.Join(e.dataD, "plugins", "standalone.reattach.json")); err != nil {
		t.Error(err)
	}
	testkit.WaitFor(t, 5*time.Second, "plugin log line in the per-plugin log file", testkit.Cond(func() bool {
		data, _ := os.ReadFile(filepath.Join(e.dataD, "plugins", "standalone.log"))
		return strings.Contains(string(data), "configured")
	}))

	// Close kills the plugin process and removes its reattach file.
	m.Close()
	testkit.WaitFor(t, 10*time.Second, "plugin process gone after Close", testkit.Cond(func() bool { return len(pidsOf(t, bin)) == 0 }))
	if _, err := os.Stat(filepath.Join(e.dataD, "plugins", "standalone.reattach.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("reattach file after Close: %v", err)
	}
	if _, err := m.Get("standalone"); !errors.Is(err, plugins.ErrUnhealthy) {
		t.Errorf("Get after Close: %v", err)
	}
}

func TestRestartAfterKill(t *testing.T) {
	e := newEnv(t)
	bin := e.install(standaloneBin, "standalone")
	m := e.manager(fmt.Sprintf(standaloneHCL, filepath.Join(e.dataD, "ws")))
	start(t, m)
	for round := range 2 {
		old := status(t, m, "standalone").PID
		if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		testkit.WaitFor(t, 15*time.Second, "plugin restarted with a new pid", testkit.Cond(func() bool {
			s := status(t, m, "standalone")
			return s.Healthy && s.PID != old && s.PID > 0
		}))
		if got := status(t, m, "standalone").Restarts; got != round+1 {
			t.Errorf("round %d: restarts = %d, want %d", round, got, round+1)
		}
		checkGet(t, m, "standalone")
		if got := pidsOf(t, bin); len(got) != 1 {
			t.Fatalf("round %d: processes of the plugin: %v", round, got)
		}
		// The reattach file follows the new process.
		data, err := os.ReadFile(filepath.Join(e.dataD, "plugins", "standalone.reattach.json"))
		if err != nil {
			t.Fatal(err)
		}
		rc, err := runtime.UnmarshalReattach(data)
		if err != nil || rc.Pid != status(t, m, "standalone").PID {
			t.Fatalf("reattach file %s: %v", data, err)
		}
	}
}

// Executors a plugin launched are detached: a plugin crash leaves them
// running and the restarted plugin recovers them from their handles.
func TestExecutorSurvivesPluginCrash(t *testing.T) {
	agentctl, _, err := runtimetest.Agentctl(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	e.install(standaloneBin, "standalone")
	m := e.manager(fmt.Sprintf(`plugin "standalone" {
  config {
    workspace_root = %q
    agentctl_path  = %q
  }
}`, filepath.Join(e.dataD, "ws"), agentctl))
	start(t, m)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rt, err := m.Get("standalone")
	if err != nil {
		t.Fatal(err)
	}
	launched, err := rt.Launch(ctx, runtime.LaunchRequest{SessionID: "s1", TaskID: "t1", ExecutorID: "e1", AgentctlSecret: "sekrit", FencingToken: 1})
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	t.Cleanup(func() {
		if rt, err := m.Get("standalone"); err == nil {
			_ = rt.Destroy(context.Background(), launched.Handle)
		}
	})
	if launched.PID <= 0 || !alive(launched.PID) {
		t.Fatalf("launched %+v: agentctl not running", launched)
	}

	old := status(t, m, "standalone").PID
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 15*time.Second, "plugin restarted", testkit.Cond(func() bool {
		s := status(t, m, "standalone")
		return s.Healthy && s.PID != old
	}))
	if !alive(launched.PID) {
		t.Fatal("agentctl died with its plugin")
	}
	rt, err = m.Get("standalone")
	if err != nil {
		t.Fatal(err)
	}
	insp, err := rt.Inspect(ctx, launched.Handle)
	if err != nil || insp.State != runtime.StateRunning {
		t.Fatalf("Inspect after plugin restart: %+v, %v", insp, err)
	}
	rec, err := rt.Recover(ctx, launched.Handle, "sekrit")
	if err != nil || rec.PID != launched.PID || rec.Nonce != launched.Nonce {
		t.Fatalf("Recover after plugin restart: %+v, %v (launched pid %d nonce %s)", rec, err, launched.PID, launched.Nonce)
	}
}

// A crash is noticed while the plugin is being waited for as unhealthy.
func TestUnhealthyWhileRestarting(t *testing.T) {
	e := newEnv(t)
	e.install(testPluginBin, "good")
	m := e.manager(`plugin "good" {}`, func(o *plugins.Options) {
		o.RestartBackoffMin, o.RestartBackoffMax = 2*time.Second, 2*time.Second
	})
	start(t, m)
	old := status(t, m, "good").PID
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 5*time.Second, "plugin unhealthy after kill", testkit.Cond(func() bool { return !status(t, m, "good").Healthy }))
	s := status(t, m, "good")
	if !strings.Contains(s.Error, "plugin process exited; restarting in 2s") {
		t.Errorf("error while restarting: %q", s.Error)
	}
	if _, err := m.Get("good"); !errors.Is(err, plugins.ErrUnhealthy) || !strings.Contains(err.Error(), "exited") {
		t.Errorf("Get while restarting: %v", err)
	}
	testkit.WaitFor(t, 10*time.Second, "plugin healthy again", testkit.Cond(func() bool { return status(t, m, "good").Healthy }))
	checkGet(t, m, "good")
}

func TestReattachNewManager(t *testing.T) {
	e := newEnv(t)
	bin := e.install(testPluginBin, "good")
	const src = `plugin "good" {
  config {
    greeting = "hi"
  }
}`
	m1 := e.manager(src)
	start(t, m1)
	pid := status(t, m1, "good").PID
	m1.Detach() // like a supervisor that went away without stopping its plugins

	if !alive(pid) {
		t.Fatal("Detach stopped the plugin process")
	}
	m2 := e.manager(src)
	start(t, m2)
	s := status(t, m2, "good")
	if !s.Healthy || s.PID != pid {
		t.Fatalf("new manager: %+v, want reattached pid %d", s, pid)
	}
	if got := pidsOf(t, bin); len(got) != 1 || got[0] != pid {
		t.Fatalf("processes of the plugin after reattach: %v (want only %d)", got, pid)
	}
	checkGet(t, m2, "good")

	// The reattached plugin is supervised too.
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 15*time.Second, "reattached plugin restarted", testkit.Cond(func() bool {
		s := status(t, m2, "good")
		return s.Healthy && s.PID != pid
	}))
	checkGet(t, m2, "good")
}

// The supervisor process is killed with SIGKILL: the plugin survives (no
// SIGPIPE death), keeps logging into its log file, and the next supervisor
// reattaches to it instead of starting a second one.
func TestReattachAfterSupervisorCrash(t *testing.T) {
	e := newEnv(t)
	bin := e.install(testPluginBin, "good")
	const src = `plugin "good" {}`
	helper := exec.Command(os.Args[0], "-test.run=^$")
	helper.Env = append(os.Environ(), helperEnv+"=1", "HELPER_CONFIG="+src, "HELPER_PLUGIN_DIR="+e.pluginD, "HELPER_DATA_DIR="+e.dataD)
	stdin, err := helper.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	out, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	helper.Stderr = testWriter{t}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = helper.Process.Kill()
		_ = helper.Wait()
		t.Fatalf("helper supervisor: %v", err)
	}
	var name string
	var pid int
	var healthy bool
	if _, err := fmt.Sscanf(line, "PID %s %d %v", &name, &pid, &healthy); err != nil || !healthy || pid <= 0 {
		t.Fatalf("helper said %q (%v)", line, err)
	}
	_ = helper.Process.Kill() // SIGKILL: no Close, no cleanup
	_ = helper.Wait()

	logPath := filepath.Join(e.dataD, "plugins", "good.log")
	before, _ := os.ReadFile(logPath)
	n := strings.Count(string(before), "testplugin configured")
	if n != 1 {
		t.Fatalf("log file before the crash holds %d configured lines:\n%s", n, before)
	}

	m := e.manager(src)
	start(t, m) // reattaches and sends SetConfig again, which logs
	s := status(t, m, "good")
	if !s.Healthy || s.PID != pid {
		t.Fatalf("after crash: %+v, want reattached pid %d", s, pid)
	}
	if got := pidsOf(t, bin); len(got) != 1 {
		t.Fatalf("processes of the plugin: %v", got)
	}
	testkit.WaitFor(t, 5*time.Second, "plugin's own log line in its log file after the supervisor died", testkit.Cond(func() bool {
		data, _ := os.ReadFile(logPath)
		return strings.Count(string(data), "testplugin configured") == 2
	}))
	checkGet(t, m, "good")
	if !alive(pid) {
		t.Fatal("plugin died after logging to a broken stderr")
	}
	m.Close()
	testkit.WaitFor(t, 15*time.Second, "plugin stopped by Close", testkit.Cond(func() bool { return !alive(pid) }))
}

// TestMissingPluginStopsStart: a configured plugin whose executable is not
// in plugin_dir is an error that names its block, and no plugin process was
// started; marked optional, the same block only makes it unhealthy.
func TestMissingPluginStopsStart(t *testing.T) {
	e := newEnv(t)
	good := e.install(testPluginBin, "good")
	m := e.manager("plugin \"good\" {}\nplugin \"docker\" {\n  config {}\n}\n")
	err := m.Start(context.Background())
	var de *config.DiagError
	if !errors.As(err, &de) {
		t.Fatalf("Start: %v, want a *config.DiagError", err)
	}
	msg := err.Error()
	for _, want := range []string{"plugins.hcl:2", `plugin "docker" is configured`, "paddock-runtime-docker", "optional = true"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	if got := pidsOf(t, good); len(got) != 0 {
		t.Errorf("a plugin process runs after the refused start: %v", got)
	}

	opt := e.manager("plugin \"good\" {}\nplugin \"docker\" {\n  optional = true\n}\n")
	start(t, opt)
	checkGet(t, opt, "good")
	if s := status(t, opt, "docker"); s.Healthy || !strings.Contains(s.Error, "no executable paddock-runtime-docker") {
		t.Errorf("optional missing plugin: %+v", s)
	}
}

func TestBadPlugins(t *testing.T) {
	e := newEnv(t)
	e.install(testPluginBin, "good")
	e.write("junk", "#!/bin/sh\necho this is not a plugin\n", 0o755)
	e.write("text", "just some notes, not a program\n", 0o755)
	e.write("noexec", "#!/bin/sh\nexit 0\n", 0o644)
	for _, name := range []string{"exitstart", "hang", "hanginfo", "api99", "badcookie"} {
		e.install(testPluginBin, name)
	}
	e.install(testPluginBin, "noblock") // no plugin block: ignored
	var src strings.Builder
	for _, name := range []string{"good", "junk", "text", "noexec", "exitstart", "hang", "hanginfo", "api99", "badcookie"} {
		fmt.Fprintf(&src, "plugin %q {}\n", name)
	}
	src.WriteString("plugin \"missing\" {\n  optional = true\n}\n")
	const loadTimeout = 2 * time.Second
	m := e.manager(src.String(), func(o *plugins.Options) { o.LoadTimeout = loadTimeout })
	began := time.Now()
	start(t, m)
	// Loads run in parallel; a hang costs one bounded timeout (plus the
	// graceful-then-forced kill of a plugin that hangs after its handshake).
	if took := time.Since(began); took > loadTimeout+8*time.Second {
		t.Errorf("Start took %s", took)
	}

	for _, tc := range []struct{ name, want string }{
		{"junk", "not a Paddock runtime plugin"},
		{"text", "not a Paddock runtime plugin"},
		{"noexec", "is not executable"},
		{"exitstart", "plugin stderr: testplugin: cannot start: missing everything"},
		{"hang", "timeout while waiting for plugin to start"},
		{"hanginfo", "did not finish loading within 2s"},
		{"api99", `speaks API version "99", this host supports 1`},
		{"badcookie", "plugin stderr: This binary is a plugin"},
		{"missing", "no executable paddock-runtime-missing in plugin_dir"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := status(t, m, tc.name)
			if s.Healthy || !strings.Contains(s.Error, tc.want) || s.PID != 0 {
				t.Errorf("status %+v, want unhealthy with %q", s, tc.want)
			}
			_, err := m.Get(tc.name)
			if !errors.Is(err, plugins.ErrUnhealthy) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Get: %v", err)
			}
			if p := filepath.Join(e.pluginD, plugins.BinaryPrefix+tc.name); tc.name != "missing" && !strings.HasPrefix(tc.name, "no") && tc.name != "junk" && tc.name != "text" {
				if got := pidsOf(t, p); len(got) != 0 {
					t.Errorf("refused plugin still runs: %v", got)
				}
			}
		})
	}
	// The good plugin loaded regardless, and the unconfigured binary was ignored.
	checkGet(t, m, "good")
	if got := len(m.List()); got != 10 {
		t.Errorf("List has %d plugins, want the 10 configured ones: %+v", got, m.List())
	}
	if got := pidsOf(t, filepath.Join(e.pluginD, plugins.BinaryPrefix+"noblock")); len(got) != 0 {
		t.Errorf("a binary without a block was started: %v", got)
	}
}

func TestInvalidPluginConfig(t *testing.T) {
	e := newEnv(t)
	bin := e.install(testPluginBin, "good")
	sbin := e.install(standaloneBin, "standalone")
	src := `plugin "good" {
  config {
    greeting = "hi"
    colour   = "blue"
  }
}

plugin "standalone" {
  config {
    start_timeout = "soon"
  }
}
`
	m := e.manager(src)
	err := m.Start(context.Background())
	var de *config.DiagError
	if !errors.As(err, &de) {
		t.Fatalf("Start: %v, want a *config.DiagError", err)
	}
	msg := err.Error()
	for _, want := range []string{"plugins.hcl:4:5: Unsupported argument", "plugins.hcl:10:"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error does not hold %q:\n%s", want, msg)
		}
	}
	testkit.WaitFor(t, 10*time.Second, "plugins stopped after invalid config", testkit.Cond(func() bool {
		return len(pidsOf(t, bin)) == 0 && len(pidsOf(t, sbin)) == 0
	}))
}

// The example third-party plugin loads like ours; its required attributes are
// enforced with diagnostics at their true position.
func TestExamplePlugin(t *testing.T) {
	e := newEnv(t)
	e.install(exampleBin, "subprocess")
	bad := e.manager(`plugin "subprocess" {
  config {
    workspace_root = "/tmp/x"
  }
}`)
	err := bad.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "plugins.hcl:") || !strings.Contains(err.Error(), "agentctl_path") {
		t.Fatalf("Start without agentctl_path: %v", err)
	}
	// agentctl_path must name an executable file (any will do here).
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	m := e.manager(fmt.Sprintf(`plugin "subprocess" {
  config {
    workspace_root = %q
    agentctl_path  = %q
  }
}`, filepath.Join(e.dataD, "ws"), exe))
	start(t, m)
	if s := status(t, m, "subprocess"); !s.Healthy || s.Version != "0.1.0" || !s.Capabilities.NodeLocal {
		t.Fatalf("status %+v", s)
	}
	checkGet(t, m, "subprocess")
}

func TestGetUnknownRuntime(t *testing.T) {
	e := newEnv(t)
	e.install(testPluginBin, "good")
	m := e.manager(`plugin "good" {}`)
	start(t, m)
	_, err := m.Get("dokcer")
	if !errors.Is(err, plugins.ErrUnknownRuntime) || !strings.Contains(err.Error(), `"dokcer"`) || !strings.Contains(err.Error(), "configured: good") {
		t.Fatalf("Get unknown: %v", err)
	}
}

func TestStaleReattachFiles(t *testing.T) {
	e := newEnv(t)
	bin := e.install(testPluginBin, "good")
	e.install(testPluginBin, "other")
	stateDir := filepath.Join(e.dataD, "plugins")
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, content string }{
		// Our own pid: alive, but not the plugin binary.
		{"good", fmt.Sprintf(`{"protocol":"grpc","protocol_version":1,"network":"unix","address":"/nonexistent.sock","pid":%d}`, os.Getpid())},
		{"garbage", "{not json"},
		{"other", `{"protocol":"grpc","protocol_version":1,"network":"unix","address":"/nonexistent.sock","pid":999999999}`},
	} {
		if err := os.WriteFile(filepath.Join(stateDir, tc.name+".reattach.json"), []byte(tc.content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	m := e.manager(`plugin "good" {}`)
	start(t, m)
	s := status(t, m, "good")
	if !s.Healthy || s.PID == os.Getpid() {
		t.Fatalf("status %+v", s)
	}
	if got := pidsOf(t, bin); len(got) != 1 || got[0] != s.PID {
		t.Fatalf("processes %v", got)
	}
	for _, name := range []string{"garbage", "other"} {
		if _, err := os.Stat(filepath.Join(stateDir, name+".reattach.json")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("stale reattach file of unconfigured plugin %s: %v", name, err)
		}
	}
	data, err := os.ReadFile(filepath.Join(stateDir, "good.reattach.json"))
	if err != nil {
		t.Fatal(err)
	}
	if rc, err := runtime.UnmarshalReattach(data); err != nil || rc.Pid != s.PID {
		t.Errorf("reattach file not replaced: %s (%v)", data, err)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts plugins.Options
		want string
	}{
		{"no data dir", plugins.Options{}, "data_dir is required"},
		{"bad name", plugins.Options{DataDir: "d", Plugins: []*config.Plugin{{Name: "../x"}}}, "plugin name"},
		{"duplicate", plugins.Options{DataDir: "d", Plugins: []*config.Plugin{{Name: "x"}, {Name: "x"}}}, "configured twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := plugins.New(tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want %q", err, tc.want)
			}
		})
	}
}

func TestStatusJSONRoundTrip(t *testing.T) {
	s := plugins.Status{Name: "x", Version: "1.2", APIVersion: "1", Healthy: false, Error: "boom", PID: 7, Restarts: 2,
		Capabilities: runtime.Capabilities{NodeLocal: true, Extra: map[string]bool{"supports_gpu": true}}}
	raw, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"name":"x","version":"1.2","api_version":"1","capabilities":{"node_local":true,"supports_gpu":true,"supports_workspace_only":false,"survives_supervisor_restart":false},"healthy":false,"error":"boom","pid":7,"restarts":2}`
	if string(raw) != want {
		t.Fatalf("JSON\n got %s\nwant %s", raw, want)
	}
	var back plugins.Status
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if back.Name != s.Name || back.PID != 7 || back.Restarts != 2 || !back.Capabilities.NodeLocal || !back.Capabilities.Extra["supports_gpu"] || len(back.Capabilities.Extra) != 1 {
		t.Fatalf("round trip: %+v", back)
	}
	if err := json.Unmarshal([]byte(`{"capabilities":[1]}`), &back); err == nil {
		t.Fatal("bad capabilities accepted")
	}
}

func FuzzStatusJSON(f *testing.F) {
	f.Add([]byte(`{"name":"x","capabilities":{"node_local":true,"gpu":false},"pid":3}`))
	f.Add([]byte(`{"capabilities":null}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var s plugins.Status
		if err := json.Unmarshal(data, &s); err != nil {
			return
		}
		raw, err := json.Marshal(s)
		if err != nil {
			t.Fatalf("marshal %+v: %v", s, err)
		}
		var back plugins.Status
		if err := json.Unmarshal(raw, &back); err != nil {
			t.Fatalf("re-decode %s: %v", raw, err)
		}
		again, _ := json.Marshal(back)
		if string(again) != string(raw) {
			t.Fatalf("not stable:\n%s\n%s", raw, again)
		}
	})
}
