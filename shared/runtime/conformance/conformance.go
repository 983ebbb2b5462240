// Package conformance is the runtime plugin conformance kit: one call from a
// plugin author's test runs the plugin binary as a real go-plugin subprocess
// and checks the whole executor lifecycle and the error contract.
//
//	func TestConformance(t *testing.T) {
//		conformance.Run(t, conformance.Config{PluginPath: bin, AgentctlPath: agentctl,
//			PluginConfig: `agentctl_path = "{{agentctl_path}}"
//		workspace_root = "{{temp_dir}}"`})
//	}
//
// It imports only shared/ and the standard library's testing, never supervisor/.
package conformance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"

	"github.com/paddockhq/paddock/shared/agentctl/pin"
	"github.com/paddockhq/paddock/shared/runtime"
	"github.com/paddockhq/paddock/shared/runtime/agentctlproc"
	"github.com/paddockhq/paddock/shared/runtime/runtimetest"
)

// Config describes the plugin under test.
type Config struct {
	// PluginPath is the plugin executable. Required.
	PluginPath string
	// PluginConfig is the HCL body of the plugin's `config { … }` block. The
	// placeholders {{agentctl_path}} and {{temp_dir}} (a fresh directory per
	// plugin load) are replaced, quoted for use inside an HCL string.
	PluginConfig string
	// AgentctlPath is the agentctl binary the plugin should use; it replaces
	// {{agentctl_path}} and is exported to the plugin as PADDOCK_AGENTCTL_PATH.
	AgentctlPath string
	// InvalidPluginConfig must be refused with error diagnostics; default:
	// an attribute no plugin knows.
	InvalidPluginConfig string
	// Workspace is the task workspace passed to Launch (default: none).
	Workspace runtime.Workspace
	// TaskRoot is the directory the plugin, configured with PluginConfig,
	// confines task workspaces to (placeholders as in PluginConfig; default
	// "{{temp_dir}}"). The confinement cases launch with paths that leave
	// it: a relative path with "..", an absolute path, and a symlink inside
	// it that points outside.
	TaskRoot string
	// NoTaskWorkspaces declares a runtime that never uses the task's
	// workspace path (its executors work elsewhere); the confinement cases
	// are skipped.
	NoTaskWorkspaces bool
	// LaunchOptions are passed as LaunchRequest.Options.
	LaunchOptions map[string]string
	// Timeout bounds each operation; default 30s.
	Timeout time.Duration
	// Logger receives go-plugin's and the plugin's logs; default: discarded
	// (the plugin's stderr is printed when a check fails).
	Logger hclog.Logger
}

// Run checks the plugin: info and capabilities, config validation with
// diagnostics at file:line,col (an unknown attribute, a bad block, a syntax
// error), task workspaces confined to TaskRoot, concurrent launches of one
// session serialised (one agentctl survives), launch → agentctl healthy →
// inspect → the optional
// Reconcile keeps the owned executor → recover from the
// handle through a new plugin process → stop → destroy, and the typed errors
// (not-found for destroyed or garbage handles, invalid-request for bad
// launches).
func Run(t *testing.T, cfg Config) {
	t.Helper()
	if cfg.PluginPath == "" {
		t.Fatal("conformance: Config.PluginPath is required")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.InvalidPluginConfig == "" {
		cfg.InvalidPluginConfig = "paddock_conformance_unknown_attribute = true\n"
	}
	// The agentctls the checks launch work under k.tempDir; whatever a
	// failed check left running ends with the test.
	runtimetest.CleanupProcesses(t)
	k := &kit{cfg: cfg, tempDir: t.TempDir()}
	t.Run("info_and_capabilities", k.infoAndCapabilities)
	t.Run("invalid_config_has_ranges", k.invalidConfig)
	t.Run("invalid_launch_request", k.invalidLaunch)
	t.Run("garbage_handle_not_found", k.garbageHandle)
	t.Run("workspace_confinement", k.confinement)
	t.Run("concurrent_launches_serialised", k.concurrentLaunches)
	t.Run("lifecycle", k.lifecycle)
}

type kit struct {
	cfg     Config
	tempDir string
}

func (k *kit) ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), k.cfg.Timeout)
	t.Cleanup(cancel)
	return ctx
}

// load starts a fresh plugin process and configures it.
func (k *kit) load(t *testing.T) *runtime.Client {
	t.Helper()
	logger := k.cfg.Logger
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	stderrPath := filepath.Join(t.TempDir(), "plugin-stderr.log")
	stderr, err := os.Create(stderrPath)
	if err != nil {
		t.Fatalf("conformance: %v", err)
	}
	var env []string
	if k.cfg.AgentctlPath != "" {
		env = append(env, "PADDOCK_AGENTCTL_PATH="+k.cfg.AgentctlPath)
	}
	c, err := runtime.NewClient(k.ctx(t), runtime.ClientConfig{Path: k.cfg.PluginPath, Env: env, Logger: logger, Stderr: stderr})
	if err != nil {
		stderr.Close()
		t.Fatalf("conformance: load plugin: %v", err)
	}
	t.Cleanup(func() {
		c.Kill()
		stderr.Close()
		if t.Failed() {
			if b, err := os.ReadFile(stderrPath); err == nil && len(b) > 0 {
				t.Logf("plugin stderr:\n%s", tailString(string(b), 8192))
			}
		}
	})
	diags, err := c.SetConfig(k.ctx(t), runtime.ConfigSource{Filename: "conformance.hcl", Source: []byte(k.pluginConfig()), Start: hcl.Pos{Line: 1, Column: 1}})
	if err != nil {
		t.Fatalf("conformance: SetConfig: %v", err)
	}
	if diags.HasErrors() {
		t.Fatalf("conformance: SetConfig refused the valid config: %s", diags.Error())
	}
	return c
}

func (k *kit) pluginConfig() string {
	quote := func(s string) string {
		return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "${", "$${", "%{", "%%{").Replace(s)
	}
	return k.expand(k.cfg.PluginConfig, quote)
}

func (k *kit) expand(s string, quote func(string) string) string {
	return strings.NewReplacer("{{agentctl_path}}", quote(k.cfg.AgentctlPath), "{{temp_dir}}", quote(k.tempDir)).Replace(s)
}

func (k *kit) request(t *testing.T, secret string) runtime.LaunchRequest {
	id := strings.Map(func(r rune) rune {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			return r
		}
		return '-'
	}, strings.ToLower(t.Name()))
	if len(id) > 40 {
		id = id[len(id)-40:]
	}
	id = "conf-" + strings.Trim(id, "-.") + "-" + randHex(4)
	return runtime.LaunchRequest{
		SessionID:      id,
		TaskID:         "conformance-task",
		ExecutorID:     "exec-" + randHex(4),
		Cluster:        "conformance",
		Workspace:      k.cfg.Workspace,
		AgentctlSecret: secret,
		FencingToken:   1,
		Options:        k.cfg.LaunchOptions,
	}
}

func (k *kit) infoAndCapabilities(t *testing.T) {
	c := k.load(t)
	info := c.Info()
	if info.Name == "" || info.Version == "" || info.APIVersion == "" {
		t.Errorf("Info = %+v: name, version and api_version must all be set", info)
	}
	if _, err := c.Capabilities(k.ctx(t)); err != nil {
		t.Errorf("Capabilities: %v", err)
	}
	if _, err := c.ConfigSchema(k.ctx(t)); err != nil {
		t.Errorf("ConfigSchema: %v", err)
	}
}

func (k *kit) invalidConfig(t *testing.T) {
	c := k.load(t)
	start := hcl.Pos{Line: 40, Column: 5, Byte: 1234}
	for name, src := range map[string]string{
		"unknown_attribute": k.cfg.InvalidPluginConfig,
		"bad_block":         "paddock_conformance_unknown_block {\n  x = 1\n}\n",
		"syntax_error":      "this is = = not hcl {\n",
	} {
		t.Run(name, func(t *testing.T) {
			diags, err := c.SetConfig(k.ctx(t), runtime.ConfigSource{Filename: "conformance-invalid.hcl", Source: []byte(src), Start: start})
			if err != nil {
				t.Fatalf("SetConfig returned an error instead of diagnostics: %v", err)
			}
			if !diags.HasErrors() {
				t.Fatalf("SetConfig accepted invalid config %q", src)
			}
			for _, d := range diags {
				if d.Severity != hcl.DiagError {
					continue
				}
				if d.Subject == nil {
					t.Errorf("diagnostic %q has no subject range", d.Summary)
					continue
				}
				if d.Subject.Filename != "conformance-invalid.hcl" || d.Subject.Start.Line < start.Line || d.Subject.Start.Byte < start.Byte {
					t.Errorf("diagnostic %q range %s does not point into the file at or after line %d", d.Summary, d.Subject, start.Line)
				}
				// The operator reads file:line,col in the message.
				if at := fmt.Sprintf("conformance-invalid.hcl:%d,%d", d.Subject.Start.Line, d.Subject.Start.Column); !strings.Contains(d.Error(), at) {
					t.Errorf("diagnostic text %q lacks %s", d.Error(), at)
				}
			}
			if name == "bad_block" {
				// The block starts the body: line and column are the body's.
				var found bool
				for _, d := range diags {
					found = found || (d.Severity == hcl.DiagError && d.Subject != nil && d.Subject.Start.Line == start.Line && d.Subject.Start.Column == start.Column)
				}
				if !found {
					t.Errorf("no error diagnostic at conformance-invalid.hcl:%d,%d for the unknown block: %s", start.Line, start.Column, diags.Error())
				}
			}
		})
	}
	// The valid configuration still works after a refused one.
	diags, err := c.SetConfig(k.ctx(t), runtime.ConfigSource{Filename: "conformance.hcl", Source: []byte(k.pluginConfig()), Start: hcl.Pos{Line: 1, Column: 1}})
	if err != nil || diags.HasErrors() {
		t.Fatalf("SetConfig(valid) after invalid: %v %s", err, diags.Error())
	}
}

func (k *kit) invalidLaunch(t *testing.T) {
	c := k.load(t)
	secret := randHex(16)
	cases := map[string]func(*runtime.LaunchRequest){
		"empty_session_id":      func(r *runtime.LaunchRequest) { r.SessionID = "" },
		"path_in_session_id":    func(r *runtime.LaunchRequest) { r.SessionID = "../../etc" },
		"empty_secret":          func(r *runtime.LaunchRequest) { r.AgentctlSecret = "" },
		"bad_env_name":          func(r *runtime.LaunchRequest) { r.Env = map[string]string{"A=B": "x"} },
		"option_flag_injection": func(r *runtime.LaunchRequest) { r.TaskID = "-rf" },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			req := k.request(t, secret)
			mutate(&req)
			resp, err := c.Launch(k.ctx(t), req)
			if !errors.Is(err, runtime.ErrInvalidRequest) {
				if err == nil {
					_ = c.Destroy(k.ctx(t), resp.Handle)
				}
				t.Fatalf("Launch(%s) error = %v, want ErrInvalidRequest", name, err)
			}
		})
	}
}

func (k *kit) garbageHandle(t *testing.T) {
	c := k.load(t)
	for name, h := range map[string][]byte{
		"binary": {0xff, 0x00, 0x13, 0x37},
		"json":   []byte(`{"v":999,"session_id":"nope"}`),
		"text":   []byte("not a handle"),
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := c.Recover(k.ctx(t), h, randHex(16)); !errors.Is(err, runtime.ErrNotFound) {
				t.Errorf("Recover(garbage) error = %v, want ErrNotFound", err)
			}
		})
	}
	if _, err := c.Recover(k.ctx(t), nil, randHex(16)); !errors.Is(err, runtime.ErrInvalidRequest) {
		t.Errorf("Recover(empty handle) error = %v, want ErrInvalidRequest", err)
	}
}

// confinement launches with task workspaces outside TaskRoot: each must be
// refused with ErrInvalidRequest and leave the outside directory untouched.
func (k *kit) confinement(t *testing.T) {
	if k.cfg.NoTaskWorkspaces {
		t.Skip("the runtime never uses the task's workspace path")
	}
	root := k.cfg.TaskRoot
	if root == "" {
		root = "{{temp_dir}}"
	}
	root = k.expand(root, func(s string) string { return s })
	c := k.load(t)
	outside := t.TempDir()
	rel, err := filepath.Rel(root, outside)
	if err != nil || !strings.HasPrefix(rel, "..") {
		t.Fatalf("conformance: %s is not outside %s (%v)", outside, root, err)
	}
	link := filepath.Join(root, "conformance-escape-"+randHex(4))
	if err := os.Symlink(outside, link); err != nil {
		t.Fatalf("conformance: %v", err)
	}
	t.Cleanup(func() { os.Remove(link) })
	secret := randHex(16)
	for name, path := range map[string]string{
		"dotdot_relative":  rel,
		"absolute_outside": outside,
		"symlink_outside":  link,
	} {
		t.Run(name, func(t *testing.T) {
			req := k.request(t, secret)
			req.Workspace = runtime.Workspace{Path: path}
			resp, err := c.Launch(k.ctx(t), req)
			if err == nil {
				_ = c.Destroy(k.ctx(t), resp.Handle)
				t.Fatalf("Launch with workspace %q (outside %s) succeeded in %q", path, root, resp.WorkspacePath)
			}
			if !errors.Is(err, runtime.ErrInvalidRequest) {
				t.Fatalf("Launch with workspace %q outside %s: %v, want ErrInvalidRequest", path, root, err)
			}
		})
	}
	if entries, err := os.ReadDir(outside); err != nil || len(entries) > 0 {
		t.Errorf("the directory outside the root was written: %v %v", entries, err)
	}
}

// concurrentLaunches launches one session three times at once. Operations
// on one session are serialised, so each launch replaces the one before:
// exactly one agentctl answers for its response at the end, and none after
// Destroy.
func (k *kit) concurrentLaunches(t *testing.T) {
	c := k.load(t)
	req := k.request(t, randHex(16))
	const n = 3
	resps := make([]runtime.LaunchResponse, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resps[i], errs[i] = c.Launch(k.ctx(t), req)
		}()
	}
	wg.Wait()
	var last []byte
	for i, err := range errs {
		if err != nil {
			t.Errorf("concurrent Launch %d: %v", i, err)
		} else {
			last = resps[i].Handle
		}
	}
	if last == nil {
		t.FailNow()
	}
	alive := func() (handles [][]byte) {
		for i, resp := range resps {
			if errs[i] != nil {
				continue
			}
			ctx, cancel := context.WithTimeout(k.ctx(t), 3*time.Second)
			h, err := agentctlproc.CheckHealthPinned(ctx, resp.AgentctlURL, req.AgentctlSecret, resp.AgentctlFingerprint)
			cancel()
			if err == nil && h.Nonce == resp.Nonce {
				handles = append(handles, resp.Handle)
			}
		}
		return handles
	}
	live := alive()
	for _, h := range live {
		defer func() { _ = c.Destroy(k.ctx(t), h) }()
	}
	if len(live) != 1 {
		t.Fatalf("%d agentctls answer for their launch of session %s after %d concurrent launches, want exactly 1 (launches of one session must be serialised)", len(live), req.SessionID, n)
	}
	if err := c.Destroy(k.ctx(t), live[0]); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	if left := alive(); len(left) > 0 {
		t.Errorf("an agentctl of the session still answers after Destroy")
	}
}

func (k *kit) lifecycle(t *testing.T) {
	c1 := k.load(t)
	caps, err := c1.Capabilities(k.ctx(t))
	if err != nil {
		t.Fatalf("Capabilities: %v", err)
	}
	secret := randHex(16)
	req := k.request(t, secret)
	launched, err := c1.Launch(k.ctx(t), req)
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	destroyed := false
	t.Cleanup(func() {
		if !destroyed {
			ctx, cancel := context.WithTimeout(context.Background(), k.cfg.Timeout)
			defer cancel()
			if c, err := runtime.NewClient(ctx, runtime.ClientConfig{Path: k.cfg.PluginPath}); err == nil {
				_, _ = c.SetConfig(ctx, runtime.ConfigSource{Filename: "conformance.hcl", Source: []byte(k.pluginConfig())})
				_ = c.Destroy(ctx, launched.Handle)
				c.Kill()
			}
		}
	})
	if len(launched.Handle) == 0 || launched.AgentctlURL == "" || launched.Nonce == "" {
		t.Fatalf("Launch response %+v: handle, agentctl_url and nonce are required", redact(launched))
	}
	k.checkHealthy(t, "after launch", launched, req.SessionID, secret)

	if strings.HasPrefix(launched.AgentctlURL, "https://") != (launched.AgentctlFingerprint != "") {
		t.Errorf("Launch response: agentctl_url %s with fingerprint %q; an https URL needs the certificate's fingerprint and only it has one", launched.AgentctlURL, launched.AgentctlFingerprint)
	}
	plain := http.DefaultClient
	if launched.AgentctlFingerprint != "" {
		plain = &http.Client{Transport: &http.Transport{TLSClientConfig: pin.ClientConfig(launched.AgentctlFingerprint)}}
	}
	if resp, err := plain.Get(strings.TrimRight(launched.AgentctlURL, "/") + "/v1/health"); err != nil {
		t.Errorf("agentctl unreachable without auth: %v", err)
	} else {
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("agentctl health without the secret: HTTP %d, want 401", resp.StatusCode)
		}
	}
	if h, err := agentctlproc.CheckHealthPinned(k.ctx(t), launched.AgentctlURL, "wrong-"+secret, launched.AgentctlFingerprint); err == nil {
		t.Errorf("agentctl answered health with a wrong secret: %+v", h)
	}

	ins, err := c1.Inspect(k.ctx(t), launched.Handle)
	if err != nil {
		t.Fatalf("Inspect: %v", err)
	}
	if ins.State != runtime.StateRunning {
		t.Fatalf("Inspect after launch: state %q, want running (%s)", ins.State, ins.Message)
	}

	// Reconcile is optional (runtime.Reconciler): a plugin without it
	// answers ErrUnsupported; one with it must answer and keep an owned
	// executor. The long grace keeps anything else on a shared engine safe.
	if removed, err := c1.Reconcile(k.ctx(t), runtime.ReconcileRequest{Cluster: req.Cluster, Owned: []string{req.ExecutorID}, Grace: time.Hour}); err != nil && !errors.Is(err, runtime.ErrUnsupported) {
		t.Errorf("Reconcile: %v (want success or ErrUnsupported)", err)
	} else if err == nil {
		k.checkHealthy(t, "after Reconcile with the executor owned", launched, req.SessionID, secret)
		if len(removed) > 0 {
			t.Logf("Reconcile removed executors older than an hour: %v", removed)
		}
	}

	// The host goes away; a new host process recovers from the handle alone.
	c1.Kill()
	if caps.SurvivesSupervisorRestart {
		k.checkHealthy(t, "after the plugin process was killed", launched, req.SessionID, secret)
	}
	c2 := k.load(t)
	recovered, err := c2.Recover(k.ctx(t), launched.Handle, secret)
	if err != nil {
		t.Fatalf("Recover in a fresh plugin process: %v", err)
	}
	k.checkHealthy(t, "after recover", recovered, req.SessionID, secret)
	if caps.SurvivesSupervisorRestart && recovered.Nonce != launched.Nonce {
		t.Errorf("Recover restarted agentctl (nonce %s → %s) although it was still healthy", launched.Nonce, recovered.Nonce)
	}
	handle := recovered.Handle
	if ins, err := c2.Inspect(k.ctx(t), handle); err != nil || ins.State != runtime.StateRunning {
		t.Fatalf("Inspect after recover = %+v, %v; want running", ins, err)
	}

	if err := c2.Stop(k.ctx(t), handle, 5*time.Second); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	runtimetest.WaitFor(t, 10*time.Second, "agentctl to stop answering after Stop", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := agentctlproc.CheckHealthPinned(ctx, recovered.AgentctlURL, secret, recovered.AgentctlFingerprint)
		return err != nil
	})
	if ins, err := c2.Inspect(k.ctx(t), handle); err == nil && ins.State == runtime.StateRunning {
		t.Errorf("Inspect after Stop: still running")
	}
	if err := c2.Stop(k.ctx(t), handle, time.Second); err != nil {
		t.Errorf("second Stop: %v (stop must be idempotent)", err)
	}

	if err := c2.Destroy(k.ctx(t), handle); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	destroyed = true
	if err := c2.Destroy(k.ctx(t), handle); err != nil && !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("second Destroy: %v (want nil or ErrNotFound)", err)
	}
	if _, err := c2.Recover(k.ctx(t), handle, secret); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("Recover after Destroy: error = %v, want ErrNotFound", err)
	}
	if ins, err := c2.Inspect(k.ctx(t), handle); err == nil && ins.State == runtime.StateRunning {
		t.Errorf("Inspect after Destroy: still running")
	}
}

func (k *kit) checkHealthy(t *testing.T, when string, resp runtime.LaunchResponse, session, secret string) {
	t.Helper()
	h, err := agentctlproc.CheckHealthPinned(k.ctx(t), resp.AgentctlURL, secret, resp.AgentctlFingerprint)
	if err != nil {
		t.Fatalf("agentctl %s: %v", when, err)
	}
	if h.Nonce != resp.Nonce {
		t.Errorf("agentctl %s: health nonce %q, response nonce %q", when, h.Nonce, resp.Nonce)
	}
	if resp.PID != 0 && h.PID != resp.PID {
		t.Errorf("agentctl %s: health pid %d, response pid %d", when, h.PID, resp.PID)
	}
	if h.SessionID != session {
		t.Errorf("agentctl %s: health session %q, want %q", when, h.SessionID, session)
	}
}

// redact drops the handle (which may be long) from a response for messages.
func redact(r runtime.LaunchResponse) runtime.LaunchResponse {
	r.Handle = nil
	return r
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func tailString(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
