// Package acpagent runs an Agent Client Protocol agent as a child process and
// drives it over its stdio with github.com/coder/acp-go-sdk: initialize (bounded),
// session/new or session/load (resume), session/prompt, session/cancel, and
// session/update notifications turned into callbacks (text chunks, tool
// calls, plans, commands, modes), session/set_mode, and the client methods an
// agent calls: session/request_permission (Config.OnPermission answers),
// fs/* (Config.FS) and terminal/* (Config.Terminals), advertised in
// initialize's clientCapabilities only when configured.
//
// This package must not import agentctl or anything under supervisor/.
package acpagent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode"
	"unsafe"

	acp "github.com/coder/acp-go-sdk"
	"github.com/hashicorp/go-hclog"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/shared/nice"
	"golang.org/x/sys/unix"
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
	ResumeToken string        // non-empty: session/load this ACP session id
	Logger      hclog.Logger
	// Credential, when set, runs the agent as that user and group
	// (agentctl's -agent-user) instead of agentctl's own.
	Credential *syscall.Credential
	// Nice, when not 0, is the nice value the agent runs at (agentctl's
	// -nice; see shared/nice).
	Nice int

	// OnUpdate receives message text chunks (kind: agent, user, thought).
	OnUpdate func(kind, text string)
	// OnOutputRead, when set, is called after the updates of one read of
	// the agent's output were handed to OnUpdate and the others: what the
	// agent said so far is handled, and the next read is a pause away.
	OnOutputRead func()
	// OnToolCall receives every tool_call and tool_call_update.
	OnToolCall func(u ToolCallUpdate)
	// OnPlan receives every plan (the whole plan each time).
	OnPlan func(p api.Plan)
	// OnCommands receives available_commands_update's commands.
	OnCommands func(cmds []api.AgentCommand)
	// OnMode receives current_mode_update's mode id.
	OnMode func(modeID string)
	// OnPermission answers a permission request: it returns the option id
	// chosen, or "" to answer cancelled. It may block until a person
	// answers; ctx ends when the agent's connection does. Nil answers
	// every request cancelled.
	OnPermission func(ctx context.Context, req PermissionRequest) string
	// FS, when set, serves fs/read_text_file and fs/write_text_file.
	FS FileSystem
	// Terminals, when set, serves the terminal/* methods.
	Terminals Terminals
}

// PermissionRequest is a session/request_permission as far as it parsed.
type PermissionRequest struct {
	// ToolCall is the request's toolCall (an update of the call it asks
	// about).
	ToolCall ToolCallUpdate
	Options  []api.PermissionOption
}

// Agent is one running ACP agent process with an open ACP session.
type Agent struct {
	cfg Config
	cmd *exec.Cmd
	// endOutput ends the reading of the agent's stdout (agentOutput.wait).
	endOutput  func()
	conn       *acp.ClientSideConnection
	sessionID  string
	loadable   bool
	model      string // reported by session/new or session/load
	modesMu    sync.Mutex
	modes      *api.AgentModes // offered by session/new or session/load; nil when none
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
	// A session of its own (and so a process group, which Kill signals):
	// the scheduler weighs it apart from agentctl, so nice.Lower can put
	// the agent below agentctl and the server.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: cfg.Credential}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("agent stdin: %w", err)
	}
	// The pipe is agentctl's own, not cmd.StdoutPipe's: Wait closes that
	// one as soon as the agent exits, and the paced reader may not have read
	// the agent's last lines by then. This one ends at EOF (no process holds
	// its write end) or when Kill ends the reading.
	stdout, stdoutW, err := blockingPipe()
	if err != nil {
		stdin.Close()
		return nil, fmt.Errorf("agent stdout: %w", err)
	}
	end, endW, err := blockingPipe()
	if err != nil {
		stdin.Close()
		stdout.Close()
		stdoutW.Close()
		return nil, fmt.Errorf("agent stdout: %w", err)
	}
	readNow, err := quietRead(stdout)
	if err != nil {
		stdin.Close()
		stdout.Close()
		stdoutW.Close()
		end.Close()
		endW.Close()
		return nil, fmt.Errorf("agent stdout: %w", err)
	}
	cmd.Stdout = stdoutW
	// Wait copies stderr until its end, which a process the agent left
	// running can keep open: past the agent's exit, stop waiting for it.
	cmd.WaitDelay = stderrWaitDelay
	var endOnce sync.Once
	a := &Agent{cfg: cfg, cmd: cmd, endOutput: func() { endOnce.Do(func() { endW.Close() }) }, done: make(chan struct{}), stderrTail: &tail{max: 4096}, garbage: make(chan string, 1)}
	cmd.Stderr = a.stderrTail
	err = cmd.Start()
	stdoutW.Close() // the agent holds it now
	if err != nil {
		stdout.Close()
		end.Close()
		endW.Close()
		return nil, fmt.Errorf("start agent %q: %w", cfg.Argv[0], err)
	}
	if err := nice.Lower(cmd.Process.Pid, cfg.Nice, cfg.Logger.Named("nice").Warn); err != nil {
		cfg.Logger.Warn("agent keeps agentctl's CPU priority", "error", err)
	}
	a.wg.Add(1)
	out := &agentOutput{src: outputCloser{stdout, end}, wait: func() error { return waitReadable(stdout, end) }, readNow: readNow, update: (&client{a: a}).updateLine, read: cfg.OnOutputRead, garbage: func(line string) {
		cfg.Logger.Warn("agent wrote a line that is not JSON-RPC", "bytes", len(line))
		select {
		case a.garbage <- truncate(line, 200):
		default:
		}
	}}
	go func() {
		defer a.wg.Done()
		err := cmd.Wait()
		a.exitCode = exitCode(cmd, err)
		close(a.done)
	}()
	a.conn = acp.NewClientSideConnection(&client{a: a}, stdin, out)
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
			ClientCapabilities: acp.ClientCapabilities{Fs: acp.FileSystemCapabilities{ReadTextFile: a.cfg.FS != nil, WriteTextFile: a.cfg.FS != nil}, Terminal: a.cfg.Terminals != nil},
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
				a.setModes(resp.Modes)
			}
			return err
		})
	}
	return a.call(ctx, "session/new", func(ctx context.Context) error {
		resp, err := a.conn.NewSession(ctx, acp.NewSessionRequest{Cwd: a.cfg.Dir, McpServers: []acp.McpServer{}})
		if err == nil {
			a.sessionID = string(resp.SessionId)
			a.model = currentModel(resp.Models)
			a.setModes(resp.Modes)
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
	a.endOutput() // ends a read that something the agent left running would keep open
	a.wg.Wait()
}

// client answers the agent's requests.
type client struct{ a *Agent }

func (c *client) SessionUpdate(ctx context.Context, n acp.SessionNotification) error {
	// Reached only by a line updateLine could not decode, which the SDK
	// then decoded: text chunks are all there is to take from it.
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

// updateLine is the fast path of session/update notifications, the one
// notification an agent sends (a streaming agent one per chunk): it decodes
// only what it uses, in the connection's receive loop, where the SDK would
// decode the whole message twice through its generic types and hand it to
// its notification goroutine. Being read in order with every other line, an
// update is handled before any answer or request that came after it, as the
// SDK guarantees. Text chunks take the short way (one small decode); the
// agent's other updates (tool calls, plans, commands, modes) are decoded
// leniently (work.go). A line it cannot decode goes to the SDK, which does
// what it always did with it.
func (c *client) updateLine(line []byte) bool {
	if bytes.Contains(line, []byte(`_chunk"`)) {
		if handled, ok := c.chunkLine(line); ok {
			return handled
		}
	}
	var n struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Update json.RawMessage `json:"update"`
		} `json:"params"`
	}
	if !bytes.Contains(line, []byte(`"`+acp.ClientMethodSessionUpdate+`"`)) || json.Unmarshal(line, &n) != nil ||
		n.ID != nil || n.Method != acp.ClientMethodSessionUpdate {
		return false
	}
	var u struct {
		SessionUpdate string          `json:"sessionUpdate"`
		Content       json.RawMessage `json:"content"`
		CurrentModeID *string         `json:"currentModeId"`
	}
	if json.Unmarshal(n.Params.Update, &u) != nil {
		return false
	}
	cfg := &c.a.cfg
	switch u.SessionUpdate {
	case "agent_message_chunk", "user_message_chunk", "agent_thought_chunk":
		var content struct {
			Type string  `json:"type"`
			Text *string `json:"text"`
		}
		if json.Unmarshal(u.Content, &content) != nil {
			return false // not even a content block: the SDK's to judge
		}
		if cfg.OnUpdate == nil || content.Type != "text" || content.Text == nil {
			return true // not text: nothing to show
		}
		kind := KindAgent
		switch u.SessionUpdate {
		case "user_message_chunk":
			kind = KindUser
		case "agent_thought_chunk":
			kind = KindThought
		}
		cfg.OnUpdate(kind, *content.Text)
	case "tool_call", "tool_call_update":
		if cfg.OnToolCall != nil {
			cfg.OnToolCall(parseToolCall(n.Params.Update, u.SessionUpdate == "tool_call"))
		}
	case "plan":
		if cfg.OnPlan != nil {
			cfg.OnPlan(parsePlan(n.Params.Update))
		}
	case "available_commands_update":
		if cfg.OnCommands != nil {
			cfg.OnCommands(parseCommands(n.Params.Update))
		}
	case "current_mode_update":
		if u.CurrentModeID != nil && c.a.setCurrentMode(*u.CurrentModeID) && cfg.OnMode != nil {
			cfg.OnMode(*u.CurrentModeID)
		}
	}
	return true
}

// chunkLine is updateLine's way for the line a streaming agent writes most,
// a text chunk (agent_message_chunk, user_message_chunk,
// agent_thought_chunk): one decode of the whole line into the fields used,
// where the general way decodes the line, then its update, then the
// update's content, each a scan of its own (three quarters of updateLine's
// time, BenchmarkUpdateLine). ok is false when the line is not such a
// chunk in this shape (a content that is no object, for one): the general
// way then judges it as before.
func (c *client) chunkLine(line []byte) (handled, ok bool) {
	var n struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Update struct {
				SessionUpdate string `json:"sessionUpdate"`
				Content       struct {
					Type string  `json:"type"`
					Text *string `json:"text"`
				} `json:"content"`
			} `json:"update"`
		} `json:"params"`
	}
	if json.Unmarshal(line, &n) != nil || n.ID != nil || n.Method != acp.ClientMethodSessionUpdate {
		return false, false
	}
	kind := ""
	switch n.Params.Update.SessionUpdate {
	case "agent_message_chunk":
		kind = KindAgent
	case "user_message_chunk":
		kind = KindUser
	case "agent_thought_chunk":
		kind = KindThought
	default:
		return false, false
	}
	content, cb := n.Params.Update.Content, c.a.cfg.OnUpdate
	if cb != nil && content.Type == "text" && content.Text != nil {
		cb(kind, *content.Text)
	}
	return true, true // not text: nothing to show
}

func (c *client) RequestPermission(ctx context.Context, p acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	cancelled := acp.RequestPermissionResponse{Outcome: acp.RequestPermissionOutcome{Cancelled: &acp.RequestPermissionOutcomeCancelled{}}}
	if c.a.cfg.OnPermission == nil {
		return cancelled, nil
	}
	req := PermissionRequest{Options: make([]api.PermissionOption, 0, len(p.Options))}
	// The SDK has decoded the request strictly; the tool call goes through
	// the same lenient reading as a tool_call_update.
	if raw, err := json.Marshal(p.ToolCall); err == nil {
		req.ToolCall = parseToolCall(raw, false)
	}
	for _, o := range p.Options {
		req.Options = append(req.Options, api.PermissionOption{OptionID: string(o.OptionId), Name: o.Name, Kind: string(o.Kind)})
	}
	opt := c.a.cfg.OnPermission(ctx, req)
	if opt == "" {
		return cancelled, nil
	}
	return acp.RequestPermissionResponse{Outcome: acp.RequestPermissionOutcome{Selected: &acp.RequestPermissionOutcomeSelected{OptionId: acp.PermissionOptionId(opt)}}}, nil
}

// setModes records the modes session/new or session/load offered.
func (a *Agent) setModes(m *acp.SessionModeState) {
	if m == nil {
		return
	}
	modes := &api.AgentModes{CurrentModeID: string(m.CurrentModeId), Available: []api.AgentMode{}}
	for _, md := range m.AvailableModes {
		am := api.AgentMode{ID: string(md.Id), Name: md.Name}
		if md.Description != nil {
			am.Description = *md.Description
		}
		modes.Available = append(modes.Available, am)
	}
	a.modesMu.Lock()
	a.modes = modes
	a.modesMu.Unlock()
}

// setCurrentMode records the current mode; false when it did not change.
func (a *Agent) setCurrentMode(id string) bool {
	a.modesMu.Lock()
	defer a.modesMu.Unlock()
	if a.modes == nil {
		// An agent that offered no modes announced one: record it alone.
		a.modes = &api.AgentModes{Available: []api.AgentMode{}}
	}
	if a.modes.CurrentModeID == id {
		return false
	}
	a.modes.CurrentModeID = id
	return true
}

// Modes is the agent's modes and the current one (nil when it offers none).
func (a *Agent) Modes() *api.AgentModes {
	a.modesMu.Lock()
	defer a.modesMu.Unlock()
	if a.modes == nil {
		return nil
	}
	m := *a.modes
	m.Available = append([]api.AgentMode(nil), a.modes.Available...)
	return &m
}

// SetMode asks the agent to switch the session to modeID
// (session/set_mode) and records it as current once the agent agreed.
func (a *Agent) SetMode(ctx context.Context, modeID string) error {
	if _, err := a.conn.SetSessionMode(ctx, acp.SetSessionModeRequest{SessionId: acp.SessionId(a.sessionID), ModeId: acp.SessionModeId(modeID)}); err != nil {
		return fmt.Errorf("session/set_mode %s: %w", modeID, err)
	}
	a.setCurrentMode(modeID)
	return nil
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

// stderrWaitDelay bounds how long the wait for an agent's exit waits for
// the end of its stderr after the agent exited.
const stderrWaitDelay = 2 * time.Second

// outputPace is how often, at most, agentctl reads an agent's output while
// it keeps coming. A streaming agent writes a line per chunk (a model's
// tokens come 20 or more times a second); reading each as it comes costs
// agentctl a wakeup of its own per chunk, several thread switches in all,
// and on a host running hundreds of agents those wakeups are most of
// agentctl's CPU. Read at this pace, a burst of chunks is taken in one
// wakeup and handled in one go, and the chunks of one read go to the
// supervisor in one frame of the event stream as soon as they are handled
// (Config.OnOutputRead): a streaming session costs agentctl one wakeup per
// pace, not one per chunk plus one per frame (the supervisor writes a
// streaming session at most every 100 ms anyway). A line after a quiet
// spell is read at once, and so is the first after a read that carried a
// JSON-RPC response or request (a turn's end, or an agent's call that waits
// for its answer); from there the pause grows with the burst's age
// (burstPace), so a short reply and its turn's end are not held for a whole
// pace, nor is the next turn's when prompts follow each other.
const outputPace = 100 * time.Millisecond

// firstPace is the least pause between two reads of a burst.
const firstPace = outputPace / 8

// burstPace is the pause before the next read of a burst of output that
// began age ago: a quarter of its age, at least firstPace and at most
// outputPace. A line waits at most a fifth of the time since the burst
// began; a reply of a few chunks over ~40 ms is read in four reads, and a
// steady stream is read every outputPace from ~0.4 s on (about ten more
// reads than at outputPace throughout, once per burst).
func burstPace(age time.Duration) time.Duration {
	return min(outputPace, max(firstPace, age/4))
}

// maxAgentLine bounds one line of an agent's output (as the ACP SDK does).
const maxAgentLine = 10 << 20

// agentOutput is an agent's stdout as its ACP connection reads it: every
// line that is not a JSON-RPC object is left out and reported to garbage,
// and reads are paced by outputPace. Only the connection's receive loop
// reads it.
type agentOutput struct {
	src io.ReadCloser // closed at its end
	// wait, when set, blocks until src can be read without blocking, or
	// fails when the reading is to end (waitReadable: src is a blocking
	// pipe, which closing it does not wake).
	wait    func() error
	garbage func(line string)
	// readNow, when set, reads src if it has something to read (or is at
	// its end) without blocking, and reports whether it did (quietRead).
	readNow func(p []byte) (n int, ok bool, err error)
	// update handles a session/update notification itself and reports
	// whether it did (nil: every line goes to the connection).
	update func(line []byte) bool
	// read, when set, is called after each read's lines were taken.
	read  func()
	buf   []byte // read and not yet split into lines
	ready []byte // JSON-RPC lines for the connection
	err   error  // from src, returned once ready is drained
	// last is when the latest read of src returned; full is whether it
	// filled the space it was given; pace is the pause before the next
	// read, set by burstPace from when the burst of output began (zero:
	// the next read begins one); call is set by take for a line with an
	// id (a JSON-RPC response or request), which ends the burst.
	last  time.Time
	full  bool
	pace  time.Duration
	began time.Time
	call  bool
}

func (o *agentOutput) Read(p []byte) (int, error) {
	for len(o.ready) == 0 {
		if o.err != nil {
			return 0, o.err
		}
		o.fill()
	}
	n := copy(p, o.ready)
	o.ready = o.ready[n:]
	return n, nil
}

// fill reads src once (after the pause the pace asks for) and moves every
// complete line read so far to ready.
func (o *agentOutput) fill() {
	// Reads start at least the pace apart, so what comes meanwhile is
	// taken in one go; a read that filled its space left more waiting and
	// goes on at once. A line after a quiet spell finds the read waiting.
	if !o.full && !o.last.IsZero() {
		if d := o.pace - time.Since(o.last); d > 0 {
			time.Sleep(d)
		}
	}
	if len(o.buf) == maxAgentLine {
		o.err = fmt.Errorf("a line of the agent's output is longer than %d bytes", maxAgentLine)
		return
	}
	if cap(o.buf)-len(o.buf) < 4096 {
		o.buf = append(make([]byte, 0, min(max(2*cap(o.buf), 64<<10), maxAgentLine)), o.buf...)
	}
	space := o.buf[len(o.buf):cap(o.buf)]
	var n int
	var err error
	read := false
	if o.readNow != nil {
		n, read, err = o.readNow(space)
	}
	if !read {
		if o.wait != nil {
			err = o.wait()
		}
		if err == nil {
			n, err = o.src.Read(space)
		}
	}
	now := time.Now()
	if o.began.IsZero() || now.Sub(o.last) > o.pace+outputPace { // after a quiet spell: a new burst
		o.began = now
	}
	o.pace = burstPace(now.Sub(o.began))
	o.last, o.full = now, n == len(space)
	o.buf = o.buf[:len(o.buf)+n]
	if o.ready == nil || cap(o.ready) > 1<<20 {
		o.ready = nil
	}
	o.call = false
	rest := o.buf
	for {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			break
		}
		o.take(rest[:i])
		rest = rest[i+1:]
	}
	o.buf = o.buf[:copy(o.buf, rest)]
	if err != nil {
		o.take(o.buf) // a last line without its newline
		o.buf = o.buf[:0]
		o.err = err
		o.src.Close()
	}
	if o.call {
		o.began, o.pace = time.Time{}, 0 // the next read begins a burst, at once
	}
	if o.read != nil {
		o.read()
	}
}

// blockingPipe is os.Pipe without the runtime's network poller: its read
// end is read by blocking system calls. The poller watches a pollable pipe
// from when it opens, so each line the agent writes wakes the poller's
// thread even while the paced reader sleeps: one wakeup per chunk of a
// stream, which the pacing is there to save (a 500-chunk turn cost agentctl
// ~1,800 thread switches with a pollable pipe, ~1,200 with this; see
// BenchmarkStreamCPU). A blocking read cannot be ended by closing its file,
// hence agentOutput.wait.
func blockingPipe() (r, w *os.File, err error) {
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC); err != nil {
		return nil, nil, os.NewSyscallError("pipe2", err)
	}
	return os.NewFile(uintptr(p[0]), "|0"), os.NewFile(uintptr(p[1]), "|1"), nil
}

// outputCloser closes an agent's stdout with the pipe that ends its reading.
type outputCloser struct {
	*os.File
	end *os.File
}

func (c outputCloser) Close() error {
	c.end.Close()
	return c.File.Close()
}

// errOutputEnded: Kill ended the reading of the agent's output.
var errOutputEnded = errors.New("the agent's output was closed")

// waitReadable blocks until src has something to read (or its end: no
// writer left) or end's write end is closed, which it reports as
// errOutputEnded. Both are blocking pipes; poll(2) waits for either without
// the runtime's poller.
func waitReadable(src, end *os.File) error {
	srcConn, err := src.SyscallConn()
	if err != nil {
		return err
	}
	endConn, err := end.SyscallConn()
	if err != nil {
		return err
	}
	var pollErr error
	ctlErr := srcConn.Control(func(srcFd uintptr) {
		if err := endConn.Control(func(endFd uintptr) {
			fds := []unix.PollFd{{Fd: int32(srcFd), Events: unix.POLLIN}, {Fd: int32(endFd), Events: unix.POLLIN}}
			for {
				_, err := unix.Poll(fds, -1)
				if err == unix.EINTR {
					continue
				}
				switch {
				case err != nil:
					pollErr = os.NewSyscallError("poll", err)
				case fds[1].Revents != 0:
					pollErr = errOutputEnded
				}
				return
			}
		}); err != nil {
			pollErr = err
		}
	})
	if ctlErr != nil {
		return ctlErr
	}
	return pollErr
}

// quietRead returns agentOutput.readNow for src, a pipe only agentOutput
// reads: it looks whether src has something to read (or is at its end)
// with a ppoll(2) that does not wait, and then reads it, both through
// syscall.RawSyscall6, which tells the Go runtime nothing of the call.
// Neither call can block (the look does not wait; a pipe that has data or
// no writer answers a read at once). A call through the runtime's
// bookkeeping (syscall.Syscall, as os.File's Read and waitReadable's
// poll(2) make) wakes the runtime's monitor thread (sysmon) when it is
// asleep, which then looks again every 20 µs for as long as any goroutine
// runs. At a streaming agent's pace the paced reader wakes once per chunk
// and finds the chunk already there, so each chunk woke sysmon only for
// those two calls; a perf profile of agentctl under BenchmarkPacedStreamCPU
// had sysmon's sleeps and wakeups as its largest single share (see
// docs/PERFORMANCE-NOTES.md). The waiting way (waitReadable) still goes
// through the runtime: it is taken only when nothing has come yet.
func quietRead(src *os.File) (func(p []byte) (int, bool, error), error) {
	rc, err := src.SyscallConn()
	if err != nil {
		return nil, err
	}
	fd := -1
	if err := rc.Control(func(f uintptr) { fd = int(f) }); err != nil {
		return nil, err
	}
	// fd stays valid while src is open: agentOutput closes src only after
	// its last read, from the goroutine that reads.
	return func(p []byte) (int, bool, error) {
		if len(p) == 0 {
			return 0, false, nil
		}
		fds := [1]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		var zero unix.Timespec // look, do not wait
		ready, _, errno := syscall.RawSyscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&fds[0])), 1, uintptr(unsafe.Pointer(&zero)), 0, 0, 0)
		if errno != 0 || ready == 0 {
			return 0, false, nil // nothing yet (or the look failed): the waiting way
		}
		n, _, errno := syscall.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
		switch {
		case errno == syscall.EINTR || errno == syscall.EAGAIN:
			return 0, false, nil
		case errno != 0:
			return 0, true, &os.PathError{Op: "read", Path: src.Name(), Err: errno}
		case n == 0:
			return 0, true, io.EOF
		}
		return int(n), true, nil
	}, nil
}

// take queues one line for the connection, or reports it when it is not
// a JSON-RPC object.
func (o *agentOutput) take(line []byte) {
	t := bytes.TrimSpace(line)
	if len(t) == 0 {
		return
	}
	if t[0] != '{' {
		o.garbage(string(t))
		return
	}
	// A line update takes it decoded, and so was valid JSON: only the
	// others need a check of their own (a second scan of every chunk's
	// line otherwise).
	if o.update != nil && o.update(t) {
		return
	}
	if !json.Valid(t) {
		o.garbage(string(t))
		return
	}
	// A notification has no id (nor a key of that name at its top level;
	// a nested one only makes the next read come sooner).
	o.call = o.call || bytes.Contains(t, []byte(`"id"`))
	o.ready = append(append(o.ready, t...), '\n')
}
