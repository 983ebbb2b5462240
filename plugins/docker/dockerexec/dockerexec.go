// Package dockerexec is the docker runtime: each session's agentctl runs as
// the entry process (pid 1) of its own container, created through the Docker
// Engine API (github.com/moby/moby/client, which negotiates the API version). Containers
// outlive the plugin and the supervisor; Recover finds them again by id or,
// failing that, by the paddock.session_id label.
//
// A session's host files live under workspace_root/<session-id>/: workspace/
// (a plain directory, or a git worktree on the session's branch when the
// task's workspace is a git repository), bind-mounted at /workspace, and
// state/ (agentctl's durable state), bind-mounted at /paddock/state. The
// agentctl port (7800/tcp) is published on publish_addr with a host port the
// engine picks; the secret reaches agentctl as PADDOCK_AGENTCTL_SECRET. No
// image is ever pulled. It imports only shared/, never supervisor/.
package dockerexec

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/hashicorp/go-hclog"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/paddockhq/paddock/shared/agentctl"
	"github.com/paddockhq/paddock/shared/runtime"
	"github.com/paddockhq/paddock/shared/runtime/agentctlproc"
	"github.com/paddockhq/paddock/shared/runtime/pluginbase"
	"github.com/paddockhq/paddock/shared/runtime/workspace"
)

// Name and Version identify the plugin.
const (
	Name    = "docker"
	Version = "0.1.0"
)

// Labels every container of this runtime carries.
const (
	LabelSession  = "paddock.session_id"
	LabelTask     = "paddock.task_id"
	LabelExecutor = "paddock.executor_id"
	LabelCluster  = "paddock.cluster"
)

// Paths and port inside the container.
const (
	ContainerWorkspace = "/workspace"
	ContainerStateDir  = "/paddock/state"
	ContainerAgentctl  = "/paddock/bin/agentctl"
	AgentctlPort       = 7800
)

var agentctlPort = network.MustParsePort(strconv.Itoa(AgentctlPort) + "/tcp")

// Runtime implements runtime.Runtime on a Docker engine.
type Runtime struct {
	*pluginbase.Base[Config]

	mu      sync.Mutex
	cli     *client.Client // for cliHost; nil until first use
	cliHost string
	cliErr  error
}

var _ runtime.Runtime = (*Runtime)(nil)

// New returns a docker runtime with the default configuration. SetConfig
// never contacts the engine: a down engine is a runtime condition
// (unavailable), not a config error.
func New(logger hclog.Logger) *Runtime {
	return &Runtime{Base: pluginbase.New(pluginbase.Options[Config]{
		Info: runtime.Info{Name: Name, Version: Version}, Spec: spec, Defaults: defaults, Logger: logger,
		LogFields: func(c Config) []any {
			return []any{"image", c.Image, "host", c.Host, "workspace_root", c.WorkspaceRoot, "publish_addr", c.PublishAddr}
		},
	})}
}

// Close releases the engine client.
func (r *Runtime) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cli != nil {
		err := r.cli.Close()
		r.cli = nil
		return err
	}
	return nil
}

// engine returns the configuration in force and its engine client (made
// again when the configured host changed).
func (r *Runtime) engine() (Config, *client.Client, error) {
	cfg, _ := r.Config()
	r.mu.Lock()
	defer r.mu.Unlock()
	if (r.cli != nil || r.cliErr != nil) && r.cliHost != cfg.Host {
		if r.cli != nil {
			_ = r.cli.Close()
		}
		r.cli, r.cliErr = nil, nil
	}
	if r.cli == nil && r.cliErr == nil {
		// API version negotiation is on by default in this client (its
		// WithAPIVersionNegotiation option is a deprecated no-op): it talks
		// to any engine from API 1.40 on (Debian's docker.io speaks 1.41).
		opts := []client.Opt{client.WithHostFromEnv()}
		if cfg.Host != "" {
			opts = append(opts, client.WithHost(cfg.Host))
		}
		r.cliHost = cfg.Host
		r.cli, r.cliErr = client.New(opts...)
		if r.cliErr != nil {
			r.cliErr = fmt.Errorf("docker client for %q: %v: %w", cfg.Host, r.cliErr, runtime.ErrInvalidConfig)
		}
	}
	return cfg, r.cli, r.cliErr
}

// Capabilities implements runtime.Runtime.
func (r *Runtime) Capabilities(context.Context) (runtime.Capabilities, error) {
	cfg, _ := r.Config()
	local := cfg.nodeLocal()
	return runtime.Capabilities{SupportsWorkspaceOnly: true, SurvivesSupervisorRestart: true, NodeLocal: local}, nil
}

// executor returns the configuration in force, its engine client and the
// decoded handle hb, for an operation on an executor.
func (r *Runtime) executor(hb []byte) (Config, *client.Client, handle, error) {
	cfg, cli, err := r.engine()
	if err != nil {
		return cfg, nil, handle{}, err
	}
	h, err := decodeHandle(hb, cfg.WorkspaceRoot)
	return cfg, cli, h, err
}

// engineErr classifies an engine error: unreachable → ErrUnavailable.
func engineErr(cfg Config, op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("docker %s: %w", op, err)
	}
	if client.IsErrConnectionFailed(err) || cerrdefs.IsUnavailable(err) {
		host := cfg.Host
		if host == "" {
			host = "the local engine"
		}
		return fmt.Errorf("docker %s: engine %s is unreachable: %v: %w", op, host, err, runtime.ErrUnavailable)
	}
	if cerrdefs.IsInvalidArgument(err) {
		return fmt.Errorf("docker %s: the engine refused the request: %v: %w", op, err, runtime.ErrInvalidConfig)
	}
	return fmt.Errorf("docker %s: %w", op, err)
}

// Launch implements runtime.Runtime: check engine and image, prepare the
// workspace, remove any earlier container of this session, create and start
// a fresh one, and wait until its agentctl is healthy. Any failure after the
// container was created removes it.
func (r *Runtime) Launch(ctx context.Context, req runtime.LaunchRequest) (runtime.LaunchResponse, error) {
	if err := req.Validate(); err != nil {
		return runtime.LaunchResponse{}, err
	}
	defer r.Sessions.Lock(req.SessionID)()
	cfg, cli, err := r.engine()
	if err != nil {
		return runtime.LaunchResponse{}, err
	}
	if _, err := cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		return runtime.LaunchResponse{}, engineErr(cfg, "ping", err)
	}
	if _, err := cli.ImageInspect(ctx, cfg.Image); err != nil {
		if cerrdefs.IsNotFound(err) {
			return runtime.LaunchResponse{}, fmt.Errorf("image %s does not exist on the engine (images are never pulled; build it, e.g. make image): %w", cfg.Image, runtime.ErrInvalidConfig)
		}
		return runtime.LaunchResponse{}, engineErr(cfg, "image inspect "+cfg.Image, err)
	}
	h := handle{
		V:          handleVersion,
		SessionID:  req.SessionID,
		ExecutorID: req.ExecutorID,
		Cluster:    cfg.Cluster,
	}
	if h.Cluster == "" {
		h.Cluster = req.Cluster
	}
	if h.Cluster != "" && !runtime.ValidID(h.Cluster) {
		return runtime.LaunchResponse{}, fmt.Errorf("cluster %q is not a valid label value: %w", h.Cluster, runtime.ErrInvalidRequest)
	}
	// 0700 directories keep other local users out of a session's files;
	// the engine bind-mounts them as root, so the container needs no search
	// permission on the host's parents. The container user must own the
	// workspace and state directories to write them: by default it is the
	// plugin's own uid:gid.
	prepared, err := workspace.Prepare(ctx, workspace.NewRequest(cfg.WorkspaceRoot, req))
	h.Layout = prepared.Layout
	freshDir, gitDir := prepared.Fresh, prepared.GitCommonDir
	if err != nil {
		if freshDir {
			r.removeSessionDir(ctx, h)
		}
		return runtime.LaunchResponse{}, err
	}
	if uid, gid, ok := cfg.agentUID(); ok {
		// The agent runs as another user than agentctl: the workspace is
		// its; the state directory stays the container user's, 0700.
		if err := prepared.Chown(uid, gid); err != nil {
			return runtime.LaunchResponse{}, fmt.Errorf("session %s: %w", req.SessionID, err)
		}
	}
	if err := r.removeSessionContainers(ctx, cli, cfg, h.SessionID, h.Cluster); err != nil {
		return runtime.LaunchResponse{}, err
	}
	id, err := r.create(ctx, cli, cfg, req, h, gitDir)
	if err != nil {
		if freshDir {
			r.removeSessionDir(ctx, h)
		}
		return runtime.LaunchResponse{}, err
	}
	h.ContainerID = id
	if err := r.startAndWait(ctx, cli, cfg, req.AgentctlSecret, &h, true); err != nil {
		r.removeContainer(cli, id)
		if freshDir {
			r.removeSessionDir(ctx, h)
		}
		return runtime.LaunchResponse{}, fmt.Errorf("session %s: %w", req.SessionID, err)
	}
	r.Logger().Info("launched container", "session_id", h.SessionID, "container_id", shortID(id), "url", h.URL, "workspace", h.Workspace)
	return h.response(), nil
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// hostname derives a valid host name from the session id.
func hostname(session string) string {
	b := []byte(strings.ToLower(session))
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			b[i] = '-'
		}
	}
	s := strings.Trim(string(b), "-")
	if len(s) > 54 {
		s = strings.TrimRight(s[:54], "-")
	}
	return "paddock-" + s
}

// create creates (not starts) the session's container.
func (r *Runtime) create(ctx context.Context, cli *client.Client, cfg Config, req runtime.LaunchRequest, h handle, gitDir string) (string, error) {
	entry := "agentctl"
	binds := []string{
		h.Workspace + ":" + ContainerWorkspace,
		filepath.Join(h.SessionDir, "state") + ":" + ContainerStateDir,
	}
	if cfg.AgentctlPath != "" {
		entry = ContainerAgentctl
		binds = append(binds, cfg.AgentctlPath+":"+ContainerAgentctl+":ro")
	}
	if gitDir != "" && filepath.IsAbs(gitDir) {
		// The worktree's .git file names the repository's git dir by its
		// host path: mount it at the same path so git works inside.
		binds = append(binds, gitDir+":"+gitDir)
	}
	env := []string{agentctlSecretEnv + "=" + req.AgentctlSecret, "PADDOCK_SESSION_ID=" + req.SessionID}
	for k, v := range req.Env {
		if k != agentctlSecretEnv {
			env = append(env, k+"="+v)
		}
	}
	user := cfg.User
	if user == "" {
		user = fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid())
	}
	args := []string{"serve",
		"-session", req.SessionID,
		"-workspace", ContainerWorkspace,
		"-state-dir", ContainerStateDir,
		"-listen", "0.0.0.0:" + strconv.Itoa(AgentctlPort),
		"-advertise", cfg.advertiseHost(),
		"-info-file", ContainerStateDir + "/agentctl.json",
	}
	if cfg.AgentctlTLS {
		args = append(args, "-tls")
	}
	if uid, gid, ok := cfg.agentUID(); ok {
		args = append(args, "-agent-user", strconv.Itoa(uid)+":"+strconv.Itoa(gid))
	}
	hostIP, err := netip.ParseAddr(cfg.PublishAddr)
	if err != nil {
		return "", fmt.Errorf("publish_addr %q: %v: %w", cfg.PublishAddr, err, runtime.ErrInvalidConfig)
	}
	restart := container.RestartPolicy{Name: container.RestartPolicyDisabled}
	if cfg.RestartStopped {
		// The engine itself brings the container back after it restarts.
		restart.Name = container.RestartPolicyUnlessStopped
	}
	resources := container.Resources{Memory: cfg.Memory, NanoCPUs: cfg.NanoCPUs}
	if cfg.Pids > 0 {
		p := cfg.Pids
		resources.PidsLimit = &p
	}
	stopTimeout := 10
	res, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: "paddock-" + req.SessionID + "-" + randHex(3),
		Config: &container.Config{
			Image:      cfg.Image,
			Hostname:   hostname(req.SessionID),
			User:       user,
			Env:        env,
			Entrypoint: []string{entry},
			// The terminal and agent-user flags are part of the container's
			// command, so a restart of the container (by Recover or the
			// engine) keeps them.
			Cmd:          append(args, req.Terminal.Args()...),
			WorkingDir:   ContainerWorkspace,
			ExposedPorts: network.PortSet{agentctlPort: {}},
			Labels: map[string]string{
				LabelSession:  req.SessionID,
				LabelTask:     req.TaskID,
				LabelExecutor: req.ExecutorID,
				LabelCluster:  h.Cluster,
			},
			StopTimeout: &stopTimeout,
		},
		HostConfig: &container.HostConfig{
			Binds:         binds,
			PortBindings:  network.PortMap{agentctlPort: {{HostIP: hostIP, HostPort: ""}}},
			RestartPolicy: restart,
			Privileged:    false,
			Resources:     resources,
		},
	})
	if err != nil {
		// A create that failed half-way may still have left a container.
		r.removeLabelled(cli, h.SessionID, h.Cluster)
		return "", engineErr(cfg, "create container", err)
	}
	return res.ID, nil
}

const agentctlSecretEnv = "PADDOCK_AGENTCTL_SECRET"

// startAndWait starts the container when needed and waits (bounded by
// StartTimeout) until its agentctl is healthy for h's session; it records
// URL, nonce and pid in h.
func (r *Runtime) startAndWait(ctx context.Context, cli *client.Client, cfg Config, secret string, h *handle, start bool) error {
	if start {
		if _, err := cli.ContainerStart(ctx, h.ContainerID, client.ContainerStartOptions{}); err != nil {
			return engineErr(cfg, "start container "+shortID(h.ContainerID), err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.StartTimeout)
	defer cancel()
	var lastErr error
	for attempt := 0; ; attempt++ {
		ins, err := cli.ContainerInspect(ctx, h.ContainerID, client.ContainerInspectOptions{})
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			return engineErr(cfg, "inspect container "+shortID(h.ContainerID), err)
		}
		c := ins.Container
		if c.State != nil && !c.State.Running && !c.State.Restarting && attempt > 0 {
			return fmt.Errorf("container %s exited (code %d) before agentctl was healthy: %s", shortID(h.ContainerID), c.State.ExitCode, r.logsTail(cli, h.ContainerID))
		}
		if url, ok := endpoint(cfg, c); ok {
			h.URL = url
			health, fingerprint, err := checkAgentctl(ctx, cfg, h, url, secret)
			if err == nil {
				if health.SessionID != h.SessionID {
					return fmt.Errorf("agentctl at %s serves session %q, want %q", url, health.SessionID, h.SessionID)
				}
				h.Nonce, h.PID, h.Fingerprint = health.Nonce, health.PID, fingerprint
				return nil
			}
			lastErr = err
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond): // polling interval
			continue
		}
		break
	}
	if lastErr == nil {
		lastErr = ctx.Err()
	}
	return fmt.Errorf("agentctl in container %s was not healthy within %s: %v; logs: %s: %w", shortID(h.ContainerID), cfg.StartTimeout, lastErr, r.logsTail(cli, h.ContainerID), runtime.ErrUnavailable)
}

// checkAgentctl asks agentctl at url for its health. With agentctl_tls the
// connection pins the fingerprint of agentctl's info file in the session's
// state dir (bind-mounted from the host), and the answer must carry the
// info file's nonce: an info file of an earlier start names another key.
func checkAgentctl(ctx context.Context, cfg Config, h *handle, url, secret string) (agentctl.Health, string, error) {
	hctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if !cfg.AgentctlTLS {
		health, err := agentctl.NewClient(url, secret, 2*time.Second).Health(hctx)
		return health, "", err
	}
	info, err := agentctlproc.ReadInfo(agentctlproc.InfoFile(filepath.Join(h.SessionDir, "state")))
	if err != nil {
		return agentctl.Health{}, "", err
	}
	if info.Fingerprint == "" {
		return agentctl.Health{}, "", fmt.Errorf("agentctl's info file has no certificate fingerprint (an image with an older agentctl?)")
	}
	health, err := agentctl.NewPinnedClient(url, secret, info.Fingerprint, 2*time.Second).Health(hctx)
	if err == nil && health.Nonce != info.Nonce {
		err = fmt.Errorf("agentctl answers with nonce %s, its info file says %s", health.Nonce, info.Nonce)
	}
	return health, info.Fingerprint, err
}

// endpoint is agentctl's URL from the container's published port.
func endpoint(cfg Config, c container.InspectResponse) (string, bool) {
	if c.NetworkSettings == nil {
		return "", false
	}
	for _, b := range c.NetworkSettings.Ports[agentctlPort] {
		if b.HostPort != "" && b.HostPort != "0" {
			scheme := "http://"
			if cfg.AgentctlTLS {
				scheme = "https://"
			}
			return scheme + hostPort(cfg.advertiseHost(), b.HostPort), true
		}
	}
	return "", false
}

func hostPort(host, port string) string {
	if strings.Contains(host, ":") {
		return "[" + host + "]:" + port
	}
	return host + ":" + port
}

// removeContainer force-removes a container with a fresh bounded context
// (the caller's may already be cancelled).
func (r *Runtime) removeContainer(cli *client.Client, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
		r.Logger().Warn("could not remove container", "container_id", shortID(id), "error", err)
	}
}

// removeLabelled force-removes every container of a session (best effort).
func (r *Runtime) removeLabelled(cli *client.Client, session, cluster string) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	list, err := listSession(ctx, cli, session, cluster)
	if err != nil {
		return
	}
	for _, c := range list {
		r.removeContainer(cli, c.ID)
	}
}

// removeSessionContainers removes the containers of earlier launches.
func (r *Runtime) removeSessionContainers(ctx context.Context, cli *client.Client, cfg Config, session, cluster string) error {
	list, err := listSession(ctx, cli, session, cluster)
	if err != nil {
		return engineErr(cfg, "list containers", err)
	}
	for _, c := range list {
		r.Logger().Info("removing the container of an earlier launch", "session_id", session, "container_id", shortID(c.ID))
		if _, err := cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
			return engineErr(cfg, "remove container "+shortID(c.ID), err)
		}
	}
	return nil
}

// listSession lists all containers (running or not) labelled with session
// (and cluster, when not empty), newest first.
func listSession(ctx context.Context, cli *client.Client, session, cluster string) ([]container.Summary, error) {
	f := client.Filters{}.Add("label", LabelSession+"="+session)
	if cluster != "" {
		f = f.Add("label", LabelCluster+"="+cluster)
	}
	res, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return nil, err
	}
	return res.Items, nil
}

// find inspects the handle's container, else the newest container carrying
// its session label (preferring a running one). ok=false: none exists.
func (r *Runtime) find(ctx context.Context, cli *client.Client, cfg Config, h handle) (container.InspectResponse, bool, error) {
	ins, err := cli.ContainerInspect(ctx, h.ContainerID, client.ContainerInspectOptions{})
	if err == nil {
		return ins.Container, true, nil
	}
	if !cerrdefs.IsNotFound(err) {
		return container.InspectResponse{}, false, engineErr(cfg, "inspect container "+shortID(h.ContainerID), err)
	}
	list, err := listSession(ctx, cli, h.SessionID, h.Cluster)
	if err != nil {
		return container.InspectResponse{}, false, engineErr(cfg, "list containers", err)
	}
	var pick *container.Summary
	for i := range list {
		c := &list[i]
		if pick == nil || (c.State == container.StateRunning && pick.State != container.StateRunning) ||
			(c.State == pick.State && c.Created > pick.Created) {
			pick = c
		}
	}
	if pick == nil {
		return container.InspectResponse{}, false, nil
	}
	ins, err = cli.ContainerInspect(ctx, pick.ID, client.ContainerInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		return container.InspectResponse{}, false, nil
	}
	if err != nil {
		return container.InspectResponse{}, false, engineErr(cfg, "inspect container "+shortID(pick.ID), err)
	}
	r.Logger().Info("found the session's container by label", "session_id", h.SessionID, "old_container_id", shortID(h.ContainerID), "container_id", shortID(pick.ID))
	return ins.Container, true, nil
}

// Recover implements runtime.Runtime: find the container (by id, else by
// label), start it when stopped and restart_stopped allows, and check its
// agentctl. A container that restarted has a new nonce (and possibly a new
// host port); the response carries both.
func (r *Runtime) Recover(ctx context.Context, hb []byte, secret string) (runtime.LaunchResponse, error) {
	cfg, cli, h, err := r.executor(hb)
	if err != nil {
		return runtime.LaunchResponse{}, err
	}
	if secret == "" {
		return runtime.LaunchResponse{}, fmt.Errorf("agentctl secret is empty: %w", runtime.ErrInvalidRequest)
	}
	defer r.Sessions.Lock(h.SessionID)()
	c, ok, err := r.find(ctx, cli, cfg, h)
	if err != nil {
		return runtime.LaunchResponse{}, err
	}
	if !ok {
		return runtime.LaunchResponse{}, fmt.Errorf("session %s: container %s is gone and no container carries its label: %w", h.SessionID, shortID(h.ContainerID), runtime.ErrNotFound)
	}
	h.ContainerID = c.ID
	running := c.State != nil && (c.State.Running || c.State.Restarting)
	if c.State != nil && (c.State.Dead || c.State.Status == container.StateRemoving) {
		return runtime.LaunchResponse{}, fmt.Errorf("session %s: container %s is %s: %w", h.SessionID, shortID(c.ID), c.State.Status, runtime.ErrNotFound)
	}
	if !running && !cfg.RestartStopped {
		return runtime.LaunchResponse{}, fmt.Errorf("session %s: container %s is stopped and restart_stopped is false: %w", h.SessionID, shortID(c.ID), runtime.ErrNotFound)
	}
	oldNonce := h.Nonce
	if err := r.startAndWait(ctx, cli, cfg, secret, &h, !running); err != nil {
		return runtime.LaunchResponse{}, fmt.Errorf("session %s: %w", h.SessionID, err)
	}
	if running && h.Nonce == oldNonce {
		r.Logger().Info("reattached container", "session_id", h.SessionID, "container_id", shortID(h.ContainerID))
	} else {
		r.Logger().Info("recovered container with a new agentctl", "session_id", h.SessionID, "container_id", shortID(h.ContainerID), "started", !running)
	}
	return h.response(), nil
}

// Inspect implements runtime.Runtime.
func (r *Runtime) Inspect(ctx context.Context, hb []byte) (runtime.InspectResponse, error) {
	cfg, cli, h, err := r.executor(hb)
	if err != nil {
		return runtime.InspectResponse{}, err
	}
	c, ok, err := r.find(ctx, cli, cfg, h)
	if err != nil {
		return runtime.InspectResponse{}, err
	}
	if !ok {
		return runtime.InspectResponse{}, fmt.Errorf("session %s: container %s is gone: %w", h.SessionID, shortID(h.ContainerID), runtime.ErrNotFound)
	}
	details := map[string]string{"container_id": c.ID, "workspace": h.Workspace}
	if c.Config != nil {
		details["image"] = c.Config.Image
		details["hostname"] = c.Config.Hostname
	}
	resp := runtime.InspectResponse{State: runtime.StateExited, Details: details}
	if c.State != nil {
		details["status"] = string(c.State.Status)
		details["host_pid"] = strconv.Itoa(c.State.Pid)
		if c.State.Running {
			resp.State, resp.PID = runtime.StateRunning, 1
			resp.AgentctlURL, _ = endpoint(cfg, c)
		} else {
			resp.Message = fmt.Sprintf("container is %s (exit code %d)", c.State.Status, c.State.ExitCode)
		}
	}
	return resp, nil
}

// Stop implements runtime.Runtime: stop the container (SIGTERM, then
// SIGKILL after timeout). A missing container is no error.
func (r *Runtime) Stop(ctx context.Context, hb []byte, timeout time.Duration) error {
	cfg, cli, h, err := r.executor(hb)
	if err != nil {
		return err
	}
	defer r.Sessions.Lock(h.SessionID)()
	c, ok, err := r.find(ctx, cli, cfg, h)
	if err != nil || !ok {
		return err
	}
	secs := int((timeout + time.Second - 1) / time.Second)
	if _, err := cli.ContainerStop(ctx, c.ID, client.ContainerStopOptions{Timeout: &secs}); err != nil && !cerrdefs.IsNotFound(err) {
		return engineErr(cfg, "stop container "+shortID(c.ID), err)
	}
	r.Logger().Info("stopped container", "session_id", h.SessionID, "container_id", shortID(c.ID))
	return nil
}

// Destroy implements runtime.Runtime: remove the session's containers, its
// worktree (the branch stays: it holds the session's commits) and its
// session dir. A plain task directory used in place is never deleted.
func (r *Runtime) Destroy(ctx context.Context, hb []byte) error {
	cfg, cli, h, err := r.executor(hb)
	if err != nil {
		return err
	}
	defer r.Sessions.Lock(h.SessionID)()
	if _, err := cli.ContainerRemove(ctx, h.ContainerID, client.ContainerRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
		return engineErr(cfg, "remove container "+shortID(h.ContainerID), err)
	}
	if err := r.removeSessionContainers(ctx, cli, cfg, h.SessionID, h.Cluster); err != nil {
		return err
	}
	r.removeSessionDir(ctx, h)
	if _, err := os.Stat(h.SessionDir); err == nil {
		return fmt.Errorf("session %s: could not remove %s", h.SessionID, h.SessionDir)
	}
	r.Logger().Info("destroyed executor", "session_id", h.SessionID, "container_id", shortID(h.ContainerID))
	return nil
}

// removeSessionDir removes the session's worktree and directory.
func (r *Runtime) removeSessionDir(ctx context.Context, h handle) {
	if err := workspace.Remove(ctx, r.Logger().With("session_id", h.SessionID), h.Layout); err != nil {
		r.Logger().Warn("could not remove session dir", "session_id", h.SessionID, "error", err)
	}
}
