package plugins

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"

	"github.com/paddockhq/paddock/shared/runtime"
	"github.com/paddockhq/paddock/supervisor/config"
)

// BinaryPrefix is the file name prefix of runtime plugin executables:
// plugin "docker" is the executable paddock-runtime-docker in plugin_dir.
const BinaryPrefix = "paddock-runtime-"

// Errors returned by Get; branch on them with errors.Is. The error text says
// why (the known names, or the plugin's last error).
var (
	// ErrUnknownRuntime: no plugin block has that name.
	ErrUnknownRuntime = errors.New("unknown runtime")
	// ErrUnhealthy: the plugin is configured but not usable right now
	// (missing binary, refused at load, crashed and restarting).
	ErrUnhealthy = errors.New("runtime plugin unhealthy")
)

// Defaults for the zero values of Options.
const (
	DefaultLoadTimeout       = 10 * time.Second
	DefaultRestartBackoffMin = 250 * time.Millisecond
	DefaultRestartBackoffMax = 30 * time.Second
	DefaultHealthInterval    = 10 * time.Second
)

// exitPollInterval is how often a supervised plugin's process is checked for
// exit (a cheap in-memory check of go-plugin's client).
const exitPollInterval = 100 * time.Millisecond

// Options configure a Manager.
type Options struct {
	// Dir is plugin_dir, where paddock-runtime-<name> executables are found.
	Dir string
	// DataDir is the supervisor's data_dir; plugin state (reattach files and
	// logs) lives in DataDir/plugins. Required.
	DataDir string
	// NodeAddr is the node's address (bind_addr), passed to plugins in
	// runtime.NodeAddrEnv; default 127.0.0.1.
	NodeAddr string
	// Plugins are the `plugin "<name>"` blocks of the configuration.
	Plugins []*config.Plugin
	// Logger receives the Manager's and the plugins' log lines; default: a
	// null logger.
	Logger hclog.Logger
	// LoadTimeout bounds loading one plugin (start, handshake, Info,
	// SetConfig, Capabilities); default DefaultLoadTimeout.
	LoadTimeout time.Duration
	// RestartBackoffMin is the first delay before restarting a lost plugin;
	// it doubles per failed attempt up to RestartBackoffMax and resets once
	// a plugin stayed up for RestartBackoffMax.
	RestartBackoffMin time.Duration
	// RestartBackoffMax caps the restart delay.
	RestartBackoffMax time.Duration
	// HealthInterval is how often a loaded plugin is asked for Info; two
	// failed checks in a row (each bounded by LoadTimeout) make it lost and
	// it is killed and restarted.
	HealthInterval time.Duration
	// SupportedAPIVersions the supervisor accepts; default
	// runtime.SupportedAPIVersions.
	SupportedAPIVersions []string
}

// Manager loads and supervises runtime plugins. It is safe for concurrent
// use. Call Start once, then Close (or Detach).
type Manager struct {
	opts     Options
	logger   hclog.Logger
	dir      string // absolute plugin_dir
	stateDir string // DataDir/plugins

	ctx    context.Context // cancelled by Close/Detach; owns supervision
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	plugins map[string]*instance
	started bool
	closed  bool
}

// instance is one configured plugin. Fields below mu are guarded by
// Manager.mu; the others are fixed after Start.
type instance struct {
	name    string
	block   *config.Plugin
	path    string // absolute executable path; "" when missing
	logPath string
	logFile *os.File

	client  *runtime.Client
	info    runtime.Info
	caps    runtime.Capabilities
	pid     int
	healthy bool
	err     string
	// restarts counts the loads supervise attempted after losing the
	// plugin (failed attempts included: a crash loop shows as a climb).
	restarts int
}

// New checks opts and returns a Manager; nothing starts until Start.
func New(opts Options) (*Manager, error) {
	if opts.DataDir == "" {
		return nil, errors.New("plugins: data_dir is required")
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	if opts.LoadTimeout <= 0 {
		opts.LoadTimeout = DefaultLoadTimeout
	}
	if opts.RestartBackoffMin <= 0 {
		opts.RestartBackoffMin = DefaultRestartBackoffMin
	}
	if opts.RestartBackoffMax <= 0 {
		opts.RestartBackoffMax = DefaultRestartBackoffMax
	}
	if opts.RestartBackoffMax < opts.RestartBackoffMin {
		opts.RestartBackoffMax = opts.RestartBackoffMin
	}
	if opts.HealthInterval <= 0 {
		opts.HealthInterval = DefaultHealthInterval
	}
	dir := opts.Dir
	if dir != "" {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return nil, fmt.Errorf("plugins: plugin_dir %s: %w", dir, err)
		}
		dir = abs
	}
	stateDir, err := filepath.Abs(filepath.Join(opts.DataDir, "plugins"))
	if err != nil {
		return nil, fmt.Errorf("plugins: data_dir %s: %w", opts.DataDir, err)
	}
	m := &Manager{opts: opts, logger: opts.Logger, dir: dir, stateDir: stateDir, plugins: map[string]*instance{}}
	for _, b := range opts.Plugins {
		if b == nil {
			continue
		}
		if !validName(b.Name) {
			return nil, fmt.Errorf("plugins: plugin name %q must be letters, digits, '.', '_' or '-'", b.Name)
		}
		if _, dup := m.plugins[b.Name]; dup {
			return nil, fmt.Errorf("plugins: plugin %q is configured twice", b.Name)
		}
		m.plugins[b.Name] = &instance{name: b.Name, block: b}
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	return m, nil
}

func validName(s string) bool {
	if s == "" || s == "." || s == ".." || len(s) > 128 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Start discovers and loads the configured plugins (reattaching to plugin
// processes a previous supervisor left running) and starts supervising them.
// A configured plugin whose executable is missing makes Start return a
// *config.DiagError before any plugin runs, unless its block is optional
// (then it is listed as unhealthy). Plugins that cannot be loaded are
// logged and listed as unhealthy; Start still succeeds. Invalid plugin
// configuration (error diagnostics from a plugin's SetConfig) makes Start
// stop every plugin and return a *config.DiagError. Other errors are about
// the Manager's own directories.
func (m *Manager) Start(ctx context.Context) error {
	m.mu.Lock()
	if m.started || m.closed {
		m.mu.Unlock()
		return errors.New("plugins: Start called twice or after Close")
	}
	m.started = true
	m.mu.Unlock()

	if err := os.MkdirAll(m.stateDir, 0o700); err != nil {
		return fmt.Errorf("plugins: create plugin state dir: %w", err)
	}
	bins, err := discover(m.dir)
	if err != nil {
		return err
	}
	if m.dir != "" && bins == nil {
		m.logger.Warn("plugin_dir does not exist; no runtime plugins available", "plugin_dir", m.dir)
	}
	for name, path := range bins {
		if _, ok := m.plugins[name]; !ok {
			m.logger.Debug("ignoring plugin binary without a plugin block", "plugin", name, "path", path)
		}
	}
	m.removeStale(bins)

	// A configured plugin without its executable stops the start before
	// any plugin process runs, unless its block says optional = true.
	var missing hcl.Diagnostics
	for _, inst := range m.plugins {
		inst.path = bins[inst.name]
		if inst.path != "" {
			continue
		}
		m.setUnhealthy(inst, fmt.Sprintf("no executable %s%s in plugin_dir %s", BinaryPrefix, inst.name, m.dirForMessages()))
		if inst.block.Optional {
			m.logger.Warn("optional runtime plugin not found; starting without it", "plugin", inst.name, "error", inst.err)
			continue
		}
		missing = append(missing, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Runtime plugin not found",
			Detail: fmt.Sprintf("plugin %q is configured, but plugin_dir %s has no executable %s%s. hint: build it (make build), point plugin_dir at the directory that holds it, or add optional = true to the plugin block to start without it",
				inst.name, m.dirForMessages(), BinaryPrefix, inst.name),
			Subject: inst.block.DefRange.Ptr(),
		})
	}
	if missing.HasErrors() {
		m.closeAll(true)
		return &config.DiagError{Diags: missing}
	}

	var wg sync.WaitGroup
	var dmu sync.Mutex
	var diags hcl.Diagnostics
	for _, inst := range m.plugins {
		if inst.path == "" {
			continue
		}
		inst.logPath = filepath.Join(m.stateDir, inst.name+".log")
		f, err := os.OpenFile(inst.logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			m.closeAll(true)
			return fmt.Errorf("plugins: open plugin log: %w", err)
		}
		inst.logFile = f
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := m.load(ctx, inst, true)
			if d.HasErrors() {
				dmu.Lock()
				diags = append(diags, d...)
				dmu.Unlock()
			}
			if err != nil {
				m.setUnhealthy(inst, condense(err))
				m.logger.Error("runtime plugin refused", "plugin", inst.name, "path", inst.path, "error", condense(err))
				m.logger.Debug("runtime plugin refused (full error)", "plugin", inst.name, "error", err)
			}
		}()
	}
	wg.Wait()
	if diags.HasErrors() {
		m.closeAll(true)
		return &config.DiagError{Diags: diags}
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return errors.New("plugins: closed during Start")
	}
	for _, inst := range m.plugins {
		if inst.client != nil {
			m.wg.Add(1)
			go m.supervise(inst)
		}
	}
	return nil
}

func (m *Manager) dirForMessages() string {
	if m.dir == "" {
		return "(plugin_dir not set)"
	}
	return m.dir
}

// Close stops supervising, kills the plugin processes (gracefully, then
// forcefully) and removes their reattach files. Executors the plugins
// launched are detached processes and keep running. Close is idempotent.
func (m *Manager) Close() { m.closeAll(true) }

// Detach stops supervising and disconnects from the plugin processes but
// leaves them running with their reattach files in place, so that the next
// Manager on the same data_dir reattaches to them (a supervisor handing
// over, e.g. for an upgrade). Calling Close after Detach does nothing.
func (m *Manager) Detach() { m.closeAll(false) }

func (m *Manager) closeAll(kill bool) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	m.mu.Unlock()
	m.cancel()
	m.wg.Wait()

	m.mu.Lock()
	insts := make([]*instance, 0, len(m.plugins))
	for _, inst := range m.plugins {
		insts = append(insts, inst)
	}
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, inst := range insts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.mu.Lock()
			c, pid := inst.client, inst.pid
			inst.client, inst.healthy, inst.err = nil, false, "plugin manager closed"
			m.mu.Unlock()
			if c != nil && kill {
				m.killClient(c, pid)
				m.removeReattach(inst.name)
				m.logger.Info("runtime plugin stopped", "plugin", inst.name)
			}
			if inst.logFile != nil {
				_ = inst.logFile.Close()
			}
		}()
	}
	wg.Wait()
}

// Get returns the runtime of a healthy plugin. Call it for every operation:
// after a plugin restart the previous value talks to a dead process. Errors
// wrap ErrUnknownRuntime or ErrUnhealthy with the reason.
func (m *Manager) Get(name string) (runtime.Runtime, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	inst, ok := m.plugins[name]
	if !ok {
		known := make([]string, 0, len(m.plugins))
		for n := range m.plugins {
			known = append(known, n)
		}
		sort.Strings(known)
		list := "none configured"
		if len(known) > 0 {
			list = "configured: " + strings.Join(known, ", ")
		}
		return nil, fmt.Errorf("runtime %q: %w (%s)", name, ErrUnknownRuntime, list)
	}
	if m.closed {
		return nil, fmt.Errorf("runtime %q: %w: plugin manager closed", name, ErrUnhealthy)
	}
	if !inst.healthy || inst.client == nil {
		reason := inst.err
		if reason == "" {
			reason = "not loaded yet"
		}
		return nil, fmt.Errorf("runtime %q: %w: %s", name, ErrUnhealthy, reason)
	}
	return inst.client.Runtime, nil
}

// List reports every configured plugin, sorted by name.
func (m *Manager) List() []Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Status, 0, len(m.plugins))
	for _, inst := range m.plugins {
		out = append(out, Status{
			Name:         inst.name,
			Version:      inst.info.Version,
			APIVersion:   inst.info.APIVersion,
			Capabilities: copyCaps(inst.caps),
			Healthy:      inst.healthy,
			Error:        inst.err,
			PID:          inst.pid,
			Restarts:     inst.restarts,
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func copyCaps(c runtime.Capabilities) runtime.Capabilities {
	if c.Extra != nil {
		extra := make(map[string]bool, len(c.Extra))
		for k, v := range c.Extra {
			extra[k] = v
		}
		c.Extra = extra
	}
	return c
}

// condense makes one line of an error for Status.Error and log lines:
// go-plugin's handshake errors carry a multi-line troubleshooting essay.
func condense(err error) string {
	var parts []string
	for _, line := range strings.Split(err.Error(), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "This usually means") || strings.HasPrefix(line, "Additional notes about plugin") {
			break
		}
		if line != "" {
			parts = append(parts, line)
		}
	}
	return strings.Join(parts, " ")
}

func (m *Manager) setUnhealthy(inst *instance, reason string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	inst.healthy, inst.err = false, reason
}
