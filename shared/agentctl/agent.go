package agentctl

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/shared/agentctl/acpagent"
	"github.com/paddockhq/paddock/shared/agentctl/ptyagent"
	"github.com/paddockhq/paddock/shared/agentctl/workspace"
)

// Sentinel errors of the agent lifecycle, mapped to HTTP statuses by the server.
var (
	ErrAgentRunning    = errors.New("an agent is already running")
	ErrNoAgent         = errors.New("no agent is running")
	ErrTurnRunning     = errors.New("a turn is already running")
	ErrNoTurn          = errors.New("no turn is running")
	ErrNotResumable    = errors.New("agent profile does not support session resume")
	ErrAgentNotReady   = errors.New("agent is not waiting for input")
	ErrCommandNotFound = errors.New("agent command not found on PATH")
)

// driver is what the manager needs from a protocol implementation.
type driver interface {
	prompt(ctx context.Context, text string) (outcome string, err error)
	cancel(ctx context.Context) error
	stop(grace time.Duration) int
	done() <-chan struct{}
	exitCode() int
	pid() int
	// model is the model the agent reported ("" when none).
	model() string
}

// manager owns the agent of one session, its messages and its events.
type manager struct {
	// watched is closed when the running agent's watch has recorded its
	// exit (m.mu; replaced at every start).
	watched     chan struct{}
	log         hclog.Logger
	workspace   string
	sessionID   string
	stateDir    string
	initTimeout time.Duration
	credential  *syscall.Credential // the agent's user, when not agentctl's
	nice        int                 // the agent's nice value (0: agentctl's)
	events      *eventLog
	env         []string
	// ws is the workspace the agent's fs/* requests are served from.
	ws *workspace.Workspace
	// terms are the commands the agent runs, kept for agentctl's lifetime.
	terms *commandTerminals

	mu        sync.Mutex
	status    string
	profile   Profile
	drv       driver
	pty       *ptyagent.Agent
	token     string
	resumable bool
	turn      int
	running   bool
	cancelled bool
	outcome   string
	exit      *int
	lastErr   string
	msgs      []*Message
	current   *Message // agent message or thought being streamed
	// streamed holds current's text as ACP chunks add to it: each update's
	// text is a view of it, not a copy of the whole text so far.
	streamed strings.Builder
	nextMsg  int
	probed   *bool
	// acp is the running ACP agent (nil when none, or a pty agent).
	acp *acpagent.Agent
	// tools are the tool entries of this agent run by tool call id.
	tools map[string]*Message
	// plan is the current turn's plan entry (nil until the agent sends one).
	plan     *Message
	commands []api.AgentCommand
	modes    *api.AgentModes
	// perms are the permission requests of this agent run, oldest first.
	perms []*permission

	wg sync.WaitGroup
}

// resumeInfo is persisted in the state dir so a restarted agentctl knows the
// last agent's token.
type resumeInfo struct {
	Protocol    string `json:"protocol"`
	ResumeToken string `json:"resume_token"`
}

func (m *manager) saveResume() {
	b, _ := json.Marshal(resumeInfo{Protocol: m.profile.Protocol, ResumeToken: m.token})
	if err := writeFileSync(filepath.Join(m.stateDir, "agent.json"), b); err != nil {
		m.log.Warn("persist agent resume info", "error", err)
	}
}

func (m *manager) loadResume() {
	b, err := os.ReadFile(filepath.Join(m.stateDir, "agent.json"))
	if err != nil {
		return
	}
	var ri resumeInfo
	if json.Unmarshal(b, &ri) == nil && ValidToken(ri.ResumeToken) {
		m.token = ri.ResumeToken
		m.profile.Protocol = ri.Protocol
	}
}

// agentEnv is agentctl's environment without its secret, plus the profile's env.
func (m *manager) agentEnv(p Profile) []string {
	var env []string
	for _, kv := range m.env {
		if strings.HasPrefix(kv, "PADDOCK_AGENTCTL_") {
			continue
		}
		env = append(env, kv)
	}
	for k, v := range p.Env {
		env = append(env, k+"="+v)
	}
	return env
}

// resolveArgv fills templates and resolves argv[0] on agentctl's PATH.
func (m *manager) resolveArgv(argv []string, token string) ([]string, error) {
	r := strings.NewReplacer("{{resume_token}}", token, "{{session_id}}", m.sessionID, "{{workspace}}", m.workspace)
	out := make([]string, len(argv))
	for i, a := range argv {
		out[i] = r.Replace(a)
	}
	path, err := lookPath(out[0], m.env)
	if err != nil {
		return nil, err
	}
	out[0] = path
	return out, nil
}

func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		if st, err := os.Stat(name); err != nil || st.IsDir() {
			return "", fmt.Errorf("agent command %q: %w", name, ErrCommandNotFound)
		}
		return name, nil
	}
	pathEnv := ""
	for _, kv := range env {
		if strings.HasPrefix(kv, "PATH=") {
			pathEnv = kv[5:]
		}
	}
	for _, dir := range filepath.SplitList(pathEnv) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("agent command %q: %w", name, ErrCommandNotFound)
}

func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

func (m *manager) state() AgentState {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := AgentState{Status: m.status, Protocol: m.profile.Protocol, ResumeToken: m.token, SupportsSessionResume: m.resumable,
		Turn: m.turn, TurnRunning: m.running, LastOutcome: m.outcome, ExitCode: m.exit, Error: m.lastErr,
		Commands: m.commands, Modes: m.modes, PendingPermissions: m.pendingPermissions()}
	if m.drv != nil {
		st.PID = m.drv.pid()
		st.Model = m.drv.model()
	}
	return st
}

func (m *manager) messages() []Message {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Message, 0, len(m.msgs))
	for _, msg := range m.msgs {
		out = append(out, *msg)
	}
	return out
}

// addMessage appends a text message; m.mu must be held.
func (m *manager) addMessage(role, text string, complete bool) *Message {
	return m.appendMessage(&Message{Role: role, Text: text, Complete: complete})
}

// appendMessage gives msg its id and times, appends and publishes it;
// m.mu must be held.
func (m *manager) appendMessage(msg *Message) *Message {
	m.nextMsg++
	now := time.Now().UTC()
	msg.ID, msg.CreatedAt, msg.UpdatedAt = "m"+strconv.Itoa(m.nextMsg), now, now
	// While the agent starts, what it says is the conversation it resumed.
	msg.History = m.status == StatusStarting
	m.msgs = append(m.msgs, msg)
	m.events.publish(EventMessageAdded, MessageData{Message: *msg})
	return msg
}

// updateMessage sets a message's text; m.mu must be held.
func (m *manager) updateMessage(msg *Message, text string, complete bool) {
	if msg.Text == text && msg.Complete == complete {
		return
	}
	msg.Text, msg.Complete, msg.UpdatedAt = text, complete, time.Now().UTC()
	m.events.publish(EventMessageUpdated, MessageData{Message: *msg})
}

// onACPUpdate merges streamed chunks into messages.
func (m *manager) onACPUpdate(kind, text string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch kind {
	case acpagent.KindUser:
		if !m.running { // history replayed by session/load: a turn of it begins
			m.endStream()
			m.plan = nil
			m.addMessage(RoleUser, text, true)
		}
	case acpagent.KindAgent:
		m.streamChunk(RoleAgent, text)
	case acpagent.KindThought:
		m.streamChunk(RoleThought, text)
	}
}

func (m *manager) fail(msg string) {
	m.lastErr = msg
	m.events.publish(EventAgentError, AgentErrorData{Message: msg})
}

// start launches the agent (resume when token is non-empty).
func (m *manager) start(ctx context.Context, req StartRequest) (AgentState, error) {
	if err := req.Profile.Validate(); err != nil {
		return AgentState{}, fmt.Errorf("%w: %v", errBadRequest, err)
	}
	if req.ResumeToken != "" {
		if err := CheckToken("resume_token", req.ResumeToken); err != nil {
			return AgentState{}, fmt.Errorf("%w: %v", errBadRequest, err)
		}
	}
	m.mu.Lock()
	if m.status == StatusStarting || m.status == StatusRunning || m.status == StatusWaitingForInput {
		m.mu.Unlock()
		return AgentState{}, ErrAgentRunning
	}
	m.status, m.profile, m.lastErr, m.exit, m.turn, m.outcome = StatusStarting, req.Profile, "", nil, 0, ""
	m.msgs, m.current, m.running = nil, nil, false
	m.tools, m.plan, m.commands, m.modes, m.perms = map[string]*Message{}, nil, nil, nil, nil
	m.mu.Unlock()

	var err error
	if req.Profile.Protocol == ProtocolACP {
		err = m.startACP(ctx, req)
	} else {
		err = m.startPTY(ctx, req)
	}
	if err != nil {
		m.mu.Lock()
		m.status = StatusError
		m.fail(err.Error())
		m.mu.Unlock()
		return AgentState{}, err
	}
	m.mu.Lock()
	m.status = StatusWaitingForInput
	// messages replayed during a resume are history: complete
	for _, msg := range m.msgs {
		if !msg.Complete {
			m.updateMessage(msg, msg.Text, true)
		}
	}
	m.current = nil
	m.saveResume()
	d := m.drv
	m.journalStart(d.pid())
	m.events.publish(EventAgentStarted, AgentStartedData{PID: d.pid(), Protocol: req.Profile.Protocol, ResumeToken: m.token, Resumed: req.ResumeToken != ""})
	watched := make(chan struct{})
	m.watched = watched
	m.mu.Unlock()
	m.wg.Add(1)
	go m.watch(d, watched)
	return m.state(), nil
}

// watch reports the agent's exit.
func (m *manager) watch(d driver, watched chan struct{}) {
	defer m.wg.Done()
	defer close(watched)
	<-d.done()
	code := d.exitCode()
	m.journalStop(d.pid(), code)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.drv != d {
		return
	}
	if m.running {
		// The turn's own end may not have been seen yet: report it first,
		// so turn_finished always comes before agent_stopped.
		m.endTurn(m.turn, OutcomeInterrupted, fmt.Sprintf("the agent exited with code %d", code))
	}
	m.cancelPermissions()
	// The commands of an agent that is gone are ended; people still see them.
	m.terms.releaseAll()
	m.exit = &code
	m.status = StatusExited
	m.drv, m.pty, m.acp = nil, nil, nil
	m.events.publish(EventAgentStopped, AgentStoppedData{ExitCode: code})
}

func (m *manager) startACP(ctx context.Context, req StartRequest) error {
	argv, err := m.resolveArgv(req.Profile.Command, req.ResumeToken)
	if err != nil {
		return err
	}
	a, err := acpagent.Start(ctx, acpagent.Config{
		Argv: argv, Dir: m.workspace, Env: m.agentEnv(req.Profile), InitTimeout: m.initTimeout,
		ResumeToken: req.ResumeToken, Logger: m.log.Named("acp"), Credential: m.credential, Nice: m.nice,
		OnUpdate: m.onACPUpdate, OnOutputRead: m.events.settleChunks, OnToolCall: m.onToolCall, OnPlan: m.onPlan, OnCommands: m.onCommands, OnMode: m.onMode,
		OnPermission: m.onPermission, FS: agentFS{ws: m.ws}, Terminals: agentTerminals{m: m},
	})
	if errors.Is(err, acpagent.ErrResumeUnsupported) {
		f := false
		m.mu.Lock()
		m.probed = &f
		m.mu.Unlock()
		return fmt.Errorf("resume %s: %w", req.ResumeToken, ErrNotResumable)
	}
	if err != nil {
		return fmt.Errorf("start acp agent: %w", err)
	}
	m.mu.Lock()
	m.drv = &acpDriver{a: a}
	m.acp = a
	if md := a.Modes(); md != nil {
		m.modes = md
		// Published like a later mode change: a supervisor that follows
		// the events (not only GET /v1/agent) learns the modes offered.
		m.events.publish(EventModeUpdated, ModesData{Modes: *md})
	}
	m.token = a.SessionID()
	m.resumable = a.SupportsLoad()
	r := a.SupportsLoad()
	m.probed = &r
	m.mu.Unlock()
	return nil
}

func (m *manager) startPTY(ctx context.Context, req StartRequest) error {
	p := req.Profile
	token := req.ResumeToken
	args := p.NewArgs
	if token != "" {
		if !p.SupportsSessionResume || len(p.ResumeArgs) == 0 {
			return fmt.Errorf("resume %s: %w", token, ErrNotResumable)
		}
		args = p.ResumeArgs
	} else if p.SupportsSessionResume {
		token = newToken()
	}
	argv, err := m.resolveArgv(append(append([]string{}, p.Command...), args...), token)
	if err != nil {
		return err
	}
	d := &ptyDriver{m: m, ready: make(chan struct{})}
	parser := &ptyagent.Parser{OnReply: d.onReply, OnReplyStart: d.onReplyStart, OnPrompt: d.onPrompt, OnCancelled: d.onCancelled, OnInput: d.onInput}
	a, err := ptyagent.Start(ptyagent.Config{Argv: argv, Dir: m.workspace, Env: m.agentEnv(p), Logger: m.log.Named("pty"), OnOutput: parser.Feed, Credential: m.credential, Nice: m.nice})
	if err != nil {
		return fmt.Errorf("start pty agent: %w", err)
	}
	d.a = a
	// Wait until the program shows its prompt (or exits, or the bound passes).
	t := time.NewTimer(m.initTimeout)
	defer t.Stop()
	select {
	case <-d.ready:
	case <-a.Done():
		hist, _ := a.History()
		return fmt.Errorf("start pty agent: agent exited with code %d: %s", a.ExitCode(), truncateStr(strings.TrimSpace(string(hist)), 300))
	case <-t.C:
		a.Stop(2 * time.Second)
		return fmt.Errorf("start pty agent: no prompt %q within %s", ptyagent.PromptMarker, m.initTimeout)
	case <-ctx.Done():
		a.Stop(2 * time.Second)
		return ctx.Err()
	}
	m.mu.Lock()
	m.drv, m.pty, m.token, m.resumable = d, a, token, p.SupportsSessionResume
	m.mu.Unlock()
	return nil
}

func truncateStr(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// prompt starts a turn; the turn runs in the background.
func (m *manager) prompt(text string) (PromptResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.drv == nil {
		return PromptResponse{}, ErrNoAgent
	}
	if m.running {
		return PromptResponse{}, ErrTurnRunning
	}
	if m.status != StatusWaitingForInput {
		return PromptResponse{}, ErrAgentNotReady
	}
	m.turn++
	m.endStream()
	m.running, m.cancelled, m.current, m.plan = true, false, nil, nil
	m.status = StatusRunning
	msg := m.addMessage("user", text, true)
	d, turn := m.drv, m.turn
	m.wg.Add(1)
	go m.runTurn(d, turn, text)
	return PromptResponse{MessageID: msg.ID, Turn: turn}, nil
}

func (m *manager) runTurn(d driver, turn int, text string) {
	defer m.wg.Done()
	outcome, err := d.prompt(context.Background(), text)
	exited := false
	if err != nil {
		// A turn cut by the agent's death usually fails first with a closed
		// pipe: give the process a moment so the turn is reported as
		// interrupted by its exit, not as an agent error.
		t := time.NewTimer(time.Second)
		select {
		case <-d.done():
			exited = true
		case <-t.C:
		}
		t.Stop()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.running || m.turn != turn {
		return // watch ended the turn when the agent exited
	}
	switch {
	case err != nil && exited:
		m.endTurn(turn, OutcomeInterrupted, fmt.Sprintf("the agent exited with code %d", d.exitCode()))
	case err != nil:
		m.fail(fmt.Sprintf("turn %d: %v", turn, err))
		m.endTurn(turn, OutcomeError, err.Error())
	case outcome == "cancelled" || m.cancelled:
		m.endTurn(turn, OutcomeCancelled, "")
	default:
		m.endTurn(turn, OutcomeEndTurn, "")
	}
	if m.drv == d && m.status == StatusRunning {
		m.status = StatusWaitingForInput
	}
}

// endTurn completes the streamed reply and reports the turn's end once;
// m.mu must be held.
func (m *manager) endTurn(turn int, outcome, errText string) {
	m.endStream()
	// An agent that ended its turn waits for no answer any more.
	m.cancelPermissions()
	m.running = false
	m.outcome = outcome
	m.events.publish(EventTurnFinished, TurnFinishedData{Turn: turn, Outcome: outcome, Error: errText})
}

func (m *manager) cancel(ctx context.Context) error {
	m.mu.Lock()
	d := m.drv
	if d == nil {
		m.mu.Unlock()
		return ErrNoAgent
	}
	if !m.running {
		m.mu.Unlock()
		return ErrNoTurn
	}
	m.cancelled = true
	turn := m.turn
	// ACP: the client answers the cancelled turn's pending permission
	// requests cancelled.
	m.cancelPermissions()
	m.mu.Unlock()
	if err := d.cancel(ctx); err != nil {
		return err
	}
	// A cancel can reach the agent before the turn it cancels has begun
	// there (the prompt request is still on its way): repeat it a few times
	// while that turn still runs.
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		for i := 0; i < 10; i++ {
			select {
			case <-d.done():
				return
			case <-time.After(200 * time.Millisecond):
			}
			m.mu.Lock()
			still := m.running && m.turn == turn && m.drv == d
			m.mu.Unlock()
			if !still {
				return
			}
			rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_ = d.cancel(rctx)
			cancel()
		}
	}()
	return nil
}

// stop ends the agent and waits for it to exit.
func (m *manager) stop() (int, error) {
	m.mu.Lock()
	d, watched := m.drv, m.watched
	if d != nil {
		m.cancelPermissions()
	}
	m.mu.Unlock()
	if d == nil {
		return 0, ErrNoAgent
	}
	code := d.stop(5 * time.Second)
	// watch publishes agent_stopped: answer once it has, so a caller that
	// reads the events next finds it there.
	<-watched
	return code, nil
}

// shutdown stops any agent and waits for the manager's goroutines.
func (m *manager) shutdown() {
	m.mu.Lock()
	d := m.drv
	if d != nil {
		m.cancelPermissions()
	}
	m.mu.Unlock()
	if d != nil {
		d.stop(3 * time.Second)
	}
	m.terms.stopAll()
	m.wg.Wait()
}

// probe reports supports_session_resume for a profile.
func (m *manager) probe(ctx context.Context, p Profile) (bool, error) {
	if err := p.Validate(); err != nil {
		return false, fmt.Errorf("%w: %v", errBadRequest, err)
	}
	if p.Protocol == ProtocolPTY {
		return p.SupportsSessionResume && len(p.ResumeArgs) > 0, nil
	}
	argv, err := m.resolveArgv(p.Command, "")
	if err != nil {
		return false, err
	}
	ok, err := acpagent.Probe(ctx, acpagent.Config{Argv: argv, Dir: m.workspace, Env: m.agentEnv(p), InitTimeout: m.initTimeout, Logger: m.log.Named("probe"), Credential: m.credential, Nice: m.nice})
	if err != nil {
		m.events.publish(EventAgentError, AgentErrorData{Message: "probe: " + err.Error()})
		return false, fmt.Errorf("probe acp agent: %w", err)
	}
	m.mu.Lock()
	m.probed = &ok
	m.mu.Unlock()
	return ok, nil
}

// acpDriver adapts acpagent.Agent.
type acpDriver struct{ a *acpagent.Agent }

func (d *acpDriver) prompt(ctx context.Context, text string) (string, error) {
	return d.a.Prompt(ctx, text)
}
func (d *acpDriver) cancel(ctx context.Context) error { return d.a.Cancel(ctx) }
func (d *acpDriver) stop(grace time.Duration) int     { return d.a.Stop(grace) }
func (d *acpDriver) done() <-chan struct{}            { return d.a.Done() }
func (d *acpDriver) exitCode() int                    { return d.a.ExitCode() }
func (d *acpDriver) pid() int                         { return d.a.PID() }
func (d *acpDriver) model() string                    { return d.a.Model() }

// ptyDriver types prompts into the terminal and follows the parser.
type ptyDriver struct {
	m         *manager
	a         *ptyagent.Agent
	ready     chan struct{}
	readyOnce sync.Once

	mu        sync.Mutex
	turnDone  chan struct{}
	started   chan struct{} // closed when the current turn's reply line begins
	cancelled bool
	// typed is set while a turn typed in the agent's terminal (not sent as
	// a prompt) runs: its line and reply are part of the conversation.
	typed bool
}

// onInput records a line typed in the agent's terminal as a user message;
// the echo of a prompt agentctl typed itself is already recorded.
func (d *ptyDriver) onInput(text string) {
	d.mu.Lock()
	if d.turnDone != nil {
		d.mu.Unlock()
		return
	}
	d.typed = true
	d.mu.Unlock()
	m := d.m
	m.mu.Lock()
	defer m.mu.Unlock()
	m.current = nil
	m.addMessage("user", text, true)
}

func (d *ptyDriver) onReplyStart() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.started != nil {
		close(d.started)
		d.started = nil
	}
}

func (d *ptyDriver) onPrompt() {
	d.readyOnce.Do(func() { close(d.ready) })
	d.mu.Lock()
	if d.turnDone != nil {
		close(d.turnDone)
		d.turnDone = nil
	}
	typed := d.typed
	d.typed = false
	d.mu.Unlock()
	if typed {
		m := d.m
		m.mu.Lock()
		if m.current != nil && !m.running {
			m.updateMessage(m.current, m.current.Text, true)
			m.current = nil
		}
		m.mu.Unlock()
	}
}

func (d *ptyDriver) onCancelled() {
	d.mu.Lock()
	d.cancelled = true
	d.mu.Unlock()
}

func (d *ptyDriver) onReply(text string, final bool) {
	d.mu.Lock()
	inTurn := d.turnDone != nil || d.typed
	d.mu.Unlock()
	if !inTurn || text == "" {
		return
	}
	m := d.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.current == nil {
		m.current = m.addMessage("agent", text, false)
		return
	}
	m.updateMessage(m.current, text, false)
}

func (d *ptyDriver) prompt(ctx context.Context, text string) (string, error) {
	done := make(chan struct{})
	d.mu.Lock()
	d.turnDone, d.cancelled, d.started, d.typed = done, false, make(chan struct{}), false
	d.mu.Unlock()
	line := strings.NewReplacer("\r", " ", "\n", " ").Replace(text)
	if _, err := d.a.Write([]byte(line + "\r")); err != nil {
		return "", fmt.Errorf("type prompt: %w", err)
	}
	select {
	case <-done:
	case <-d.a.Done():
		return "", fmt.Errorf("agent exited with code %d during the turn", d.a.ExitCode())
	case <-ctx.Done():
		return "", ctx.Err()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cancelled {
		return "cancelled", nil
	}
	return "end_turn", nil
}

// cancel waits (bounded) until the agent has begun the turn, so the Ctrl-C
// is not swallowed by the line discipline together with unread input.
func (d *ptyDriver) cancel(ctx context.Context) error {
	d.mu.Lock()
	started := d.started
	d.mu.Unlock()
	if started != nil {
		t := time.NewTimer(d.m.initTimeout)
		select {
		case <-started:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	return d.a.Interrupt()
}
func (d *ptyDriver) stop(grace time.Duration) int { return d.a.Stop(grace) }
func (d *ptyDriver) done() <-chan struct{}        { return d.a.Done() }
func (d *ptyDriver) exitCode() int                { return d.a.ExitCode() }
func (d *ptyDriver) pid() int                     { return d.a.PID() }
func (d *ptyDriver) model() string                { return "" } // a pty agent reports none
