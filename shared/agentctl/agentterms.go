package agentctl

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/shared/agentctl/acpagent"
	"github.com/paddockhq/paddock/shared/agentctl/ptyagent"
)

// The commands an ACP agent runs (terminal/create) are named terminals of
// the session, cmd-1, cmd-2, … (never reused while agentctl runs): each
// runs its argv (no shell) in a PTY, as the agent's user, in a directory
// of the workspace, and is served to people live and replayed like any
// terminal (Server.CommandTerminal, plugged into shared/term as an
// External), read-only: input from people is refused. The agent's terminal
// id is the name. After terminal/release the agent can no longer use it,
// but it stays listed and replayable until agentctl ends (the oldest
// released ones beyond maxKeptTerminals are forgotten).

// CommandTerminalPrefix begins the names of the agent's command terminals.
const CommandTerminalPrefix = "cmd-"

// maxKeptTerminals bounds the released terminals kept for people to see
// (each holds up to ptyagent.DefaultHistory bytes of output).
const maxKeptTerminals = 32

// ErrReadOnly: a command terminal takes no input from people.
var ErrReadOnly = errors.New("this terminal runs a command of the agent: it is read-only")

// errUnknownTerminal: the agent named a terminal it does not hold.
var errUnknownTerminal = errors.New("unknown terminal id")

// CommandTerminal is one command the agent runs. Its methods other than
// Name, Command and Released make it a shared/term External (Resize takes
// ints; Write refuses input).
type CommandTerminal struct {
	name string
	argv []string
	p    *ptyagent.Agent

	mu       sync.Mutex
	released bool
	limit    int // the agent's outputByteLimit (0: none)
}

// limitOutput records the agent's outputByteLimit; t.mu must be held.
func (t *CommandTerminal) limitOutput(n int) { t.limit = n }

// Name is the terminal's name (cmd-N).
func (t *CommandTerminal) Name() string { return t.name }

// Command is the argv it runs.
func (t *CommandTerminal) Command() []string { return append([]string(nil), t.argv...) }

// Write refuses people's input while the agent owns the terminal.
func (t *CommandTerminal) Write(p []byte) (int, error) { return 0, ErrReadOnly }

// Resize is ignored: the command's output is the agent's, formatted for
// the size it started with, whoever watches.
func (t *CommandTerminal) Resize(cols, rows int) error { return nil }

// History returns recent output and the offset of its first byte.
func (t *CommandTerminal) History() ([]byte, int64) { return t.p.History() }

// Subscribe returns output from now on (closed at the command's exit).
func (t *CommandTerminal) Subscribe() (<-chan []byte, func()) { return t.p.Subscribe() }

// Done is closed when the command has exited.
func (t *CommandTerminal) Done() <-chan struct{} { return t.p.Done() }

// ExitCode is the command's exit code (128+N for signal N), valid once Done.
func (t *CommandTerminal) ExitCode() int { return t.p.ExitCode() }

// PID is the command's process id.
func (t *CommandTerminal) PID() int { return t.p.PID() }

func (t *CommandTerminal) running() bool {
	select {
	case <-t.p.Done():
		return false
	default:
		return true
	}
}

func (t *CommandTerminal) info() api.Terminal {
	ti := api.Terminal{Name: t.name, Command: t.Command(), Owner: OwnerAgent, Running: t.running(), ReadOnly: true}
	if !ti.Running {
		c := t.p.ExitCode()
		ti.ExitCode = &c
	}
	return ti
}

// exit is how the command ended (nil while it runs).
func (t *CommandTerminal) exit() *acpagent.TerminalExit {
	if t.running() {
		return nil
	}
	if sig := t.p.Signal(); sig != "" {
		return &acpagent.TerminalExit{Signal: &sig}
	}
	c := t.p.ExitCode()
	return &acpagent.TerminalExit{ExitCode: &c}
}

// commandTerminals holds a session's command terminals for agentctl's
// lifetime.
type commandTerminals struct {
	wg    sync.WaitGroup // releaseAll's stops
	mu    sync.Mutex
	next  int
	terms []*CommandTerminal // oldest first
}

func (c *commandTerminals) get(name string) (*CommandTerminal, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range c.terms {
		if t.name == name {
			return t, true
		}
	}
	return nil, false
}

// held is the terminal the agent names, unless it released it.
func (c *commandTerminals) held(id string) (*CommandTerminal, error) {
	t, ok := c.get(id)
	if ok {
		t.mu.Lock()
		ok = !t.released
		t.mu.Unlock()
	}
	if !ok {
		return nil, fmt.Errorf("terminal %q: %w", id, errUnknownTerminal)
	}
	return t, nil
}

func (c *commandTerminals) add(argv []string, start func(name string) (*ptyagent.Agent, error)) (*CommandTerminal, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.next++
	name := CommandTerminalPrefix + strconv.Itoa(c.next)
	p, err := start(name)
	if err != nil {
		return nil, err
	}
	t := &CommandTerminal{name: name, argv: argv, p: p}
	c.terms = append(c.terms, t)
	// Forget the oldest released terminals beyond the bound.
	released := 0
	for _, x := range c.terms {
		if x.isReleased() {
			released++
		}
	}
	for i := 0; i < len(c.terms) && released > maxKeptTerminals; {
		if c.terms[i].isReleased() && !c.terms[i].running() {
			c.terms = append(c.terms[:i], c.terms[i+1:]...)
			released--
			continue
		}
		i++
	}
	return t, nil
}

func (t *CommandTerminal) isReleased() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.released
}

func (c *commandTerminals) list() []api.Terminal {
	c.mu.Lock()
	terms := append([]*CommandTerminal(nil), c.terms...)
	c.mu.Unlock()
	out := make([]api.Terminal, 0, len(terms))
	for _, t := range terms {
		out = append(out, t.info())
	}
	return out
}

// stopAll ends every command still running and waits for the ones being
// ended (agentctl is closing).
func (c *commandTerminals) stopAll() {
	c.mu.Lock()
	terms := append([]*CommandTerminal(nil), c.terms...)
	c.mu.Unlock()
	for _, t := range terms {
		if t.running() {
			t.p.Stop(time.Second)
		}
	}
	c.wg.Wait()
}

// releaseAll ends every running command and releases every terminal (the
// agent that held them is gone).
func (c *commandTerminals) releaseAll() {
	c.mu.Lock()
	terms := append([]*CommandTerminal(nil), c.terms...)
	c.mu.Unlock()
	for _, t := range terms {
		t.mu.Lock()
		t.released = true
		t.mu.Unlock()
		if t.running() {
			// Not waited for here (the caller holds the manager's lock):
			// SIGTERM, then SIGKILL a second later, in the background;
			// stopAll waits for it.
			c.wg.Add(1)
			go func() {
				defer c.wg.Done()
				t.p.Stop(time.Second)
			}()
		}
	}
}

// agentTerminals serves the running agent's terminal/* methods.
type agentTerminals struct{ m *manager }

// Create implements acpagent.Terminals.
func (a agentTerminals) Create(ctx context.Context, req acpagent.TerminalRequest) (string, error) {
	m := a.m
	dir := m.workspace
	if req.Cwd != "" {
		var err error
		if dir, err = commandDir(m.workspace, req.Cwd); err != nil {
			return "", err
		}
	}
	m.mu.Lock()
	env := append(m.agentEnv(m.profile), req.Env...)
	m.mu.Unlock()
	path, err := lookPath(req.Command, env)
	if err != nil {
		return "", fmt.Errorf("terminal/create: %w", err)
	}
	argv := append([]string{req.Command}, req.Args...)
	t, err := m.terms.add(argv, func(name string) (*ptyagent.Agent, error) {
		return ptyagent.Start(ptyagent.Config{Argv: append([]string{path}, req.Args...), Dir: dir, Env: env,
			Logger: m.log.Named(name), Credential: m.credential, Nice: m.nice})
	})
	if err != nil {
		return "", fmt.Errorf("terminal/create %q: %w", req.Command, err)
	}
	t.mu.Lock()
	t.limitOutput(req.OutputByteLimit)
	t.mu.Unlock()
	m.log.Info("agent command started", "terminal", t.name, "argv", argv, "dir", dir, "pid", t.PID())
	return t.name, nil
}

// commandDir is the agent's cwd for a command: absolute or relative to the
// workspace, an existing directory inside it (symlinks resolved).
func commandDir(ws, cwd string) (string, error) {
	p := cwd
	if !filepath.IsAbs(p) {
		p = filepath.Join(ws, p)
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", fmt.Errorf("cwd %q: %w", cwd, err)
	}
	if _, err := relInside(evalOr(ws), real); err != nil {
		return "", fmt.Errorf("cwd %q: %w", cwd, err)
	}
	if st, err := os.Stat(real); err != nil || !st.IsDir() {
		return "", fmt.Errorf("cwd %q is not a directory", cwd)
	}
	return real, nil
}

// Output implements acpagent.Terminals: the output kept (line ends as
// "\n": the PTY's "\r\n" is its own), cut from the start to the agent's
// outputByteLimit at a character boundary.
func (a agentTerminals) Output(id string) (acpagent.TerminalOutput, error) {
	t, err := a.m.terms.held(id)
	if err != nil {
		return acpagent.TerminalOutput{}, err
	}
	// exit is read first: once it is set, the history is the whole output.
	exit := t.exit()
	hist, off := t.p.History()
	out := strings.ReplaceAll(string(hist), "\r\n", "\n")
	truncated := off > 0
	t.mu.Lock()
	limit := t.limit
	t.mu.Unlock()
	if limit > 0 && len(out) > limit {
		out = out[len(out)-limit:]
		for len(out) > 0 && !utf8.RuneStart(out[0]) {
			out = out[1:]
		}
		truncated = true
	}
	return acpagent.TerminalOutput{Output: out, Truncated: truncated, Exit: exit}, nil
}

// WaitForExit implements acpagent.Terminals.
func (a agentTerminals) WaitForExit(ctx context.Context, id string) (acpagent.TerminalExit, error) {
	t, err := a.m.terms.held(id)
	if err != nil {
		return acpagent.TerminalExit{}, err
	}
	select {
	case <-t.p.Done():
		return *t.exit(), nil
	case <-ctx.Done():
		return acpagent.TerminalExit{}, ctx.Err()
	}
}

// Kill implements acpagent.Terminals: SIGTERM to the command's process
// group, SIGKILL a second later.
func (a agentTerminals) Kill(id string) error {
	t, err := a.m.terms.held(id)
	if err != nil {
		return err
	}
	t.p.Stop(time.Second)
	return nil
}

// Release implements acpagent.Terminals: the command is ended and the id
// forgotten by the agent; people still see the terminal.
func (a agentTerminals) Release(id string) error {
	t, err := a.m.terms.held(id)
	if err != nil {
		return err
	}
	if t.running() {
		t.p.Stop(time.Second)
	}
	t.mu.Lock()
	t.released = true
	t.mu.Unlock()
	return nil
}
