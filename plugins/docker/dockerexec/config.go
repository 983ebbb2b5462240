package dockerexec

import (
	"fmt"
	"math"
	"math/big"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/paddockhq/paddock/shared/runtime"
)

// Defaults applied when the config leaves an attribute out.
const (
	DefaultImage         = "paddock-executor:dev"
	DefaultWorkspaceRoot = "./data/workspaces"
	DefaultPublishAddr   = "127.0.0.1"
	DefaultStartTimeout  = 30 * time.Second
	// MinMemory is the smallest memory limit the engine accepts (6 MiB).
	MinMemory = 6 << 20
)

// Config is the docker plugin's `config { … }` body.
type Config struct {
	// Image is the executor image (never pulled: it must exist on the engine).
	Image string
	// Host is the engine address (unix:///var/run/docker.sock, tcp://…);
	// empty means DOCKER_HOST, else the local socket.
	Host string
	// AgentctlPath is a host path of a static agentctl bind-mounted read-only
	// into the container; empty means agentctl must be on the image's PATH.
	AgentctlPath string
	// WorkspaceRoot (absolute after parsing) holds every session's directory;
	// task workspaces must lie inside it.
	WorkspaceRoot string
	// PublishAddr is the host IP agentctl's port is published on.
	PublishAddr string
	// Advertise is the host put in the agentctl URL (default PublishAddr, or
	// 127.0.0.1 when PublishAddr is unspecified).
	Advertise string
	// Memory is the memory limit in bytes (0: none).
	Memory int64
	// NanoCPUs is the CPU limit in 1e-9 CPUs (0: none).
	NanoCPUs int64
	// Pids is the process limit (0: none).
	Pids int64
	// User is the container user (uid[:gid] or name); empty means the
	// plugin's own uid:gid so workspace files stay the operator's.
	User string
	// RestartStopped lets Recover start a stopped container again.
	RestartStopped bool
	// Cluster is the paddock.cluster label value; empty means the launch
	// request's cluster.
	Cluster string
	// StartTimeout bounds container start until agentctl is healthy.
	StartTimeout time.Duration
	// ReconcileGrace, when set, is the age a container no executor owns
	// must reach before Reconcile removes it, instead of the grace the
	// supervisor asks for (0: the supervisor's).
	ReconcileGrace time.Duration
}

var configSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "image"}, {Name: "host"}, {Name: "agentctl_path"}, {Name: "workspace_root"},
		{Name: "publish_addr"}, {Name: "advertise"}, {Name: "memory"}, {Name: "cpus"}, {Name: "pids"},
		{Name: "user"}, {Name: "restart_stopped"}, {Name: "cluster"}, {Name: "start_timeout"},
		{Name: "reconcile_grace"},
	},
}

var schemaDoc = runtime.Schema{Attributes: []runtime.AttributeSchema{
	{Name: "image", Type: "string", Description: "executor image, never pulled (default " + DefaultImage + ")"},
	{Name: "host", Type: "string", Description: "Docker engine address, e.g. unix:///var/run/docker.sock or tcp://10.0.0.5:2375 (default: DOCKER_HOST, else the local socket)"},
	{Name: "agentctl_path", Type: "string", Description: "host path of a static agentctl bind-mounted read-only into the container (default: agentctl from the image's PATH)"},
	{Name: "workspace_root", Type: "string", Description: "host directory holding session workspaces; task workspaces must be inside it (default " + DefaultWorkspaceRoot + ")"},
	{Name: "publish_addr", Type: "string", Description: "host IP agentctl's port is published on, reachable by every supervisor node (default " + DefaultPublishAddr + ")"},
	{Name: "advertise", Type: "string", Description: "host name or IP put in agentctl's URL (default: publish_addr)"},
	{Name: "memory", Type: "string", Description: `memory limit: bytes or a size like "512m", "2g" (at least 6m; default none)`},
	{Name: "cpus", Type: "number", Description: "CPU limit, e.g. 1.5 (default none)"},
	{Name: "pids", Type: "number", Description: "process limit (default none)"},
	{Name: "user", Type: "string", Description: "container user uid[:gid] (default: the plugin's uid:gid)"},
	{Name: "restart_stopped", Type: "bool", Description: "Recover starts a stopped container again (default true)"},
	{Name: "cluster", Type: "string", Description: "paddock.cluster label value (default: the launch request's cluster)"},
	{Name: "start_timeout", Type: "duration", Description: "how long a container may take until agentctl is healthy (default 30s)"},
	{Name: "reconcile_grace", Type: "duration", Description: "how old a container of this cluster that no executor owns must be before the supervisor's reconciler removes it (default: the supervisor's grace, 2m); allow for clock skew with a remote engine"},
}}

// ParseConfig parses a config body; diagnostics carry ranges in src.Filename.
func ParseConfig(src runtime.ConfigSource) (Config, hcl.Diagnostics) {
	cfg := Config{
		Image:          DefaultImage,
		WorkspaceRoot:  DefaultWorkspaceRoot,
		PublishAddr:    DefaultPublishAddr,
		RestartStopped: true,
		StartTimeout:   DefaultStartTimeout,
	}
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
	bad := func(name, detail string) {
		var subject *hcl.Range
		if a, ok := content.Attributes[name]; ok {
			subject = a.Expr.Range().Ptr()
		}
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid " + name, Detail: detail, Subject: subject})
	}
	value := func(name string) (cty.Value, bool) {
		attr, ok := content.Attributes[name]
		if !ok {
			return cty.NilVal, false
		}
		v, vdiags := attr.Expr.Value(nil)
		diags = append(diags, vdiags...)
		if vdiags.HasErrors() {
			return cty.NilVal, false
		}
		if v.IsNull() || !v.IsKnown() {
			bad(name, name+" must not be null.")
			return cty.NilVal, false
		}
		return v, true
	}
	str := func(name string, dst *string) bool {
		v, ok := value(name)
		if !ok {
			return false
		}
		if v.Type() != cty.String {
			bad(name, name+" must be a string.")
			return false
		}
		*dst = v.AsString()
		return true
	}
	number := func(name string) (*big.Float, bool) {
		v, ok := value(name)
		if !ok {
			return nil, false
		}
		if v.Type() != cty.Number {
			bad(name, name+" must be a number.")
			return nil, false
		}
		return v.AsBigFloat(), true
	}

	if str("image", &cfg.Image) && strings.TrimSpace(cfg.Image) == "" {
		bad("image", "image must not be empty.")
	}
	if str("host", &cfg.Host) && cfg.Host != "" {
		if u, err := url.Parse(cfg.Host); err != nil || u.Scheme == "" || (u.Scheme != "unix" && u.Scheme != "tcp" && u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "ssh" && u.Scheme != "npipe") {
			bad("host", fmt.Sprintf("%q is not an engine address like unix:///var/run/docker.sock or tcp://HOST:2375.", cfg.Host))
		}
	}
	// Paths the file sets are relative to the file's directory.
	if str("agentctl_path", &cfg.AgentctlPath) && cfg.AgentctlPath != "" {
		cfg.AgentctlPath = src.Path(cfg.AgentctlPath)
		abs, err := filepath.Abs(cfg.AgentctlPath)
		if err == nil {
			cfg.AgentctlPath = abs
		}
		if st, serr := os.Stat(cfg.AgentctlPath); err != nil || serr != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			bad("agentctl_path", fmt.Sprintf("%s is not an executable file.", cfg.AgentctlPath))
		}
	}
	if str("workspace_root", &cfg.WorkspaceRoot) {
		if cfg.WorkspaceRoot == "" {
			bad("workspace_root", "workspace_root must not be empty.")
		}
		cfg.WorkspaceRoot = src.Path(cfg.WorkspaceRoot)
	}
	if cfg.WorkspaceRoot != "" {
		if abs, err := filepath.Abs(cfg.WorkspaceRoot); err != nil {
			bad("workspace_root", err.Error())
		} else {
			cfg.WorkspaceRoot = abs
		}
	}
	if str("publish_addr", &cfg.PublishAddr) {
		if _, err := netip.ParseAddr(cfg.PublishAddr); err != nil {
			bad("publish_addr", fmt.Sprintf("%q is not an IP address (the engine publishes ports on IPs only).", cfg.PublishAddr))
		}
	}
	if str("advertise", &cfg.Advertise) && (cfg.Advertise == "" || strings.ContainsAny(cfg.Advertise, "/ @?#")) {
		bad("advertise", fmt.Sprintf("%q is not a host name or IP.", cfg.Advertise))
	}
	var mem string
	if v, ok := value("memory"); ok {
		switch v.Type() {
		case cty.String:
			mem = v.AsString()
		case cty.Number:
			mem = v.AsBigFloat().Text('f', -1)
		default:
			bad("memory", "memory must be a size like \"512m\" or a number of bytes.")
		}
	}
	if mem != "" {
		n, err := ParseSize(mem)
		switch {
		case err != nil:
			bad("memory", err.Error())
		case n < MinMemory:
			bad("memory", fmt.Sprintf("memory %q is below the engine's minimum of 6m.", mem))
		default:
			cfg.Memory = n
		}
	}
	if f, ok := number("cpus"); ok {
		c, _ := f.Float64()
		if c <= 0 || c > 4096 || math.IsNaN(c) {
			bad("cpus", fmt.Sprintf("cpus must be a positive number like 1.5, not %s.", f.Text('g', -1)))
		} else if cfg.NanoCPUs = int64(math.Round(c * 1e9)); cfg.NanoCPUs < 1e7 {
			bad("cpus", "cpus must be at least 0.01.")
		}
	}
	if f, ok := number("pids"); ok {
		p, acc := f.Int64()
		if acc != big.Exact || p <= 0 {
			bad("pids", fmt.Sprintf("pids must be a positive whole number, not %s.", f.Text('g', -1)))
		} else {
			cfg.Pids = p
		}
	}
	if str("user", &cfg.User) && (cfg.User == "" || strings.ContainsAny(cfg.User, " \t\n\x00")) {
		bad("user", "user must be a uid[:gid] or user name.")
	}
	if v, ok := value("restart_stopped"); ok {
		if v.Type() != cty.Bool {
			bad("restart_stopped", "restart_stopped must be true or false.")
		} else {
			cfg.RestartStopped = v.True()
		}
	}
	if str("cluster", &cfg.Cluster) && cfg.Cluster != "" && !runtime.ValidID(cfg.Cluster) {
		bad("cluster", fmt.Sprintf("cluster %q must be letters, digits, '.', '_' or '-'.", cfg.Cluster))
	}
	var timeout string
	if str("start_timeout", &timeout) {
		d, err := time.ParseDuration(timeout)
		if err != nil || d <= 0 {
			bad("start_timeout", fmt.Sprintf("%q is not a positive duration like \"30s\".", timeout))
		} else {
			cfg.StartTimeout = d
		}
	}
	var grace string
	if str("reconcile_grace", &grace) {
		d, err := time.ParseDuration(grace)
		if err != nil || d <= 0 {
			bad("reconcile_grace", fmt.Sprintf("%q is not a positive duration like \"2m\".", grace))
		} else {
			cfg.ReconcileGrace = d
		}
	}
	return cfg, diags
}

// ParseSize parses a byte size: a whole number with an optional binary unit
// suffix b, k, m, g or t (case-insensitive, an optional trailing "b" or
// "ib" as in "512mb" or "2GiB").
func ParseSize(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	t = strings.TrimSuffix(t, "ib")
	if len(t) > 1 && strings.HasSuffix(t, "b") && strings.ContainsAny(t[len(t)-2:len(t)-1], "kmgt") {
		t = t[:len(t)-1]
	}
	mult := int64(1)
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'b':
			t = t[:n-1]
		case 'k':
			mult, t = 1<<10, t[:n-1]
		case 'm':
			mult, t = 1<<20, t[:n-1]
		case 'g':
			mult, t = 1<<30, t[:n-1]
		case 't':
			mult, t = 1<<40, t[:n-1]
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n <= 0 || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("%q is not a size like \"512m\", \"2g\" or a number of bytes", s)
	}
	return n * mult, nil
}

// advertiseHost is the host put in agentctl URLs.
func (c Config) advertiseHost() string {
	if c.Advertise != "" {
		return c.Advertise
	}
	if a, err := netip.ParseAddr(c.PublishAddr); err == nil && a.IsUnspecified() {
		return "127.0.0.1"
	}
	return c.PublishAddr
}

// nodeLocal reports whether Host names an engine on this machine.
func (c Config) nodeLocal() bool {
	h := c.Host
	if h == "" {
		h = os.Getenv("DOCKER_HOST")
	}
	if h == "" {
		return true
	}
	u, err := url.Parse(h)
	if err != nil {
		return false
	}
	switch u.Scheme {
	case "unix", "npipe":
		return true
	case "tcp", "http", "https":
		host := u.Hostname()
		if host == "localhost" {
			return true
		}
		a, err := netip.ParseAddr(host)
		return err == nil && a.IsLoopback()
	}
	return false
}
