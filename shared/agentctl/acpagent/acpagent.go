// Package acpagent runs an Agent Client Protocol agent as a child process and
// drives it over its stdio with github.com/coder/acp-go-sdk: initialize (bounded),
// session/new or session/load (resume), session/prompt, session/cancel, and
// session/update notifications turned into callbacks. Permission requests are
// answered by a fixed policy (allow or deny) and reported.
//
// This package must not import agentctl or anything under supervisor/.
package acpagent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode"

	acp "github.com/coder/acp-go-sdk"
	"github.com/hashicorp/go-hclog"
)

// Sentinel errors.
var (
	// ErrInitTimeout means the agent did not answer initialize in time.
	ErrInitTimeout = errors.New("agent did not answer initialize in time")
	// ErrGarbage means the agent wrote something that is not JSON-RPC.
	ErrGarbage = errors.New("agent wrote output that is not JSON-RPC")
	// ErrExited means the agent process exited.
	ErrExited = errors.New("agent exited")
	// ErrResumeUnsupported means the agent does not advertise loadSession.
	ErrResumeUnsupported = errors.New("agent does not support session/load")
)

// Update kinds passed to Config.OnUpdate.
const (
	KindAgent   = "agent"
	KindUser    = "user"
	KindThought = "thought"
)

// Config describes how to run one ACP agent.
type Config struct {
	Argv        []string // resolved argv (argv[0] is an executable path)
	Dir         string   // working directory and ACP cwd
	Env         []string
	InitTimeout time.Duration // bound on initialize + session/new|load (default 10s)
	Permission  string        // allow | deny (default deny)
	ResumeToken string        // non-empty: session/load this ACP session id
	Logger      hclog.Logger
	// Credential, when set, runs the agent as that user and group
	// (agentctl's -agent-user) instead of agentctl's own.
	Credential *syscall.Credential

	// OnUpdate receives message text chunks (kind: agent, user, thought).
	OnUpdate func(kind, text string)
	// OnPermission reports a permission request and the decision taken.
	OnPermission func(title, decision string)
}

// Agent is one running ACP agent process with an open ACP session.
type Agent struct {
	cfg        Config
	cmd        *exec.Cmd
	conn       *acp.ClientSideConnection
	sessionID  string
	loadable   bool
	model      string // reported by session/new or session/load
	done       chan struct{}
	exitCode   int
	stderrTail *tail
	garbage    chan string
	wg         sync.WaitGroup
}

// Start launches the agent, initializes it and opens (or loads) a session.
// On any failure the process is killed and a descriptive error returned.
func Start(ctx context.Context, cfg Config) (*Agent, error) {
	a, err := spawn(cfg)
	if err != nil {
		return nil, err
	}
	if err := a.handshake(ctx, true); err != nil {
		a.Kill()
		return nil, err
	}
	return a, nil
}

// Probe starts the agent, runs initialize only and reports whether it
// advertises loadSession; the process is stopped before Probe returns.
func Probe(ctx context.Context, cfg Config) (bool, error) {
	a, err := spawn(cfg)
	if err != nil {
		return false, err
	}
	defer a.Kill()
	if err := a.handshake(ctx, false); err != nil {
		return false, err
	}
	return a.loadable, nil
}

func spawn(cfg Config) (*Agent, error) {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.InitTimeout <= 0 {
		cfg.InitTimeout = 10 * time.Second
	}
	if len(cfg.Argv) == 0 {
		return nil, errors.New("empty agent command")
	}
	cmd := exec.Command(cfg.Argv[0], cfg.Argv[1:]...)
	cmd.Dir = cfg.Dir
	cmd.Env = cfg.Env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: cfg.Credential}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("agent stdin: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("agent stdout: %w", err)
	}
	a := &Agent{cfg: cfg, cmd: cmd, done: make(chan struct{}), stderrTail: &tail{max: 4096}, garbage: make(chan string, 1)}
	cmd.Stderr = a.stderrTail
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start agent %q: %w", cfg.Argv[0], err)
	}
	pr, pw := io.Pipe()
	a.wg.Add(2)
	go func() { // filter: pass JSON lines to the SDK, report anything else
		defer a.wg.Done()
		defer pw.Close()
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 10<<20)
		for sc.Scan() {
			line := sc.Bytes()
			t := strings.TrimSpace(string(line))
			if t == "" {
				continue
			}
			if !json.Valid([]byte(t)) || t[0] != '{' {
				cfg.Logger.Warn("agent wrote a line that is not JSON-RPC", "bytes", len(line))
				select {
				case a.garbage <- truncate(t, 200):
				default:
				}
				continue
			}
			if _, err := pw.Write(append([]byte(t), '\n')); err != nil {
				return
			}
		}
	}()
	go func() {
		defer a.wg.Done()
		err := cmd.Wait()
		a.exitCode = exitCode(cmd, err)
		close(a.done)
	}()
	a.conn = acp.NewClientSideConnection(&client{a: a}, stdin, pr)
	a.conn.SetLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	return a, nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

func exitCode(cmd *exec.Cmd, err error) int {
	if cmd.ProcessState == nil {
		return -1
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return cmd.ProcessState.ExitCode()
}

// call runs fn bounded by the init timeout, failing fast when the agent exits
// or writes garbage.
func (a *Agent) call(ctx context.Context, what string, fn func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, a.cfg.InitTimeout)
	defer cancel()
	res := make(chan error, 1)
	go func() { res <- fn(ctx) }()
	select {
	case err := <-res:
		if err != nil {
			// A closed connection usually means the process is exiting: give
			// it a moment so the error names the exit code.
			t := time.NewTimer(time.Second)
			defer t.Stop()
			select {
			case <-a.done:
				return a.exitedErr(what)
			case g := <-a.garbage:
				return fmt.Errorf("%s: %w: %q", what, ErrGarbage, g)
			case <-t.C:
			}
			if ctx.Err() != nil {
				return fmt.Errorf("%s: %w (after %s)", what, ErrInitTimeout, a.cfg.InitTimeout)
			}
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	case <-a.done:
		return a.exitedErr(what)
	case g := <-a.garbage:
		return fmt.Errorf("%s: %w: %q", what, ErrGarbage, g)
	case <-ctx.Done():
		return fmt.Errorf("%s: %w (after %s)", what, ErrInitTimeout, a.cfg.InitTimeout)
	}
}

func (a *Agent) exitedErr(what string) error {
	msg := strings.TrimSpace(a.stderrTail.String())
	if msg != "" {
		return fmt.Errorf("%s: %w with code %d: %s", what, ErrExited, a.exitCode, truncate(msg, 500))
	}
	return fmt.Errorf("%s: %w with code %d", what, ErrExited, a.exitCode)
}

func (a *Agent) handshake(ctx context.Context, openSession bool) error {
	var init acp.InitializeResponse
	err := a.call(ctx, "initialize", func(ctx context.Context) error {
		var err error
		init, err = a.conn.Initialize(ctx, acp.InitializeRequest{
			ProtocolVersion:    acp.ProtocolVersionNumber,
			ClientCapabilities: acp.ClientCapabilities{},
			ClientInfo:         &acp.Implementation{Name: "paddock-agentctl", Version: "1"},
		})
		return err
	})
	if err != nil {
		return err
	}
	a.loadable = init.AgentCapabilities.LoadSession
	if !openSession {
		return nil
	}
	if a.cfg.ResumeToken != "" {
		if !a.loadable {
			return ErrResumeUnsupported
		}
		a.sessionID = a.cfg.ResumeToken
		return a.call(ctx, "session/load", func(ctx context.Context) error {
			resp, err := a.conn.LoadSession(ctx, acp.LoadSessionRequest{SessionId: acp.SessionId(a.cfg.ResumeToken), Cwd: a.cfg.Dir, McpServers: []acp.McpServer{}})
			if err == nil {
				a.model = currentModel(resp.Models)
			}
			return err
		})
	}
	return a.call(ctx, "session/new", func(ctx context.Context) error {
		resp, err := a.conn.NewSession(ctx, acp.NewSessionRequest{Cwd: a.cfg.Dir, McpServers: []acp.McpServer{}})
		if err == nil {
			a.sessionID = string(resp.SessionId)
			a.model = currentModel(resp.Models)
		}
		return err
	})
}

// maxModelName bounds a reported model name, in characters.
const maxModelName = 100

// currentModel is the model an agent reports for its session ("" when it
// reports none); it is shown to people, so it is cut short and stripped of
// control characters.
func currentModel(m *acp.SessionModelState) string {
	if m == nil {
		return ""
	}
	r := []rune(strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, string(m.CurrentModelId)))
	return string(r[:min(len(r), maxModelName)])
}

// Model is the model the agent reported for the session ("" when none).
func (a *Agent) Model() string { return a.model }

// SessionID is the ACP session id (the resume token).
func (a *Agent) SessionID() string { return a.sessionID }

// SupportsLoad reports the agent's loadSession capability.
func (a *Agent) SupportsLoad() bool { return a.loadable }

// PID is the agent's process id.
func (a *Agent) PID() int { return a.cmd.Process.Pid }

// Done is closed when the agent process has exited.
func (a *Agent) Done() <-chan struct{} { return a.done }

// ExitCode is valid after Done is closed.
func (a *Agent) ExitCode() int { <-a.done; return a.exitCode }

// StderrTail returns the last bytes the agent wrote to stderr.
func (a *Agent) StderrTail() string { return a.stderrTail.String() }

// Prompt runs one turn and returns the ACP stop reason (end_turn, cancelled, …).
func (a *Agent) Prompt(ctx context.Context, text string) (string, error) {
	type result struct {
		r   acp.PromptResponse
		err error
	}
	res := make(chan result, 1)
	go func() {
		r, err := a.conn.Prompt(ctx, acp.PromptRequest{SessionId: acp.SessionId(a.sessionID), Prompt: []acp.ContentBlock{acp.TextBlock(text)}})
		res <- result{r, err}
	}()
	select {
	case r := <-res:
		if r.err != nil {
			select {
			case <-a.done:
				return "", a.exitedErr("session/prompt")
			default:
			}
			return "", fmt.Errorf("session/prompt: %w", r.err)
		}
		return string(r.r.StopReason), nil
	case <-a.done:
		return "", a.exitedErr("session/prompt")
	}
}

// Cancel asks the agent to cancel the running turn.
func (a *Agent) Cancel(ctx context.Context) error {
	if err := a.conn.Cancel(ctx, acp.CancelNotification{SessionId: acp.SessionId(a.sessionID)}); err != nil {
		return fmt.Errorf("session/cancel: %w", err)
	}
	return nil
}

// Stop ends the agent: SIGTERM to its process group, SIGKILL after grace.
func (a *Agent) Stop(grace time.Duration) int {
	_ = syscall.Kill(-a.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-a.done:
	case <-time.After(grace):
		a.Kill()
	}
	return a.ExitCode()
}

// Kill ends the agent at once and waits for its goroutines.
func (a *Agent) Kill() {
	_ = syscall.Kill(-a.cmd.Process.Pid, syscall.SIGKILL)
	_ = a.cmd.Process.Kill()
	<-a.done
	a.wg.Wait()
}

// client answers the agent's requests.
type client struct{ a *Agent }

func (c *client) SessionUpdate(ctx context.Context, n acp.SessionNotification) error {
	u := n.Update
	cb := c.a.cfg.OnUpdate
	if cb == nil {
		return nil
	}
	switch {
	case u.AgentMessageChunk != nil && u.AgentMessageChunk.Content.Text != nil:
		cb(KindAgent, u.AgentMessageChunk.Content.Text.Text)
	case u.UserMessageChunk != nil && u.UserMessageChunk.Content.Text != nil:
		cb(KindUser, u.UserMessageChunk.Content.Text.Text)
	case u.AgentThoughtChunk != nil && u.AgentThoughtChunk.Content.Text != nil:
		cb(KindThought, u.AgentThoughtChunk.Content.Text.Text)
	}
	return nil
}

func (c *client) RequestPermission(ctx context.Context, p acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	decision := "deny"
	if c.a.cfg.Permission == "allow" {
		decision = "allow"
	}
	title := ""
	if p.ToolCall.Title != nil {
		title = *p.ToolCall.Title
	}
	if c.a.cfg.OnPermission != nil {
		c.a.cfg.OnPermission(title, decision)
	}
	for _, o := range p.Options {
		allow := o.Kind == acp.PermissionOptionKindAllowOnce || o.Kind == acp.PermissionOptionKindAllowAlways
		reject := o.Kind == acp.PermissionOptionKindRejectOnce || o.Kind == acp.PermissionOptionKindRejectAlways
		if (decision == "allow" && allow) || (decision == "deny" && reject) {
			return acp.RequestPermissionResponse{Outcome: acp.RequestPermissionOutcome{Selected: &acp.RequestPermissionOutcomeSelected{OptionId: o.OptionId}}}, nil
		}
	}
	return acp.RequestPermissionResponse{Outcome: acp.RequestPermissionOutcome{Cancelled: &acp.RequestPermissionOutcomeCancelled{}}}, nil
}

func (c *client) ReadTextFile(ctx context.Context, p acp.ReadTextFileRequest) (acp.ReadTextFileResponse, error) {
	return acp.ReadTextFileResponse{}, acp.NewMethodNotFound(acp.ClientMethodFsReadTextFile)
}

func (c *client) WriteTextFile(ctx context.Context, p acp.WriteTextFileRequest) (acp.WriteTextFileResponse, error) {
	return acp.WriteTextFileResponse{}, acp.NewMethodNotFound(acp.ClientMethodFsWriteTextFile)
}

func (c *client) CreateTerminal(ctx context.Context, p acp.CreateTerminalRequest) (acp.CreateTerminalResponse, error) {
	return acp.CreateTerminalResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalCreate)
}

func (c *client) KillTerminal(ctx context.Context, p acp.KillTerminalRequest) (acp.KillTerminalResponse, error) {
	return acp.KillTerminalResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalKill)
}

func (c *client) TerminalOutput(ctx context.Context, p acp.TerminalOutputRequest) (acp.TerminalOutputResponse, error) {
	return acp.TerminalOutputResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalOutput)
}

func (c *client) ReleaseTerminal(ctx context.Context, p acp.ReleaseTerminalRequest) (acp.ReleaseTerminalResponse, error) {
	return acp.ReleaseTerminalResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalRelease)
}

func (c *client) WaitForTerminalExit(ctx context.Context, p acp.WaitForTerminalExitRequest) (acp.WaitForTerminalExitResponse, error) {
	return acp.WaitForTerminalExitResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalWaitForExit)
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
