package dockerexec

import (
	"fmt"
	"math"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/paddockhq/paddock/shared/runtime"
	"github.com/paddockhq/paddock/shared/runtime/configspec"
)

// Defaults applied when the config leaves an attribute out.
const (
	DefaultImage         = "paddock-executor:dev"
	DefaultWorkspaceRoot = "./data/workspaces"
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
	// AgentUser is the UID:GID the agent and terminal shells run as when
	// the container user is root (agentctl stays root); "container" runs
	// them as the container user. Default DefaultAgentUser.
	AgentUser string
	// AgentctlTLS runs agentctl with -tls: HTTPS with a key of its own,
	// whose fingerprint every node pins.
	AgentctlTLS bool
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

func defaults() Config {
	return Config{
		Image:         DefaultImage,
		WorkspaceRoot: DefaultWorkspaceRoot,
		// Every node talks to agentctl: by default its port is published
		// on the address the node serves on (the server's bind_addr, which
		// the host passes in runtime.NodeAddrEnv), as standalone listens.
		PublishAddr:    runtime.NodeAddr(),
		RestartStopped: true,
		AgentUser:      DefaultAgentUser,
		StartTimeout:   DefaultStartTimeout,
	}
}

// spec declares the config body: its decoder and its documentation.
var spec = configspec.Spec[Config]{
	Attributes: []configspec.Attribute[Config]{
		configspec.String("image", "executor image, never pulled (default "+DefaultImage+")",
			func(c *Config) *string { return &c.Image }, configspec.NotEmpty),
		configspec.String("host", "Docker engine address, e.g. unix:///var/run/docker.sock or tcp://10.0.0.5:2375 (default: DOCKER_HOST, else the local socket)",
			func(c *Config) *string { return &c.Host }, engineAddress),
		configspec.Path("agentctl_path", "host path of a static agentctl bind-mounted read-only into the container (default: agentctl from the image's PATH)",
			func(c *Config) *string { return &c.AgentctlPath }, configspec.Executable),
		configspec.Path("workspace_root", "host directory holding session workspaces; task workspaces must be inside it, symlinks resolved (default "+DefaultWorkspaceRoot+")",
			func(c *Config) *string { return &c.WorkspaceRoot }, configspec.NotEmpty),
		configspec.String("publish_addr", "host IP agentctl's port is published on, reachable by every supervisor node (default: the node's own address, the server's bind_addr)",
			func(c *Config) *string { return &c.PublishAddr }, ipAddress),
		configspec.String("advertise", "host name or IP put in agentctl's URL (default: publish_addr)",
			func(c *Config) *string { return &c.Advertise }, hostName),
		configspec.Attr("memory", "string", `memory limit: bytes or a size like "512m", "2g" (at least 6m; default none)`, decodeMemory),
		configspec.Number("cpus", "CPU limit, e.g. 1.5 (default none)", 0, 4096, func(c *Config, f float64) error {
			if c.NanoCPUs = int64(math.Round(f * 1e9)); c.NanoCPUs < 1e7 {
				return fmt.Errorf("cpus must be at least 0.01")
			}
			return nil
		}),
		configspec.Int("pids", "process limit (default none)", 1, math.MaxInt64, func(c *Config) *int64 { return &c.Pids }),
		configspec.String("user", "container user uid[:gid] (default: the plugin's uid:gid)",
			func(c *Config) *string { return &c.User }, userName),
		configspec.String("agent_user", `numeric UID:GID the agent and terminal shells run as inside a container whose user is root, so that they cannot read agentctl's state and secret; the session's workspace is given to that user; "container" runs them as the container user (default `+DefaultAgentUser+`, nobody in the executor image)`,
			func(c *Config) *string { return &c.AgentUser }, agentUser),
		configspec.Bool("agentctl_tls", "agentctl serves HTTPS with a key it makes at every start (ECDSA P-256, self-signed); the plugin reads its fingerprint from the state dir, it is recorded with the executor and pinned by every node (default false)",
			func(c *Config) *bool { return &c.AgentctlTLS }),
		configspec.Bool("restart_stopped", "Recover starts a stopped container again (default true)",
			func(c *Config) *bool { return &c.RestartStopped }),
		configspec.String("cluster", "paddock.cluster label value (default: the launch request's cluster)",
			func(c *Config) *string { return &c.Cluster }, clusterName),
		configspec.Duration("start_timeout", "how long a container may take until agentctl is healthy (default 30s)",
			func(c *Config) *time.Duration { return &c.StartTimeout }),
		configspec.Duration("reconcile_grace", "how old a container of this cluster that no executor owns must be before the supervisor's reconciler removes it (default: the supervisor's grace, 2m); allow for clock skew with a remote engine",
			func(c *Config) *time.Duration { return &c.ReconcileGrace }),
	},
	Checks: []configspec.Check[Config]{
		{Attr: "workspace_root", Fn: func(c *Config) (err error) { c.WorkspaceRoot, err = filepath.Abs(c.WorkspaceRoot); return err }},
	},
}

// ParseConfig parses a config body; diagnostics carry ranges in src.Filename.
func ParseConfig(src runtime.ConfigSource) (Config, hcl.Diagnostics) {
	return spec.Parse(src, defaults())
}

func engineAddress(s string) (string, error) {
	if s == "" {
		return s, nil
	}
	if u, err := url.Parse(s); err != nil || u.Scheme == "" || (u.Scheme != "unix" && u.Scheme != "tcp" && u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "ssh" && u.Scheme != "npipe") {
		return s, fmt.Errorf("%q is not an engine address like unix:///var/run/docker.sock or tcp://HOST:2375", s)
	}
	return s, nil
}

func ipAddress(s string) (string, error) {
	if _, err := netip.ParseAddr(s); err != nil {
		return s, fmt.Errorf("%q is not an IP address (the engine publishes ports on IPs only)", s)
	}
	return s, nil
}

func hostName(s string) (string, error) {
	if s == "" || strings.ContainsAny(s, "/ @?#") {
		return s, fmt.Errorf("%q is not a host name or IP", s)
	}
	return s, nil
}

func userName(s string) (string, error) {
	if s == "" || strings.ContainsAny(s, " \t\n\x00") {
		return s, fmt.Errorf("user must be a uid[:gid] or user name")
	}
	return s, nil
}

// DefaultAgentUser is agent_user's default: nobody in the executor image.
const DefaultAgentUser = "65534:65534"

// AgentUserContainer is the agent_user value that runs the agent as the
// container user.
const AgentUserContainer = "container"

func agentUser(s string) (string, error) {
	if s == AgentUserContainer {
		return s, nil
	}
	u, g, ok := strings.Cut(s, ":")
	uid, uerr := strconv.ParseUint(u, 10, 32)
	_, gerr := strconv.ParseUint(g, 10, 32)
	if !ok || uerr != nil || gerr != nil {
		return s, fmt.Errorf("agent_user must be a numeric UID:GID or %q", AgentUserContainer)
	}
	if uid == 0 {
		return s, fmt.Errorf("agent_user %q is root; use %q to run the agent as the container user", s, AgentUserContainer)
	}
	return s, nil
}

// agentUID returns the agent's uid and gid when agentctl must switch to
// them: agent_user is a UID:GID and the container user (user, or the
// plugin's uid) is root. Otherwise ok is false and the agent runs as the
// container user.
func (c Config) agentUID() (uid, gid int, ok bool) {
	if c.AgentUser == AgentUserContainer || c.AgentUser == "" {
		return 0, 0, false
	}
	containerRoot := os.Getuid() == 0 // the default container user is the plugin's
	if c.User != "" {
		cu, _, _ := strings.Cut(c.User, ":")
		containerRoot = cu == "0" || cu == "root"
	}
	if !containerRoot {
		return 0, 0, false // agentctl cannot switch users; the agent is not root anyway
	}
	u, g, _ := strings.Cut(c.AgentUser, ":")
	uid, _ = strconv.Atoi(u)
	gid, _ = strconv.Atoi(g)
	return uid, gid, true
}

func clusterName(s string) (string, error) {
	if s != "" && !runtime.ValidID(s) {
		return s, fmt.Errorf("cluster %q must be letters, digits, '.', '_' or '-'", s)
	}
	return s, nil
}

// decodeMemory takes a size string or a number of bytes.
func decodeMemory(c *Config, v cty.Value) error {
	var mem string
	switch v.Type() {
	case cty.String:
		mem = v.AsString()
	case cty.Number:
		mem = v.AsBigFloat().Text('f', -1)
	default:
		return fmt.Errorf("memory must be a size like \"512m\" or a number of bytes")
	}
	n, err := ParseSize(mem)
	switch {
	case err != nil:
		return err
	case n < MinMemory:
		return fmt.Errorf("memory %q is below the engine's minimum of 6m", mem)
	}
	c.Memory = n
	return nil
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
