package nice

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Min is the smallest nice value (the highest priority).
const Min = -20

// CheckRaise reports whether n is a nice value the server may raise itself
// to: Min to 0 (unchanged).
func CheckRaise(n int) error {
	if n < Min || n > 0 {
		return fmt.Errorf("nice must be between %d and 0, got %d", Min, n)
	}
	return nil
}

// Raise sets this process to nice value n, a higher priority than the
// default 0, so that the programs it serves cannot starve it: every thread
// of it, and, when it leads a session of its own (as a service manager or
// the bench harness starts it), that session's scheduling group, which is
// what the kernel weighs against other sessions where it groups by session
// (autogroup). What the process starts afterwards inherits the threads'
// value; the sessions they start (agentctl's) get a scheduling group of
// their own at 0, below this one.
//
// Why: on a host whose CPUs are oversubscribed (200 agents streaming
// through their agentctls on 2 CPUs), every agentctl session weighs as
// much as a server. With the servers' groups at -5 the prompt storm's chunk
// latency p99 fell from ~10 s to 2-3 s in alternating runs; the agents, at
// 19, then waited longer for a CPU, and a prompt's answer with them (see
// server.nice, which is off by default).
//
// A process that shares its session (one started from a shell) keeps the
// session's group: raising it would raise the shell and all it runs. n == 0,
// or a value at or above the current priority, changes nothing. Raising a
// priority needs root or CAP_SYS_NICE: without it Raise changes nothing and
// returns an error wrapping os.ErrPermission. group reports whether the
// scheduling group is (or, past the kernel's rate limit, will soon be) at n;
// a later failure of that goes to warn.
func Raise(n int, warn func(msg string, args ...any)) (group bool, err error) {
	if err := CheckRaise(n); err != nil {
		return false, err
	}
	if n == 0 {
		return false, nil
	}
	// Threads the Go runtime starts meanwhile inherit the value of the
	// thread that starts them, which may not have been raised yet: go over
	// them until a pass finds none to raise.
	for pass := 0; pass < 5; pass++ {
		raised, err := raiseThreads(n)
		if err != nil {
			return false, err
		}
		if !raised {
			break
		}
	}
	pid := os.Getpid()
	if sid, err := unix.Getsid(0); err != nil || sid != pid {
		return false, nil
	}
	cur, ok, err := GroupOf(pid)
	if err != nil || !ok {
		return false, err
	}
	if cur <= n {
		return true, nil
	}
	err = setAutogroup(pid, n)
	if errors.Is(err, unix.EAGAIN) {
		retryAutogroup(pid, n, warn)
		return true, nil
	}
	return err == nil, err
}

// raiseThreads sets every thread of this process above nice n to n, and
// reports whether it changed any.
func raiseThreads(n int) (bool, error) {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return false, err
	}
	raised := false
	for _, e := range tasks {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if cur, err := Of(tid); err != nil || cur <= n {
			continue // gone, or already there
		}
		switch err := unix.Setpriority(unix.PRIO_PROCESS, tid, n); {
		case errors.Is(err, unix.ESRCH):
		case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
			return false, fmt.Errorf("raise this process to nice %d: %w (it needs root or CAP_SYS_NICE)", n, os.ErrPermission)
		case err != nil:
			return false, fmt.Errorf("raise thread %d to nice %d: %w", tid, n, err)
		default:
			raised = true
		}
	}
	return raised, nil
}
