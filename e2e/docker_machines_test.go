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
	"github.com/paddockhq/paddock/bench/netns"
	"github.com/paddockhq/paddock/shared/testkit"
)

// The docker runtime on three machines. Each machine is a network
// namespace running its own Docker engine: a dockerd entered into the
// namespace (nsenter --net, so it keeps the host's mounts and cgroups) with
// its own --data-root, --exec-root (so its own containerd), -H unix socket
// and --pidfile. The executor image is built once on the default engine and
// copied into each machine's engine with docker save / docker load, as an
// operator would. Each node's docker plugin talks to its own machine's
// engine (a unix socket: node-local) and publishes agentctl's port on the
// machine's address, so the containers of one machine are reachable from
// the others over the switch and from nowhere else.
//
// One departure from three real machines: the engines run with
// --iptables=false, so a published port is served by docker-proxy (the
// userland proxy every engine runs) rather than by a DNAT rule; the path
// from another machine to agentctl is the same address and port.

// machineEngine is one machine's Docker engine.
type machineEngine struct {
	// host is the engine address for the docker CLI and plugin.
	host string
	dir  string
	cmd  *exec.Cmd
}

// startMachineEngines starts a Docker engine in each machine's namespace
// and loads image into it. The engines stop (their containers labelled
// cluster removed first) at cleanup, after the servers, before the
// namespaces go.
func startMachineEngines(t *testing.T, nw *netns.Net, image, cluster string) []*machineEngine {
	t.Helper()
	// Short paths: unix socket paths (the engine's, its containerd's) are
	// limited to 108 bytes.
	base, err := os.MkdirTemp("", "pdk")
	if err != nil {
		t.Fatal(err)
	}
	tarball := filepath.Join(base, "image.tar")
	docker(t, "save", "-o", tarball, image)
	var engines []*machineEngine
	t.Cleanup(func() {
		for _, e := range engines {
			e.stop(t, cluster)
		}
		if err := os.RemoveAll(base); err != nil {
			t.Logf("remove engine directories: %v", err)
		}
	})
	for i, h := range nw.Hosts {
		dir := filepath.Join(base, fmt.Sprintf("m%d", i+1))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		e := &machineEngine{host: "unix://" + filepath.Join(dir, "docker.sock"), dir: dir}
		log, err := os.Create(filepath.Join(dir, "dockerd.log"))
		if err != nil {
			t.Fatal(err)
		}
		e.cmd = exec.Command("nsenter", "--net=/run/netns/"+h.Namespace, "dockerd",
			"--data-root", filepath.Join(dir, "data"), "--exec-root", filepath.Join(dir, "exec"),
			"-H", e.host, "--pidfile", filepath.Join(dir, "docker.pid"), "--iptables=false")
		e.cmd.Stdout, e.cmd.Stderr = log, log
		if err := e.cmd.Start(); err != nil {
			t.Fatalf("start the engine of machine %d: %v", i+1, err)
		}
		log.Close()
		engines = append(engines, e)
	}
	for i, e := range engines {
		testkit.WaitFor(t, 60*time.Second, fmt.Sprintf("the engine of machine %d to answer", i+1), testkit.Cond(func() bool {
			return exec.Command("docker", "-H", e.host, "version").Run() == nil
		}))
		e.docker(t, "load", "-i", tarball)
	}
	return engines
}

// docker runs the docker CLI against this engine.
func (e *machineEngine) docker(t *testing.T, args ...string) string {
	t.Helper()
	return docker(t, append([]string{"-H", e.host}, args...)...)
}

// containers lists the engine's containers of cluster (of session when set).
func (e *machineEngine) containers(t *testing.T, cluster, session string) []string {
	t.Helper()
	args := []string{"ps", "-aq", "--no-trunc", "--filter", "label=paddock.cluster=" + cluster}
	if session != "" {
		args = append(args, "--filter", "label=paddock.session_id="+session)
	}
	return strings.Fields(e.docker(t, args...))
}

// stop removes the cluster's containers and stops the engine.
func (e *machineEngine) stop(t *testing.T, cluster string) {
	t.Helper()
	if e.cmd.Process == nil {
		return
	}
	out, _ := exec.Command("docker", "-H", e.host, "ps", "-aq", "--filter", "label=paddock.cluster="+cluster).Output()
	for _, id := range strings.Fields(string(out)) {
		_ = exec.Command("docker", "-H", e.host, "rm", "-f", id).Run()
	}
	_ = e.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		_ = e.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = e.cmd.Process.Kill()
		<-done
	}
	if t.Failed() {
		if b, err := os.ReadFile(filepath.Join(e.dir, "dockerd.log")); err == nil {
			t.Logf("--- engine log %s (tail) ---\n%s", e.host, tail(string(b), 4000))
		}
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// TestDockerMachinesLeaderKillKeepsContainers is the failover test on the
// docker runtime with the engine of the owning node: a docker session on
// each of three machines, each container on its own machine's engine; the
// leader's server process is killed (its machine and engine live on), and
// every session answers recall through the new leader from the same
// container and agentctl, never passing through ERROR. The plugin config
// sets no publish_addr: agentctl's port is published on each machine's own
// address by default.
func TestDockerMachinesLeaderKillKeepsContainers(t *testing.T) {
	needDocker(t)
	nw := newMachineNet(t)
	label := newDockerEnv(t, dockerTestImage).cluster
	engines := startMachineEngines(t, nw, dockerTestImage, label)
	m := startMachinesOn(t, nw, "", func(i int) string {
		root := filepath.Join(t.TempDir(), fmt.Sprintf("machine%d-workspaces", i+1))
		return fmt.Sprintf(`
plugin "docker" {
  config {
    image          = %q
    host           = %q
    workspace_root = %q
    cluster        = %q
    start_timeout  = "30s"
  }
}
`, dockerTestImage, engines[i].host, root, label)
	})
	leader := leaderOf(t, m.c)
	api := machineClient(t, leader)
	testkit.WaitFor(t, 30*time.Second, "every machine registered with a healthy docker plugin", testkit.Cond(func() bool {
		hs, err := api.Nodes(testCtx(t))
		ok := 0
		for _, h := range hs {
			if h.Available && h.Plugins["docker"] {
				ok++
			}
		}
		return err == nil && ok == 3
	}))
	task, err := api.CreateTask(testCtx(t), wire.CreateTaskRequest{Title: "docker on three machines"})
	if err != nil {
		t.Fatal(err)
	}

	type placed struct {
		id, word, node        string
		engine                *machineEngine
		executorID, container string
		nonce, startedAt      string
	}
	var sessions []*placed
	for i, n := range m.c.Nodes {
		s, err := api.CreateSession(testCtx(t), task.ID, wire.CreateSessionRequest{Agent: "demo", Runtime: "docker",
			RuntimeOptions: map[string]string{"node": n.Name}})
		if err != nil {
			t.Fatalf("docker session on %s: %v", n.Name, err)
		}
		sessions = append(sessions, &placed{id: s.ID, word: fmt.Sprintf("word%d", i), node: n.Name, engine: engines[i]})
	}
	for i, s := range sessions {
		waitState(t, api, s.id, wire.SessionWaitingForInput)
		ex := dockerExecutor(t, api, s.id)
		if ex.Node != s.node || ex.ContainerID == "" || !strings.Contains(ex.AgentctlURL, "//"+nw.Hosts[i].IP+":") {
			t.Fatalf("session %d: executor on %s (container %q) at %s, want %s at %s", i, ex.Node, ex.ContainerID, ex.AgentctlURL, s.node, nw.Hosts[i].IP)
		}
		// The container runs on its own machine's engine, and on no other.
		for j, e := range engines {
			got := e.containers(t, label, s.id)
			if want := j == i; (len(got) == 1 && got[0] == ex.ContainerID) != want || (!want && len(got) != 0) {
				t.Fatalf("session %d: containers on machine %d's engine %v (its container %s belongs on machine %d only)", i, j+1, got, ex.ContainerID, i+1)
			}
		}
		s.executorID, s.container, s.nonce = ex.ID, ex.ContainerID, ex.Nonce
		s.startedAt = s.engine.docker(t, "inspect", "-f", "{{.State.StartedAt}}", ex.ContainerID)
		if got := promptAndWait(t, api, s.id, "remember "+s.word); got != "ok, remembering "+s.word {
			t.Fatalf("session %d: remember answered %q", i, got)
		}
	}

	// Kill the leader's server process only: its machine, its engine and
	// the containers on it live on.
	watch := watchNeverError(t, m.c, leader, sessions[0].id, sessions[1].id, sessions[2].id)
	leader.Kill()
	newLeader := leaderOf(t, m.c)
	napi := machineClient(t, newLeader)
	for i, s := range sessions {
		testkit.WaitFor(t, 30*time.Second, fmt.Sprintf("docker session %d live on the new leader", i), testkit.Cond(func() bool {
			st, err := napi.SessionStatus(testCtx(t), s.id)
			return err == nil && st.IsAgentRunning && st.State == wire.SessionWaitingForInput
		}))
		if got, want := promptAndWait(t, napi, s.id, "recall"), "you asked me to remember: "+s.word; got != want {
			t.Fatalf("session %d on %s after the leader's kill: recall = %q, want %q", i, s.node, got, want)
		}
		ex := dockerExecutor(t, napi, s.id)
		if ex.ID != s.executorID || ex.ContainerID != s.container || ex.Nonce != s.nonce || ex.Node != s.node {
			t.Fatalf("session %d after the leader's kill: executor %s container %s nonce %s on %s, want %s/%s/%s on %s (the same container and agentctl)",
				i, ex.ID, ex.ContainerID, ex.Nonce, ex.Node, s.executorID, s.container, s.nonce, s.node)
		}
		if got := s.engine.docker(t, "inspect", "-f", "{{.State.StartedAt}}", s.container); got != s.startedAt {
			t.Fatalf("session %d: container started at %s after the leader's kill, want the same %s", i, got, s.startedAt)
		}
		if got := s.engine.containers(t, label, s.id); len(got) != 1 {
			t.Fatalf("session %d: containers after the leader's kill %v, want only %s", i, got, s.container)
		}
	}
	if bad := watch(); bad != "" {
		t.Fatal(bad)
	}
}
