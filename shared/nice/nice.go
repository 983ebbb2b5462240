// Package nice runs a session's agent and terminal shells at a lower CPU
// priority than the programs that serve them.
//
// Why: a local runtime runs its sessions on the server's own machine, and
// agents can use every CPU it has (a build, a test run, 200 agents
// streaming at once). Linux's scheduler shares CPU between sessions
// (setsid) before processes when autogrouping is on (the default of most
// distributions' kernels), and agents run in sessions of their own: every
// busy agent weighs as much as the whole server. On a 2-CPU host with 200
// streaming agents the servers got so little CPU that raft heartbeats
// missed their 300 ms timeout, leaders changed over and over, and agents
// whose leases were not renewed in time stopped themselves.
//
// agentctl therefore starts each agent and terminal shell in a session of
// its own and lowers it (Lower): the session's scheduling group and every
// thread of its process group take the nice value. agentctl keeps its own
// priority: it is the relay between the agent and the server (at a low
// priority a terminal's output crawled through it whenever the server and
// the client were busy) and it answers the lease renewals. Raising a nice
// value needs no privilege; Lower never lowers one.
//
// A server can go the other way where it has the privilege (Raise, when
// its config sets server.nice below 0; off by default): above its
// agentctls, so that 200 relays busy at once cannot starve raft.
package nice

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// Max is the largest nice value (the lowest priority).
const Max = 19

// Check reports whether n is a nice value a process may take without
// privilege: 0 (unchanged) to Max.
func Check(n int) error {
	if n < 0 || n > Max {
		return fmt.Errorf("nice must be between 0 and %d, got %d (a negative value would raise the priority, which needs privilege)", Max, n)
	}
	return nil
}

// Lower sets child, a process just started as the leader of a session of
// its own (Setsid, as a PTY's program is), to nice value n: every thread of
// its process group (setpriority's PRIO_PGRP; what the child forks or
// clones afterwards inherits it) and, where the kernel groups by session,
// its session's scheduling group (/proc/PID/autogroup, which is what
// weighs against other sessions). A child that does not lead its own
// session gets only the former: its group would be the caller's. A
// process group already at nice n or more is left as it is: this never
// raises a priority. n == 0 changes nothing.
//
// Without CAP_SYS_ADMIN the kernel takes one autogroup change per 100 ms
// on the whole machine: a busy one is retried in the background for up to
// retryFor while the child is the same process (its pid not reused), and
// failures after the first attempt go to warn (an hclog Logger's Warn: a
// message, then key/value pairs).
func Lower(child, n int, warn func(msg string, args ...any)) error {
	if n == 0 {
		return nil
	}
	if err := Check(n); err != nil {
		return err
	}
	if cur, err := Of(child); err != nil || cur < n {
		if err := unix.Setpriority(unix.PRIO_PGRP, child, n); err != nil {
			return fmt.Errorf("set process group %d to nice %d: %w", child, n, err)
		}
	}
	if sid, err := unix.Getsid(child); err != nil || sid != child {
		return nil
	}
	err := setAutogroup(child, n)
	if !errors.Is(err, unix.EAGAIN) {
		return err
	}
	retryAutogroup(child, n, warn)
	return nil
}

// retryAutogroup sets process pid's scheduling group to nice n in the
// background, after the kernel's rate limit refused it: for up to retryFor,
// while pid is the same process (its pid not reused). A failure goes to
// warn.
func retryAutogroup(pid, n int, warn func(msg string, args ...any)) {
	started, err := startTime(pid)
	if err != nil {
		return // gone already
	}
	go func() {
		var err error = unix.EAGAIN
		deadline := time.Now().Add(retryFor)
		for errors.Is(err, unix.EAGAIN) && time.Now().Before(deadline) {
			time.Sleep(autogroupRetry) // the kernel's rate limit, not synchronisation
			if t, terr := startTime(pid); terr != nil || t != started {
				return // the process is gone; its pid may be another's now
			}
			err = setAutogroup(pid, n)
		}
		if err != nil && warn != nil {
			warn("the session keeps its scheduling group's priority", "pid", pid, "nice", n, "error", err)
		}
	}()
}

// retryFor bounds the retries of an autogroup change the kernel's rate
// limit refused; autogroupRetry spaces them.
const (
	retryFor       = time.Minute
	autogroupRetry = 110 * time.Millisecond
)

// setAutogroup sets the nice value of process pid's scheduling group; a
// kernel without autogroups (or a process gone meanwhile) is not an error.
func setAutogroup(pid, n int) error {
	err := os.WriteFile("/proc/"+strconv.Itoa(pid)+"/autogroup", []byte(strconv.Itoa(n)), 0)
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ESRCH) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("set session %d's scheduling group to nice %d: %w", pid, n, err)
	}
	return nil
}

// Of returns the nice value of process (or thread) pid, from /proc.
func Of(pid int) (int, error) {
	return statField(pid, 19)
}

// startTime returns when process pid started, in clock ticks since boot:
// with the pid, it names one process.
func startTime(pid int) (int, error) {
	return statField(pid, 22)
}

// statField returns field n (numbered as in proc(5): 19 is nice, 22 the
// start time) of /proc/PID/stat.
func statField(pid, n int) (int, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces;
	// field 3 is the first after it.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	fields := bytes.Fields(b[i+1:])
	if len(fields) < n-2 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the command name", pid, len(fields))
	}
	return strconv.Atoi(string(fields[n-3]))
}

// GroupOf returns the nice value of process pid's scheduling group, and
// false when the process has none: the kernel has no autogroups, or the
// process never left init's session (as a CI machine's test processes),
// whose tasks the kernel weighs one by one in the root group; it shows them
// an empty file.
func GroupOf(pid int) (int, bool, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/autogroup")
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	n, ok, err := parseAutogroup(b)
	if err != nil {
		return 0, false, fmt.Errorf("/proc/%d/autogroup: %w", pid, err)
	}
	return n, ok, nil
}

// parseAutogroup reads /proc/PID/autogroup: "/autogroup-123 nice 5\n", or
// nothing for a process outside any autogroup.
func parseAutogroup(b []byte) (int, bool, error) {
	f := bytes.Fields(b)
	if len(f) == 0 {
		return 0, false, nil
	}
	if len(f) != 3 || string(f[1]) != "nice" {
		return 0, false, fmt.Errorf("unexpected %q", b)
	}
	n, err := strconv.Atoi(string(f[2]))
	if err != nil {
		return 0, false, fmt.Errorf("unexpected %q", b)
	}
	return n, true, nil
}

// LeadSession makes the calling process the leader of a session of its
// own, and so, where the kernel schedules by session, of a scheduling group
// of its own: what it starts afterwards without a session of their own
// (agentctlproc's ShareSession) shares that one group. A process that
// already leads its session is left as it is.
func LeadSession() error {
	if sid, err := unix.Getsid(0); err == nil && sid == os.Getpid() {
		return nil
	}
	if _, err := unix.Setsid(); err != nil {
		return fmt.Errorf("lead a session of its own: %w", err)
	}
	return nil
}
