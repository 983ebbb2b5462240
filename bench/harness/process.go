package harness

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Process is a child process that can be kill -9'd and started again: its
// own process group, stdout and stderr appended to a log file. Servers of
// both stores under test (Paddock and etcd) run as one.
type Process struct {
	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// Start runs argv in dir with its output appended to logPath. It is an
// error to start a process that is still running.
func (p *Process) Start(dir, logPath string, argv ...string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		select {
		case <-p.exited:
		default:
			return fmt.Errorf("%s is already running (pid %d)", argv[0], p.cmd.Process.Pid)
		}
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	// A session of its own (and so a process group, which Kill signals),
	// as a service manager starts each service: Linux's scheduler groups
	// CPU by session (autogroup), and three servers sharing the harness's
	// session would weigh as one process against every agentctl session.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", argv[0], err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(exited)
	}()
	p.cmd, p.exited = cmd, exited
	return nil
}

// Kill sends SIGKILL and waits until the process is gone.
func (p *Process) Kill() {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-exited:
	default:
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-exited
	}
}

// Running reports whether the process is alive.
func (p *Process) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// PID is the process's pid (0 when never started).
func (p *Process) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// ChildPIDs lists the direct children of pid, forked from any of its threads:
// a Go program forks from whichever thread runs the goroutine, and
// /proc/PID/task/PID/children lists only the main thread's.
func ChildPIDs(pid int) []int {
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	var out []int
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, t.Name()))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}
