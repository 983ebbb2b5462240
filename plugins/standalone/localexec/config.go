package localexec

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/paddockhq/paddock/shared/nice"
	"github.com/paddockhq/paddock/shared/runtime"
	"github.com/paddockhq/paddock/shared/runtime/agentctlproc"
	"github.com/paddockhq/paddock/shared/runtime/configspec"
)

// DefaultWorkspaceRoot is used when the config names no workspace_root.
const DefaultWorkspaceRoot = "./data/workspaces"

// DefaultNice is the sessions' nice value unless the config says
// otherwise: the lowest priority. A session's work is elastic: a busy
// agent still gets every CPU the machine has spare. The server's is not:
// a raft heartbeat that waits 300 ms starts an election, and a lease
// renewal that waits 8 s stops an agent. In a prompt storm of 200 agents
// on 2 CPUs (bench suite storm), nice 10 still left the servers so little
// (200 groups of weight 110 against each server's 1024) that leaders
// changed and agents fenced themselves; at 19 no agent fenced itself
// (leaders still changed in some runs: the agentctls relaying the stream
// weigh as much as a server, unless the servers raise themselves above
// them: server.nice).
const DefaultNice = nice.Max

// Config is the standalone plugin's `config { … }` body.
type Config struct {
	// WorkspaceRoot holds every session's directory (absolute after parsing).
	WorkspaceRoot string
	// TaskWorkspaceRoot confines task workspaces (absolute after parsing;
	// default WorkspaceRoot).
	TaskWorkspaceRoot string
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
	// RunAsUser names the user each session's agent and terminal shells
	// run as (a name or UID[:GID]); empty runs them as agentctl's user.
	RunAsUser string
	// AgentctlTLS runs agentctl with -tls: HTTPS with a key of its own,
	// whose fingerprint every node pins.
	AgentctlTLS bool
	// AgentUser is RunAsUser resolved (nil when unset).
	AgentUser *agentctlproc.User
	// Nice is the nice value each session's agent and terminal shells run
	// at, in scheduling groups of their own (agentctl's -nice): sessions
	// share the server's machine, and must not starve its raft heartbeats
	// (shared/nice).
	Nice int
}

func defaults() Config {
	return Config{WorkspaceRoot: DefaultWorkspaceRoot, Listen: net.JoinHostPort(runtime.NodeAddr(), "0"), StartTimeout: 15 * time.Second, Nice: DefaultNice}
}

// spec declares the config body: its decoder and its documentation.
var spec = configspec.Spec[Config]{
	Attributes: []configspec.Attribute[Config]{
		configspec.Path("workspace_root", "directory holding every session's workspace (default "+DefaultWorkspaceRoot+")",
			func(c *Config) *string { return &c.WorkspaceRoot }, configspec.NotEmpty),
		configspec.Path("task_workspace_root", "directory a task's workspace must lie in, symlinks resolved (default: workspace_root); e.g. your projects directory",
			func(c *Config) *string { return &c.TaskWorkspaceRoot }, configspec.NotEmpty),
		configspec.Path("agentctl_path", "agentctl binary (default: next to the plugin directory, then PATH)",
			func(c *Config) *string { return &c.AgentctlPath }, configspec.Executable),
		configspec.Bool("shared_workspace_root", "workspace_root is storage every node mounts at the same path, so a session whose node is gone may be relaunched on another node (default false)",
			func(c *Config) *bool { return &c.SharedWorkspaceRoot }),
		configspec.String("listen", "agentctl listen address (default: the server's bind_addr, port 0)",
			func(c *Config) *string { return &c.Listen }),
		configspec.String("advertise", "host agentctl advertises in its URL (default: the listen host)",
			func(c *Config) *string { return &c.Advertise }),
		configspec.String("run_as_user", "run each session's agent and terminal shells as this user (a name or UID[:GID]; the plugin must run as root), so that agentctl's state and secret stay unreadable to them; the session's workspace is given to that user (default: agentctl's own user)",
			func(c *Config) *string { return &c.RunAsUser }, configspec.NotEmpty),
		configspec.Bool("agentctl_tls", "agentctl serves HTTPS with a key it makes at start (ECDSA P-256, self-signed); its fingerprint is recorded with the executor and pinned by every node (default false)",
			func(c *Config) *bool { return &c.AgentctlTLS }),
		configspec.Int("nice", fmt.Sprintf("nice value (0-19) each session's agent and terminal shells run at, each in a scheduling group of its own, below the server beside them so that busy agents yield the CPU to it; agentctl runs in a group of its own at 0, the server's priority unless the server raised itself (server.nice); 0 changes nothing (default %d)", DefaultNice),
			0, nice.Max, func(c *Config) *int { return &c.Nice }),
		configspec.Duration("start_timeout", "how long agentctl may take to become healthy (default 15s)",
			func(c *Config) *time.Duration { return &c.StartTimeout }),
	},
	Checks: []configspec.Check[Config]{
		{Attr: "run_as_user", Fn: func(c *Config) error {
			if c.RunAsUser == "" {
				return nil
			}
			if os.Geteuid() != 0 {
				return fmt.Errorf("run_as_user needs the plugin to run as root (it runs as uid %d)", os.Geteuid())
			}
			u, err := agentctlproc.LookupUser(c.RunAsUser)
			if err != nil {
				return err
			}
			c.AgentUser = &u
			return nil
		}},
		{Attr: "workspace_root", Fn: func(c *Config) (err error) { c.WorkspaceRoot, err = filepath.Abs(c.WorkspaceRoot); return err }},
		{Attr: "task_workspace_root", Fn: func(c *Config) (err error) {
			if c.TaskWorkspaceRoot == "" {
				c.TaskWorkspaceRoot = c.WorkspaceRoot
				return nil
			}
			c.TaskWorkspaceRoot, err = filepath.Abs(c.TaskWorkspaceRoot)
			return err
		}},
	},
}

// ParseConfig parses a config body; diagnostics carry ranges in src.Filename.
func ParseConfig(src runtime.ConfigSource) (Config, hcl.Diagnostics) {
	return spec.Parse(src, defaults())
}
