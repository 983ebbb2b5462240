package term

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/creack/pty"
	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/paddockhq/paddock/api/termproto"
	"github.com/paddockhq/paddock/shared/nice"
)

// ErrExited is returned when input is written to a terminal whose shell has exited.
var ErrExited = errors.New("term: shell has exited")

// ErrClosed is returned by a closed Terminal.
var ErrClosed = errors.New("term: terminal closed")

// ReadBufferBytes is the size of PTY reads: large reads keep throughput near the PTY's own.
const ReadBufferBytes = 32 << 10

// exitDrain bounds how long output is drained after the shell exits while some other
// process still holds the PTY open.
const exitDrain = 2 * time.Second

// TerminalConfig describes the program a Terminal runs.
type TerminalConfig struct {
	// Argv is the program and its arguments (required unless External is set; never run
	// through a shell).
	Argv []string
	// External, when set, makes the terminal show a PTY owned by someone else instead of
	// running Argv: it is called for the first generation and by Reset once the program
	// has exited. Such a terminal cannot be reset while its program runs.
	External func() (External, error)
	// Dir is the working directory ("" = the current one).
	Dir string
	// Env is the environment (nil = this process's); TERM defaults to xterm-256color.
	Env []string
	// Credential, when set, runs Argv as that user and group instead of this
	// process's own.
	Credential *syscall.Credential
	// Nice, when not 0, is the nice value the shell runs at (see
	// shared/nice).
	Nice int
	// Cols and Rows are the initial size (80x24 if zero).
	Cols, Rows int
	// ReplayBytes is the ring size per shell (DefaultReplayBytes if zero).
	ReplayBytes int
	// Logger receives diagnostics (a null logger if nil).
	Logger hclog.Logger
}

// State is a consistent view of a Terminal's current shell.
type State struct {
	Epoch    string
	Pid      int
	Ring     *Ring
	Exited   bool
	ExitCode int
	Closed   bool
	// Changed is closed at the next event: output, exit, reset or close.
	Changed <-chan struct{}
}

// Terminal is a PTY running a program whose output goes into a Ring without ever waiting
// for readers. Reset replaces the program with a fresh one under a new epoch; the
// Terminal itself lives until Close.
type Terminal struct {
	cfg TerminalConfig
	log hclog.Logger
	wg  sync.WaitGroup

	pacer atomic.Pointer[pacerFor]

	mu         sync.Mutex
	cur        *shell
	cols, rows int
	changed    chan struct{}
	closed     bool
}

// Pacer is how a connected reader holds a shell back so it never loses output: the PTY
// is not read while Next minus the reader's position reaches the limit. With no pacer set the shell never waits.
type Pacer struct {
	limit   atomic.Int64
	allowed atomic.Int64
	moved   chan struct{}
	gone    chan struct{}
	once    sync.Once
}

// NewPacer returns a pacer that lets the stream run limit bytes past from.
func NewPacer(from, limit int64) *Pacer {
	p := &Pacer{moved: make(chan struct{}, 1), gone: make(chan struct{})}
	p.allowed.Store(from)
	p.limit.Store(limit)
	return p
}

// Advance records that the reader has taken (or acknowledged) the stream up to pos.
func (p *Pacer) Advance(pos int64) {
	p.allowed.Store(pos)
	select {
	case p.moved <- struct{}{}:
	default:
	}
}

// SetLimit changes how far the stream may run ahead of the reader's position.
func (p *Pacer) SetLimit(limit int64) { p.limit.Store(limit) }

// Release lets the shell run freely for good (the reader left).
func (p *Pacer) Release() { p.once.Do(func() { close(p.gone) }) }

type shell struct {
	stop     chan struct{} // closed when the shell is being killed
	paused   atomic.Bool
	stopOnce sync.Once
	epoch    string
	cmd      *exec.Cmd
	ptmx     *os.File
	ext      External // set for a PTY owned by someone else (cmd and ptmx are nil)
	ring     *Ring
	pid      int
	exited   bool
	exitCode int
}

type pacerFor struct {
	epoch string
	p     *Pacer
}

// SetPacer makes the shell of the given epoch wait for p (nil: run freely). A pacer
// for another epoch is ignored.
func (t *Terminal) SetPacer(epoch string, p *Pacer) {
	if p == nil {
		t.pacer.Store(nil)
		return
	}
	t.pacer.Store(&pacerFor{epoch: epoch, p: p})
}

// hold blocks while the shell's pacer says the reader is too far behind.
func (t *Terminal) hold(s *shell) {
	for {
		pf := t.pacer.Load()
		if pf == nil || pf.epoch != s.epoch {
			return
		}
		p := pf.p
		if s.ring.Next()-p.allowed.Load() < p.limit.Load() {
			return
		}
		s.paused.Store(true)
		select {
		case <-p.moved:
		case <-p.gone:
		case <-s.stop:
			s.paused.Store(false)
			return
		}
		s.paused.Store(false)
	}
}

// NewTerminal starts cfg.Argv in a new PTY.
func NewTerminal(cfg TerminalConfig) (*Terminal, error) {
	if cfg.External == nil && (len(cfg.Argv) == 0 || cfg.Argv[0] == "") {
		return nil, errors.New("new terminal: empty argv")
	}
	if cfg.Cols == 0 && cfg.Rows == 0 {
		cfg.Cols, cfg.Rows = 80, 24
	}
	if err := termproto.CheckSize(cfg.Cols, cfg.Rows); err != nil {
		return nil, fmt.Errorf("new terminal: %w", err)
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	t := &Terminal{cfg: cfg, log: cfg.Logger, cols: cfg.Cols, rows: cfg.Rows, changed: make(chan struct{})}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.startLocked(); err != nil {
		return nil, err
	}
	return t, nil
}

func newEpoch() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (t *Terminal) env() []string {
	env := t.cfg.Env
	if env == nil {
		env = os.Environ()
	}
	env = append([]string(nil), env...)
	for _, kv := range env {
		if strings.HasPrefix(kv, "TERM=") {
			return env
		}
	}
	return append(env, "TERM=xterm-256color")
}

// startLocked starts a new shell generation; t.mu is held.
func (t *Terminal) startLocked() error {
	if t.cfg.External != nil {
		src, err := t.cfg.External()
		if err != nil {
			return fmt.Errorf("new terminal: %w", err)
		}
		t.startExternalLocked(src)
		return nil
	}
	cmd := exec.Command(t.cfg.Argv[0], t.cfg.Argv[1:]...)
	cmd.Dir = t.cfg.Dir
	cmd.Env = t.env()
	if t.cfg.Credential != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: t.cfg.Credential}
	}
	started, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: uint16(t.cols), Rows: uint16(t.rows)})
	if err != nil {
		return fmt.Errorf("start %q in pty: %w", t.cfg.Argv[0], err)
	}
	// The shell leads a new session: its group id is its pid.
	if err := nice.Lower(cmd.Process.Pid, t.cfg.Nice, t.log.Named("nice").Warn); err != nil {
		t.log.Warn("shell keeps this process's CPU priority", "error", err)
	}
	ptmx, err := pollable(started)
	if err != nil {
		killSession(cmd.Process.Pid)
		_ = cmd.Wait()
		return fmt.Errorf("start %q in pty: %w", t.cfg.Argv[0], err)
	}
	s := &shell{stop: make(chan struct{}), epoch: newEpoch(), cmd: cmd, ptmx: ptmx, ring: NewRing(t.cfg.ReplayBytes), pid: cmd.Process.Pid}
	t.cur = s
	t.log.Debug("shell started", "pid", s.pid, "epoch", s.epoch)
	readerDone := make(chan struct{})
	t.wg.Add(2)
	go func() {
		defer t.wg.Done()
		defer close(readerDone)
		t.readLoop(s)
	}()
	go func() {
		defer t.wg.Done()
		t.waitLoop(s, readerDone)
	}()
	return nil
}

// pollable returns the PTY master f as a non-blocking file served by Go's poller, and
// closes f. creack/pty's ioctls call Fd(), which leaves the descriptor in blocking mode:
// every read would then hold an OS thread in the kernel, and a shell's wake-up (a
// keystroke's echo) would wait for a free P behind whatever else runs, such as another
// terminal's flood. The new descriptor is a duplicate, so the file f owned is closed.
func pollable(f *os.File) (*os.File, error) {
	defer func() { _ = f.Close() }()
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("duplicate pty master: %w", err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("make pty master non-blocking: %w", err)
	}
	return os.NewFile(uintptr(fd), f.Name()), nil
}

// setWinsize sets the window size of PTY master f without calling Fd (which would put
// it back in blocking mode).
func setWinsize(f *os.File, cols, rows int) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ioErr error
	err = rc.Control(func(fd uintptr) {
		ioErr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Col: uint16(cols), Row: uint16(rows)})
	})
	if err != nil {
		return err
	}
	return ioErr
}

// readLoop copies PTY output into the ring until the PTY reports an error (EIO once
// every holder of the slave side is gone).
func (t *Terminal) readLoop(s *shell) {
	buf := make([]byte, ReadBufferBytes)
	for {
		t.hold(s)
		n, err := s.ptmx.Read(buf)
		if n > 0 {
			_, _ = s.ring.Write(buf[:n])
			t.mu.Lock()
			t.signalLocked()
			t.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// waitLoop reaps the shell, ends whatever it left in its session, lets the reader drain
// and records the exit.
func (t *Terminal) waitLoop(s *shell, readerDone <-chan struct{}) {
	err := s.cmd.Wait()
	code := 0
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				code = 128 + int(ws.Signal())
			}
		} else {
			code = -1
		}
	}
	killSession(s.pid)
	// Let the reader drain what is left; give up only if the PTY stays open without the
	// reader being held back by a slow client (a stray process outside the session).
	timer := time.NewTimer(exitDrain)
	defer timer.Stop()
drain:
	for {
		select {
		case <-readerDone:
			break drain
		case <-s.stop:
			break drain
		case <-timer.C:
			if s.paused.Load() {
				timer.Reset(exitDrain)
				continue
			}
			t.log.Warn("pty still open after shell exit", "pid", s.pid)
			break drain
		}
	}
	_ = s.ptmx.Close()
	t.mu.Lock()
	s.exited, s.exitCode = true, code
	t.signalLocked()
	t.mu.Unlock()
	t.log.Debug("shell exited", "pid", s.pid, "code", code)
}

// killSession kills every process of the session led by sid (the shell, its jobs in
// other process groups and anything they left behind).
func killSession(sid int) {
	_ = syscall.Kill(-sid, syscall.SIGKILL)
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// Fields after the ")" that ends comm: state ppid pgrp session …
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) > 3 && f[3] == strconv.Itoa(sid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// kill ends the shell's session and unblocks its reader. A PTY owned by someone else
// is only no longer watched.
func (s *shell) kill() {
	s.stopOnce.Do(func() { close(s.stop) })
	if s.ext == nil {
		killSession(s.pid)
	}
}

func (t *Terminal) signalLocked() {
	close(t.changed)
	t.changed = make(chan struct{})
}

// State returns the current shell's epoch, pid, ring and exit status.
func (t *Terminal) State() State {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.cur
	return State{Epoch: s.epoch, Pid: s.pid, Ring: s.ring, Exited: s.exited, ExitCode: s.exitCode, Closed: t.closed, Changed: t.changed}
}

// Pid is the current shell's process id.
func (t *Terminal) Pid() int { return t.State().Pid }

// Epoch identifies the current shell generation; offsets are per epoch.
func (t *Terminal) Epoch() string { return t.State().Epoch }

// Ring is the current shell's replay buffer.
func (t *Terminal) Ring() *Ring { return t.State().Ring }

// Exited reports whether the current shell has exited, and its exit code.
func (t *Terminal) Exited() (bool, int) {
	st := t.State()
	return st.Exited, st.ExitCode
}

// Size is the current window size.
func (t *Terminal) Size() (cols, rows int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cols, t.rows
}

// Resize sets the PTY's window size (kept for later shells too).
func (t *Terminal) Resize(cols, rows int) error {
	if err := termproto.CheckSize(cols, rows); err != nil {
		return fmt.Errorf("resize: %w", err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return ErrClosed
	}
	t.cols, t.rows = cols, rows
	if t.cur.exited {
		return nil
	}
	if t.cur.ext != nil {
		if err := t.cur.ext.Resize(cols, rows); err != nil {
			return fmt.Errorf("resize external pty to %dx%d: %w", cols, rows, err)
		}
		return nil
	}
	if err := setWinsize(t.cur.ptmx, cols, rows); err != nil {
		return fmt.Errorf("resize pty to %dx%d: %w", cols, rows, err)
	}
	return nil
}

// Write sends input to the shell. It fails with ErrExited once the shell has exited.
func (t *Terminal) Write(p []byte) (int, error) {
	t.mu.Lock()
	s, closed := t.cur, t.closed
	t.mu.Unlock()
	if closed {
		return 0, ErrClosed
	}
	if s.exited {
		return 0, ErrExited
	}
	if s.ext != nil {
		n, err := s.ext.Write(p)
		if err != nil {
			return n, fmt.Errorf("write to external pty of pid %d: %w", s.pid, err)
		}
		return n, nil
	}
	n, err := s.ptmx.Write(p)
	if err != nil {
		return n, fmt.Errorf("write to pty of pid %d: %w", s.pid, err)
	}
	return n, nil
}

// Reset kills the current shell with its whole session and starts a fresh one under a
// new epoch (with a new, empty ring). It also revives a shell that has exited. A
// terminal showing an External PTY fails with ErrNotResettable while its program runs,
// and moves to its owner's new program once it has exited (ErrNoNewProgram if none).
func (t *Terminal) Reset() error {
	if t.cfg.External != nil {
		return t.resetExternal()
	}
	// The lock is held from the kill to the new shell so nobody sees the killed shell
	// as the current one that "exited" (its exit would be announced to the client).
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return ErrClosed
	}
	t.cur.kill()
	if err := t.startLocked(); err != nil {
		return fmt.Errorf("reset: %w", err)
	}
	t.signalLocked()
	return nil
}

// Close kills the shell and waits for the terminal's goroutines to end.
func (t *Terminal) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		t.wg.Wait()
		return nil
	}
	t.closed = true
	cur := t.cur
	t.signalLocked()
	t.mu.Unlock()
	cur.kill()
	t.wg.Wait()
	return nil
}

// SetPacerIf replaces the pacer with next only if old is still the one installed.
func (t *Terminal) SetPacerIf(old *Pacer, next *Pacer) {
	cur := t.pacer.Load()
	if cur == nil || cur.p != old {
		return
	}
	if next == nil {
		t.pacer.CompareAndSwap(cur, nil)
		return
	}
	t.pacer.CompareAndSwap(cur, &pacerFor{epoch: cur.epoch, p: next})
}
