// Package localexec is the standalone runtime: each session's agentctl runs as
// a detached local process (own session and process group, output to a log
// file in the session's state dir) so it outlives the plugin and the
// supervisor. A session's files live under workspace_root/<session-id>/:
// workspace/ (a plain directory, or a git worktree on the session's branch
// when the task's workspace is a git repository) and state/ (agentctl's
// state, info file and log). It imports only shared/, never supervisor/.
package localexec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/paddockhq/paddock/shared/runtime"
	"github.com/paddockhq/paddock/shared/runtime/agentctlproc"
	"github.com/paddockhq/paddock/shared/runtime/pluginbase"
	"github.com/paddockhq/paddock/shared/runtime/workspace"
)

// Name and Version identify the plugin.
const (
	Name    = "standalone"
	Version = "0.1.0"
)

// Runtime implements runtime.Runtime for local detached agentctl processes.
type Runtime struct {
	*pluginbase.Base[Config]

	// handles caches decodeHandle's checked results (see decodeHandle).
	handlesMu   sync.Mutex
	handlesRoot string
	handles     map[string]handle
}

// maxCachedHandles bounds the decoded-handle cache; it is emptied when full.
const maxCachedHandles = 4096

var _ runtime.Runtime = (*Runtime)(nil)

// New returns a standalone runtime with the default configuration.
func New(logger hclog.Logger) *Runtime {
	base := pluginbase.New(pluginbase.Options[Config]{
		Info: runtime.Info{Name: Name, Version: Version}, Spec: spec, Defaults: defaults, Logger: logger,
		LogFields: func(c Config) []any {
			return []any{"workspace_root", c.WorkspaceRoot, "task_workspace_root", c.TaskWorkspaceRoot, "agentctl_path", c.AgentctlPath, "run_as_user", c.RunAsUser, "nice", c.Nice}
		},
	})
	return &Runtime{Base: base, handles: map[string]handle{}}
}

func (r *Runtime) config() Config {
	cfg, _ := r.Config()
	return cfg
}

// Capabilities implements runtime.Runtime.
func (r *Runtime) Capabilities(context.Context) (runtime.Capabilities, error) {
	cfg := r.config()
	return runtime.Capabilities{SupportsWorkspaceOnly: true, SurvivesSupervisorRestart: true, NodeLocal: true,
		Extra: map[string]bool{runtime.CapSharedWorkspace: cfg.SharedWorkspaceRoot}}, nil
}

var _ runtime.WorkspaceChecker = (*Runtime)(nil)

// CheckTaskWorkspace implements runtime.WorkspaceChecker: a task's
// workspace must lie in task_workspace_root (workspace.CheckPath; Launch
// confines it again with workspace.Confine, on the path as it is then).
func (r *Runtime) CheckTaskWorkspace(_ context.Context, path string) error {
	return workspace.CheckPath(r.config().TaskWorkspaceRoot, "task_workspace_root", path)
}

// handle is what the host stores for an executor. It never holds the secret.
type handle struct {
	V         int    `json:"v"`
	SessionID string `json:"session_id"`
	workspace.Layout
	StateDir string `json:"state_dir"`
	PID      int    `json:"pid"`
	Nonce    string `json:"nonce"`
	URL      string `json:"url"`
	// Fingerprint is agentctl's certificate fingerprint when it serves TLS.
	Fingerprint string            `json:"fingerprint,omitempty"`
	Env         map[string]string `json:"env,omitempty"`
	// Terminal is the launch's terminal settings, so a restart by Recover
	// runs agentctl with the same ones.
	Terminal *handleTerminal `json:"terminal,omitempty"`
}

// handleTerminal is runtime.Terminal as a handle stores it.
type handleTerminal struct {
	Shell         []string `json:"shell,omitempty"`
	ReplayBytes   int      `json:"replay_bytes,omitempty"`
	IdleTimeoutMS int64    `json:"idle_timeout_ms,omitempty"`
}

func newHandleTerminal(t runtime.Terminal) *handleTerminal {
	if t.IsZero() {
		return nil
	}
	ms := t.IdleTimeout.Milliseconds()
	if t.IdleTimeout > 0 && ms == 0 {
		ms = 1
	}
	return &handleTerminal{Shell: t.Shell, ReplayBytes: t.ReplayBytes, IdleTimeoutMS: ms}
}

// terminal is the runtime.Terminal h stores (zero for none).
func (h handle) terminal() runtime.Terminal {
	if h.Terminal == nil {
		return runtime.Terminal{}
	}
	return runtime.Terminal{Shell: h.Terminal.Shell, ReplayBytes: h.Terminal.ReplayBytes,
		IdleTimeout: time.Duration(h.Terminal.IdleTimeoutMS) * time.Millisecond}
}

const handleVersion = 1

// decodeHandle decodes and checks a handle; anything unusable is ErrNotFound
// (the host can do nothing with it but forget it).
//
// A handle that passed is cached by its exact bytes for as long as
// workspace_root stays the same: the host inspects the same handles over and
// over, and the JSON decode was a third of Inspect's own CPU in a profile.
// The cached handle's Env map is shared: read-only.
func (r *Runtime) decodeHandle(b []byte) (handle, error) {
	root := r.config().WorkspaceRoot
	r.handlesMu.Lock()
	h, ok := r.handles[string(b)]
	ok = ok && r.handlesRoot == root
	r.handlesMu.Unlock()
	if ok {
		return h, nil
	}
	if err := json.Unmarshal(b, &h); err != nil {
		return h, fmt.Errorf("decode handle: %v: %w", err, runtime.ErrNotFound)
	}
	if h.V != handleVersion || !runtime.ValidID(h.SessionID) || h.StateDir == "" {
		return h, fmt.Errorf("handle is not a standalone executor handle: %w", runtime.ErrNotFound)
	}
	if err := h.Layout.Check(root, h.SessionID); err != nil {
		return h, err
	}
	if !workspace.Within(h.SessionDir, h.StateDir) {
		return h, fmt.Errorf("handle state dir is outside workspace_root %s: %w", root, runtime.ErrNotFound)
	}
	if h.Terminal != nil && (h.Terminal.IdleTimeoutMS < 0 || h.Terminal.IdleTimeoutMS > int64(math.MaxInt64/time.Millisecond)) {
		return h, fmt.Errorf("handle terminal idle timeout %dms is out of range: %w", h.Terminal.IdleTimeoutMS, runtime.ErrNotFound)
	}
	if err := h.terminal().Validate(); err != nil {
		return h, fmt.Errorf("handle terminal settings: %v: %w", err, runtime.ErrNotFound)
	}
	r.handlesMu.Lock()
	if r.handlesRoot != root || len(r.handles) >= maxCachedHandles {
		r.handlesRoot, r.handles = root, map[string]handle{}
	}
	r.handles[string(b)] = h
	r.handlesMu.Unlock()
	return h, nil
}

func (h handle) response() runtime.LaunchResponse {
	b, _ := json.Marshal(h)
	resp := runtime.LaunchResponse{Handle: b, AgentctlURL: h.URL, PID: h.PID, Nonce: h.Nonce, AgentctlFingerprint: h.Fingerprint}
	h.Layout.Response(&resp)
	return resp
}

// Launch implements runtime.Runtime: prepare the workspace (reused when it
// already exists), stop any agentctl of an earlier launch of this session,
// and start a fresh one.
func (r *Runtime) Launch(ctx context.Context, req runtime.LaunchRequest) (runtime.LaunchResponse, error) {
	if err := req.Validate(); err != nil {
		return runtime.LaunchResponse{}, err
	}
	defer r.Sessions.Lock(req.SessionID)()
	cfg := r.config()
	agentctl, err := findAgentctl(cfg)
	if err != nil {
		return runtime.LaunchResponse{}, err
	}
	wreq := workspace.NewRequest(cfg.WorkspaceRoot, req)
	wreq.TaskRoot, wreq.TaskRootName = cfg.TaskWorkspaceRoot, "task_workspace_root"
	prepared, err := workspace.Prepare(ctx, wreq)
	if err != nil {
		return runtime.LaunchResponse{}, err
	}
	if u := cfg.AgentUser; u != nil {
		if err := prepared.GiveTo(cfg.WorkspaceRoot, u.UID, u.GID); err != nil {
			return runtime.LaunchResponse{}, fmt.Errorf("session %s: %w", req.SessionID, err)
		}
	}
	h := handle{
		V:         handleVersion,
		SessionID: req.SessionID,
		Layout:    prepared.Layout,
		StateDir:  prepared.StateDir(),
		Env:       req.Env,
		Terminal:  newHandleTerminal(req.Terminal),
	}
	r.stopRunning(ctx, h, 5*time.Second)
	if err := r.start(ctx, cfg, agentctl, req.AgentctlSecret, &h); err != nil {
		return runtime.LaunchResponse{}, err
	}
	r.Logger().Info("launched agentctl", "session_id", h.SessionID, "pid", h.PID, "url", h.URL, "workspace", h.Workspace)
	return h.response(), nil
}

// start launches agentctl for h and records its pid, nonce and URL in h.
func (r *Runtime) start(ctx context.Context, cfg Config, agentctl, secret string, h *handle) error {
	proc, err := agentctlproc.Start(ctx, agentctlproc.StartConfig{
		AgentctlPath: agentctl,
		SessionID:    h.SessionID,
		Workspace:    h.Workspace,
		StateDir:     h.StateDir,
		Listen:       cfg.Listen,
		Advertise:    cfg.Advertise,
		Secret:       secret,
		Env:          childEnv(agentctl, h.Env),
		Timeout:      cfg.StartTimeout,
		Terminal:     h.terminal(),
		AgentUser:    cfg.AgentUser,
		TLS:          cfg.AgentctlTLS,
		Nice:         cfg.Nice,
		// One scheduling group for all of this runtime's agentctls (its
		// plugin leads the session; see the plugin's main).
		ShareSession: true,
	})
	if err != nil {
		return fmt.Errorf("session %s: %w", h.SessionID, err)
	}
	h.PID, h.Nonce, h.URL, h.Fingerprint = proc.Info.PID, proc.Info.Nonce, proc.Info.URL, proc.Info.Fingerprint
	return nil
}

// stopRunning stops the agentctl of h's session if one runs (the one h names
// or the one in the state dir's info file).
func (r *Runtime) stopRunning(ctx context.Context, h handle, timeout time.Duration) error {
	pids := []int{h.PID}
	if info, err := agentctlproc.ReadInfo(agentctlproc.InfoFile(h.StateDir)); err == nil && info.PID != h.PID {
		pids = append(pids, info.PID)
	}
	var errs []error
	for _, pid := range pids {
		if agentctlproc.IsSessionAgentctl(pid, h.SessionID) {
			r.Logger().Info("stopping agentctl", "session_id", h.SessionID, "pid", pid)
			errs = append(errs, agentctlproc.StopGroup(ctx, pid, timeout))
		}
	}
	return errors.Join(errs...)
}

// Recover implements runtime.Runtime.
func (r *Runtime) Recover(ctx context.Context, hb []byte, secret string) (runtime.LaunchResponse, error) {
	h, err := r.decodeHandle(hb)
	if err != nil {
		return runtime.LaunchResponse{}, err
	}
	if secret == "" {
		return runtime.LaunchResponse{}, fmt.Errorf("agentctl secret is empty: %w", runtime.ErrInvalidRequest)
	}
	defer r.Sessions.Lock(h.SessionID)()
	if st, err := os.Stat(h.Workspace); err != nil || !st.IsDir() {
		return runtime.LaunchResponse{}, fmt.Errorf("session %s: workspace %s is gone: %w", h.SessionID, h.Workspace, runtime.ErrNotFound)
	}
	if agentctlproc.IsSessionAgentctl(h.PID, h.SessionID) {
		// The process is this session's agentctl: never start a second one
		// beside a live one. A slow or unreachable agentctl is retried for a
		// while, then reported unavailable (the supervisor retries); only an
		// answer with another nonce or pid means it is not ours any more.
		var herr error
		for attempt := 0; attempt < 5 && ctx.Err() == nil; attempt++ {
			hctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			var health agentctlproc.Health
			health, herr = agentctlproc.CheckHealthPinned(hctx, h.URL, secret, h.Fingerprint)
			cancel()
			if herr == nil && health.Nonce == h.Nonce && health.PID == h.PID {
				r.Logger().Info("reattached agentctl", "session_id", h.SessionID, "pid", h.PID)
				return h.response(), nil
			}
			if herr == nil {
				break // it answers, but as someone else
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Duration(attempt+1) * 200 * time.Millisecond):
			}
		}
		if err := ctx.Err(); err != nil {
			return runtime.LaunchResponse{}, err
		}
		if herr != nil {
			return runtime.LaunchResponse{}, fmt.Errorf("session %s: agentctl (pid %d) is running but does not answer: %v: %w", h.SessionID, h.PID, herr, runtime.ErrUnavailable)
		}
		r.Logger().Warn("agentctl does not match its handle; restarting", "session_id", h.SessionID, "pid", h.PID)
	}
	cfg := r.config()
	agentctl, err := findAgentctl(cfg)
	if err != nil {
		return runtime.LaunchResponse{}, err
	}
	r.stopRunning(ctx, h, 5*time.Second)
	if err := r.start(ctx, cfg, agentctl, secret, &h); err != nil {
		return runtime.LaunchResponse{}, err
	}
	r.Logger().Info("restarted agentctl", "session_id", h.SessionID, "pid", h.PID)
	return h.response(), nil
}

// Inspect implements runtime.Runtime.
func (r *Runtime) Inspect(_ context.Context, hb []byte) (runtime.InspectResponse, error) {
	h, err := r.decodeHandle(hb)
	if err != nil {
		return runtime.InspectResponse{}, err
	}
	_, werr := os.Stat(h.Workspace)
	details := map[string]string{"workspace": h.Workspace, "workspace_exists": strconv.FormatBool(werr == nil)}
	if agentctlproc.IsSessionAgentctl(h.PID, h.SessionID) {
		return runtime.InspectResponse{State: runtime.StateRunning, PID: h.PID, AgentctlURL: h.URL, Details: details}, nil
	}
	if werr != nil {
		if _, serr := os.Stat(h.SessionDir); serr != nil {
			return runtime.InspectResponse{}, fmt.Errorf("session %s: executor is gone: %w", h.SessionID, runtime.ErrNotFound)
		}
	}
	return runtime.InspectResponse{State: runtime.StateExited, PID: h.PID, Message: "agentctl is not running", Details: details}, nil
}

// Stop implements runtime.Runtime.
func (r *Runtime) Stop(ctx context.Context, hb []byte, timeout time.Duration) error {
	h, err := r.decodeHandle(hb)
	if err != nil {
		return err
	}
	defer r.Sessions.Lock(h.SessionID)()
	if err := r.stopRunning(ctx, h, timeout); err != nil {
		return fmt.Errorf("session %s: %w", h.SessionID, err)
	}
	return nil
}

// Destroy implements runtime.Runtime: stop agentctl, remove the worktree
// (the branch is kept: it holds the session's commits) and the session dir.
func (r *Runtime) Destroy(ctx context.Context, hb []byte) error {
	h, err := r.decodeHandle(hb)
	if err != nil {
		return err
	}
	defer r.Sessions.Lock(h.SessionID)()
	if err := r.stopRunning(ctx, h, 5*time.Second); err != nil {
		return fmt.Errorf("session %s: %w", h.SessionID, err)
	}
	if err := workspace.Remove(ctx, r.Logger().With("session_id", h.SessionID), h.Layout); err != nil {
		return fmt.Errorf("session %s: %w", h.SessionID, err)
	}
	r.Logger().Info("destroyed executor", "session_id", h.SessionID)
	return nil
}

// findAgentctl resolves the agentctl binary: config, then bin/agentctl when
// this plugin runs from bin/plugins/, then next to the plugin, then PATH.
func findAgentctl(cfg Config) (string, error) {
	if cfg.AgentctlPath != "" {
		return cfg.AgentctlPath, nil
	}
	if exe, err := os.Executable(); err == nil {
		dir := filepath.Dir(exe)
		for _, p := range []string{filepath.Join(filepath.Dir(dir), "agentctl"), filepath.Join(dir, "agentctl")} {
			if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
				return p, nil
			}
		}
	}
	p, err := exec.LookPath("agentctl")
	if err != nil {
		return "", fmt.Errorf("agentctl not found (set agentctl_path): %w", runtime.ErrUnavailable)
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("agentctl path %s: %w", p, err)
	}
	return abs, nil
}

// childEnv is the plugin's environment with the agentctl binary's directory
// first on PATH, then the request's extra variables.
func childEnv(agentctl string, extra map[string]string) []string {
	path := filepath.Dir(agentctl)
	if p := os.Getenv("PATH"); p != "" {
		path += string(os.PathListSeparator) + p
	}
	env := []string{"PATH=" + path}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PATH=") && !strings.HasPrefix(kv, agentctlproc.SecretEnv+"=") && !strings.HasPrefix(kv, "PADDOCK_RUNTIME_PLUGIN=") && !strings.HasPrefix(kv, "PLUGIN_") {
			env = append(env, kv)
		}
	}
	for k, v := range extra {
		env = append(env, k+"="+v)
	}
	return env
}
