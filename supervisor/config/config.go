package config

import (
	"net"
	"os"
	"strconv"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// Default values of the configuration, as documented in docs/CONFIGURATION.md.
const (
	DefaultDataDir            = "./data"
	DefaultBindAddr           = "127.0.0.1"
	DefaultLogLevel           = "info"
	DefaultHTTPPort           = 7700
	DefaultRaftPort           = 7701
	DefaultBootstrapExpect    = 1
	DefaultHeartbeatTimeout   = 300 * time.Millisecond
	DefaultElectionTimeout    = 300 * time.Millisecond
	DefaultLeaderLeaseTimeout = 150 * time.Millisecond
	// DefaultServerNice is the CPU priority (nice value) a server raises
	// itself to: 0, none (see Server.Nice).
	DefaultServerNice    = 0
	DefaultMaxBody       = 1 << 20 // 1MiB
	DefaultPluginDir     = "./bin/plugins"
	DefaultAutoResume    = AutoResumeActive
	DefaultHealthTimeout = 2 * time.Second
	DefaultReplayBytes   = 256 << 10 // 256KiB
	DefaultIdleTimeout   = 30 * time.Minute
	DefaultLeaseTTL      = 10 * time.Second
	DefaultPermission    = PermissionAsk
	// DefaultNodeName is used when os.Hostname fails.
	DefaultNodeName = "paddock"
)

// Values of the enumerated settings.
const (
	ProtocolACP = "acp"
	ProtocolPTY = "pty"

	PermissionAsk   = "ask"
	PermissionAllow = "allow"
	PermissionDeny  = "deny"

	AutoResumeAll    = "all"
	AutoResumeActive = "active"
	AutoResumeNone   = "none"

	// The values of server.raft_store (supervisor/cluster's StoreBolt and
	// StoreWAL).
	RaftStoreBolt = "bolt"
	RaftStoreWAL  = "wal"
)

// LogLevels lists the accepted values of log_level, most verbose first.
var logLevels = []string{"trace", "debug", "info", "warn", "error"}

// Config is the whole server configuration after merging, defaults and validation.
type Config struct {
	// NodeName is this node's raft server ID; default os.Hostname().
	NodeName string
	// DataDir holds the raft log, snapshots, node identity and plugin state.
	DataDir string
	// BindAddr is the IP address both listeners bind to and advertise.
	BindAddr string
	// LogLevel is one of trace|debug|info|warn|error (always lower case).
	LogLevel string
	// LogJSON selects JSON log lines.
	LogJSON bool
	// Ports are the listener ports.
	Ports Ports
	// Server holds clustering and raft timing.
	Server Server
	// ACL holds the API token.
	ACL ACL
	// API holds HTTP API limits.
	API API
	// PluginDir is where paddock-runtime-* binaries are looked up.
	PluginDir string
	// EnableDebug serves Go's profiler under /debug/pprof/ on the HTTP API
	// (behind the token, like every other route); off by default, as in
	// Nomad and Consul.
	EnableDebug bool
	// Plugins are the plugin blocks, in order of appearance; a later file's block with
	// the same name replaces the earlier one in place.
	Plugins []*Plugin
	// Agents are the agent profiles, with the same merge rule as Plugins.
	Agents []*Agent
	// Recovery controls what the leader does with sessions after a failover.
	Recovery Recovery
	// Terminal controls terminals served by agentctl.
	Terminal Terminal
	// Lease controls executor leases.
	Lease Lease
	// Limits keep a node standing under abuse.
	Limits Limits
	// TLS secures the HTTP API, raft and node-to-node calls.
	TLS TLS
}

// TLS is the `tls` block. Relative paths set in a file are relative to that
// file's directory.
type TLS struct {
	// CAFile is the CA certificate of the cluster (paddock tls ca create).
	CAFile string
	// CertFile and KeyFile are this node's server certificate and key
	// (paddock tls cert create -server -node NODE_NAME).
	CertFile string
	KeyFile  string
	// VerifyIncoming makes the HTTP API require a client certificate.
	VerifyIncoming bool
	// VerifyServerHostname makes the node check that each peer it dials
	// presents a server certificate, the intended node's where known.
	VerifyServerHostname bool
}

// Enabled reports whether the block turns TLS on.
func (t TLS) Enabled() bool { return t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" }

// Scheme is the URL scheme of the HTTP API: https with TLS on, else http.
func (c *Config) Scheme() string {
	if c.TLS.Enabled() {
		return "https"
	}
	return "http"
}

// Ports is the `ports` block.
type Ports struct {
	// HTTP serves the API, WebSockets and leader forwarding (default 7700).
	HTTP int
	// Raft is the raft transport port (default 7701).
	Raft int
}

// Server is the `server` block.
type Server struct {
	// BootstrapExpect is the cluster size to bootstrap with: 1, 3 or 5.
	BootstrapExpect int
	// RetryJoin lists peers' HTTP addresses as host:port; empty when alone.
	RetryJoin []string
	// HeartbeatTimeout is raft's heartbeat timeout (default 300ms).
	HeartbeatTimeout time.Duration
	// ElectionTimeout is raft's election timeout (default 300ms).
	ElectionTimeout time.Duration
	// LeaderLeaseTimeout is raft's leader lease (default 150ms); never above HeartbeatTimeout.
	LeaderLeaseTimeout time.Duration
	// ClusterSecret authenticates node-to-node calls (joins, forwarded
	// writes); "" derives one from acl.token (see NodeSecret).
	ClusterSecret string
	// CleanupDeadServers lets the leader remove a server that stopped
	// answering from the raft configuration (autopilot; default false).
	CleanupDeadServers bool
	// RaftStore is where raft keeps its log and stable state in a new
	// data_dir: RaftStoreBolt or RaftStoreWAL; "" (unset) gives a new
	// data_dir bolt and keeps the store an existing one has. Set, a
	// data_dir that holds the other store is refused at start.
	RaftStore string
	// Nice is the CPU priority the server raises itself to at start, -20
	// to 0 (default 0: it keeps the priority it was started with). Below
	// 0 it runs above its sessions' agentctls, so that many busy sessions
	// on its host cannot starve raft, and its agents (at 19) wait longer
	// for a CPU. It needs root or CAP_SYS_NICE; without, the server keeps
	// its priority and says so.
	Nice int
}

// ACL is the `acl` block.
type ACL struct {
	// Token is the API bearer token; "" means an open API.
	Token string
	// ReadToken is a second token that may only read and stream events
	// (no writes, no terminals, no snapshots); "" when there is none.
	ReadToken string
}

// API is the `api` block.
type API struct {
	// AllowedOrigins are the browser Origins allowed on WebSockets.
	AllowedOrigins []string
	// MaxBody is the largest accepted request body in bytes (default 1MiB).
	MaxBody int64
}

// Recovery is the `recovery` block.
type Recovery struct {
	// AutoResume is all|active|none (default active).
	AutoResume string
	// HealthTimeout bounds one executor health check (default 2s).
	HealthTimeout time.Duration
}

// Terminal is the `terminal` block.
type Terminal struct {
	// Shell is the argv of a terminal's shell; nil means agentctl's $SHELL, else /bin/sh.
	Shell []string
	// ReplayBytes is the size of a terminal's replay buffer (default 256KiB).
	ReplayBytes int64
	// IdleTimeout closes terminals without a client for that long (default 30m).
	IdleTimeout time.Duration
}

// Limits is the `limits` block.
type Limits struct {
	// MaxSessionsPerNode caps the live executors a node runs (0: no cap).
	MaxSessionsPerNode int
	// MaxWebsockets caps the WebSockets (event streams and terminals) one
	// node serves at once (0: no cap).
	MaxWebsockets int
	// MaxRequestRate caps the requests per second one client address may
	// make of a node, with bursts of as many (0: no cap).
	MaxRequestRate int
}

// Lease is the `lease` block.
type Lease struct {
	// TTL is an executor lease's time to live (default 10s).
	TTL time.Duration
}

// Plugin is one `plugin "name" { config { … } }` block. The plugin itself validates its
// config, so the block's body is kept as source with its position, and the plugin
// re-parses it with hclsyntax.ParseConfig(Source, Filename, Start) so its diagnostics
// carry true file ranges. (The byte offsets of those ranges are offsets in the whole
// file, not in Source.)
type Plugin struct {
	// Name is the block label, e.g. "standalone" for paddock-runtime-standalone.
	Name string
	// Filename is the file the block was read from.
	Filename string
	// Source is the inner body of `config { … }` (between the braces), empty if the
	// block has no config block.
	Source []byte
	// Start is the position of Source's first byte in Filename.
	Start hcl.Pos
	// DefRange is the range of the block header, `plugin "name"`.
	DefRange hcl.Range
	// Optional lets the server start when the plugin's executable is
	// missing (the runtime is then listed as unhealthy); by default a
	// configured plugin without its executable stops the start.
	Optional bool
}

// Agent is one `agent "name" { … }` profile.
type Agent struct {
	// Name is the block label.
	Name string
	// Protocol is acp or pty.
	Protocol string
	// Command is the argv that starts the agent; never empty.
	Command []string
	// NewArgs are appended to Command for a new conversation (templates allowed).
	NewArgs []string
	// ResumeArgs are appended to Command to resume a conversation (templates allowed).
	ResumeArgs []string
	// Permission is how ACP permission requests are answered: ask (a
	// person answers through the API; the default), allow or deny.
	Permission string
	// AutoAllow lists the tool kinds (api.ToolKinds) whose requests are
	// allowed without asking.
	AutoAllow []string
	// PermissionTimeout, when set, is how long a request waits for a
	// person: then its reject option is chosen (zero: it waits forever).
	PermissionTimeout time.Duration
	// SupportsSessionResume is nil when not declared (ACP agents are probed).
	SupportsSessionResume *bool
	// DefRange is the range of the block header, `agent "name"`.
	DefRange hcl.Range
}

// Default returns a configuration holding every default and no plugins or agents.
func Default() *Config {
	name, err := os.Hostname()
	if err != nil || name == "" {
		name = DefaultNodeName
	}
	return &Config{
		NodeName: name,
		DataDir:  DefaultDataDir,
		BindAddr: DefaultBindAddr,
		LogLevel: DefaultLogLevel,
		Ports:    Ports{HTTP: DefaultHTTPPort, Raft: DefaultRaftPort},
		Server: Server{
			BootstrapExpect:    DefaultBootstrapExpect,
			HeartbeatTimeout:   DefaultHeartbeatTimeout,
			ElectionTimeout:    DefaultElectionTimeout,
			LeaderLeaseTimeout: DefaultLeaderLeaseTimeout,
			Nice:               DefaultServerNice,
		},
		API:       API{MaxBody: DefaultMaxBody},
		PluginDir: DefaultPluginDir,
		Recovery:  Recovery{AutoResume: DefaultAutoResume, HealthTimeout: DefaultHealthTimeout},
		Terminal:  Terminal{ReplayBytes: DefaultReplayBytes, IdleTimeout: DefaultIdleTimeout},
		Lease:     Lease{TTL: DefaultLeaseTTL},
	}
}

// Agent returns the agent profile with that name, or nil.
func (c *Config) Agent(name string) *Agent {
	for _, a := range c.Agents {
		if a.Name == name {
			return a
		}
	}
	return nil
}

// Plugin returns the plugin block with that name, or nil.
func (c *Config) Plugin(name string) *Plugin {
	for _, p := range c.Plugins {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// NodeSecret is the credential nodes present to each other's node-to-node
// routes: server.cluster_secret ("" when the whole API is open). It is never
// derived from a user credential: a single server with acl.token and no
// cluster_secret is given a random one kept in its data dir
// (server.Start), and servers that join each other must be configured with
// the same one (Validate).
func (c *Config) NodeSecret() string {
	return c.Server.ClusterSecret
}

// RaftAddr is BindAddr:Ports.Raft.
func (c *Config) RaftAddr() string {
	return net.JoinHostPort(c.BindAddr, strconv.Itoa(c.Ports.Raft))
}

// HTTPAddr is BindAddr:Ports.HTTP.
func (c *Config) HTTPAddr() string {
	return net.JoinHostPort(c.BindAddr, strconv.Itoa(c.Ports.HTTP))
}
