// Package ptyagent runs a terminal agent program in a PTY (creack/pty), keeps
// its recent output, lets callers type into it and subscribe to its output
// (so the PTY can be served as the terminal named "agent"), and parses the
// line convention of Paddock's demo agent into replies and turn boundaries:
//
//   - a line that is exactly the prompt ("demo> ") means the agent waits for input;
//   - a line starting with "agent: " is a reply; its text may arrive in chunks;
//   - "[turn cancelled]" reports a turn interrupted by Ctrl-C.
//
// Programs that do not follow the convention still run and can be driven
// through the terminal; agentctl just cannot see their turn boundaries.
//
// This package must not import agentctl or anything under supervisor/.
package ptyagent

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"github.com/hashicorp/go-hclog"

	"github.com/paddockhq/paddock/shared/nice"
	"golang.org/x/sys/unix"
)

// DefaultHistory is how many bytes of recent output an Agent keeps.
const DefaultHistory = 256 << 10

// Config describes how to run one terminal agent.
type Config struct {
	Argv       []string
	Dir        string
	Env        []string
	Cols, Rows uint16
	Logger     hclog.Logger
	// OnOutput, when set, is called with every chunk of output (in order,
	// from the reader goroutine; it must not block).
	OnOutput func(p []byte)
	// Credential, when set, runs the program as that user and group
	// (agentctl's -agent-user) instead of agentctl's own.
	Credential *syscall.Credential
	// Nice, when not 0, is the nice value the program runs at (agentctl's
	// -nice; see shared/nice).
	Nice int
}

// Agent is one program running in a PTY.
type Agent struct {
	cmd  *exec.Cmd
	ptmx *os.File
	log  hclog.Logger

	mu      sync.Mutex
	history []byte
	offset  int64 // absolute stream offset of history[0]
	subs    map[int]chan []byte
	nextSub int

	done     chan struct{}
	exitCode int
	signal   string // the signal that ended the program ("" when it exited)
	wg       sync.WaitGroup
	onOutput func([]byte)
}

// Start runs argv in a new PTY.
func Start(cfg Config) (*Agent, error) {
	if len(cfg.Argv) == 0 {
		return nil, errors.New("empty agent command")
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Cols == 0 {
		cfg.Cols = 120
	}
	if cfg.Rows == 0 {
		cfg.Rows = 40
	}
	cmd := exec.Command(cfg.Argv[0], cfg.Argv[1:]...)
	cmd.Dir = cfg.Dir
	cmd.Env = cfg.Env
	if cfg.Credential != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cfg.Credential}
	}
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: cfg.Cols, Rows: cfg.Rows})
	if err != nil {
		return nil, fmt.Errorf("start agent %q in a pty: %w", cfg.Argv[0], err)
	}
	// The PTY's program leads a new session: its group id is its pid.
	if err := nice.Lower(cmd.Process.Pid, cfg.Nice, cfg.Logger.Named("nice").Warn); err != nil {
		cfg.Logger.Warn("agent keeps agentctl's CPU priority", "error", err)
	}
	a := &Agent{cmd: cmd, ptmx: ptmx, log: cfg.Logger, subs: map[int]chan []byte{}, done: make(chan struct{}), onOutput: cfg.OnOutput}
	a.wg.Add(1)
	go a.readLoop()
	return a, nil
}

func (a *Agent) readLoop() {
	defer a.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := a.ptmx.Read(buf)
		if n > 0 {
			p := append([]byte(nil), buf[:n]...)
			a.mu.Lock()
			a.history = append(a.history, p...)
			if over := len(a.history) - DefaultHistory; over > 0 {
				a.history = append([]byte(nil), a.history[over:]...)
				a.offset += int64(over)
			}
			for _, ch := range a.subs {
				select {
				case ch <- p:
				default: // a slow subscriber loses output rather than blocking the agent
				}
			}
			a.mu.Unlock()
			if a.onOutput != nil {
				a.onOutput(p)
			}
		}
		if err != nil {
			break
		}
	}
	err := a.cmd.Wait()
	code := -1
	if a.cmd.ProcessState != nil {
		code = a.cmd.ProcessState.ExitCode()
		if ws, ok := a.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
			a.signal = unix.SignalName(ws.Signal())
		}
	}
	if err != nil && code == -1 {
		a.log.Debug("agent wait", "error", err)
	}
	a.exitCode = code
	a.mu.Lock()
	for id, ch := range a.subs {
		close(ch)
		delete(a.subs, id)
	}
	a.mu.Unlock()
	_ = a.ptmx.Close()
	close(a.done)
}

// Write types p into the agent's terminal.
func (a *Agent) Write(p []byte) (int, error) {
	select {
	case <-a.done:
		return 0, errors.New("agent has exited")
	default:
	}
	return a.ptmx.Write(p)
}

// Resize changes the terminal size.
func (a *Agent) Resize(cols, rows uint16) error {
	return pty.Setsize(a.ptmx, &pty.Winsize{Cols: cols, Rows: rows})
}

// History returns the recent output and the absolute offset of its first byte.
func (a *Agent) History() ([]byte, int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]byte(nil), a.history...), a.offset
}

// Subscribe returns a channel of output chunks produced from now on and a
// function that ends the subscription. The channel is closed when the agent
// exits. A subscriber that does not keep up loses chunks.
func (a *Agent) Subscribe() (<-chan []byte, func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ch := make(chan []byte, 256)
	select {
	case <-a.done:
		close(ch)
		return ch, func() {}
	default:
	}
	id := a.nextSub
	a.nextSub++
	a.subs[id] = ch
	return ch, func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		if c, ok := a.subs[id]; ok {
			close(c)
			delete(a.subs, id)
		}
	}
}

// PID is the agent's process id.
func (a *Agent) PID() int { return a.cmd.Process.Pid }

// Done is closed when the agent has exited and its output is drained.
func (a *Agent) Done() <-chan struct{} { return a.done }

// ExitCode is valid once Done is closed.
func (a *Agent) ExitCode() int { <-a.done; return a.exitCode }

// Signal is the name of the signal that ended the program (SIGKILL…), ""
// when it exited by itself; valid once Done is closed.
func (a *Agent) Signal() string { <-a.done; return a.signal }

// Interrupt types Ctrl-C.
func (a *Agent) Interrupt() error {
	_, err := a.Write([]byte{0x03})
	return err
}

// Stop sends SIGTERM (then SIGHUP by closing) and SIGKILL after grace.
func (a *Agent) Stop(grace time.Duration) int {
	_ = syscall.Kill(-a.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-a.done:
	case <-time.After(grace):
		_ = syscall.Kill(-a.cmd.Process.Pid, syscall.SIGKILL)
		_ = a.cmd.Process.Kill()
	}
	code := a.ExitCode()
	a.wg.Wait()
	return code
}
