package remoteexec_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"

	"github.com/paddockhq/paddock/plugins/remote/remoteexec"
	"github.com/paddockhq/paddock/shared/agentctl"
	"github.com/paddockhq/paddock/shared/agentctl/pin"
	"github.com/paddockhq/paddock/shared/runtime"
	"github.com/paddockhq/paddock/shared/runtime/conformance"
	"github.com/paddockhq/paddock/shared/runtime/runtimetest"
	"github.com/paddockhq/paddock/shared/testkit"
)

// hostIP is the loopback address the agentctl host daemons of these tests
// listen on: not 127.0.0.1, so nothing works by accident on the default.
const hostIP = "127.0.0.2"

var bins runtimetest.Binaries

func TestMain(m *testing.M) {
	os.Exit(runtimetest.Main(m, "paddock-runtime-remote", "github.com/paddockhq/paddock/plugins/remote", &bins))
}

// agentHost is a real `agentctl host` process on hostIP.
type agentHost struct {
	t          *testing.T
	url        string
	addr       string
	root       string
	secret     string
	secretFile string
	cmd        *exec.Cmd
	done       chan struct{}
	// tls runs the host with -tls; fingerprint is its certificate's.
	tls         bool
	fingerprint string
}

// startHost starts an agentctl host on a free port of hostIP and waits
// until it answers health.
func startHost(t *testing.T) *agentHost {
	t.Helper()
	return startHostTLS(t, false)
}

// startHostTLS is startHost, with agentctl host -tls when useTLS.
func startHostTLS(t *testing.T, useTLS bool) *agentHost {
	t.Helper()
	l, err := net.Listen("tcp", hostIP+":0")
	if err != nil {
		t.Skipf("cannot listen on %s (loopback alias missing?): %v", hostIP, err)
	}
	addr := l.Addr().String()
	l.Close()
	dir := t.TempDir()
	h := &agentHost{t: t, url: "http://" + addr, addr: addr, root: filepath.Join(dir, "root"), secret: randHex(16), secretFile: filepath.Join(dir, "host.secret"), tls: useTLS}
	if useTLS {
		h.url = "https://" + addr
	}
	if err := os.WriteFile(h.secretFile, []byte(h.secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	runtimetest.CleanupProcesses(t)
	h.start()
	t.Cleanup(h.cleanup)
	return h
}

func (h *agentHost) start() {
	t := h.t
	t.Helper()
	args := []string{"host", "-listen", h.addr, "-root", h.root, "-secret-file", h.secretFile,
		"-log-file", filepath.Join(filepath.Dir(h.root), "host.log"), "-log-level", "debug"}
	if h.tls {
		args = append(args, "-tls")
	}
	cmd := exec.Command(bins.Agentctl, args...)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start agentctl host: %v", err)
	}
	h.cmd, h.done = cmd, make(chan struct{})
	go func(done chan struct{}) { _ = cmd.Wait(); close(done) }(h.done)
	testkit.WaitFor(t, 10*time.Second, "agentctl host health", testkit.Cond(func() bool {
		select {
		case <-h.done:
			t.Fatalf("agentctl host exited at start; log:\n%s", h.log())
		default:
		}
		if h.tls {
			cert, err := tls.LoadX509KeyPair(filepath.Join(h.root, "host-tls.crt"), filepath.Join(h.root, "host-tls.key"))
			if err != nil {
				return false
			}
			if fp := pin.Fingerprint(cert.Certificate[0]); h.fingerprint != "" && fp != h.fingerprint {
				t.Fatalf("agentctl host's fingerprint changed across a restart: %s, was %s", fp, h.fingerprint)
			} else {
				h.fingerprint = fp
			}
		}
		hc := agentctl.NewPinnedHostClient(h.url, h.secret, h.fingerprint, time.Second)
		return hc.Health(context.Background()) == nil
	}))
}

// kill stops the host daemon (its instances keep running, detached).
func (h *agentHost) kill() {
	if h.cmd == nil {
		return
	}
	_ = h.cmd.Process.Kill()
	<-h.done
	h.cmd = nil
}

func (h *agentHost) log() string {
	b, _ := os.ReadFile(filepath.Join(filepath.Dir(h.root), "host.log"))
	return string(b)
}

func (h *agentHost) client() *agentctl.HostClient {
	return agentctl.NewPinnedHostClient(h.url, h.secret, h.fingerprint, 30*time.Second)
}

// cleanup stops every instance the host started, then the host.
func (h *agentHost) cleanup() {
	if h.t.Failed() {
		h.t.Logf("agentctl host log:\n%s", tail(h.log(), 4000))
	}
	if b, err := os.ReadFile(filepath.Join(h.root, "instances.json")); err == nil {
		var reg map[string]agentctl.Instance
		if json.Unmarshal(b, &reg) == nil {
			for _, inst := range reg {
				// Only signal a process that really is this host's instance.
				if cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", inst.PID)); err == nil && bytes.Contains(cmdline, []byte(h.root)) {
					_ = syscall.Kill(inst.PID, syscall.SIGCONT)
					_ = syscall.Kill(inst.PID, syscall.SIGKILL)
				}
			}
		}
	}
	h.kill()
}

// config is the plugin config body naming this host "box".
func (h *agentHost) config(extra string) string {
	fp := ""
	if h.fingerprint != "" {
		fp = fmt.Sprintf("  fingerprint = %q\n", h.fingerprint)
	}
	return fmt.Sprintf("host \"box\" {\n  url = %q\n  secret_file = %q\n%s}\n%s", h.url, h.secretFile, fp, extra)
}

func TestConformance(t *testing.T) {
	h := startHost(t)
	conformance.Run(t, conformance.Config{
		PluginPath:   bins.Plugin,
		AgentctlPath: bins.Agentctl,
		PluginConfig: h.config(""),
		Timeout:      60 * time.Second,
		// Sessions work in the host's workspace, never the task's path.
		NoTaskWorkspaces: true,
	})
}

// TestConformanceTLS: agentctl host -tls serves HTTPS with a key it keeps
// across restarts (the plugin pins the configured fingerprint) and starts
// instances with serve -tls, whose fingerprints reach the launch response.
// A host config pinned to another fingerprint reaches no host.
func TestConformanceTLS(t *testing.T) {
	h := startHostTLS(t, true)
	conformance.Run(t, conformance.Config{
		PluginPath:       bins.Plugin,
		AgentctlPath:     bins.Agentctl,
		PluginConfig:     h.config(""),
		Timeout:          60 * time.Second,
		NoTaskWorkspaces: true,
	})
	h.kill()
	h.start() // fails the test if the fingerprint changed

	c := runtimetest.Load(t, bins.Plugin, strings.Replace(h.config(""), h.fingerprint, strings.Repeat("ab", 32), 1))
	_, err := c.Launch(context.Background(), runtime.LaunchRequest{SessionID: "mitm", AgentctlSecret: randHex(16)})
	if err == nil || !strings.Contains(err.Error(), "fingerprint") {
		t.Fatalf("launch on a host pinned to another fingerprint: %v, want a fingerprint mismatch", err)
	}
}

// syncBuffer collects log output written from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// newRuntime is the runtime in-process (the conformance test covers it as a
// plugin process), configured with cfg, logging into the returned buffer.
func newRuntime(t *testing.T, cfg string) (*remoteexec.Runtime, *syncBuffer) {
	t.Helper()
	buf := &syncBuffer{}
	r := remoteexec.New(hclog.New(&hclog.LoggerOptions{Output: buf, Level: hclog.Debug}))
	diags, err := r.SetConfig(context.Background(), runtime.ConfigSource{Filename: "test.hcl", Source: []byte(cfg), Start: hcl.Pos{Line: 1, Column: 1, Byte: 0}})
	if err != nil || diags.HasErrors() {
		t.Fatalf("SetConfig: %v %s", err, diags.Error())
	}
	return r, buf
}

// launcher is what launch needs: the in-process runtime or a plugin client.
type launcher interface {
	Launch(ctx context.Context, req runtime.LaunchRequest) (runtime.LaunchResponse, error)
}

func launch(t *testing.T, r launcher, opts map[string]string) (runtime.LaunchRequest, runtime.LaunchResponse) {
	t.Helper()
	req := runtime.LaunchRequest{SessionID: "s-" + randHex(4), TaskID: "t1", AgentctlSecret: randHex(16), FencingToken: 3, Options: opts}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	resp, err := r.Launch(ctx, req)
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	return req, resp
}

// remotePID reads the instance's pid (on the "remote" machine, here local)
// through Inspect.
func remotePID(t *testing.T, r runtime.Runtime, handle []byte) int {
	t.Helper()
	ins, err := r.Inspect(context.Background(), handle)
	if err != nil || ins.State != runtime.StateRunning {
		t.Fatalf("Inspect = %+v, %v; want running", ins, err)
	}
	pid, err := strconv.Atoi(ins.Details["remote_pid"])
	if err != nil || pid <= 0 {
		t.Fatalf("Inspect details %v: no remote_pid", ins.Details)
	}
	return pid
}

// makeUnreachable freezes the instance (its health checks time out) and
// kills the host daemon (connection refused): the machine is "down".
func makeUnreachable(t *testing.T, h *agentHost, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP instance: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	// SIGSTOP takes effect asynchronously: wait until the kernel reports
	// every thread of the process stopped.
	testkit.WaitFor(t, 10*time.Second, "the instance to be stopped", testkit.Cond(func() bool { return allStopped(pid) }))
	h.kill()
}

// allStopped reports whether every thread of pid is in state T.
func allStopped(pid int) bool {
	stats, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil || len(stats) == 0 {
		return false
	}
	for _, p := range stats {
		if procState(p) != 'T' {
			return false
		}
	}
	return true
}

// procState is the state letter of a /proc/…/stat file (R, S, T, Z, …), or 0.
func procState(statPath string) byte {
	b, err := os.ReadFile(statPath)
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0
	}
	return b[i+2]
}

func TestRecoverWhenHostComesBackWithinBackoff(t *testing.T) {
	h := startHost(t)
	r, logs := newRuntime(t, h.config(`reconnect {
  initial  = "100ms"
  max      = "300ms"
  attempts = 40
  timeout  = "300ms"
}`))
	req, launched := launch(t, r, nil)
	pid := remotePID(t, r, launched.Handle)
	makeUnreachable(t, h, pid)

	type result struct {
		resp runtime.LaunchResponse
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := r.Recover(context.Background(), launched.Handle, req.AgentctlSecret)
		done <- result{resp, err}
	}()
	testkit.WaitFor(t, 20*time.Second, "two failed recover attempts", testkit.Cond(func() bool {
		return strings.Count(logs.String(), "recover attempt failed") >= 2
	}))
	select {
	case res := <-done:
		t.Fatalf("Recover returned while the host was unreachable: %+v %v", res.resp, res.err)
	default:
	}
	// The machine comes back.
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	h.start()
	var res result
	select {
	case res = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Recover did not return after the host came back")
	}
	if res.err != nil {
		t.Fatalf("Recover after the host came back: %v", res.err)
	}
	if res.resp.Nonce != launched.Nonce || res.resp.AgentctlURL != launched.AgentctlURL {
		t.Errorf("Recover = %s %s, want the same agentctl %s %s", res.resp.AgentctlURL, res.resp.Nonce, launched.AgentctlURL, launched.Nonce)
	}
	hl, err := agentctl.NewClient(res.resp.AgentctlURL, req.AgentctlSecret, 5*time.Second).Health(context.Background())
	if err != nil || hl.SessionID != req.SessionID {
		t.Fatalf("agentctl health after recover: %+v %v", hl, err)
	}
	if err := r.Destroy(context.Background(), res.resp.Handle); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
}

func TestRecoverUnreachableBeyondBackoff(t *testing.T) {
	h := startHost(t)
	r, logs := newRuntime(t, h.config(`reconnect {
  initial  = "50ms"
  max      = "100ms"
  attempts = 3
  timeout  = "300ms"
}`))
	req, launched := launch(t, r, nil)
	pid := remotePID(t, r, launched.Handle)
	makeUnreachable(t, h, pid)

	start := time.Now()
	_, err := r.Recover(context.Background(), launched.Handle, req.AgentctlSecret)
	if !errors.Is(err, runtime.ErrUnavailable) {
		t.Fatalf("Recover with the host down: %v, want ErrUnavailable", err)
	}
	for _, want := range []string{"unreachable after 3 attempts", `host "box"`, req.SessionID} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if n := strings.Count(logs.String(), "recover attempt failed"); n != 3 {
		t.Errorf("%d failed attempts logged, want 3", n)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Recover took %s with 3 attempts of 300ms", d)
	}
	// Inspect with the host down reports unknown, not an error.
	ins, err := r.Inspect(context.Background(), launched.Handle)
	if err != nil || ins.State != runtime.StateUnknown {
		t.Errorf("Inspect with the host down = %+v, %v; want state unknown", ins, err)
	}
	// Stop with the host down is a clear, typed error.
	if err := r.Stop(context.Background(), launched.Handle, time.Second); !errors.Is(err, runtime.ErrUnavailable) {
		t.Errorf("Stop with the host down: %v, want ErrUnavailable", err)
	}
}

func TestRecoverReportsRestartedInstance(t *testing.T) {
	h := startHost(t)
	r, _ := newRuntime(t, h.config(`reconnect {
  initial  = "50ms"
  max      = "100ms"
  attempts = 50
}`))
	req, launched := launch(t, r, nil)
	// Someone restarts the session's agentctl through the host: a new
	// process, port and nonce.
	hc := h.client()
	ctx := context.Background()
	if err := hc.DeleteInstance(ctx, req.SessionID); err != nil {
		t.Fatal(err)
	}
	inst, err := hc.CreateInstanceWithSecret(ctx, req.SessionID, req.AgentctlSecret)
	if err != nil {
		t.Fatal(err)
	}
	if inst.Nonce == launched.Nonce {
		t.Fatal("a new instance kept the old nonce")
	}
	ins, err := r.Inspect(ctx, launched.Handle)
	if err != nil || ins.State != runtime.StateRunning || !strings.Contains(ins.Message, "restarted") {
		t.Errorf("Inspect of a restarted instance = %+v, %v; want running, restarted", ins, err)
	}
	resp, err := r.Recover(ctx, launched.Handle, req.AgentctlSecret)
	if err != nil {
		t.Fatalf("Recover of a restarted instance: %v", err)
	}
	if resp.Nonce != inst.Nonce || resp.AgentctlURL != inst.URL {
		t.Errorf("Recover = %s %s, want the new instance %s %s", resp.AgentctlURL, resp.Nonce, inst.URL, inst.Nonce)
	}

	// Gone from the host: not found at once, without using up the 50 attempts.
	if err := hc.DeleteInstance(ctx, req.SessionID); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := r.Recover(ctx, resp.Handle, req.AgentctlSecret); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("Recover of a deleted instance: %v, want ErrNotFound", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Recover of a deleted instance took %s", d)
	}
}

// pluginClient loads the plugin binary as a real subprocess and configures it.
func pluginClient(t *testing.T, cfg string) *runtime.Client {
	return runtimetest.Load(t, bins.Plugin, cfg)
}

func TestLaunchHostSelection(t *testing.T) {
	h := startHost(t)
	// "down" is declared first and refuses connections: the default launch
	// skips it; asking for it by name is unavailable; an unknown name or
	// option is an invalid request.
	l, err := net.Listen("tcp", hostIP+":0")
	if err != nil {
		t.Fatal(err)
	}
	downURL := "http://" + l.Addr().String()
	l.Close()
	wrongSecret := filepath.Join(t.TempDir(), "wrong.secret")
	if err := os.WriteFile(wrongSecret, []byte("not-the-host-secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf("host \"down\" {\n  url = %q\n  secret_file = %q\n}\nhost \"wrongsecret\" {\n  url = %q\n  secret_file = %q\n}\n%s",
		downURL, h.secretFile, h.url, wrongSecret, h.config(`reconnect {
  timeout = "500ms"
}`))
	c := pluginClient(t, cfg)
	ctx := context.Background()

	req, resp := launch(t, c, nil)
	ins, err := c.Inspect(ctx, resp.Handle)
	if err != nil || ins.Details["host"] != "box" {
		t.Errorf("default launch went to %v (%v), want box, the first healthy host", ins.Details["host"], err)
	}
	if !strings.HasPrefix(resp.AgentctlURL, "http://"+hostIP+":") {
		t.Errorf("agentctl url %s is not on the host's address %s", resp.AgentctlURL, hostIP)
	}
	for _, secret := range []string{h.secret, req.AgentctlSecret} {
		if bytes.Contains(resp.Handle, []byte(secret)) {
			t.Errorf("the handle %s holds a secret", resp.Handle)
		}
	}
	_, byName := launch(t, c, map[string]string{"host": "box"})
	for _, r := range []runtime.LaunchResponse{resp, byName} {
		if err := c.Destroy(ctx, r.Handle); err != nil {
			t.Errorf("Destroy: %v", err)
		}
	}

	for _, tc := range []struct {
		name string
		opts map[string]string
		want error
		msg  string
	}{
		{"unknown_host", map[string]string{"host": "nope"}, runtime.ErrInvalidRequest, `"nope" is not a configured host`},
		{"unknown_option", map[string]string{"hots": "box"}, runtime.ErrInvalidRequest, `unknown runtime option "hots"`},
		{"host_down", map[string]string{"host": "down"}, runtime.ErrUnavailable, `agentctl host "down"`},
		{"wrong_host_secret", map[string]string{"host": "wrongsecret"}, runtime.ErrInvalidConfig, "check secret_file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := runtime.LaunchRequest{SessionID: "s-" + randHex(4), AgentctlSecret: randHex(16), Options: tc.opts}
			resp, err := c.Launch(ctx, req)
			if err == nil {
				_ = c.Destroy(ctx, resp.Handle)
			}
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("Launch(%v) = %v, want %v mentioning %q", tc.opts, err, tc.want, tc.msg)
			}
		})
	}
}

func TestLaunchNoHealthyHost(t *testing.T) {
	l, err := net.Listen("tcp", hostIP+":0")
	if err != nil {
		t.Skip(err)
	}
	url := "http://" + l.Addr().String()
	l.Close()
	secret := filepath.Join(t.TempDir(), "s")
	if err := os.WriteFile(secret, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, _ := newRuntime(t, fmt.Sprintf("host \"a\" {\n url = %q\n secret_file = %q\n}\n", url, secret))
	_, err = r.Launch(context.Background(), runtime.LaunchRequest{SessionID: "s1", AgentctlSecret: randHex(16)})
	if !errors.Is(err, runtime.ErrUnavailable) || !strings.Contains(err.Error(), "no healthy agentctl host") {
		t.Fatalf("Launch with every host down: %v, want ErrUnavailable", err)
	}
}

func TestUnconfigured(t *testing.T) {
	r := remoteexec.New(nil)
	_, err := r.Launch(context.Background(), runtime.LaunchRequest{SessionID: "s1", AgentctlSecret: randHex(16)})
	if !errors.Is(err, runtime.ErrInvalidConfig) {
		t.Fatalf("Launch before SetConfig: %v, want ErrInvalidConfig", err)
	}
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// The launch's terminal settings travel in the host's create-instance
// request and become the remote agentctl's flags; a launch without them
// passes none (agentctl's defaults apply).
func TestTerminalSettingsReachRemoteAgentctl(t *testing.T) {
	h := startHost(t)
	r, _ := newRuntime(t, h.config(""))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req := runtime.LaunchRequest{SessionID: "s-" + randHex(4), TaskID: "t1", AgentctlSecret: randHex(16), FencingToken: 3,
		Terminal: runtime.Terminal{Shell: []string{"/bin/sh", "-c", "echo from config; exec /bin/sh"}, ReplayBytes: 65536, IdleTimeout: 90 * time.Second}}
	resp, err := r.Launch(ctx, req)
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", remotePID(t, r, resp.Handle)))
	if err != nil {
		t.Fatal(err)
	}
	want := "\x00-shell\x00" + `["/bin/sh","-c","echo from config; exec /bin/sh"]` + "\x00-replay-bytes\x0065536\x00-idle-timeout\x001m30s\x00"
	if !strings.Contains(string(cmdline), want) {
		t.Fatalf("remote agentctl argv %q lacks %q", cmdline, want)
	}

	_, plain := launch(t, r, nil)
	cmdline, err = os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", remotePID(t, r, plain.Handle)))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(cmdline, []byte("\x00-shell\x00")) || bytes.Contains(cmdline, []byte("\x00-replay-bytes\x00")) {
		t.Fatalf("agentctl launched without terminal settings got terminal flags: %q", cmdline)
	}
}
