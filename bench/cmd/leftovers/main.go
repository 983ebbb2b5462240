// Command leftovers kills what a test run left running under the given
// directories: every process that works in, runs from or names one of them,
// and their descendants (runtimetest.ProcessesUnder). `make test` runs go
// test with TMPDIR in a fresh directory and this after it, so that a test
// that ran no cleanup (one that timed out, say) leaves no detached agentctl
// behind. It lists what it killed; it exits 1 when a process survives ten
// seconds of SIGKILL.
package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/paddockhq/paddock/shared/runtime/runtimetest"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(dirs []string, stdout, stderr io.Writer) int {
	if len(dirs) == 0 {
		fmt.Fprintln(stderr, "usage: leftovers DIR...")
		return 2
	}
	killed := map[int]string{}
	var order []int
	deadline := time.Now().Add(10 * time.Second)
	for {
		pids := runtimetest.ProcessesUnder(dirs...)
		if len(pids) == 0 {
			break
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(stderr, "leftovers: processes %v under %s survive SIGKILL\n", pids, strings.Join(dirs, ", "))
			return 1
		}
		for _, pid := range pids {
			if _, seen := killed[pid]; !seen {
				killed[pid] = argv(pid)
				order = append(order, pid)
			}
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(20 * time.Millisecond) // polling interval while they die
	}
	if len(order) > 0 {
		fmt.Fprintf(stdout, "leftovers: killed %d processes the tests left running under %s:\n", len(order), strings.Join(dirs, ", "))
		for _, pid := range order {
			fmt.Fprintf(stdout, "  %d %s\n", pid, killed[pid])
		}
	}
	return 0
}

// argv is pid's command line, shortened for the list.
func argv(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	s := strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
