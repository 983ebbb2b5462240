// Command runtime-subprocess is the smallest complete Paddock runtime plugin,
// the starting point for third-party runtime authors. Each session's agentctl
// runs as a detached local process in workspace_root/<session-id>/workspace.
// It imports only Paddock's shared/ packages (and HCL), never supervisor/.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/paddockhq/paddock/shared/runtime"
	"github.com/paddockhq/paddock/shared/runtime/agentctlproc"
)

func main() { runtime.Serve(&plugin{}) }

// config is the plugin's `config { … }` body.
type config struct {
	WorkspaceRoot string `hcl:"workspace_root"`
	AgentctlPath  string `hcl:"agentctl_path"`
}

// handle is the opaque executor handle the supervisor stores for us.
type handle struct {
	SessionID string `json:"session_id"`
	Dir       string `json:"dir"`
	PID       int    `json:"pid"`
	Nonce     string `json:"nonce"`
	URL       string `json:"url"`
}

type plugin struct{ cfg config }

func (p *plugin) Info(context.Context) (runtime.Info, error) {
	return runtime.Info{Name: "subprocess", Version: "0.1.0", APIVersion: runtime.APIVersion}, nil
}

func (p *plugin) ConfigSchema(context.Context) (runtime.Schema, error) {
	return runtime.Schema{Attributes: []runtime.AttributeSchema{
		{Name: "workspace_root", Type: "string", Required: true},
		{Name: "agentctl_path", Type: "string", Required: true},
	}}, nil
}

// SetConfig parses the body at its true position so errors point into the
// operator's file. (A real plugin would guard cfg with a mutex.)
func (p *plugin) SetConfig(_ context.Context, src runtime.ConfigSource) (hcl.Diagnostics, error) {
	f, diags := hclsyntax.ParseConfig(src.Source, src.Filename, src.Start)
	if diags.HasErrors() {
		return diags, nil
	}
	var c config
	if diags = gohcl.DecodeBody(f.Body, nil, &c); diags.HasErrors() {
		return diags, nil
	}
	root, err := filepath.Abs(c.WorkspaceRoot)
	if err != nil {
		return nil, fmt.Errorf("workspace_root: %w", err)
	}
	p.cfg = config{WorkspaceRoot: root, AgentctlPath: c.AgentctlPath}
	return nil, nil
}

func (p *plugin) Capabilities(context.Context) (runtime.Capabilities, error) {
	return runtime.Capabilities{SupportsWorkspaceOnly: true, SurvivesSupervisorRestart: true, NodeLocal: true}, nil
}

func (p *plugin) Launch(ctx context.Context, req runtime.LaunchRequest) (runtime.LaunchResponse, error) {
	// The SDK has already validated req (ids are safe path elements).
	h := handle{SessionID: req.SessionID, Dir: filepath.Join(p.cfg.WorkspaceRoot, req.SessionID)}
	if err := os.MkdirAll(filepath.Join(h.Dir, "workspace"), 0o755); err != nil {
		return runtime.LaunchResponse{}, fmt.Errorf("create workspace: %w", err)
	}
	return p.start(ctx, h, req.AgentctlSecret)
}

func (p *plugin) start(ctx context.Context, h handle, secret string) (runtime.LaunchResponse, error) {
	proc, err := agentctlproc.Start(ctx, agentctlproc.StartConfig{
		AgentctlPath: p.cfg.AgentctlPath, SessionID: h.SessionID, Secret: secret, Env: os.Environ(),
		Workspace: filepath.Join(h.Dir, "workspace"), StateDir: filepath.Join(h.Dir, "state"),
	})
	if err != nil {
		return runtime.LaunchResponse{}, err
	}
	h.PID, h.Nonce, h.URL = proc.Info.PID, proc.Info.Nonce, proc.Info.URL
	b, err := json.Marshal(h)
	if err != nil {
		return runtime.LaunchResponse{}, fmt.Errorf("encode handle: %w", err)
	}
	return runtime.LaunchResponse{Handle: b, AgentctlURL: h.URL, PID: h.PID, Nonce: h.Nonce, WorkspacePath: filepath.Join(h.Dir, "workspace")}, nil
}

// decode returns ErrNotFound for anything that is not one of our handles.
func (p *plugin) decode(b []byte) (handle, error) {
	var h handle
	if err := json.Unmarshal(b, &h); err != nil || !runtime.ValidID(h.SessionID) || h.Dir != filepath.Join(p.cfg.WorkspaceRoot, h.SessionID) {
		return h, fmt.Errorf("not a subprocess handle: %w", runtime.ErrNotFound)
	}
	return h, nil
}

func (p *plugin) Recover(ctx context.Context, b []byte, secret string) (runtime.LaunchResponse, error) {
	h, err := p.decode(b)
	if err != nil {
		return runtime.LaunchResponse{}, err
	}
	if _, err := os.Stat(filepath.Join(h.Dir, "workspace")); err != nil {
		return runtime.LaunchResponse{}, fmt.Errorf("workspace of %s is gone: %w", h.SessionID, runtime.ErrNotFound)
	}
	if agentctlproc.IsSessionAgentctl(h.PID, h.SessionID) {
		if health, err := agentctlproc.CheckHealth(ctx, h.URL, secret); err == nil && health.Nonce == h.Nonce {
			return runtime.LaunchResponse{Handle: b, AgentctlURL: h.URL, PID: h.PID, Nonce: h.Nonce, WorkspacePath: filepath.Join(h.Dir, "workspace")}, nil
		}
		_ = agentctlproc.StopGroup(ctx, h.PID, 2*time.Second)
	}
	return p.start(ctx, h, secret)
}

func (p *plugin) Inspect(_ context.Context, b []byte) (runtime.InspectResponse, error) {
	h, err := p.decode(b)
	if err != nil {
		return runtime.InspectResponse{}, err
	}
	if agentctlproc.IsSessionAgentctl(h.PID, h.SessionID) {
		return runtime.InspectResponse{State: runtime.StateRunning, PID: h.PID, AgentctlURL: h.URL}, nil
	}
	if _, err := os.Stat(h.Dir); err != nil {
		return runtime.InspectResponse{}, fmt.Errorf("executor of %s is gone: %w", h.SessionID, runtime.ErrNotFound)
	}
	return runtime.InspectResponse{State: runtime.StateExited, PID: h.PID}, nil
}

func (p *plugin) Stop(ctx context.Context, b []byte, timeout time.Duration) error {
	h, err := p.decode(b)
	if err != nil {
		return err
	}
	if agentctlproc.IsSessionAgentctl(h.PID, h.SessionID) {
		return agentctlproc.StopGroup(ctx, h.PID, timeout)
	}
	return nil
}

func (p *plugin) Destroy(ctx context.Context, b []byte) error {
	if err := p.Stop(ctx, b, 5*time.Second); err != nil {
		return err
	}
	h, _ := p.decode(b)
	return os.RemoveAll(h.Dir) // decode confined Dir to workspace_root
}
