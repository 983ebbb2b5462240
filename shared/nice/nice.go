// Package nice runs a session's processes at a lower CPU priority than the
// supervisor beside them.
//
// Why: a local runtime runs its sessions on the server's own machine, and
// agents can use every CPU it has (a build, a test run, 200 agents
// streaming at once). Linux's scheduler shares CPU between sessions
// (setsid) before processes when autogrouping is on (the default of most
// distributions' kernels), and agentctl starts a session of its own: every
// agent then weighs as much as the whole server. On a 2-CPU host with 200
// streaming agents the servers got so little CPU that raft heartbeats
// missed their 300 ms timeout, leaders changed over and over, and agents
// whose leases were not renewed in time stopped themselves.
//
// agentctl therefore lowers its session's scheduling group to a nice value
// (LowerSessionGroup) and sets the agent and terminal shells to it
// (LowerGroup);
// agentctl itself keeps its own priority inside its group, so its relay and
// lease renewals come before its agent's work. Raising a nice value needs
// no privilege; nothing here ever lowers one.
package nice

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"

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

// LowerGroup sets every process of process group pgid, each of its
// threads, to nice value n (setpriority's PRIO_PGRP). Call it on a child
// that was just started in a group of its own (Setpgid, or a PTY's new
// session, whose group id is the child's pid): what the child forks or
// clones afterwards inherits n. A process that leaves the group before
// the call (setpgid in its first instants) keeps its priority. A group
// already at n or below it (started by a process niced further) is left
// as it is: this never raises a priority. n == 0 changes nothing.
func LowerGroup(pgid, n int) error {
	if n == 0 {
		return nil
	}
	if err := Check(n); err != nil {
		return err
	}
	if cur, err := Of(pgid); err == nil && cur >= n {
		return nil
	}
	if err := unix.Setpriority(unix.PRIO_PGRP, pgid, n); err != nil {
		return fmt.Errorf("set process group %d to nice %d: %w", pgid, n, err)
	}
	return nil
}

// autogroupFile is where Linux exposes a process's scheduling group and
// takes its nice value.
const autogroupFile = "/proc/self/autogroup"

// LowerSessionGroup sets the nice value of the calling process's
// scheduling group (Linux's autogroup: every session is one) to n, when
// the caller leads its session: a process in someone else's session (an
// agentctl run from a shell) leaves that session's group alone. It
// reports whether the group was changed; a kernel without autogroups is
// not an error (there, Start's per-process nice is what counts).
func LowerSessionGroup(n int) (bool, error) {
	if n == 0 {
		return false, nil
	}
	if err := Check(n); err != nil {
		return false, err
	}
	sid, err := unix.Getsid(0)
	if err != nil || sid != os.Getpid() {
		return false, nil
	}
	err = os.WriteFile(autogroupFile, []byte(strconv.Itoa(n)), 0)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("lower this session's scheduling group to nice %d: %w", n, err)
	}
	return true, nil
}

// Of returns the nice value of process (or thread) pid, from /proc.
func Of(pid int) (int, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces;
	// nice is the 17th field after it.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	fields := bytes.Fields(b[i+1:])
	if len(fields) < 17 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the command name", pid, len(fields))
	}
	return strconv.Atoi(string(fields[16]))
}

// GroupOf returns the nice value of process pid's scheduling group, and
// false when the kernel has no autogroups.
func GroupOf(pid int) (int, bool, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/autogroup")
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	// "/autogroup-123 nice 5\n"
	f := bytes.Fields(b)
	if len(f) != 3 || string(f[1]) != "nice" {
		return 0, false, fmt.Errorf("/proc/%d/autogroup: unexpected %q", pid, b)
	}
	n, err := strconv.Atoi(string(f[2]))
	return n, true, err
}
