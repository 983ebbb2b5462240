package agentctl

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"

	"github.com/paddockhq/paddock/shared/nice"
)

// HostOptions configure a Host (agentctl host).
type HostOptions struct {
	Root       string // instances and workspaces live under it
	Secret     string // required on every host API request
	Executable string // the agentctl binary to run "serve" with (default os.Executable)
	ListenHost string // host the instances listen on (default 127.0.0.1)
	Advertise  string // host put in instance URLs (default: ListenHost rules of serve)
	Logger     hclog.Logger
	// StartTimeout bounds waiting for a new instance's info file (default 15s).
	StartTimeout time.Duration
	// TLS starts instances with serve -tls; each reports its fingerprint.
	TLS bool
	// Nice starts instances with serve -nice (0, the default, leaves their
	// priority alone).
	Nice int
}

// Instance is one agentctl serve process managed by a Host.
type Instance struct {
	SessionID string `json:"session_id"`
	URL       string `json:"url"`
	Secret    string `json:"secret"`
	PID       int    `json:"pid"`
	Nonce     string `json:"nonce"`
	Workspace string `json:"workspace"`
	Healthy   bool   `json:"healthy"`
	// Fingerprint is the instance's certificate fingerprint when it serves
	// TLS (HostOptions.TLS; the URL is https).
	Fingerprint string `json:"fingerprint,omitempty"`
}

// CreateInstanceRequest is the body of POST /v1/instances.
type CreateInstanceRequest struct {
	SessionID string `json:"session_id"`
	// Secret, when set, becomes the instance's secret instead of a generated
	// one (the remote runtime passes the secret the supervisor chose).
	Secret string `json:"secret,omitempty"`
	// Terminal, when set, configures the instance's terminals (the remote
	// runtime passes the server's `terminal` block).
	Terminal *InstanceTerminal `json:"terminal,omitempty"`
}

// MinReplayBytes is the smallest terminal replay buffer `agentctl serve` accepts.
const MinReplayBytes = 4096

// InstanceTerminal is how an instance runs its terminals. A zero field keeps
// `agentctl serve`'s default ($SHELL, else /bin/sh; its default replay
// buffer and idle timeout).
type InstanceTerminal struct {
	// Shell is the argv of a terminal's program.
	Shell []string `json:"shell,omitempty"`
	// ReplayBytes is each terminal's replay buffer (at least MinReplayBytes).
	ReplayBytes int `json:"replay_bytes,omitempty"`
	// IdleTimeoutMS ends a terminal with no connection for that many milliseconds.
	IdleTimeoutMS int64 `json:"idle_timeout_ms,omitempty"`
}

// maxIdleTimeoutMS keeps IdleTimeoutMS within a time.Duration.
const maxIdleTimeoutMS = int64(1<<63-1) / int64(time.Millisecond)

// Validate checks t: a set shell has a non-empty program, no NUL bytes and
// only UTF-8 (it travels as JSON); a set replay buffer is at least
// MinReplayBytes, and nothing is negative.
func (t InstanceTerminal) Validate() error {
	if t.Shell != nil && (len(t.Shell) == 0 || t.Shell[0] == "") {
		return errors.New("terminal shell: the program (first word) is empty")
	}
	for i, w := range t.Shell {
		if strings.ContainsRune(w, 0) || !utf8.ValidString(w) {
			return fmt.Errorf("terminal shell word %d holds a NUL byte or is not UTF-8", i)
		}
	}
	if t.ReplayBytes < 0 || (t.ReplayBytes > 0 && t.ReplayBytes < MinReplayBytes) {
		return fmt.Errorf("terminal replay_bytes %d must be 0 (default) or at least %d", t.ReplayBytes, MinReplayBytes)
	}
	if t.IdleTimeoutMS < 0 || t.IdleTimeoutMS > maxIdleTimeoutMS {
		return fmt.Errorf("terminal idle_timeout_ms %d is out of range", t.IdleTimeoutMS)
	}
	return nil
}

// Args returns the `agentctl serve` flags for t's set fields, each flag and
// value its own argv element; the shell is one -shell JSON array. t must
// have passed Validate.
func (t InstanceTerminal) Args() []string {
	var args []string
	if len(t.Shell) > 0 {
		b, _ := json.Marshal(t.Shell) // a []string always marshals
		args = append(args, "-shell", string(b))
	}
	if t.ReplayBytes > 0 {
		args = append(args, "-replay-bytes", strconv.Itoa(t.ReplayBytes))
	}
	if t.IdleTimeoutMS > 0 {
		args = append(args, "-idle-timeout", (time.Duration(t.IdleTimeoutMS) * time.Millisecond).String())
	}
	return args
}

// Host starts, lists and stops per-session agentctl serve instances.
type Host struct {
	opts HostOptions
	log  hclog.Logger
	mu   sync.Mutex
	reg  map[string]Instance
	mux  *http.ServeMux
}

// NewHost loads the registry under opts.Root.
func NewHost(opts HostOptions) (*Host, error) {
	if opts.Secret == "" {
		return nil, errors.New("agentctl host: secret is empty")
	}
	if opts.Root == "" {
		return nil, errors.New("agentctl host: root is empty")
	}
	if err := nice.Check(opts.Nice); err != nil {
		return nil, fmt.Errorf("agentctl host: %w", err)
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	if opts.ListenHost == "" {
		opts.ListenHost = "127.0.0.1"
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 15 * time.Second
	}
	if opts.Executable == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("agentctl host: find own executable: %w", err)
		}
		opts.Executable = exe
	}
	root, err := filepath.Abs(opts.Root)
	if err != nil {
		return nil, err
	}
	opts.Root = root
	if err := os.MkdirAll(filepath.Join(root, "instances"), 0o700); err != nil {
		return nil, fmt.Errorf("agentctl host: %w", err)
	}
	h := &Host{opts: opts, log: opts.Logger, reg: map[string]Instance{}}
	b, err := os.ReadFile(h.regPath())
	switch {
	case err == nil:
		if err := json.Unmarshal(b, &h.reg); err != nil {
			return nil, fmt.Errorf("agentctl host: decode registry %s: %w", h.regPath(), err)
		}
	case !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("agentctl host: read registry: %w", err)
	}
	h.routes()
	return h, nil
}

func (h *Host) regPath() string { return filepath.Join(h.opts.Root, "instances.json") }

// saveLocked persists the registry; h.mu must be held.
func (h *Host) saveLocked() error {
	b, _ := json.MarshalIndent(h.reg, "", "  ")
	return writeFileSync(h.regPath(), b)
}

// Handler returns the authenticated host API.
func (h *Host) Handler() http.Handler {
	want := []byte("Bearer " + h.opts.Secret)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			writeError(w, 401, CodeUnauthorized, "missing or wrong Authorization: Bearer secret")
			return
		}
		h.mux.ServeHTTP(w, r)
	})
}

func (h *Host) routes() {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/health", func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		n := len(h.reg)
		h.mu.Unlock()
		writeJSON(w, 200, map[string]any{"status": "ok", "pid": os.Getpid(), "instances": n})
	})
	mux.HandleFunc("POST /v1/instances", func(w http.ResponseWriter, r *http.Request) {
		var req CreateInstanceRequest
		if !decodeJSON(w, r, &req) {
			return
		}
		inst, err := h.CreateInstance(r.Context(), req)
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, 201, inst)
	})
	mux.HandleFunc("GET /v1/instances", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]any{"instances": h.List(r.Context())})
	})
	mux.HandleFunc("DELETE /v1/instances/{id}", func(w http.ResponseWriter, r *http.Request) {
		if err := h.Delete(r.Context(), r.PathValue("id")); err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, 200, map[string]bool{"stopped": true})
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, 404, CodeNotFound, fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path))
	})
	h.mux = mux
}

// ErrInstanceExists is returned when a live instance already serves the session.
var ErrInstanceExists = errors.New("an instance for this session already exists")

// ErrNoInstance is returned for an unknown session id.
var ErrNoInstance = errors.New("no instance for this session")

// Create starts an agentctl serve instance for sessionID (detached: it
// survives the host daemon) and waits until it is healthy.
func (h *Host) Create(ctx context.Context, sessionID string) (Instance, error) {
	return h.CreateWithSecret(ctx, sessionID, "")
}

// CreateWithSecret is Create with a caller-chosen instance secret (16 to 256
// printable, non-space ASCII characters); empty means generate one.
func (h *Host) CreateWithSecret(ctx context.Context, sessionID, secret string) (Instance, error) {
	return h.CreateInstance(ctx, CreateInstanceRequest{SessionID: sessionID, Secret: secret})
}

// CreateInstance is Create with every option of a POST /v1/instances body:
// a caller-chosen secret (see CreateWithSecret) and terminal settings,
// passed to `agentctl serve` as flags (argv only).
func (h *Host) CreateInstance(ctx context.Context, req CreateInstanceRequest) (Instance, error) {
	sessionID, secret := req.SessionID, req.Secret
	if err := CheckToken("session_id", sessionID); err != nil {
		return Instance{}, fmt.Errorf("%w: %v", errBadRequest, err)
	}
	if secret != "" && !validInstanceSecret(secret) {
		return Instance{}, fmt.Errorf("%w: secret must be 16 to 256 printable non-space ASCII characters", errBadRequest)
	}
	var terminalArgs []string
	if req.Terminal != nil {
		if err := req.Terminal.Validate(); err != nil {
			return Instance{}, fmt.Errorf("%w: %v", errBadRequest, err)
		}
		terminalArgs = req.Terminal.Args()
	}
	h.mu.Lock()
	if old, ok := h.reg[sessionID]; ok {
		h.mu.Unlock()
		if h.healthy(ctx, old) {
			return Instance{}, fmt.Errorf("session %s: %w", sessionID, ErrAgentRunning)
		}
		h.mu.Lock()
	}
	h.mu.Unlock()
	dir := filepath.Join(h.opts.Root, "instances", sessionID)
	ws := filepath.Join(h.opts.Root, "workspaces", sessionID)
	for _, d := range []string{dir, ws} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return Instance{}, fmt.Errorf("create instance dir: %w", err)
		}
	}
	if secret == "" {
		var sb [24]byte
		if _, err := rand.Read(sb[:]); err != nil {
			return Instance{}, err
		}
		secret = hex.EncodeToString(sb[:])
	}
	secretPath := filepath.Join(dir, "secret")
	if err := writeFileSync(secretPath, []byte(secret)); err != nil {
		return Instance{}, fmt.Errorf("write instance secret: %w", err)
	}
	_ = os.Chmod(secretPath, 0o600)
	infoPath := filepath.Join(dir, "info.json")
	_ = os.Remove(infoPath)
	args := []string{"serve", "-session", sessionID, "-workspace", ws, "-listen", h.opts.ListenHost + ":0",
		"-info-file", infoPath, "-secret-file", secretPath, "-log-file", filepath.Join(dir, "agentctl.log")}
	if h.opts.Advertise != "" {
		args = append(args, "-advertise", h.opts.Advertise)
	}
	if h.opts.TLS {
		args = append(args, "-tls")
	}
	if h.opts.Nice != 0 {
		args = append(args, "-nice", strconv.Itoa(h.opts.Nice))
	}
	args = append(args, terminalArgs...)
	cmd := exec.Command(h.opts.Executable, args...)
	cmd.Dir = ws
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	var env []string
	for _, kv := range os.Environ() {
		if len(kv) > 17 && kv[:17] == "PADDOCK_AGENTCTL_" {
			continue
		}
		env = append(env, kv)
	}
	cmd.Env = env
	if err := cmd.Start(); err != nil {
		return Instance{}, fmt.Errorf("start agentctl serve: %w", err)
	}
	pid := cmd.Process.Pid
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }() // reaps the child while the host lives
	deadline := time.Now().Add(h.opts.StartTimeout)
	var info Info
	for {
		b, err := os.ReadFile(infoPath)
		if err == nil && json.Unmarshal(b, &info) == nil && info.PID == pid {
			break
		}
		select {
		case <-exited:
			return Instance{}, fmt.Errorf("start agentctl serve for %s: it exited (see %s)", sessionID, filepath.Join(dir, "agentctl.log"))
		case <-ctx.Done():
			_ = cmd.Process.Kill()
			return Instance{}, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			return Instance{}, fmt.Errorf("start agentctl serve for %s: no info file within %s", sessionID, h.opts.StartTimeout)
		}
	}
	inst := Instance{SessionID: sessionID, URL: info.URL, Secret: secret, PID: pid, Nonce: info.Nonce, Workspace: ws, Fingerprint: info.Fingerprint}
	inst.Healthy = h.healthy(ctx, inst)
	h.mu.Lock()
	h.reg[sessionID] = inst
	err := h.saveLocked()
	h.mu.Unlock()
	if err != nil {
		return Instance{}, fmt.Errorf("persist host registry: %w", err)
	}
	h.log.Info("instance started", "session_id", sessionID, "pid", pid, "url", info.URL)
	return inst, nil
}

// healthy checks the instance answers health with its recorded pid and nonce.
func (h *Host) healthy(ctx context.Context, inst Instance) bool {
	c := NewPinnedClient(inst.URL, inst.Secret, inst.Fingerprint, 2*time.Second)
	hl, err := c.Health(ctx)
	return err == nil && hl.Nonce == inst.Nonce && hl.PID == inst.PID && hl.SessionID == inst.SessionID
}

// List returns the registered instances with a fresh health check each.
func (h *Host) List(ctx context.Context) []Instance {
	h.mu.Lock()
	out := make([]Instance, 0, len(h.reg))
	for _, inst := range h.reg {
		out = append(out, inst)
	}
	h.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].SessionID < out[j].SessionID })
	var wg sync.WaitGroup
	for i := range out {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			out[i].Healthy = h.healthy(ctx, out[i])
		}(i)
	}
	wg.Wait()
	return out
}

// Delete stops an instance (only when its pid and nonce check out, so a
// reused pid is never signalled) and forgets it. The workspace is kept.
func (h *Host) Delete(ctx context.Context, sessionID string) error {
	h.mu.Lock()
	inst, ok := h.reg[sessionID]
	h.mu.Unlock()
	if !ok {
		return fmt.Errorf("session %q: %w", sessionID, ErrNoInstance)
	}
	if h.healthy(ctx, inst) {
		_ = syscall.Kill(inst.PID, syscall.SIGTERM)
		if !waitExited(inst.PID, 10*time.Second) {
			_ = syscall.Kill(inst.PID, syscall.SIGKILL)
		}
	}
	h.mu.Lock()
	delete(h.reg, sessionID)
	err := h.saveLocked()
	h.mu.Unlock()
	return err
}

func validInstanceSecret(s string) bool {
	if len(s) < 16 || len(s) > 256 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}
