package localexec

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/paddockhq/paddock/shared/runtime"
)

// DefaultWorkspaceRoot is used when the config names no workspace_root.
const DefaultWorkspaceRoot = "./data/workspaces"

// Config is the standalone plugin's `config { … }` body.
type Config struct {
	// WorkspaceRoot holds every session's directory (absolute after parsing).
	WorkspaceRoot string
	// AgentctlPath is the agentctl binary; empty means discover it.
	AgentctlPath string
	// Listen is agentctl's -listen address (default: the node's address,
	// port 0, so that every node of the cluster can reach it).
	Listen string
	// Advertise is agentctl's -advertise host, when set.
	Advertise string
	// StartTimeout bounds agentctl's start until healthy.
	StartTimeout time.Duration
	// SharedWorkspaceRoot declares workspace_root to be storage every node
	// mounts at the same path: a session whose node is gone may then be
	// relaunched on another node (capability "shared_workspace").
	SharedWorkspaceRoot bool
}

var configSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "workspace_root"},
		{Name: "agentctl_path"},
		{Name: "listen"},
		{Name: "advertise"},
		{Name: "start_timeout"},
		{Name: "shared_workspace_root"},
	},
}

// Schema documents the config body for ConfigSchema.
var schemaDoc = runtime.Schema{Attributes: []runtime.AttributeSchema{
	{Name: "workspace_root", Type: "string", Description: "directory holding every session's workspace (default " + DefaultWorkspaceRoot + ")"},
	{Name: "agentctl_path", Type: "string", Description: "agentctl binary (default: next to the plugin directory, then PATH)"},
	{Name: "shared_workspace_root", Type: "bool", Description: "workspace_root is storage every node mounts at the same path, so a session whose node is gone may be relaunched on another node (default false)"},
	{Name: "listen", Type: "string", Description: "agentctl listen address (default: the server's bind_addr, port 0)"},
	{Name: "advertise", Type: "string", Description: "host agentctl advertises in its URL (default: the listen host)"},
	{Name: "start_timeout", Type: "duration", Description: "how long agentctl may take to become healthy (default 15s)"},
}}

// ParseConfig parses a config body; diagnostics carry ranges in src.Filename.
func ParseConfig(src runtime.ConfigSource) (Config, hcl.Diagnostics) {
	cfg := Config{WorkspaceRoot: DefaultWorkspaceRoot, Listen: net.JoinHostPort(runtime.NodeAddr(), "0"), StartTimeout: 15 * time.Second}
	start := src.Start
	if start.Line == 0 {
		start = hcl.Pos{Line: 1, Column: 1}
	}
	file, diags := hclsyntax.ParseConfig(src.Source, src.Filename, start)
	if diags.HasErrors() {
		return cfg, diags
	}
	content, cdiags := file.Body.Content(configSchema)
	diags = append(diags, cdiags...)
	str := func(name string, dst *string) {
		attr, ok := content.Attributes[name]
		if !ok {
			return
		}
		v, vdiags := attr.Expr.Value(nil)
		diags = append(diags, vdiags...)
		if vdiags.HasErrors() {
			return
		}
		if v.IsNull() || !v.IsKnown() || v.Type() != cty.String {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid " + name,
				Detail: name + " must be a string.", Subject: attr.Expr.Range().Ptr()})
			return
		}
		*dst = v.AsString()
	}
	str("workspace_root", &cfg.WorkspaceRoot)
	str("agentctl_path", &cfg.AgentctlPath)
	str("listen", &cfg.Listen)
	str("advertise", &cfg.Advertise)
	var timeout string
	str("start_timeout", &timeout)
	if attr, ok := content.Attributes["shared_workspace_root"]; ok {
		v, vdiags := attr.Expr.Value(nil)
		diags = append(diags, vdiags...)
		if !vdiags.HasErrors() {
			if v.IsNull() || !v.IsKnown() || v.Type() != cty.Bool {
				diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid shared_workspace_root",
					Detail: "shared_workspace_root must be true or false.", Subject: attr.Expr.Range().Ptr()})
			} else {
				cfg.SharedWorkspaceRoot = v.True()
			}
		}
	}
	if diags.HasErrors() {
		return cfg, diags
	}
	subject := func(name string) *hcl.Range {
		if a, ok := content.Attributes[name]; ok {
			return a.Expr.Range().Ptr()
		}
		return nil
	}
	if timeout != "" {
		d, err := time.ParseDuration(timeout)
		if err != nil || d <= 0 {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid start_timeout",
				Detail: fmt.Sprintf("%q is not a positive duration like \"15s\".", timeout), Subject: subject("start_timeout")})
		} else {
			cfg.StartTimeout = d
		}
	}
	// Paths the file sets are relative to the file's directory.
	if _, set := content.Attributes["workspace_root"]; set {
		cfg.WorkspaceRoot = src.Path(cfg.WorkspaceRoot)
	}
	cfg.AgentctlPath = src.Path(cfg.AgentctlPath)
	if cfg.WorkspaceRoot == "" {
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid workspace_root",
			Detail: "workspace_root must not be empty.", Subject: subject("workspace_root")})
	} else if abs, err := filepath.Abs(cfg.WorkspaceRoot); err != nil {
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid workspace_root",
			Detail: err.Error(), Subject: subject("workspace_root")})
	} else {
		cfg.WorkspaceRoot = abs
	}
	if cfg.AgentctlPath != "" {
		abs, err := filepath.Abs(cfg.AgentctlPath)
		if err == nil {
			cfg.AgentctlPath = abs
		}
		if st, serr := os.Stat(cfg.AgentctlPath); err != nil || serr != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid agentctl_path",
				Detail: fmt.Sprintf("%s is not an executable file.", cfg.AgentctlPath), Subject: subject("agentctl_path")})
		}
	}
	return cfg, diags
}
