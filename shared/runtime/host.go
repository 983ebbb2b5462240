package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
)

// ClientConfig says how the host loads one plugin.
type ClientConfig struct {
	// Path is the plugin executable. Required unless Reattach is set.
	Path string
	// Args are extra arguments for the plugin executable.
	Args []string
	// Env is extra environment (KEY=VALUE) for the plugin process, on top of
	// the host's own environment.
	Env []string
	// Reattach, when set, connects to an already running plugin process
	// instead of starting one.
	Reattach *plugin.ReattachConfig
	// Logger receives the plugin's log lines (named after the plugin) and
	// go-plugin's own; default: a null logger.
	Logger hclog.Logger
	// Stderr, when set, also receives the plugin's raw stderr (for example a
	// per-plugin log file).
	Stderr io.Writer
	// SupportedAPIVersions the host accepts; default SupportedAPIVersions.
	SupportedAPIVersions []string
	// StartTimeout bounds the handshake of a starting plugin; default 10s.
	StartTimeout time.Duration
}

// Client is a loaded runtime plugin. It implements Runtime; every call is a
// gRPC round trip to the plugin process.
type Client struct {
	Runtime
	pc   *plugin.Client
	info Info
}

// NewClient starts (or reattaches to) a plugin, checks the handshake, and
// negotiates the plugin API version: a plugin whose api_version is not in
// cfg.SupportedAPIVersions is refused with ErrIncompatibleAPIVersion and its
// process is stopped (unless it was reattached to).
func NewClient(ctx context.Context, cfg ClientConfig) (*Client, error) {
	logger := cfg.Logger
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	supported := cfg.SupportedAPIVersions
	if len(supported) == 0 {
		supported = SupportedAPIVersions
	}
	timeout := cfg.StartTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	pcfg := &plugin.ClientConfig{
		HandshakeConfig:  Handshake,
		Plugins:          PluginMap(),
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Logger:           logger,
		Stderr:           cfg.Stderr,
		StartTimeout:     timeout,
	}
	name := "reattached plugin"
	if cfg.Reattach != nil {
		pcfg.Reattach = cfg.Reattach
	} else {
		if cfg.Path == "" {
			return nil, errors.New("load runtime plugin: no plugin path")
		}
		name = cfg.Path
		cmd := exec.Command(cfg.Path, cfg.Args...)
		cmd.Env = append(os.Environ(), cfg.Env...)
		pcfg.Cmd = cmd
		pcfg.SkipHostEnv = true
	}
	pc := plugin.NewClient(pcfg)
	fail := func(err error) (*Client, error) {
		if cfg.Reattach == nil {
			pc.Kill()
		}
		return nil, err
	}
	proto, err := pc.Client()
	if err != nil {
		return fail(fmt.Errorf("load runtime plugin %s: %w (not a Paddock runtime plugin, a plugin built for another protocol version, or it exited at start): %w", name, ErrHandshake, err))
	}
	raw, err := proto.Dispense(PluginName)
	if err != nil {
		return fail(fmt.Errorf("load runtime plugin %s: dispense: %w", name, err))
	}
	gc, ok := raw.(*grpcClient)
	if !ok {
		return fail(fmt.Errorf("load runtime plugin %s: unexpected client type %T", name, raw))
	}
	gc.offered = supported
	info, err := gc.Info(ctx)
	if err != nil {
		return fail(fmt.Errorf("load runtime plugin %s: %w", name, err))
	}
	if !slices.Contains(supported, info.APIVersion) {
		return fail(fmt.Errorf("load runtime plugin %s: plugin %q speaks API version %q, this host supports %s: %w",
			name, info.Name, info.APIVersion, strings.Join(supported, ", "), ErrIncompatibleAPIVersion))
	}
	return &Client{Runtime: gc, pc: pc, info: info}, nil
}

// Info is the plugin's Info as read when it was loaded.
func (c *Client) Info() Info { return c.info }

// Reconcile calls the plugin's optional Reconciler; it returns
// ErrUnsupported when the plugin does not implement it.
func (c *Client) Reconcile(ctx context.Context, req ReconcileRequest) ([]string, error) {
	rc, ok := c.Runtime.(Reconciler)
	if !ok {
		return nil, fmt.Errorf("runtime reconcile: %w", ErrUnsupported)
	}
	return rc.Reconcile(ctx, req)
}

// ReattachConfig is what a restarted host needs to reconnect to this plugin
// process (see MarshalReattach to keep it on disk).
func (c *Client) ReattachConfig() *plugin.ReattachConfig { return c.pc.ReattachConfig() }

// Exited reports whether the plugin process has exited.
func (c *Client) Exited() bool { return c.pc.Exited() }

// Ping checks that the plugin process answers.
func (c *Client) Ping() error {
	proto, err := c.pc.Client()
	if err != nil {
		return fmt.Errorf("ping runtime plugin: %w", err)
	}
	if err := proto.Ping(); err != nil {
		return fmt.Errorf("ping runtime plugin: %w", err)
	}
	return nil
}

// Kill stops the plugin process (gracefully, then forcefully). Executors the
// plugin started are not touched.
func (c *Client) Kill() { c.pc.Kill() }

// PluginClient exposes the underlying go-plugin client.
func (c *Client) PluginClient() *plugin.Client { return c.pc }

// reattachJSON is the on-disk form of a plugin.ReattachConfig.
type reattachJSON struct {
	Protocol        string `json:"protocol"`
	ProtocolVersion int    `json:"protocol_version"`
	Network         string `json:"network"`
	Address         string `json:"address"`
	Pid             int    `json:"pid"`
}

// MarshalReattach encodes a reattach configuration as JSON for data_dir.
func MarshalReattach(rc *plugin.ReattachConfig) ([]byte, error) {
	if rc == nil || rc.Addr == nil {
		return nil, errors.New("marshal reattach config: no address")
	}
	return json.Marshal(reattachJSON{
		Protocol:        string(rc.Protocol),
		ProtocolVersion: rc.ProtocolVersion,
		Network:         rc.Addr.Network(),
		Address:         rc.Addr.String(),
		Pid:             rc.Pid,
	})
}

// UnmarshalReattach decodes what MarshalReattach wrote.
func UnmarshalReattach(data []byte) (*plugin.ReattachConfig, error) {
	var r reattachJSON
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("decode reattach config: %w", err)
	}
	if r.Pid <= 0 {
		return nil, fmt.Errorf("decode reattach config: invalid pid %d", r.Pid)
	}
	var addr net.Addr
	var err error
	switch r.Network {
	case "unix":
		addr, err = net.ResolveUnixAddr("unix", r.Address)
	case "tcp":
		addr, err = net.ResolveTCPAddr("tcp", r.Address)
	default:
		return nil, fmt.Errorf("decode reattach config: unknown network %q", r.Network)
	}
	if err != nil {
		return nil, fmt.Errorf("decode reattach config: %w", err)
	}
	if r.Protocol != string(plugin.ProtocolGRPC) {
		return nil, fmt.Errorf("decode reattach config: protocol %q is not grpc", r.Protocol)
	}
	return &plugin.ReattachConfig{
		Protocol:        plugin.Protocol(r.Protocol),
		ProtocolVersion: r.ProtocolVersion,
		Addr:            addr,
		Pid:             r.Pid,
	}, nil
}

// VerifyPluginPID checks (on Linux, through /proc) that pid is a live process
// running the executable at path, so a reattach never trusts a reused pid.
func VerifyPluginPID(pid int, path string) error {
	if pid <= 0 {
		return fmt.Errorf("verify plugin pid %d: invalid pid", pid)
	}
	exe, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "exe"))
	if err != nil {
		return fmt.Errorf("verify plugin pid %d: %w", pid, err)
	}
	want, err := filepath.EvalSymlinks(path)
	if err != nil {
		return fmt.Errorf("verify plugin pid %d: %w", pid, err)
	}
	want, err = filepath.Abs(want)
	if err != nil {
		return fmt.Errorf("verify plugin pid %d: %w", pid, err)
	}
	// A replaced binary shows as "PATH (deleted)"; that is still our plugin.
	exe = strings.TrimSuffix(exe, " (deleted)")
	if exe != want {
		return fmt.Errorf("verify plugin pid %d: runs %s, not %s", pid, exe, want)
	}
	return nil
}
