// Package agentctlproc starts `agentctl serve` as a detached local process and
// checks on it: the building block of local runtimes (plugins/standalone, the
// example plugin). It speaks only the fixed agentctl launch interface (flags,
// info file, GET /v1/health; terminal settings as shared/runtime's Terminal)
// and must not import supervisor/.
package agentctlproc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/paddockhq/paddock/shared/agentctl/pin"
	"github.com/paddockhq/paddock/shared/nice"
	"github.com/paddockhq/paddock/shared/runtime"
)

// SecretEnv is the environment variable agentctl reads its secret from.
const SecretEnv = "PADDOCK_AGENTCTL_SECRET"

// Info is what agentctl writes to its -info-file once it listens.
type Info struct {
	URL       string `json:"url"`
	PID       int    `json:"pid"`
	Nonce     string `json:"nonce"`
	SessionID string `json:"session_id"`
	// Fingerprint is the SHA-256 of agentctl's certificate when it serves
	// TLS (StartConfig.TLS; the URL is https).
	Fingerprint string `json:"fingerprint,omitempty"`
}

// Health is the part of GET /v1/health a runtime checks.
type Health struct {
	Status    string `json:"status"`
	SessionID string `json:"session_id"`
	Nonce     string `json:"nonce"`
	PID       int    `json:"pid"`
}

// StartConfig says how to start one agentctl.
type StartConfig struct {
	// AgentctlPath is the agentctl executable (absolute).
	AgentctlPath string
	SessionID    string
	// Workspace is agentctl's -workspace directory.
	Workspace string
	// StateDir is agentctl's -state-dir; the info file and log file go there too.
	StateDir string
	// Listen defaults to 127.0.0.1:0; Advertise is passed when set.
	Listen    string
	Advertise string
	// Secret is handed over in the environment, never in argv.
	Secret string
	// Env is the child's whole environment (KEY=VALUE), without the secret.
	Env []string
	// Timeout bounds the wait for the info file and a healthy answer; default 15s.
	Timeout time.Duration
	// Terminal becomes agentctl's -shell, -replay-bytes and -idle-timeout
	// flags (its zero value keeps agentctl's defaults).
	Terminal runtime.Terminal
	// AgentUser, when set, becomes agentctl's -agent-user: the agent and
	// terminal shells run as that user while agentctl keeps the caller's.
	AgentUser *User
	// TLS becomes agentctl's -tls: it serves HTTPS with a key of its own,
	// and Info.Fingerprint is what clients pin.
	TLS bool
	// Nice becomes agentctl's -nice: the agent and terminal shells run at
	// that nice value, each in a scheduling group of its own (0: unchanged);
	// agentctl keeps its priority.
	Nice int
	// ShareSession keeps agentctl in the caller's session, in a process
	// group of its own, instead of a session of its own. Where the kernel
	// schedules by session (autogrouping), every agentctl a caller starts
	// then weighs as one scheduling group against the server, not each as
	// much as the whole server (see the standalone runtime).
	ShareSession bool
}

// User is a numeric user and group.
type User struct{ UID, GID int }

// Arg is the user as agentctl's -agent-user value, UID:GID.
func (u User) Arg() string { return strconv.Itoa(u.UID) + ":" + strconv.Itoa(u.GID) }

// InfoFile is where agentctl's info file lives in a state dir.
func InfoFile(stateDir string) string { return filepath.Join(stateDir, "agentctl.json") }

// LogFile is where agentctl's stdout/stderr go in a state dir.
func LogFile(stateDir string) string { return filepath.Join(stateDir, "agentctl.log") }

// Process is a started agentctl. Done is closed when the child has exited
// and been reaped (only while the starting process lives; a later process
// sees it through Alive).
type Process struct {
	Info Info
	Done <-chan struct{}
}

// Start launches agentctl detached from the caller: its own process group
// (and session, unless cfg.ShareSession), stdin from /dev/null,
// stdout/stderr appended to the state dir's log file (never the caller's
// pipes), so it survives the caller. It
// returns once agentctl has written its info file and answered /v1/health
// with the same pid and nonce.
func Start(ctx context.Context, cfg StartConfig) (*Process, error) {
	if cfg.AgentctlPath == "" || cfg.SessionID == "" || cfg.Workspace == "" || cfg.StateDir == "" || cfg.Secret == "" {
		return nil, errors.New("start agentctl: agentctl path, session, workspace, state dir and secret are required")
	}
	if err := cfg.Terminal.Validate(); err != nil {
		return nil, fmt.Errorf("start agentctl: %w", err)
	}
	if err := nice.Check(cfg.Nice); err != nil {
		return nil, fmt.Errorf("start agentctl: %w", err)
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = 15 * time.Second
	}
	listen := cfg.Listen
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("start agentctl: state dir: %w", err)
	}
	if err := os.Chmod(cfg.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("start agentctl: state dir: %w", err)
	}
	infoPath := InfoFile(cfg.StateDir)
	if err := os.Remove(infoPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("start agentctl: remove old info file: %w", err)
	}
	logPath := LogFile(cfg.StateDir)
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("start agentctl: log file: %w", err)
	}
	defer logf.Close() // the child holds its own descriptor

	// The secret goes through a 0600 file that agentctl removes once read:
	// an environment variable would stay readable in /proc/PID/environ.
	secretFile, err := writeSecretFile(cfg.StateDir, cfg.Secret)
	if err != nil {
		return nil, fmt.Errorf("start agentctl: %w", err)
	}
	args := []string{"serve", "-session", cfg.SessionID, "-workspace", cfg.Workspace,
		"-state-dir", cfg.StateDir, "-listen", listen, "-info-file", infoPath,
		"-secret-file", secretFile, "-secret-file-once"}
	if cfg.Advertise != "" {
		args = append(args, "-advertise", cfg.Advertise)
	}
	if cfg.AgentUser != nil {
		args = append(args, "-agent-user", cfg.AgentUser.Arg())
	}
	if cfg.TLS {
		args = append(args, "-tls")
	}
	if cfg.Nice != 0 {
		args = append(args, "-nice", strconv.Itoa(cfg.Nice))
	}
	args = append(args, cfg.Terminal.Args()...)
	cmd := exec.Command(cfg.AgentctlPath, args...)
	cmd.Dir = cfg.Workspace
	cmd.Env = withoutKey(cfg.Env, SecretEnv)
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: !cfg.ShareSession, Setpgid: cfg.ShareSession}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start agentctl %s: %w", cfg.AgentctlPath, err)
	}
	done := make(chan struct{})
	// Reap the child when it exits so its pid never lingers as a zombie;
	// the goroutine ends with the child.
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	pid := cmd.Process.Pid
	kill := func() {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}

	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		info, ierr := ReadInfo(infoPath)
		if ierr == nil && info.PID == pid && cfg.TLS && info.Fingerprint == "" {
			kill()
			return nil, fmt.Errorf("start agentctl: it was asked to serve TLS but reports no certificate fingerprint (an older agentctl?)")
		}
		if ierr == nil && info.PID == pid {
			hctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			h, herr := CheckHealthPinned(hctx, info.URL, cfg.Secret, info.Fingerprint)
			cancel()
			if herr == nil {
				if h.Nonce != info.Nonce || h.PID != info.PID {
					kill()
					return nil, fmt.Errorf("start agentctl: health answered nonce %q pid %d, info file says %q %d", h.Nonce, h.PID, info.Nonce, info.PID)
				}
				return &Process{Info: info, Done: done}, nil
			}
		}
		select {
		case <-done:
			return nil, fmt.Errorf("start agentctl: exited before it was healthy; log %s: %s", logPath, tail(logPath, 2048))
		case <-ctx.Done():
			kill()
			return nil, fmt.Errorf("start agentctl: %w", ctx.Err())
		case <-deadline.C:
			kill()
			return nil, fmt.Errorf("start agentctl: not healthy after %s; log %s: %s", timeout, logPath, tail(logPath, 2048))
		case <-tick.C:
		}
	}
}

func withoutKey(env []string, key string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	return out
}

func tail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > n {
		_, _ = f.Seek(st.Size()-n, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	return strings.TrimSpace(string(b))
}

// ReadInfo reads and validates an agentctl info file.
func ReadInfo(path string) (Info, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Info{}, fmt.Errorf("read agentctl info: %w", err)
	}
	var info Info
	if err := json.Unmarshal(b, &info); err != nil {
		return Info{}, fmt.Errorf("decode agentctl info %s: %w", path, err)
	}
	if info.URL == "" || info.PID <= 0 || info.Nonce == "" {
		return Info{}, fmt.Errorf("agentctl info %s is incomplete", path)
	}
	return info, nil
}

var httpClient = &http.Client{Timeout: 5 * time.Second}

// CheckHealth calls GET URL/v1/health with the secret and returns the answer;
// anything but a 200 with status "ok" is an error.
func CheckHealth(ctx context.Context, url, secret string) (Health, error) {
	return CheckHealthPinned(ctx, url, secret, "")
}

// CheckHealthPinned is CheckHealth for an agentctl serving TLS whose
// certificate has the given fingerprint ("" is CheckHealth).
func CheckHealthPinned(ctx context.Context, url, secret, fingerprint string) (Health, error) {
	client := httpClient
	if fingerprint != "" {
		client = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil, TLSClientConfig: pin.ClientConfig(fingerprint), DisableKeepAlives: true}}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(url, "/")+"/v1/health", nil)
	if err != nil {
		return Health{}, fmt.Errorf("agentctl health: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := client.Do(req)
	if err != nil {
		return Health{}, fmt.Errorf("agentctl health: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return Health{}, fmt.Errorf("agentctl health: read: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return Health{}, fmt.Errorf("agentctl health: HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(body))
	}
	var h Health
	if err := json.Unmarshal(body, &h); err != nil {
		return Health{}, fmt.Errorf("agentctl health: decode: %w", err)
	}
	if h.Status != "ok" {
		return h, fmt.Errorf("agentctl health: status %q", h.Status)
	}
	return h, nil
}

// Alive reports whether pid is a live (not zombie) process.
func Alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	var buf [512]byte
	stat, err := readProc(pid, "stat", buf[:0])
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	// The state follows the parenthesised command name: "pid (comm) S ...".
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) {
		if s := stat[i+2]; s == 'Z' || s == 'X' {
			return false
		}
	}
	return true
}

// IsSessionAgentctl reports whether pid is an `agentctl serve` for session
// sessionID (by its command line), so a reused pid is never signalled.
//
// It reads only /proc/PID/cmdline: a process that is gone has none, and a
// zombie's (or an exiting process's) is empty, so no separate liveness check
// is needed. Runtimes call it on every Inspect; it makes four system calls
// and, for a command line under 1 KiB, no allocation.
func IsSessionAgentctl(pid int, sessionID string) bool {
	if pid <= 0 {
		return false
	}
	var buf [1024]byte
	b, err := readProc(pid, "cmdline", buf[:0])
	if err != nil {
		return false
	}
	return isSessionAgentctlCmdline(b, sessionID)
}

// isSessionAgentctlCmdline reports whether a /proc/PID/cmdline (arguments
// each ended by NUL) is an `agentctl serve` for session sessionID: it has the
// argument "serve" and -session ID, --session ID, -session=ID or
// --session=ID. An empty command line (a zombie, an exiting process or a
// kernel thread) is not.
func isSessionAgentctlCmdline(b []byte, sessionID string) bool {
	b = bytes.TrimRight(b, "\x00")
	if len(b) == 0 {
		return false
	}
	serve, session, flag := false, false, false
	for more := true; more; {
		var a []byte
		a, b, more = bytes.Cut(b, []byte{0})
		// string(a) only in comparisons: no allocation.
		if flag && string(a) == sessionID {
			session = true // the value after -session / --session
		}
		flag = string(a) == "-session" || string(a) == "--session"
		if string(a) == "serve" {
			serve = true
		}
		v, ok := bytes.CutPrefix(a, []byte("--session="))
		if !ok {
			v, ok = bytes.CutPrefix(a, []byte("-session="))
		}
		if ok && string(v) == sessionID {
			session = true // -session=ID or --session=ID
		}
	}
	return serve && session
}

// readProc reads /proc/PID/name into buf (grown when too small) with plain
// system calls: open, read until end of file, close. os.ReadFile spends
// about twice as many on a /proc file (fstat, fcntl, a failed epoll
// registration) and those are the bulk of an Inspect's cost.
func readProc(pid int, name string, buf []byte) ([]byte, error) {
	path := "/proc/" + strconv.Itoa(pid) + "/" + name
	var fd int
	var err error
	for {
		if fd, err = syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0); err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer syscall.Close(fd)
	buf = buf[:0]
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := syscall.Read(fd, buf[len(buf):cap(buf)])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
}

// StopGroup sends SIGTERM to the process group pid leads, waits up to
// timeout for pid to exit, then sends SIGKILL and waits a little more.
func StopGroup(ctx context.Context, pid int, timeout time.Duration) error {
	if pid <= 0 {
		return fmt.Errorf("stop agentctl: invalid pid %d", pid)
	}
	if !Alive(pid) {
		return nil
	}
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	if waitGone(ctx, pid, timeout) {
		return nil
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	if waitGone(ctx, pid, 5*time.Second) {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("stop agentctl %d: %w", pid, ctx.Err())
	}
	return fmt.Errorf("stop agentctl %d: still alive after SIGKILL", pid)
}

func waitGone(ctx context.Context, pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if !Alive(pid) {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// writeSecretFile writes the secret to a new 0600 file in dir.
func writeSecretFile(dir, secret string) (string, error) {
	f, err := os.CreateTemp(dir, ".agentctl-secret-*")
	if err != nil {
		return "", fmt.Errorf("secret file: %w", err)
	}
	defer f.Close()
	if err := f.Chmod(0o600); err != nil {
		return "", fmt.Errorf("secret file: %w", err)
	}
	if _, err := f.WriteString(secret); err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("secret file: %w", err)
	}
	return f.Name(), nil
}

// LookupUser resolves a user name, or a numeric UID[:GID], to a User; a
// name's (or a bare UID's) group is its primary group from the user
// database, else GID = UID. Root is refused: the point is another user.
func LookupUser(s string) (User, error) {
	name, group, hasGroup := strings.Cut(s, ":")
	var u User
	if uid, err := strconv.Atoi(name); err == nil && uid >= 0 {
		u = User{UID: uid, GID: uid}
		if e, err := user.LookupId(name); err == nil {
			u.GID, _ = strconv.Atoi(e.Gid)
		}
	} else {
		e, err := user.Lookup(name)
		if err != nil {
			return User{}, fmt.Errorf("user %q: %w", name, err)
		}
		u.UID, _ = strconv.Atoi(e.Uid)
		u.GID, _ = strconv.Atoi(e.Gid)
	}
	if hasGroup {
		gid, err := strconv.Atoi(group)
		if err != nil || gid < 0 {
			return User{}, fmt.Errorf("group %q must be a number", group)
		}
		u.GID = gid
	}
	if u.UID == 0 {
		return User{}, fmt.Errorf("user %q is root; name another user", s)
	}
	return u, nil
}
