package dockerexec_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/paddockhq/paddock/plugins/docker/dockerexec"
	"github.com/paddockhq/paddock/plugins/docker/enginetest"
	"github.com/paddockhq/paddock/shared/agentctl"
	"github.com/paddockhq/paddock/shared/runtime"
	"github.com/paddockhq/paddock/shared/runtime/conformance"
	"github.com/paddockhq/paddock/shared/runtime/runtimetest"
	"github.com/paddockhq/paddock/shared/testkit"
)

func TestConformance(t *testing.T) {
	needDocker(t)
	conformance.Run(t, conformance.Config{
		PluginPath: pluginPath,
		PluginConfig: `image = "` + testImage + `"
workspace_root = "{{temp_dir}}"`,
	})
}

// The conformance kit over TLS: agentctl in the container serves HTTPS
// with its own key, and Launch and Recover report its fingerprint.
func TestConformanceAgentctlTLS(t *testing.T) {
	needDocker(t)
	conformance.Run(t, conformance.Config{
		PluginPath: pluginPath,
		PluginConfig: `image = "` + testImage + `"
workspace_root = "{{temp_dir}}"
agentctl_tls = true`,
	})
}

// The busybox-only image works because agentctl is bind-mounted from the
// host; the task workspace is a git repository, so the session gets a
// worktree on its own branch.
func TestConformanceBindMountedAgentctlGitWorktree(t *testing.T) {
	needDocker(t)
	root := t.TempDir()
	repo := runtimetest.GitRepo(t, filepath.Join(root, "repo"))
	conformance.Run(t, conformance.Config{
		PluginPath:   pluginPath,
		AgentctlPath: agentctlPath,
		PluginConfig: `image = "` + testBusyboxImage + `"
agentctl_path = "{{agentctl_path}}"
workspace_root = "` + root + `"`,
		Workspace: runtime.Workspace{Path: repo},
		TaskRoot:  root,
	})
}

// Inside the container agentctl is pid 1, the hostname is the container's
// (session-derived), the workspace is bind-mounted, labels and limits are
// set, nothing is privileged and the port is published on publish_addr only.
func TestContainerShape(t *testing.T) {
	needDocker(t)
	root := t.TempDir()
	r := newRuntime(t, baseConfig(root, `memory = "256m"`, `cpus = 0.5`, `pids = 200`))
	session := newSession("Shape_Test.1")
	cleanupSession(t, session)
	req := request(session)
	resp, err := r.Launch(ctxT(t, time.Minute), req)
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	if resp.ContainerID == "" || !strings.HasPrefix(resp.AgentctlURL, "http://127.0.0.1:") {
		t.Fatalf("response %+v: want a container id and an http://127.0.0.1:PORT url", resp)
	}
	var h map[string]any
	if err := json.Unmarshal(resp.Handle, &h); err != nil || h["container_id"] != resp.ContainerID || h["url"] != resp.AgentctlURL {
		t.Fatalf("handle %s: want JSON with container_id and url (%v)", resp.Handle, err)
	}
	if strings.Contains(string(resp.Handle), req.AgentctlSecret) {
		t.Fatal("the handle holds the secret")
	}

	cmdline := dockerCLI(t, "exec", resp.ContainerID, "cat", "/proc/1/cmdline")
	argv := strings.Split(strings.TrimRight(cmdline, "\x00"), "\x00")
	if filepath.Base(argv[0]) != "agentctl" || len(argv) < 2 || argv[1] != "serve" {
		t.Errorf("/proc/1/cmdline = %q, want agentctl serve …", argv)
	}
	inside := dockerCLI(t, "exec", resp.ContainerID, "hostname")
	ins, err := engine(t).ContainerInspect(context.Background(), resp.ContainerID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := ins.Container
	if inside != c.Config.Hostname || inside != "paddock-shape-test-1-"+strings.ToLower(session[len(session)-8:]) {
		t.Errorf("hostname inside %q, container's %q, want the session-derived name", inside, c.Config.Hostname)
	}
	for k, want := range map[string]string{dockerexec.LabelSession: session, dockerexec.LabelTask: "task-1",
		dockerexec.LabelExecutor: req.ExecutorID, dockerexec.LabelCluster: "dockerexec-test"} {
		if got := c.Config.Labels[k]; got != want {
			t.Errorf("label %s = %q, want %q", k, got, want)
		}
	}
	hc := c.HostConfig
	if hc.Privileged {
		t.Error("container is privileged")
	}
	if hc.Memory != 256<<20 || hc.NanoCPUs != 5e8 || hc.PidsLimit == nil || *hc.PidsLimit != 200 {
		t.Errorf("limits memory=%d nanocpus=%d pids=%v, want 256MiB, 0.5 CPU, 200", hc.Memory, hc.NanoCPUs, hc.PidsLimit)
	}
	for port, bindings := range hc.PortBindings {
		for _, b := range bindings {
			if b.HostIP.String() != "127.0.0.1" {
				t.Errorf("port %s published on %s, want 127.0.0.1", port, b.HostIP)
			}
		}
	}

	// The workspace is bind-mounted: a file written through agentctl's files
	// API appears in the host's session workspace.
	ac := agentctl.NewClient(resp.AgentctlURL, req.AgentctlSecret, 5*time.Second)
	if err := ac.WriteFile(ctxT(t, 10*time.Second), "hello.txt", []byte("from the container\n")); err != nil {
		t.Fatalf("WriteFile through agentctl: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(resp.WorkspacePath, "hello.txt")); err != nil || string(b) != "from the container\n" {
		t.Errorf("host workspace file: %q, %v", b, err)
	}
	if !strings.HasPrefix(resp.WorkspacePath, root) {
		t.Errorf("workspace %s is not under workspace_root %s", resp.WorkspacePath, root)
	}
	// The agent runs as nobody (agent_user's default) while agentctl stays
	// root: it cannot read agentctl's state (its info file, the state dir)
	// nor agentctl's environment, where the secret is.
	if os.Getuid() == 0 {
		if !strings.Contains(strings.Join(argv, " "), " -agent-user 65534:65534") {
			t.Errorf("agentctl argv %q lacks -agent-user 65534:65534", argv)
		}
		script := `id -u > uid
cat /paddock/state/agentctl.json > info 2> info.err; echo $? > info.rc
ls /paddock/state > ls 2> ls.err; echo $? > ls.rc
cat /proc/1/environ > environ 2> environ.err; echo $? > environ.rc
printf 'demo> '; exec sleep 600`
		if _, err := ac.StartAgent(ctxT(t, 30*time.Second), agentctl.Profile{Protocol: agentctl.ProtocolPTY, Command: []string{"/bin/sh", "-c", script}}, ""); err != nil {
			t.Fatalf("start agent: %v", err)
		}
		read := func(name string) string {
			b, _ := os.ReadFile(filepath.Join(resp.WorkspacePath, name))
			return strings.TrimSpace(string(b))
		}
		testkit.WaitFor(t, 10*time.Second, "the agent's probes", testkit.Cond(func() bool { return read("environ.rc") != "" }))
		if got := read("uid"); got != "65534" {
			t.Errorf("agent runs as uid %q in the container, want 65534", got)
		}
		for _, probe := range []string{"info", "ls", "environ"} {
			if read(probe+".rc") == "0" || read(probe) != "" {
				t.Errorf("agent's %s probe: rc %s, read %q, stderr %q; want it refused", probe, read(probe+".rc"), read(probe), read(probe+".err"))
			}
		}
	}
	// The secret guards agentctl.
	if _, err := agentctl.NewClient(resp.AgentctlURL, "wrong", 5*time.Second).Health(ctxT(t, 5*time.Second)); err == nil {
		t.Error("agentctl answered with a wrong secret")
	}

	if err := r.Destroy(ctxT(t, time.Minute), resp.Handle); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	if ids := sessionContainers(t, session); len(ids) != 0 {
		t.Errorf("containers left after Destroy: %v", ids)
	}
	if _, err := os.Stat(filepath.Join(root, session)); !os.IsNotExist(err) {
		t.Errorf("session dir left after Destroy: %v", err)
	}
}

func TestRecoverCases(t *testing.T) {
	needDocker(t)
	cases := []struct {
		name    string
		config  []string
		mutate  func(t *testing.T, resp runtime.LaunchResponse)
		wantErr error // nil: recovered
		newID   bool  // recovered into a different container
		sameAg  bool  // same agentctl (nonce) as at launch
	}{
		{name: "running_reattach", sameAg: true},
		{name: "removed_behind_its_back", wantErr: runtime.ErrNotFound, mutate: func(t *testing.T, resp runtime.LaunchResponse) {
			dockerCLI(t, "rm", "-f", resp.ContainerID)
		}},
		{name: "recreated_with_labels", newID: true, mutate: recreate},
		{name: "stopped_restarted", mutate: func(t *testing.T, resp runtime.LaunchResponse) {
			dockerCLI(t, "stop", "-t", "1", resp.ContainerID)
		}},
		{name: "stopped_restart_disabled", config: []string{"restart_stopped = false"}, wantErr: runtime.ErrNotFound,
			mutate: func(t *testing.T, resp runtime.LaunchResponse) { dockerCLI(t, "stop", "-t", "1", resp.ContainerID) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			cfg := baseConfig(root, tc.config...)
			r := newRuntime(t, cfg)
			session := newSession("rec")
			cleanupSession(t, session)
			req := request(session)
			resp, err := r.Launch(ctxT(t, time.Minute), req)
			if err != nil {
				t.Fatalf("Launch: %v", err)
			}
			if tc.mutate != nil {
				tc.mutate(t, resp)
			}
			// A fresh runtime, as after a supervisor restart.
			r2 := newRuntime(t, cfg)
			got, err := r2.Recover(ctxT(t, time.Minute), resp.Handle, req.AgentctlSecret)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("Recover error = %v, want %v", err, tc.wantErr)
				}
				if _, err := r2.Inspect(ctxT(t, time.Minute), resp.Handle); tc.wantErr == runtime.ErrNotFound && tc.name == "removed_behind_its_back" && !errors.Is(err, runtime.ErrNotFound) {
					t.Errorf("Inspect error = %v, want ErrNotFound", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Recover: %v", err)
			}
			h, herr := agentctl.NewClient(got.AgentctlURL, req.AgentctlSecret, 5*time.Second).Health(ctxT(t, 10*time.Second))
			if herr != nil || h.Nonce != got.Nonce || h.SessionID != session {
				t.Fatalf("health after Recover: %+v %v (response nonce %s)", h, herr, got.Nonce)
			}
			if (got.ContainerID != resp.ContainerID) != tc.newID {
				t.Errorf("container %s → %s, want changed=%v", resp.ContainerID, got.ContainerID, tc.newID)
			}
			if (got.Nonce == resp.Nonce) != tc.sameAg {
				t.Errorf("nonce %s → %s, want same=%v", resp.Nonce, got.Nonce, tc.sameAg)
			}
			if ins, err := r2.Inspect(ctxT(t, time.Minute), got.Handle); err != nil || ins.State != runtime.StateRunning {
				t.Errorf("Inspect after Recover: %+v %v", ins, err)
			}
			if err := r2.Destroy(ctxT(t, time.Minute), got.Handle); err != nil {
				t.Fatalf("Destroy: %v", err)
			}
			if ids := sessionContainers(t, session); len(ids) != 0 {
				t.Errorf("containers left after Destroy: %v", ids)
			}
		})
	}
}

// recreate removes the container and creates an equal one (same config,
// labels and mounts; a new id) behind the plugin's back.
func recreate(t *testing.T, resp runtime.LaunchResponse) {
	t.Helper()
	cli := engine(t)
	ctx := ctxT(t, time.Minute)
	ins, err := cli.ContainerInspect(ctx, resp.ContainerID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dockerCLI(t, "rm", "-f", resp.ContainerID)
	c := ins.Container
	res, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{Config: c.Config, HostConfig: c.HostConfig})
	if err != nil {
		t.Fatalf("re-create: %v", err)
	}
	if _, err := cli.ContainerStart(ctx, res.ID, client.ContainerStartOptions{}); err != nil {
		t.Fatalf("start re-created: %v", err)
	}
}

// The engine is unreachable during a (simulated) supervisor restart: Recover
// says unavailable (retryable), and once the engine answers again the retry
// succeeds. The unreachable engine is simulated by pointing host at a socket
// that does not exist, which never disturbs the real engine; the real stop
// and start of dockerd is TestEngineRestart.
func TestRecoverRetriedWhileEngineUnreachable(t *testing.T) {
	needDocker(t)
	root := t.TempDir()
	r := newRuntime(t, baseConfig(root))
	session := newSession("unreach")
	cleanupSession(t, session)
	req := request(session)
	resp, err := r.Launch(ctxT(t, time.Minute), req)
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	down := newRuntime(t, baseConfig(root, `host = "unix://`+filepath.Join(t.TempDir(), "no-engine.sock")+`"`))
	for i := 0; i < 3; i++ {
		_, err := down.Recover(ctxT(t, 10*time.Second), resp.Handle, req.AgentctlSecret)
		if !errors.Is(err, runtime.ErrUnavailable) || !strings.Contains(err.Error(), "unreachable") {
			t.Fatalf("Recover with the engine down: %v, want ErrUnavailable saying unreachable", err)
		}
	}
	up := newRuntime(t, baseConfig(root))
	got, err := up.Recover(ctxT(t, time.Minute), resp.Handle, req.AgentctlSecret)
	if err != nil || got.ContainerID != resp.ContainerID || got.Nonce != resp.Nonce {
		t.Fatalf("Recover with the engine back: %+v %v", got, err)
	}
	if err := up.Destroy(ctxT(t, time.Minute), got.Handle); err != nil {
		t.Fatal(err)
	}
}

// Bad input: a clear error each, and no container left behind.
func TestLaunchBadInput(t *testing.T) {
	needDocker(t)
	outside := t.TempDir()
	cases := []struct {
		name    string
		config  []string
		ws      string
		wantErr error
		want    string
	}{
		{name: "missing_image", config: []string{`image = "paddock-no-such-image:nope"`}, wantErr: runtime.ErrInvalidConfig, want: "paddock-no-such-image:nope does not exist"},
		{name: "engine_down", config: []string{`host = "unix:///nonexistent/docker.sock"`}, wantErr: runtime.ErrUnavailable, want: "unreachable"},
		{name: "cpus_beyond_the_machine", config: []string{`cpus = 4000`}, wantErr: runtime.ErrInvalidConfig, want: "CPU"},
		{name: "workspace_outside_root", ws: outside, wantErr: runtime.ErrInvalidRequest, want: "outside workspace_root"},
		{name: "workspace_escape_relative", ws: "../../etc", wantErr: runtime.ErrInvalidRequest, want: "outside workspace_root"},
		{name: "workspace_missing", ws: "does-not-exist", wantErr: runtime.ErrInvalidRequest, want: "does-not-exist"},
		{name: "agentctl_not_in_image", config: []string{`image = "` + testBusyboxImage + `"`, `start_timeout = "10s"`}, want: "agentctl"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			config := baseConfig(root)
			// Later attributes would be duplicates: rebuild without defaults they override.
			for _, c := range tc.config {
				name := strings.TrimSpace(strings.SplitN(c, "=", 2)[0])
				var keep []string
				for _, line := range strings.Split(config, "\n") {
					if !strings.HasPrefix(line, name+" ") {
						keep = append(keep, line)
					}
				}
				config = strings.Join(keep, "\n") + "\n" + c + "\n"
			}
			r := newRuntime(t, config)
			session := newSession("bad")
			cleanupSession(t, session)
			req := request(session)
			req.Workspace.Path = tc.ws
			resp, err := r.Launch(ctxT(t, time.Minute), req)
			if err == nil {
				_ = r.Destroy(context.Background(), resp.Handle)
				t.Fatalf("Launch succeeded, want an error")
			}
			t.Logf("error: %v", err)
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("error = %v, want %v", err, tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
			if ids := sessionContainers(t, session); len(ids) != 0 {
				t.Errorf("containers left behind: %v", ids)
			}
			if _, err := os.Stat(filepath.Join(root, session)); !os.IsNotExist(err) {
				t.Errorf("session dir left behind: %v", err)
			}
		})
	}
}

func TestReconcile(t *testing.T) {
	needDocker(t)
	root := t.TempDir()
	// A cluster label of its own: Reconcile removes every container of its
	// cluster that it does not own, so it must not see another run's (or
	// another test's) containers of the shared "dockerexec-test" cluster.
	cluster := "dockerexec-reconcile-" + randHex(4)
	config := func(extra ...string) string {
		return strings.Replace(baseConfig(root, extra...), `cluster = "dockerexec-test"`, fmt.Sprintf("cluster = %q", cluster), 1)
	}
	r := newRuntime(t, config())
	ctx := ctxT(t, 2*time.Minute)
	launch := func(session string) runtime.LaunchResponse {
		cleanupSession(t, session)
		resp, err := r.Launch(ctx, request(session))
		if err != nil {
			t.Fatalf("Launch %s: %v", session, err)
		}
		return resp
	}
	ownedS, orphanS := newSession("owned"), newSession("orphan")
	owned, orphan := launch(ownedS), launch(orphanS)
	foreign := newSession("foreign")
	cleanupSession(t, foreign)
	foreignID := dockerCLI(t, "run", "-d", "--label", dockerexec.LabelSession+"="+foreign, "--label", dockerexec.LabelCluster+"=another-cluster",
		"--entrypoint", "sleep", testImage, "300")
	unlabelled := dockerCLI(t, "run", "-d", "--label", "paddock.test="+foreign, "--entrypoint", "sleep", testImage, "300")
	t.Cleanup(func() { _ = exec.Command("docker", "rm", "-f", unlabelled).Run() })
	isOwned := func(id string) bool { return id == "exec-"+ownedS }
	req := runtime.ReconcileRequest{Cluster: "ignored-when-configured", Owned: []string{"exec-" + ownedS, "exec-gone-long-ago"}}

	// Within the grace period nothing is removed.
	removed, err := r.Reconcile(ctx, runtime.ReconcileRequest{Cluster: req.Cluster, Owned: req.Owned, Grace: time.Hour})
	if err != nil || len(removed) != 0 {
		t.Fatalf("Reconcile(grace 1h) = %v, %v; want nothing removed", removed, err)
	}
	// reconcile_grace in the config wins over the request's grace.
	withGrace := newRuntime(t, config(`reconcile_grace = "1h"`))
	if removed, err := withGrace.Reconcile(ctx, req); err != nil || len(removed) != 0 {
		t.Fatalf("Reconcile(grace 0) with reconcile_grace = 1h: %v, %v; want nothing removed", removed, err)
	}
	removed, err = r.Reconcile(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0] != orphan.ContainerID {
		t.Fatalf("Reconcile removed %v, want only the orphan %s", removed, orphan.ContainerID)
	}
	for _, id := range []string{owned.ContainerID, foreignID, unlabelled} {
		if out := dockerCLI(t, "inspect", "-f", "{{.State.Running}}", id); out != "true" {
			t.Errorf("container %s was touched (running=%s)", id, out)
		}
	}
	if _, err := r.ReconcileCluster(ctx, "", isOwned, 0); err != nil {
		t.Errorf("ReconcileCluster with the configured cluster: %v", err)
	}
	if _, err := dockerexec.New(nil).Reconcile(ctx, runtime.ReconcileRequest{Owned: req.Owned}); !errors.Is(err, runtime.ErrInvalidRequest) {
		t.Errorf("Reconcile without a cluster: %v, want ErrInvalidRequest", err)
	}
	if _, err := r.Reconcile(ctx, runtime.ReconcileRequest{Cluster: "x", Owned: []string{"../etc"}}); !errors.Is(err, runtime.ErrInvalidRequest) {
		t.Errorf("Reconcile with a malformed owned id: %v, want ErrInvalidRequest", err)
	}
	_ = r.Destroy(ctx, owned.Handle)
}

// The supervisor reaches Reconcile through the SDK's RPC on the plugin
// binary; without a cluster attribute the request's cluster selects the
// containers, exactly as for Launch.
func TestReconcileRPC(t *testing.T) {
	needDocker(t)
	ctx := ctxT(t, 2*time.Minute)
	root := t.TempDir()
	c := runtimetest.Load(t, pluginPath, fmt.Sprintf("image = %q\nworkspace_root = %q\nstart_timeout = \"30s\"\n", testImage, root))
	cluster := "dockerexec-rpc-" + randHex(4)
	launch := func(session string) runtime.LaunchResponse {
		cleanupSession(t, session)
		req := request(session)
		req.Cluster = cluster
		resp, err := c.Launch(ctx, req)
		if err != nil {
			t.Fatalf("Launch %s: %v", session, err)
		}
		return resp
	}
	ownedS, orphanS := newSession("rpc-owned"), newSession("rpc-orphan")
	owned, orphan := launch(ownedS), launch(orphanS)
	if removed, err := c.Reconcile(ctx, runtime.ReconcileRequest{Cluster: "another-" + cluster, Owned: nil}); err != nil || len(removed) != 0 {
		t.Fatalf("Reconcile of another cluster = %v, %v; want nothing removed", removed, err)
	}
	removed, err := c.Reconcile(ctx, runtime.ReconcileRequest{Cluster: cluster, Owned: []string{"exec-" + ownedS}})
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0] != orphan.ContainerID {
		t.Fatalf("Reconcile over RPC removed %v, want only the orphan %s", removed, orphan.ContainerID)
	}
	if got := sessionContainers(t, orphanS); len(got) != 0 {
		t.Errorf("the orphan's containers after Reconcile: %v", got)
	}
	if out := dockerCLI(t, "inspect", "-f", "{{.State.Running}}", owned.ContainerID); out != "true" {
		t.Errorf("the owned container was touched (running=%s)", out)
	}
	if _, err := c.Reconcile(ctx, runtime.ReconcileRequest{Cluster: cluster, Grace: -time.Second}); !errors.Is(err, runtime.ErrInvalidRequest) {
		t.Errorf("negative grace: %v, want ErrInvalidRequest", err)
	}
	_ = c.Destroy(ctx, owned.Handle)
}

// TestEngineRestart stops the real dockerd and starts it again. It disturbs
// every other user of the engine, so it runs only with
// PADDOCK_DOCKER_ENGINE_RESTART=1 (and as root, with a dockerd this machine
// runs). The engine is restored even when the test fails.
func TestEngineRestart(t *testing.T) {
	needDocker(t)
	if os.Getenv("PADDOCK_DOCKER_ENGINE_RESTART") != "1" {
		t.Skip("stops the shared engine; set PADDOCK_DOCKER_ENGINE_RESTART=1 to run")
	}
	engine := enginetest.Find(t)
	root := t.TempDir()
	cfg := baseConfig(root)
	r := newRuntime(t, cfg)
	session := newSession("engine")
	cleanupSession(t, session)
	req := request(session)
	resp, err := r.Launch(ctxT(t, time.Minute), req)
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	engine.Stop()

	r2 := newRuntime(t, cfg) // the restarted supervisor's plugin
	if _, err := r2.Recover(ctxT(t, 10*time.Second), resp.Handle, req.AgentctlSecret); !errors.Is(err, runtime.ErrUnavailable) {
		t.Fatalf("Recover with dockerd stopped: %v, want ErrUnavailable", err)
	}
	engine.Start()
	var got runtime.LaunchResponse
	testkit.WaitFor(t, time.Minute, "Recover to succeed once the engine is back", testkit.Cond(func() bool {
		got, err = r2.Recover(ctxT(t, time.Minute), resp.Handle, req.AgentctlSecret)
		return err == nil
	}))
	if got.ContainerID != resp.ContainerID {
		t.Errorf("container changed across the engine restart: %s → %s", resp.ContainerID, got.ContainerID)
	}
	if _, err := agentctl.NewClient(got.AgentctlURL, req.AgentctlSecret, 5*time.Second).Health(ctxT(t, 10*time.Second)); err != nil {
		t.Errorf("agentctl after the engine restart: %v", err)
	}
	_ = r2.Destroy(ctxT(t, time.Minute), got.Handle)
}

// BenchmarkLaunch measures Launch: API call → container started → agentctl
// healthy (Destroy is outside the timer).
func BenchmarkLaunch(b *testing.B) {
	needDocker(b)
	root := b.TempDir()
	r := newRuntime(b, baseConfig(root))
	ctx := context.Background()
	b.StopTimer()
	for i := 0; i < b.N; i++ {
		session := newSession("bench")
		req := request(session)
		b.StartTimer()
		resp, err := r.Launch(ctx, req)
		b.StopTimer()
		if err != nil {
			b.Fatalf("Launch: %v", err)
		}
		if err := r.Destroy(ctx, resp.Handle); err != nil {
			b.Fatalf("Destroy: %v", err)
		}
	}
}

// The request's terminal settings are flags of the container's agentctl, and
// a container restarted by Recover keeps them (they are its command).
func TestTerminalSettingsInContainerCommand(t *testing.T) {
	needDocker(t)
	root := t.TempDir()
	cfg := baseConfig(root)
	r := newRuntime(t, cfg)
	session := newSession("term")
	cleanupSession(t, session)
	req := request(session)
	req.Terminal = runtime.Terminal{Shell: []string{"/bin/sh", "-c", "echo from config; exec /bin/sh"}, ReplayBytes: 65536, IdleTimeout: 90 * time.Second}
	want := "\x00-shell\x00" + `["/bin/sh","-c","echo from config; exec /bin/sh"]` + "\x00-replay-bytes\x0065536\x00-idle-timeout\x001m30s\x00"
	resp, err := r.Launch(ctxT(t, time.Minute), req)
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	if cmdline := dockerCLI(t, "exec", resp.ContainerID, "cat", "/proc/1/cmdline"); !strings.Contains(cmdline, want) {
		t.Fatalf("/proc/1/cmdline = %q, want it to hold %q", cmdline, want)
	}
	dockerCLI(t, "stop", "-t", "1", resp.ContainerID)
	got, err := newRuntime(t, cfg).Recover(ctxT(t, time.Minute), resp.Handle, req.AgentctlSecret)
	if err != nil {
		t.Fatalf("Recover: %v", err)
	}
	if got.Nonce == resp.Nonce {
		t.Fatal("Recover did not restart the stopped container's agentctl")
	}
	if cmdline := dockerCLI(t, "exec", got.ContainerID, "cat", "/proc/1/cmdline"); !strings.Contains(cmdline, want) {
		t.Fatalf("after Recover /proc/1/cmdline = %q, want it to hold %q", cmdline, want)
	}
	if err := r.Destroy(ctxT(t, time.Minute), got.Handle); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
}
