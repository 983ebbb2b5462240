// Command runtime-subprocess is the smallest complete Paddock runtime plugin,
// the starting point for third-party runtime authors. Each session's agentctl
// runs as a detached local process in workspace_root/<session-id>/workspace
// (a git worktree when the task's workspace is a repository inside
// workspace_root). It is written with the plugin author's kit:
//
//   - configspec declares the `config { … }` body once: it decodes it with
//     diagnostics at the operator's file:line,col and documents it for
//     `paddock plugin schema`;
//   - pluginbase supplies Info, ConfigSchema, SetConfig and the per-session
//     lock;
//   - workspace prepares the session's directories and confines task paths;
//   - agentctlproc starts, checks and stops agentctl.
//
// It imports only Paddock's shared/ packages, never supervisor/.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/paddockhq/paddock/shared/runtime"
	"github.com/paddockhq/paddock/shared/runtime/agentctlproc"
	"github.com/paddockhq/paddock/shared/runtime/configspec"
	"github.com/paddockhq/paddock/shared/runtime/pluginbase"
	"github.com/paddockhq/paddock/shared/runtime/workspace"
)

func main() { runtime.Serve(newPlugin()) }

// config is the plugin's `config { … }` body.
type config struct {
	WorkspaceRoot string
	AgentctlPath  string
	StartTimeout  time.Duration
}

// spec is the one declaration of the config body.
var spec = configspec.Spec[config]{
	Attributes: []configspec.Attribute[config]{
		configspec.Required(configspec.Path("workspace_root", "directory of the sessions' workspaces",
			func(c *config) *string { return &c.WorkspaceRoot }, configspec.AbsPath)),
		configspec.Required(configspec.Path("agentctl_path", "the agentctl binary",
			func(c *config) *string { return &c.AgentctlPath }, configspec.Executable)),
		configspec.Duration("start_timeout", "how long agentctl may take to become healthy (default 15s)",
			func(c *config) *time.Duration { return &c.StartTimeout }),
	},
}

func defaults() config { return config{StartTimeout: 15 * time.Second} }

// plugin implements runtime.Runtime; the embedded Base answers Info,
// ConfigSchema and SetConfig.
type plugin struct {
	*pluginbase.Base[config]
}

func newPlugin() *plugin {
	return &plugin{pluginbase.New(pluginbase.Options[config]{
		Info: runtime.Info{Name: "subprocess", Version: "0.1.0"}, Spec: spec, Defaults: defaults,
		Logger: runtime.PluginLogger("subprocess"),
	})}
}

// handle is the opaque executor handle the supervisor stores for us: where
// the session's files are and which agentctl runs (never the secret).
type handle struct {
	SessionID string `json:"session_id"`
	workspace.Layout
	PID   int    `json:"pid"`
	Nonce string `json:"nonce"`
	URL   string `json:"url"`
}

func (p *plugin) Capabilities(context.Context) (runtime.Capabilities, error) {
	return runtime.Capabilities{SupportsWorkspaceOnly: true, SurvivesSupervisorRestart: true, NodeLocal: true}, nil
}

func (p *plugin) Launch(ctx context.Context, req runtime.LaunchRequest) (runtime.LaunchResponse, error) {
	// The SDK has already validated req (ids are safe path elements).
	defer p.Sessions.Lock(req.SessionID)()
	cfg, _ := p.Config()
	prepared, err := workspace.Prepare(ctx, workspace.NewRequest(cfg.WorkspaceRoot, req))
	if err != nil {
		return runtime.LaunchResponse{}, err
	}
	h := handle{SessionID: req.SessionID, Layout: prepared.Layout}
	p.stop(ctx, h, 5*time.Second) // an agentctl of an earlier launch
	return p.start(ctx, cfg, h, req.AgentctlSecret)
}

func (p *plugin) start(ctx context.Context, cfg config, h handle, secret string) (runtime.LaunchResponse, error) {
	proc, err := agentctlproc.Start(ctx, agentctlproc.StartConfig{
		AgentctlPath: cfg.AgentctlPath, SessionID: h.SessionID, Secret: secret, Timeout: cfg.StartTimeout,
		Workspace: h.Workspace, StateDir: h.StateDir(), Env: os.Environ(),
	})
	if err != nil {
		return runtime.LaunchResponse{}, err
	}
	h.PID, h.Nonce, h.URL = proc.Info.PID, proc.Info.Nonce, proc.Info.URL
	return h.response()
}

func (h handle) response() (runtime.LaunchResponse, error) {
	b, err := json.Marshal(h)
	if err != nil {
		return runtime.LaunchResponse{}, fmt.Errorf("encode handle: %w", err)
	}
	resp := runtime.LaunchResponse{Handle: b, AgentctlURL: h.URL, PID: h.PID, Nonce: h.Nonce}
	h.Layout.Response(&resp)
	return resp, nil
}

// decode returns ErrNotFound for anything that is not one of our handles
// (Layout.Check confines its paths to workspace_root).
func (p *plugin) decode(b []byte) (handle, error) {
	var h handle
	if err := json.Unmarshal(b, &h); err != nil || !runtime.ValidID(h.SessionID) {
		return h, fmt.Errorf("not a subprocess handle: %w", runtime.ErrNotFound)
	}
	cfg, _ := p.Config()
	return h, h.Layout.Check(cfg.WorkspaceRoot, h.SessionID)
}

func (p *plugin) Recover(ctx context.Context, b []byte, secret string) (runtime.LaunchResponse, error) {
	h, err := p.decode(b)
	if err != nil {
		return runtime.LaunchResponse{}, err
	}
	defer p.Sessions.Lock(h.SessionID)()
	if !exists(h.Workspace) {
		return runtime.LaunchResponse{}, fmt.Errorf("workspace of %s is gone: %w", h.SessionID, runtime.ErrNotFound)
	}
	if agentctlproc.IsSessionAgentctl(h.PID, h.SessionID) {
		if health, err := agentctlproc.CheckHealth(ctx, h.URL, secret); err == nil && health.Nonce == h.Nonce {
			return h.response() // alive and ours: reattach
		}
		p.stop(ctx, h, 2*time.Second)
	}
	cfg, _ := p.Config()
	return p.start(ctx, cfg, h, secret)
}

func (p *plugin) Inspect(_ context.Context, b []byte) (runtime.InspectResponse, error) {
	h, err := p.decode(b)
	if err != nil {
		return runtime.InspectResponse{}, err
	}
	if agentctlproc.IsSessionAgentctl(h.PID, h.SessionID) {
		return runtime.InspectResponse{State: runtime.StateRunning, PID: h.PID, AgentctlURL: h.URL}, nil
	}
	if !exists(h.SessionDir) {
		return runtime.InspectResponse{}, fmt.Errorf("executor of %s is gone: %w", h.SessionID, runtime.ErrNotFound)
	}
	return runtime.InspectResponse{State: runtime.StateExited, PID: h.PID}, nil
}

// stop stops the session's agentctl: the one h names or the one in its
// state dir's info file.
func (p *plugin) stop(ctx context.Context, h handle, timeout time.Duration) error {
	pid := h.PID
	if info, err := agentctlproc.ReadInfo(agentctlproc.InfoFile(h.StateDir())); err == nil && !agentctlproc.IsSessionAgentctl(pid, h.SessionID) {
		pid = info.PID
	}
	if agentctlproc.IsSessionAgentctl(pid, h.SessionID) {
		return agentctlproc.StopGroup(ctx, pid, timeout)
	}
	return nil
}

func (p *plugin) Stop(ctx context.Context, b []byte, timeout time.Duration) error {
	h, err := p.decode(b)
	if err != nil {
		return err
	}
	defer p.Sessions.Lock(h.SessionID)()
	return p.stop(ctx, h, timeout)
}

func (p *plugin) Destroy(ctx context.Context, b []byte) error {
	h, err := p.decode(b)
	if err != nil {
		return err
	}
	defer p.Sessions.Lock(h.SessionID)()
	if err := p.stop(ctx, h, 5*time.Second); err != nil {
		return err
	}
	return workspace.Remove(ctx, p.Logger(), h.Layout) // the worktree, then the session dir
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
