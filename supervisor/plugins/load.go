package plugins

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/hashicorp/hcl/v2"

	"github.com/paddockhq/paddock/shared/runtime"
)

// discover returns the paddock-runtime-<name> files in dir by name (absolute
// paths, symlinks not resolved). A missing dir yields nil and no error.
func discover(dir string) (map[string]string, error) {
	if dir == "" {
		return nil, nil
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("plugins: read plugin_dir: %w", err)
	}
	bins := map[string]string{}
	for _, e := range entries {
		name, ok := strings.CutPrefix(e.Name(), BinaryPrefix)
		if !ok || !validName(name) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		st, err := os.Stat(path) // follows symlinks
		if err != nil || st.IsDir() {
			continue
		}
		bins[name] = path
	}
	return bins, nil
}

// checkExecutable refuses files a user forgot to chmod, with a clearer
// message than exec's "permission denied".
func checkExecutable(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("plugin executable: %w", err)
	}
	if st.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s is not executable (mode %s)", path, st.Mode().Perm())
	}
	return nil
}

// load starts (or, when tryReattach, first reattaches to) inst's plugin,
// configures it and records it as healthy. Error diagnostics from SetConfig
// are returned as diags together with an error; the plugin is then stopped.
func (m *Manager) load(ctx context.Context, inst *instance, tryReattach bool) (hcl.Diagnostics, error) {
	lctx, cancel := context.WithTimeout(ctx, m.opts.LoadTimeout)
	defer cancel()
	var c *runtime.Client
	if tryReattach {
		c = m.reattach(lctx, inst)
	}
	reattached := c != nil
	if c == nil {
		if err := checkExecutable(inst.path); err != nil {
			return nil, err
		}
		var err error
		stderr := &tailWriter{out: inst.logFile}
		c, err = runtime.NewClient(lctx, runtime.ClientConfig{
			Path:                 inst.path,
			Env:                  []string{runtime.PluginLogFileEnv + "=" + inst.logPath, runtime.NodeAddrEnv + "=" + m.opts.NodeAddr},
			Logger:               m.logger,
			Stderr:               stderr,
			SupportedAPIVersions: m.opts.SupportedAPIVersions,
			StartTimeout:         m.opts.LoadTimeout,
		})
		if err != nil {
			if lctx.Err() != nil && ctx.Err() == nil {
				err = fmt.Errorf("plugin did not finish loading within %s: %w", m.opts.LoadTimeout, err)
			}
			if said := stderr.tail(); said != "" && errors.Is(err, runtime.ErrHandshake) {
				err = &saidError{msg: condense(err) + "; plugin stderr: " + said, err: err}
			}
			return nil, err
		}
	}
	fail := func(err error) (hcl.Diagnostics, error) {
		pid := 0
		if rc := c.ReattachConfig(); rc != nil {
			pid = rc.Pid
		}
		m.killClient(c, pid)
		m.removeReattach(inst.name)
		if lctx.Err() != nil && ctx.Err() == nil {
			err = fmt.Errorf("plugin did not finish loading within %s: %w", m.opts.LoadTimeout, err)
		}
		return nil, err
	}
	info := c.Info()
	if info.Name != inst.name {
		m.logger.Warn("runtime plugin reports another name than its binary", "plugin", inst.name, "reported", info.Name)
	}
	b := inst.block
	// The plugin resolves relative paths against the absolute name of the
	// file (runtime.ConfigSource.Path); diagnostics name it as written.
	filename := absFile(b.Filename)
	diags, err := c.SetConfig(lctx, runtime.ConfigSource{Filename: filename, Source: b.Source, Start: b.Start})
	if err != nil {
		return fail(fmt.Errorf("set config: %w", err))
	}
	for _, d := range diags {
		for _, r := range []*hcl.Range{d.Subject, d.Context} {
			if r != nil && r.Filename == filename {
				r.Filename = b.Filename
			}
		}
	}
	for _, d := range diags {
		if d.Severity == hcl.DiagWarning {
			m.logger.Warn("runtime plugin config warning", "plugin", inst.name, "warning", diagString(d))
		}
	}
	if diags.HasErrors() {
		_, err := fail(fmt.Errorf("invalid plugin configuration: %s", diagSummary(diags)))
		return diags, err
	}
	caps, err := c.Capabilities(lctx)
	if err != nil {
		return fail(fmt.Errorf("capabilities: %w", err))
	}
	pid := 0
	if rc := c.ReattachConfig(); rc != nil {
		pid = rc.Pid
		if err := m.saveReattach(inst.name, c); err != nil {
			// Not fatal: the plugin works, only reattach after a crash is lost.
			m.logger.Warn("cannot save plugin reattach file", "plugin", inst.name, "error", err)
		}
	}
	m.mu.Lock()
	inst.client, inst.info, inst.caps, inst.pid = c, info, caps, pid
	inst.healthy, inst.err = true, ""
	m.mu.Unlock()
	how := "started"
	if reattached {
		how = "reattached"
	}
	m.logger.Info("runtime plugin loaded", "plugin", inst.name, "how", how, "version", info.Version,
		"api_version", info.APIVersion, "pid", pid)
	return nil, nil
}

// saidError is a load error with what the plugin printed before it failed.
type saidError struct {
	msg string
	err error
}

func (e *saidError) Error() string { return e.msg }
func (e *saidError) Unwrap() error { return e.err }

// diagString formats one diagnostic as FILE:LINE:COL: summary: detail.
func diagString(d *hcl.Diagnostic) string {
	var b strings.Builder
	if d.Subject != nil {
		fmt.Fprintf(&b, "%s:%d:%d: ", d.Subject.Filename, d.Subject.Start.Line, d.Subject.Start.Column)
	}
	b.WriteString(d.Summary)
	if d.Detail != "" {
		b.WriteString(": ")
		b.WriteString(d.Detail)
	}
	return b.String()
}

func diagSummary(diags hcl.Diagnostics) string {
	var parts []string
	for _, d := range diags {
		if d.Severity == hcl.DiagError {
			parts = append(parts, diagString(d))
		}
	}
	return strings.Join(parts, "; ")
}

// reattach connects to the plugin process a previous Manager recorded for
// inst, after checking that its pid still runs inst's binary. On any failure
// the reattach file is removed (and a verified but unusable process killed)
// and nil is returned, so the caller starts a fresh process.
func (m *Manager) reattach(ctx context.Context, inst *instance) *runtime.Client {
	file := m.reattachPath(inst.name)
	data, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	log := m.logger.With("plugin", inst.name, "file", file)
	if err != nil {
		log.Warn("cannot read plugin reattach file; starting a new plugin process", "error", err)
		return nil
	}
	rc, err := runtime.UnmarshalReattach(data)
	if err != nil {
		log.Warn("removing invalid plugin reattach file", "error", err)
		m.removeReattach(inst.name)
		return nil
	}
	if err := runtime.VerifyPluginPID(rc.Pid, inst.path); err != nil {
		log.Info("removing stale plugin reattach file", "reason", err)
		m.removeReattach(inst.name)
		return nil
	}
	c, err := runtime.NewClient(ctx, runtime.ClientConfig{
		Reattach:             rc,
		Logger:               m.logger,
		SupportedAPIVersions: m.opts.SupportedAPIVersions,
		StartTimeout:         m.opts.LoadTimeout,
	})
	if err != nil {
		log.Warn("cannot reattach to plugin process; killing it and starting a new one", "pid", rc.Pid, "error", err)
		// The pid was verified to run this plugin's binary: an unusable
		// leftover that would otherwise run forever.
		_ = syscall.Kill(rc.Pid, syscall.SIGKILL)
		m.removeReattach(inst.name)
		return nil
	}
	return c
}

// removeStale deletes reattach files of plugins that are no longer
// configured, killing their processes when the pid verifiably runs the
// plugin's binary.
func (m *Manager) removeStale(bins map[string]string) {
	entries, err := os.ReadDir(m.stateDir)
	if err != nil {
		return
	}
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), reattachSuffix)
		if !ok {
			continue
		}
		if _, configured := m.plugins[name]; configured {
			continue
		}
		if data, err := os.ReadFile(filepath.Join(m.stateDir, e.Name())); err == nil && bins[name] != "" {
			if rc, err := runtime.UnmarshalReattach(data); err == nil && runtime.VerifyPluginPID(rc.Pid, bins[name]) == nil {
				m.logger.Info("stopping plugin process left running by a previous supervisor; it has no plugin block", "plugin", name, "pid", rc.Pid)
				_ = syscall.Kill(rc.Pid, syscall.SIGKILL)
			}
		}
		m.logger.Debug("removing stale plugin reattach file", "plugin", name)
		_ = os.Remove(filepath.Join(m.stateDir, e.Name()))
	}
}

const reattachSuffix = ".reattach.json"

func (m *Manager) reattachPath(name string) string {
	return filepath.Join(m.stateDir, name+reattachSuffix)
}

// saveReattach writes c's reattach configuration atomically.
func (m *Manager) saveReattach(name string, c *runtime.Client) error {
	data, err := runtime.MarshalReattach(c.ReattachConfig())
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(m.stateDir, name+".reattach-*.tmp")
	if err != nil {
		return fmt.Errorf("save reattach config: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("save reattach config: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("save reattach config: %w", err)
	}
	if err := os.Rename(tmp.Name(), m.reattachPath(name)); err != nil {
		return fmt.Errorf("save reattach config: %w", err)
	}
	return nil
}

func (m *Manager) removeReattach(name string) {
	if err := os.Remove(m.reattachPath(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		m.logger.Warn("cannot remove plugin reattach file", "plugin", name, "error", err)
	}
}

// absFile is the absolute path of name when it names a regular file, else
// name unchanged (a built-in config's "<dev>", a test's in-memory name).
func absFile(name string) string {
	abs, err := filepath.Abs(name)
	if err != nil {
		return name
	}
	if st, err := os.Stat(abs); err != nil || !st.Mode().IsRegular() {
		return name
	}
	return abs
}
