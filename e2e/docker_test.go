package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	wire "github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/api/termproto"
	"github.com/paddockhq/paddock/bench/harness"
	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/plugins/docker/enginetest"
	"github.com/paddockhq/paddock/shared/term/termtest"
	"github.com/paddockhq/paddock/shared/testkit"
)

// The docker runtime's supervisor-level tests (issue 8) run against the real
// engine with an executor image built once per test binary FROM scratch by
// deploy/image/build.sh from $PADDOCK_BIN (nothing is pulled). Without an
// engine they skip, unless PADDOCK_REQUIRE_DOCKER=1 (CI) makes that a failure.

const (
	dockerRequireEnv = "PADDOCK_REQUIRE_DOCKER"
	dockerTestImage  = "paddock-executor:e2e"
)

var (
	dockerOnce sync.Once
	dockerErr  error // why the engine or the image is unusable
)

// needDocker skips (or fails, with PADDOCK_REQUIRE_DOCKER=1) a test when the
// engine does not answer or the test image cannot be built.
func needDocker(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("docker tests are process tests")
	}
	dockerOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if out, err := exec.CommandContext(ctx, "docker", "version", "--format", "{{.Server.Version}}").CombinedOutput(); err != nil {
			dockerErr = fmt.Errorf("the Docker engine does not answer: %v: %s", err, strings.TrimSpace(string(out)))
			return
		}
		script, err := filepath.Abs(filepath.Join("..", "deploy", "image", "build.sh"))
		if err != nil {
			dockerErr = err
			return
		}
		if out, err := exec.CommandContext(ctx, script, "-b", binDir, "-t", dockerTestImage).CombinedOutput(); err != nil {
			dockerErr = fmt.Errorf("build %s: %v: %s", dockerTestImage, err, out)
		}
	})
	if dockerErr != nil {
		if os.Getenv(dockerRequireEnv) == "1" {
			t.Fatalf("%s=1: %v (run .ci/install-docker.sh)", dockerRequireEnv, dockerErr)
		}
		t.Skipf("no usable Docker engine (%v); run .ci/install-docker.sh, set %s=1 to make this a failure", dockerErr, dockerRequireEnv)
	}
}

// dockerEnv is one test's docker setup: a cluster label of its own (so
// cleanup never touches anything else) and a shared workspace root.
type dockerEnv struct {
	cluster, root, image string
	extra                string // more plugin config attributes
}

// newDockerEnv prepares a docker test: its containers (by cluster label) are
// force-removed when the test ends, after its servers were stopped.
func newDockerEnv(t *testing.T, image string) dockerEnv {
	t.Helper()
	needDocker(t)
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	e := dockerEnv{cluster: "e2e-docker-" + hex.EncodeToString(b), root: t.TempDir(), image: image}
	t.Cleanup(func() {
		for _, id := range e.containers(t, "") {
			_ = exec.Command("docker", "rm", "-f", id).Run()
		}
	})
	return e
}

// config is the HCL of every node: the docker plugin with this env's image,
// workspace root and cluster label, and the demo agent.
func (e dockerEnv) config() string {
	return fmt.Sprintf(`
plugin_dir = %q
plugin "docker" {
  config {
    image          = %q
    workspace_root = %q
    cluster        = %q
    start_timeout  = "30s"
%s
  }
}
agent "demo" {
  protocol = "acp"
  command  = ["paddock-demo-agent"]
}
`, filepath.Join(binDir, "plugins"), e.image, e.root, e.cluster, e.extra)
}

// containers lists the ids of this env's containers in any state, only
// session's when it is not empty.
func (e dockerEnv) containers(t *testing.T, session string) []string {
	t.Helper()
	args := []string{"ps", "-aq", "--no-trunc", "--filter", "label=paddock.cluster=" + e.cluster}
	if session != "" {
		args = append(args, "--filter", "label=paddock.session_id="+session)
	}
	return strings.Fields(docker(t, args...))
}

// docker runs the docker CLI and returns its trimmed output.
func docker(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("docker", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("docker %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// dockerSession is a session on the docker runtime and what the test saw of it.
type dockerSession struct {
	id, containerID, executorID string
	nonce, startedAt            string // agentctl's nonce, the container's start time
	shellPid                    int
	shellMark                   string // printed in the shell before the supervisor died
}

// startDockerSession creates a demo session on the docker runtime, waits for
// it, and has it remember word.
func startDockerSession(t *testing.T, api *client.Client, e dockerEnv, word string) dockerSession {
	t.Helper()
	task, err := api.CreateTask(testCtx(t), wire.CreateTaskRequest{Title: "docker"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := api.CreateSession(testCtx(t), task.ID, wire.CreateSessionRequest{Agent: "demo", Runtime: "docker"})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, api, s.ID, wire.SessionWaitingForInput)
	if got := promptAndWait(t, api, s.ID, "remember "+word); got != "ok, remembering "+word {
		t.Fatalf("reply %q", got)
	}
	ex := dockerExecutor(t, api, s.ID)
	if ex.ContainerID == "" || ex.Runtime != "docker" || ex.Status != wire.ExecutorReady {
		t.Fatalf("executor of a docker session: %+v", ex)
	}
	// The executor row names the one running container labelled for the session.
	if got := e.containers(t, s.ID); len(got) != 1 || got[0] != ex.ContainerID {
		t.Fatalf("containers of session %s: %v, want [%s]", s.ID, got, ex.ContainerID)
	}
	if st := docker(t, "inspect", "-f", "{{.State.Running}}", ex.ContainerID); st != "true" {
		t.Fatalf("container running: %s", st)
	}
	return dockerSession{id: s.ID, containerID: ex.ContainerID, executorID: ex.ID, nonce: ex.Nonce,
		startedAt: docker(t, "inspect", "-f", "{{.State.StartedAt}}", ex.ContainerID)}
}

// dockerExecutor is the session's current executor row.
func dockerExecutor(t *testing.T, api *client.Client, sessionID string) wire.Executor {
	t.Helper()
	s, err := api.GetSession(testCtx(t), sessionID)
	if err != nil {
		t.Fatal(err)
	}
	ex, err := api.Executor(testCtx(t), s.ExecutorID)
	if err != nil {
		t.Fatalf("executor %s of %s: %v", s.ExecutorID, sessionID, err)
	}
	return *ex
}

// shellAttach attaches to the session's shell over the supervisor (no ACL).
func shellAttach(t *testing.T, n *harness.Node, sessionID string) *termtest.Client {
	t.Helper()
	c, resp, err := termDial(t, termURL(n, sessionID, "shell"), nil, termproto.Hello{Cols: 200, Rows: 50})
	if err != nil {
		t.Fatalf("attach to the shell of %s via %s: %v (%v)", sessionID, n.Name, err, resp)
	}
	c.WaitMsg("attached")
	return c
}

// shellRun types cmd into c's shell and returns what it printed, found between
// two markers the typed line itself does not contain.
func shellRun(t *testing.T, c *termtest.Client, cmd string) string {
	t.Helper()
	n := mrand.IntN(1_000_000)
	begin, end := fmt.Sprintf("BEGIN%d", n+1), fmt.Sprintf("END%d", n+2)
	c.Input(fmt.Sprintf("echo \"BEGIN$((%d+1))\"; %s; echo \"END$((%d+2))\"\r", n, cmd, n))
	var got string
	testkit.WaitFor(t, 15*time.Second, "the output of "+cmd, testkit.Cond(func() bool {
		out := c.Output()
		i, j := strings.LastIndex(out, begin), strings.LastIndex(out, end)
		if i < 0 || j < i {
			return false
		}
		got = strings.TrimSpace(out[i+len(begin) : j])
		return true
	}))
	return got
}

// checkInsideContainer checks, over a terminal through the supervisor, that
// the shell runs in the session's container, and returns the shell's pid
// and a marker it printed.
func checkInsideContainer(t *testing.T, n *harness.Node, s dockerSession) (int, string) {
	t.Helper()
	c := shellAttach(t, n, s.id)
	cmdline := strings.Fields(shellRun(t, c, "tr '\\0' ' ' </proc/1/cmdline"))
	if len(cmdline) < 2 || filepath.Base(cmdline[0]) != "agentctl" || cmdline[1] != "serve" {
		t.Fatalf("pid 1 of the container runs %q, want agentctl serve", cmdline)
	}
	host := shellRun(t, c, "hostname")
	want := docker(t, "inspect", "-f", "{{.Config.Hostname}}", s.containerID)
	if host != want || !strings.HasPrefix(host, "paddock-") {
		t.Fatalf("hostname in the shell %q, container's %q (want it, starting with paddock-)", host, want)
	}
	if pwd := shellRun(t, c, "pwd"); pwd != "/workspace" {
		t.Fatalf("the shell's directory %q, want /workspace", pwd)
	}
	pid := c.ShellPid()
	mark := c.Marker()
	_ = c.Close()
	c.WaitClosed()
	return pid, mark
}

// checkSameShell re-attaches to the shell: the same pid, and a full replay
// with what the shell printed before.
func checkSameShell(t *testing.T, n *harness.Node, s dockerSession) {
	t.Helper()
	c := shellAttach(t, n, s.id)
	c.WaitOutput(s.shellMark)
	if got := c.ShellPid(); got != s.shellPid {
		t.Fatalf("shell pid %d after recovery, want the same %d", got, s.shellPid)
	}
	_ = c.Close()
	c.WaitClosed()
}

// checkRecoveredContainer waits until the session runs again and checks it
// is served by the same container and that the agent remembers word.
func checkRecoveredContainer(t *testing.T, api *client.Client, e dockerEnv, s dockerSession, word string) {
	t.Helper()
	testkit.WaitFor(t, 60*time.Second, "session "+s.id+" to run again", testkit.Cond(func() bool {
		st, err := api.SessionStatus(testCtx(t), s.id)
		if err == nil && st.State == wire.SessionError {
			t.Fatalf("session %s is ERROR after recovery: %+v", s.id, st)
		}
		return err == nil && st.IsAgentRunning && st.State == wire.SessionWaitingForInput
	}))
	ex := dockerExecutor(t, api, s.id)
	if ex.ID != s.executorID || ex.ContainerID != s.containerID || ex.Status != wire.ExecutorReady {
		t.Fatalf("executor after recovery %s/%s (%s), want %s/%s ready", ex.ID, ex.ContainerID, ex.Status, s.executorID, s.containerID)
	}
	// Neither the container nor its agentctl was restarted.
	if ex.Nonce != s.nonce {
		t.Fatalf("agentctl nonce %q after recovery, want the same %q", ex.Nonce, s.nonce)
	}
	if got := docker(t, "inspect", "-f", "{{.State.StartedAt}}", s.containerID); got != s.startedAt {
		t.Fatalf("container started at %s after recovery, want the same %s", got, s.startedAt)
	}
	if got := e.containers(t, s.id); len(got) != 1 || got[0] != s.containerID {
		t.Fatalf("containers of session %s after recovery: %v, want only %s", s.id, got, s.containerID)
	}
	if got := promptAndWait(t, api, s.id, "recall"); got != "you asked me to remember: "+word {
		t.Fatalf("after recovery, recall = %q", got)
	}
}

func TestDockerSessionPromptTerminalMessages(t *testing.T) {
	e := newDockerEnv(t, dockerTestImage)
	c := startCluster(t, 1, false, e.config())
	node := leaderOf(t, c)
	api := apiClient(t, node)
	s := startDockerSession(t, api, e, "apple")
	if got := promptAndWait(t, api, s.id, "hello container"); got != "turn 2: hello container" {
		t.Fatalf("reply %q", got)
	}
	checkInsideContainer(t, node, s)

	msgs, err := api.Messages(testCtx(t), s.id)
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, m := range msgs {
		seen = append(seen, string(m.Role)+": "+m.Text)
	}
	for _, want := range []string{"user: remember apple", "agent: ok, remembering apple", "user: hello container", "agent: turn 2: hello container"} {
		found := false
		for _, s := range seen {
			found = found || s == want
		}
		if !found {
			t.Fatalf("messages %q lack %q", seen, want)
		}
	}

	// Bad input on a working runtime: a task workspace outside workspace_root
	// is a clear ERROR and leaves no container behind.
	outside := t.TempDir()
	task, err := api.CreateTask(testCtx(t), wire.CreateTaskRequest{Title: "outside", Workspace: wire.Workspace{Path: outside}})
	if err != nil {
		t.Fatal(err)
	}
	bad, err := api.CreateSession(testCtx(t), task.ID, wire.CreateSessionRequest{Agent: "demo", Runtime: "docker"})
	if err != nil {
		t.Fatal(err)
	}
	st := waitState(t, api, bad.ID, wire.SessionError)
	if !strings.Contains(st.ErrorMessage, "outside workspace_root") {
		t.Fatalf("error of a session with a workspace outside the root: %q", st.ErrorMessage)
	}
	if got := e.containers(t, bad.ID); len(got) != 0 {
		t.Fatalf("containers left by a refused launch: %v", got)
	}
}

func TestDockerSingleNodeRestartKeepsContainer(t *testing.T) {
	e := newDockerEnv(t, dockerTestImage)
	c := startCluster(t, 1, false, e.config())
	node := leaderOf(t, c)
	api := apiClient(t, node)
	s := startDockerSession(t, api, e, "banana")
	s.shellPid, s.shellMark = checkInsideContainer(t, node, s)

	node.Kill()
	if st := docker(t, "inspect", "-f", "{{.State.Running}}", s.containerID); st != "true" {
		t.Fatalf("the container stopped with the supervisor: running=%s", st)
	}
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	leaderOf(t, c)
	checkRecoveredContainer(t, api, e, s, "banana")
	checkSameShell(t, node, s)
}

func TestDockerLeaderKillKeepsContainer(t *testing.T) {
	e := newDockerEnv(t, dockerTestImage)
	c := startCluster(t, 3, true, e.config())
	leader := leaderOf(t, c)
	api := apiClient(t, leader)
	s := startDockerSession(t, api, e, "cherry")
	s.shellPid, s.shellMark = checkInsideContainer(t, leader, s)

	leader.Kill()
	newLeader := leaderOf(t, c)
	if newLeader == leader {
		t.Fatal("the killed node still leads")
	}
	api = apiClient(t, newLeader)
	checkRecoveredContainer(t, api, e, s, "cherry")
	checkSameShell(t, newLeader, s)
}

func TestDockerContainerRemovedWhileSupervisorDown(t *testing.T) {
	e := newDockerEnv(t, dockerTestImage)
	c := startCluster(t, 1, false, e.config())
	node := leaderOf(t, c)
	api := apiClient(t, node)
	s := startDockerSession(t, api, e, "damson")

	node.Kill()
	docker(t, "rm", "-f", s.containerID)
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	leaderOf(t, c)
	var st *wire.Status
	testkit.WaitFor(t, 60*time.Second, "the session whose container was removed to be ERROR executor_lost", testkit.Cond(func() bool {
		var err error
		st, err = api.SessionStatus(testCtx(t), s.id)
		return err == nil && st.State == wire.SessionError && st.ResumeReason != nil && *st.ResumeReason == wire.ReasonExecutorLost
	}))
	ex, err := api.Executor(testCtx(t), s.executorID)
	if err != nil || ex.Status != wire.ExecutorError {
		t.Fatalf("executor after its container was removed: %+v %v", ex, err)
	}
	short := s.containerID[:12]
	if !strings.Contains(ex.ErrorMessage, short) || !strings.Contains(ex.ErrorMessage, "gone") {
		t.Fatalf("executor error %q does not say that container %s is gone", ex.ErrorMessage, short)
	}
	sess, err := api.GetSession(testCtx(t), s.id)
	if err != nil || !strings.Contains(sess.ErrorMessage, short) {
		t.Fatalf("session error %q (%v) does not name container %s", sess.ErrorMessage, err, short)
	}
	t.Logf("executor error: %s", ex.ErrorMessage)
	if st.ResumeMessage == nil || *st.ResumeMessage == "" {
		t.Fatalf("status without a resume message: %+v", st)
	}
	if got := e.containers(t, s.id); len(got) != 0 {
		t.Fatalf("containers of the lost session: %v, want none", got)
	}
}

var imageRefRE = regexp.MustCompile(`paddock-e2e-missing:[0-9a-f]+`)

func TestDockerMissingImage(t *testing.T) {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	image := "paddock-e2e-missing:" + hex.EncodeToString(b)
	e := newDockerEnv(t, image)
	c := startCluster(t, 1, false, e.config())
	api := apiClient(t, leaderOf(t, c))
	task, err := api.CreateTask(testCtx(t), wire.CreateTaskRequest{Title: "no image"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := api.CreateSession(testCtx(t), task.ID, wire.CreateSessionRequest{Agent: "demo", Runtime: "docker"})
	if err != nil {
		t.Fatalf("create session: %v (the launch fails later, asynchronously)", err)
	}
	st := waitState(t, api, s.ID, wire.SessionError)
	t.Logf("session error: %s", st.ErrorMessage)
	if got := imageRefRE.FindString(st.ErrorMessage); got != image || !strings.Contains(st.ErrorMessage, "does not exist") {
		t.Fatalf("error of a session with a missing image: %q, want it to say %s does not exist", st.ErrorMessage, image)
	}
	if got := e.containers(t, ""); len(got) != 0 {
		t.Fatalf("containers left by a launch with a missing image: %v", got)
	}
	if ex, err := api.Executor(testCtx(t), st.ExecutorID); err == nil && ex.Status != wire.ExecutorError {
		t.Fatalf("executor of the failed launch: %+v", ex)
	}
}

// inspectedContainer is what recreateContainer copies from docker inspect.
type inspectedContainer struct {
	Config struct {
		Hostname, User, WorkingDir, Image string
		Env, Entrypoint, Cmd              []string
		Labels                            map[string]string
	}
	HostConfig struct {
		Binds []string
	}
}

// recreateContainer replaces a container with a new one of the same image,
// labels, environment, mounts and command (what an operator restoring it by
// hand would do) and returns the new container's id.
func recreateContainer(t *testing.T, id string) string {
	t.Helper()
	var ins []inspectedContainer
	if err := json.Unmarshal([]byte(docker(t, "inspect", id)), &ins); err != nil || len(ins) != 1 {
		t.Fatalf("inspect %s: %v", id, err)
	}
	c := ins[0].Config
	if len(c.Entrypoint) != 1 {
		t.Fatalf("entrypoint %q: want one element", c.Entrypoint)
	}
	// The environment holds agentctl's secret: pass it in a private file,
	// not on the command line.
	envFile := filepath.Join(t.TempDir(), "env")
	if err := os.WriteFile(envFile, []byte(strings.Join(c.Env, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	docker(t, "rm", "-f", id)
	args := []string{"run", "-d", "--name", "paddock-e2e-recreated-" + id[:12], "--hostname", c.Hostname, "--user", c.User,
		"--workdir", c.WorkingDir, "--entrypoint", c.Entrypoint[0], "--env-file", envFile, "-p", "127.0.0.1::7800/tcp"}
	for k, v := range c.Labels {
		args = append(args, "--label", k+"="+v)
	}
	for _, b := range ins[0].HostConfig.Binds {
		args = append(args, "-v", b)
	}
	args = append(append(args, c.Image), c.Cmd...)
	return docker(t, args...)
}

func TestDockerStoppedOrRecreatedContainerRecovered(t *testing.T) {
	e := newDockerEnv(t, dockerTestImage)
	c := startCluster(t, 1, false, e.config())
	node := leaderOf(t, c)
	api := apiClient(t, node)
	stopped := startDockerSession(t, api, e, "elder")
	recreated := startDockerSession(t, api, e, "fig")

	node.Kill()
	docker(t, "stop", "-t", "1", stopped.containerID)
	newID := recreateContainer(t, recreated.containerID)
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	leaderOf(t, c)

	// Both agentctls were restarted (new nonces): the agents are resumed from
	// their tokens and remember the conversation kept in the workspace.
	for _, tc := range []struct {
		s           dockerSession
		containerID string
		word        string
	}{
		{stopped, stopped.containerID, "elder"}, // started again in place
		{recreated, newID, "fig"},               // found by its session label
	} {
		testkit.WaitFor(t, 60*time.Second, "session "+tc.s.id+" to run again", testkit.Cond(func() bool {
			st, err := api.SessionStatus(testCtx(t), tc.s.id)
			if err == nil && st.State == wire.SessionError {
				t.Fatalf("session %s is ERROR after recovery: %+v", tc.s.id, st)
			}
			return err == nil && st.IsAgentRunning && st.State == wire.SessionWaitingForInput
		}))
		ex := dockerExecutor(t, api, tc.s.id)
		if ex.ID != tc.s.executorID || ex.ContainerID != tc.containerID || ex.Status != wire.ExecutorReady || ex.Nonce == tc.s.nonce {
			t.Fatalf("executor after recovery %s/%s (%s, nonce %s), want %s/%s ready with a new nonce", ex.ID, ex.ContainerID, ex.Status, ex.Nonce, tc.s.executorID, tc.containerID)
		}
		if got := e.containers(t, tc.s.id); len(got) != 1 || got[0] != tc.containerID {
			t.Fatalf("containers of session %s: %v, want only %s", tc.s.id, got, tc.containerID)
		}
		if got := promptAndWait(t, api, tc.s.id, "recall"); got != "you asked me to remember: "+tc.word {
			t.Fatalf("after recovery, recall = %q", got)
		}
	}
}

func TestDockerEngineDown(t *testing.T) {
	e := newDockerEnv(t, dockerTestImage)
	e.extra = fmt.Sprintf("    host = %q", "unix://"+filepath.Join(t.TempDir(), "no-engine.sock"))
	c := startCluster(t, 1, false, e.config())
	api := apiClient(t, leaderOf(t, c))
	task, err := api.CreateTask(testCtx(t), wire.CreateTaskRequest{Title: "no engine"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := api.CreateSession(testCtx(t), task.ID, wire.CreateSessionRequest{Agent: "demo", Runtime: "docker"})
	if err != nil {
		t.Fatalf("create session: %v", err)
	}
	st := waitState(t, api, s.ID, wire.SessionError)
	t.Logf("session error: %s", st.ErrorMessage)
	if !strings.Contains(st.ErrorMessage, "no-engine.sock") || !strings.Contains(st.ErrorMessage, "unreachable") || !strings.Contains(st.ErrorMessage, "unavailable") {
		t.Fatalf("error of a session whose engine is down: %q, want it to name the engine, unreachable and unavailable", st.ErrorMessage)
	}
}

func TestDockerInvalidLimitsRefusedAtStart(t *testing.T) {
	needDocker(t)
	for _, tc := range []struct{ attr, value, want string }{
		{"memory", `"1k"`, "below the engine's minimum"},
		{"cpus", "-1", "cpus must be a positive number"},
		{"pids", "1.5", "pids must be a positive whole number"},
	} {
		t.Run(tc.attr, func(t *testing.T) {
			e := newDockerEnv(t, dockerTestImage)
			e.extra = fmt.Sprintf("    %s = %s", tc.attr, tc.value)
			dir := t.TempDir()
			pair, err := testkit.FreePorts("127.0.0.1", 2)
			if err != nil {
				t.Fatal(err)
			}
			httpPort, raftPort := pair[0], pair[1]
			cfg := fmt.Sprintf("node_name = \"bad\"\ndata_dir = %q\nbind_addr = \"127.0.0.1\"\nports {\n  http = %d\n  raft = %d\n}\nserver {\n  bootstrap_expect = 1\n}\n%s",
				filepath.Join(dir, "data"), httpPort, raftPort, e.config())
			path := filepath.Join(dir, "config.hcl")
			if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, filepath.Join(binDir, "paddock"), "server", "-config", path)
			cmd.Dir = dir
			out, err := cmd.CombinedOutput()
			if err == nil || ctx.Err() != nil {
				t.Fatalf("server with %s = %s: %v (timed out: %v), want it to refuse to start; output:\n%s", tc.attr, tc.value, err, ctx.Err(), out)
			}
			// The diagnostic names the attribute, its place in the file and the reason.
			line := 0
			for i, l := range strings.Split(cfg, "\n") {
				if strings.HasPrefix(strings.TrimSpace(l), tc.attr+" =") {
					line = i + 1
				}
			}
			if !strings.Contains(string(out), tc.want) || !strings.Contains(string(out), fmt.Sprintf("config.hcl:%d", line)) {
				t.Fatalf("server with %s = %s said:\n%s\nwant %q at config.hcl:%d", tc.attr, tc.value, out, tc.want, line)
			}
		})
	}
}

// Once recovery is done (here after a restart) the leader removes a
// container of its cluster that no executor row owns, and leaves alone a
// live session's container, a stopped session's container and another
// cluster's container. The plugin's reconcile_grace of 1s stands in for the
// supervisor's 2-minute grace.
func TestDockerReconcileRemovesOrphanContainer(t *testing.T) {
	e := newDockerEnv(t, dockerTestImage)
	e.extra = `    reconcile_grace = "1s"`
	c := startCluster(t, 1, false, e.config())
	node := leaderOf(t, c)
	api := apiClient(t, node)
	live := startDockerSession(t, api, e, "elderberry")
	stopped := startDockerSession(t, api, e, "feijoa")
	if _, err := api.Stop(testCtx(t), stopped.id); err != nil {
		t.Fatal(err)
	}
	waitState(t, api, stopped.id, wire.SessionStopped)
	// A stop ends the agent; the container (agentctl) keeps serving the
	// workspace until the session is deleted.
	if ex := dockerExecutor(t, api, stopped.id); ex.Status != wire.ExecutorReady {
		t.Fatalf("executor of the stopped session: %s, want ready (workspace access)", ex.Status)
	}

	b := make([]byte, 8)
	_, _ = rand.Read(b)
	orphanExec := "ex-" + hex.EncodeToString(b)
	labels := func(cluster, session, executor string) []string {
		return []string{"--label", "paddock.cluster=" + cluster, "--label", "paddock.session_id=" + session, "--label", "paddock.executor_id=" + executor}
	}
	run := func(labels []string) string {
		args := append([]string{"run", "-d"}, labels...)
		return docker(t, append(args, "--entrypoint", "sleep", e.image, "300")...)
	}
	orphan := run(labels(e.cluster, "orphan-"+hex.EncodeToString(b[:4]), orphanExec))
	foreign := run(labels(e.cluster+"-other", "foreign-"+hex.EncodeToString(b[:4]), orphanExec))
	t.Cleanup(func() { _ = exec.Command("docker", "rm", "-f", foreign).Run() })
	// Docker records creation times in whole seconds: let the orphan be
	// certainly older than the grace before the next pass can look at it.
	created, err := time.Parse(time.RFC3339Nano, docker(t, "inspect", "-f", "{{.Created}}", orphan))
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "the orphan to be older than the grace", testkit.Cond(func() bool { return time.Since(created) > 2500*time.Millisecond }))

	node.Kill()
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	leaderOf(t, c)
	testkit.WaitFor(t, 60*time.Second, "the leader to remove the orphaned container", testkit.Cond(func() bool {
		return docker(t, "ps", "-aq", "--no-trunc", "--filter", "id="+orphan) == ""
	}))
	checkRecoveredContainer(t, api, e, live, "elderberry")
	if got := e.containers(t, stopped.id); len(got) != 1 || got[0] != stopped.containerID {
		t.Fatalf("containers of the stopped session: %v, want its own %s", got, stopped.containerID)
	}
	if st := docker(t, "inspect", "-f", "{{.State.Running}}", foreign); st != "true" {
		t.Fatalf("another cluster's container was touched: running=%s", st)
	}
	// The stopped session still resumes in its own container.
	if _, err := api.Resume(testCtx(t), stopped.id); err != nil {
		t.Fatal(err)
	}
	waitState(t, api, stopped.id, wire.SessionWaitingForInput)
	if ex := dockerExecutor(t, api, stopped.id); ex.ContainerID != stopped.containerID {
		t.Fatalf("resumed in container %s, want the kept %s", ex.ContainerID, stopped.containerID)
	}
}

// The engine stops while the supervisor is down and comes back after it
// restarted: recovery retries the unavailable runtime, then finds the same
// container (stopped with the engine, started again) and resumes the agent
// from its token. It stops the shared engine, so it runs alone (make test
// runs it after the rest with PADDOCK_DOCKER_ENGINE_RESTART=1).
func TestDockerEngineStoppedDuringSupervisorRestart(t *testing.T) {
	if os.Getenv("PADDOCK_DOCKER_ENGINE_RESTART") != "1" {
		t.Skip("stops the shared engine; set PADDOCK_DOCKER_ENGINE_RESTART=1 to run")
	}
	e := newDockerEnv(t, dockerTestImage)
	engine := enginetest.Find(t)
	c := startCluster(t, 1, false, e.config())
	node := leaderOf(t, c)
	api := apiClient(t, node)
	s := startDockerSession(t, api, e, "plum")
	node.Kill()
	engine.Stop()
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	leaderOf(t, c)
	// Recovery is retrying the runtime now; the engine comes back within
	// its budget.
	testkit.WaitFor(t, 30*time.Second, "the restarted node's recovery to start", testkit.Cond(func() bool {
		return strings.Count(node.Log(), "recovery started") >= 2
	}))
	engine.Start()
	testkit.WaitFor(t, 90*time.Second, "session "+s.id+" to run again", testkit.Cond(func() bool {
		st, err := api.SessionStatus(testCtx(t), s.id)
		return err == nil && st.IsAgentRunning && st.State == wire.SessionWaitingForInput
	}))
	ex := dockerExecutor(t, api, s.id)
	if ex.ContainerID != s.containerID || ex.Status != wire.ExecutorReady {
		t.Fatalf("executor after the engine restart: %s (%s), want container %s ready", ex.ContainerID, ex.Status, s.containerID)
	}
	if got := e.containers(t, s.id); len(got) != 1 || got[0] != s.containerID {
		t.Fatalf("containers of session %s: %v, want only %s", s.id, got, s.containerID)
	}
	// The engine stopped the container and its agentctl with it: the same
	// container was started again and the agent resumed from its token.
	if got := docker(t, "inspect", "-f", "{{.State.StartedAt}}", s.containerID); got == s.startedAt || ex.Nonce == s.nonce {
		t.Fatalf("container started at %s (was %s), agentctl nonce %s (was %s): want both new", got, s.startedAt, ex.Nonce, s.nonce)
	}
	if got := promptAndWait(t, api, s.id, "recall"); got != "you asked me to remember: plum" {
		t.Fatalf("after the engine restart, recall = %q", got)
	}
}
