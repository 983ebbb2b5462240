package term

import (
	"errors"
	"fmt"
)

// External is a PTY owned by someone else (agentctl's pty agent) that a Terminal can
// show: its output is copied into the Terminal's ring, input and resizes go to it. The
// Terminal never kills it; Close only stops watching. shared/agentctl/ptyagent.Agent
// fits with a Resize adapter (it takes uint16).
type External interface {
	// Write types input into the PTY.
	Write(p []byte) (int, error)
	// Resize sets the PTY's window size.
	Resize(cols, rows int) error
	// History returns recent output and the owner's offset of its first byte.
	History() ([]byte, int64)
	// Subscribe returns output produced from now on, closed when the program exits,
	// and a function that ends the subscription.
	Subscribe() (<-chan []byte, func())
	// Done is closed when the program has exited and its output is drained.
	Done() <-chan struct{}
	// ExitCode is the program's exit code, valid once Done is closed.
	ExitCode() int
	// PID is the program's process id.
	PID() int
}

// ErrNotResettable is returned by Reset on a terminal that shows an External PTY whose
// program is still running: the Terminal does not own it, so it cannot replace it.
var ErrNotResettable = errors.New("term: this terminal shows a program it does not own; it cannot be reset while that program runs")

// ErrNoNewProgram is returned by Reset on an External terminal whose program exited
// when its owner has not started a new one.
var ErrNoNewProgram = errors.New("term: the program has exited and no new one is running")

// subscribeAttempts bounds the retries that line a subscription up with History.
const subscribeAttempts = 5

// subscribeFrom subscribes to src and returns the history that precedes the
// subscription's first chunk. It retries while output arrives between the calls; after
// subscribeAttempts a few bytes may appear twice (only under a continuous flood).
func subscribeFrom(src External) (<-chan []byte, func(), []byte) {
	for i := 1; ; i++ {
		h1, off1 := src.History()
		ch, cancel := src.Subscribe()
		h2, off2 := src.History()
		if off1+int64(len(h1)) == off2+int64(len(h2)) || i == subscribeAttempts {
			return ch, cancel, h2
		}
		cancel()
	}
}

// startExternalLocked starts a generation that shows src (t.mu is held).
func (t *Terminal) startExternalLocked(src External) {
	ch, cancel, hist := subscribeFrom(src)
	s := &shell{stop: make(chan struct{}), epoch: newEpoch(), ext: src, ring: NewRing(t.cfg.ReplayBytes), pid: src.PID()}
	_, _ = s.ring.Write(hist)
	t.cur = s
	_ = src.Resize(t.cols, t.rows)
	t.log.Debug("showing external pty", "pid", s.pid, "epoch", s.epoch)
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		defer cancel()
		t.pumpExternal(s, ch)
	}()
}

// pumpExternal copies the program's output into the ring until it exits (recording
// the exit) or the generation is stopped. It never holds the program back: a client
// that falls a ring behind gets a full replay.
func (t *Terminal) pumpExternal(s *shell, ch <-chan []byte) {
	for {
		select {
		case <-s.stop:
			return
		case p, ok := <-ch:
			if !ok {
				select {
				case <-s.ext.Done():
				case <-s.stop:
					return
				}
				code := s.ext.ExitCode()
				t.mu.Lock()
				s.exited, s.exitCode = true, code
				t.signalLocked()
				t.mu.Unlock()
				t.log.Debug("external program exited", "pid", s.pid, "code", code)
				return
			}
			_, _ = s.ring.Write(p)
			t.mu.Lock()
			t.signalLocked()
			t.mu.Unlock()
		}
	}
}

// resetExternal moves an External terminal whose program exited to the owner's new
// program, under a new epoch.
func (t *Terminal) resetExternal() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return ErrClosed
	}
	old := t.cur
	if !old.exited {
		return ErrNotResettable
	}
	src, err := t.cfg.External()
	if err != nil {
		return fmt.Errorf("reset: %w", err)
	}
	select {
	case <-src.Done():
		return ErrNoNewProgram
	default:
	}
	if src.PID() == old.pid {
		return ErrNoNewProgram
	}
	old.stopOnce.Do(func() { close(old.stop) })
	t.startExternalLocked(src)
	t.signalLocked()
	return nil
}
