package agentctl

import (
	"errors"
	"time"

	"golang.org/x/sys/unix"
)

// waitExited waits until the process pid has exited (it is gone, or a
// zombie its parent has not reaped) or timeout passes, and reports whether
// it exited. The processes it waits for are not agentctl's children (an
// agent an earlier agentctl started, a host's detached instance), so there
// is no wait(2) for them: a pidfd (Linux 5.3 and later) becomes readable
// when its process exits, which poll(2) waits for. Where pidfd_open is not
// available it falls back to looking at /proc every few milliseconds.
func waitExited(pid int, timeout time.Duration) bool {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return true // already gone
	}
	if err != nil {
		return pollExited(pid, timeout)
	}
	defer unix.Close(fd)
	deadline := time.Now().Add(timeout)
	for {
		ms := int(time.Until(deadline) / time.Millisecond)
		if ms < 0 {
			ms = 0
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, ms)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return pollExited(pid, time.Until(deadline))
		case n > 0:
			return true
		case ms == 0:
			return false
		}
	}
}

// pollExited is waitExited without pidfds.
func pollExited(pid int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for alive(pid) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond) // no pidfd: nothing to wait on for a non-child
	}
	return true
}
