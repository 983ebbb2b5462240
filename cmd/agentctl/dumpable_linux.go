package main

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// forbidMemoryReads marks agentctl non-dumpable (PR_SET_DUMPABLE 0): another
// process of the same uid — the agent runs as agentctl's user — can then
// neither ptrace it nor read its /proc/PID/mem or environ, where the secret
// lives, and it leaves no core dump. Programs agentctl starts are dumpable
// again after their exec, as usual.
func forbidMemoryReads() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_DUMPABLE, 0): %w", err)
	}
	return nil
}
