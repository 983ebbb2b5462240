package plugins

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/paddockhq/paddock/shared/runtime"
)

// killTimeout bounds stopping one plugin process.
const killTimeout = 5 * time.Second

// processGone reports whether pid no longer runs: absent from /proc, or a
// zombie. A plugin reattached from a previous supervisor is not our child, so
// when it dies it stays a zombie until its parent (init, or whatever adopted
// it) reaps it, and some inits in containers never do; go-plugin's own exit
// check (signal 0) cannot see the difference.
func processGone(pid int) bool {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return true
	}
	// "PID (COMM) STATE …"; COMM may hold spaces and parentheses.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 || i+2 >= len(data) {
		return true
	}
	return data[i+2] == 'Z' || data[i+2] == 'X'
}

// killClient stops c's plugin process (go-plugin's graceful shutdown, then
// SIGKILL). go-plugin's Kill waits until a reattached process disappears,
// which an unreaped zombie never does; so the wait is bounded, and after
// killTimeout the process is killed by pid (when it still runs) and the
// waiting goroutine is left to go-plugin.
func (m *Manager) killClient(c *runtime.Client, pid int) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Kill()
	}()
	t := time.NewTimer(killTimeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		if pid > 0 && !processGone(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		m.logger.Warn("plugin process did not finish stopping in time; moving on", "pid", pid)
	}
}
