package runtimetest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// CleanupProcesses makes t's cleanup kill every process that lives under
// t's temporary root (the directory all of t's TempDirs are in) or under one
// of dirs, and wait until none is left: agentctl is started detached so that
// it outlives its supervisor, and nothing but the test that started it stops
// it before its idle timeout. Call it before starting the servers, plugins or
// agentctls, so that it runs after their own stop (cleanups run last-in
// first-out) and before the TempDirs are removed; calling it again for the
// same t only adds dirs to the first call's. A process that survives ten
// seconds of SIGKILL fails the test.
func CleanupProcesses(t testing.TB, dirs ...string) {
	t.Helper()
	root := filepath.Dir(t.TempDir())
	c := &cleanup{dirs: []string{root}}
	if prev, loaded := cleanups.LoadOrStore(t, c); loaded {
		c = prev.(*cleanup)
		c.add(dirs)
		return
	}
	c.add(dirs)
	t.Cleanup(func() {
		cleanups.Delete(t)
		dirs := c.list()
		WaitFor(t, 10*time.Second, fmt.Sprintf("the processes under %s to end", strings.Join(dirs, ", ")), func() bool {
			return len(KillProcessesUnder(dirs...)) == 0
		})
	})
}

// cleanups holds the directories of each test that called CleanupProcesses.
var cleanups sync.Map // testing.TB -> *cleanup

// cleanup is one test's CleanupProcesses directories.
type cleanup struct {
	mu   sync.Mutex
	dirs []string
}

func (c *cleanup) add(dirs []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, d := range dirs {
		if !slices.Contains(c.dirs, d) {
			c.dirs = append(c.dirs, d)
		}
	}
}

func (c *cleanup) list() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.dirs)
}

// KillProcessesUnder sends SIGKILL to ProcessesUnder(dirs...) and returns
// the pids it signalled (none: nothing under dirs is alive).
func KillProcessesUnder(dirs ...string) []int {
	pids := ProcessesUnder(dirs...)
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	return pids
}

// ProcessesUnder lists the live processes (not zombies) whose working
// directory or executable is in one of dirs, or whose argv or environment
// names one of them, together with all their descendants (an agent or a
// terminal shell that changed directory still belongs to its agentctl).
// The calling process and its ancestors are never listed. A dir that is
// not absolute, is "/" or is the system's temporary directory itself is
// ignored: it would take in other people's processes.
func ProcessesUnder(dirs ...string) []int {
	var roots []string
	for _, d := range dirs {
		d = filepath.Clean(d)
		if filepath.IsAbs(d) && d != "/" && d != filepath.Clean(os.TempDir()) {
			roots = append(roots, d)
		}
	}
	if len(roots) == 0 {
		return nil
	}
	procs := listProcs()
	spared := map[int]bool{}
	for pid := os.Getpid(); pid > 0 && !spared[pid]; pid = procs[pid].ppid {
		spared[pid] = true
	}
	children := map[int][]int{}
	var queue []int
	for pid, p := range procs {
		children[p.ppid] = append(children[p.ppid], pid)
		if !spared[pid] && !p.zombie && mentionsAny(pid, roots) {
			queue = append(queue, pid)
		}
	}
	seen := map[int]bool{}
	var out []int
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		if seen[pid] || spared[pid] || procs[pid].zombie {
			continue
		}
		seen[pid] = true
		out = append(out, pid)
		queue = append(queue, children[pid]...)
	}
	return out
}

// proc is what ProcessesUnder needs from /proc/PID/stat.
type proc struct {
	ppid   int
	zombie bool
}

// listProcs reads every process's parent and state from /proc.
func listProcs() map[int]proc {
	entries, _ := os.ReadDir("/proc")
	out := make(map[int]proc, len(entries))
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid ...; comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		out[pid] = proc{ppid: ppid, zombie: f[0] == "Z" || f[0] == "X"}
	}
	return out
}

// mentionsAny reports whether process pid works in, runs from, or names in
// its argv or environment one of roots.
func mentionsAny(pid int, roots []string) bool {
	base := "/proc/" + strconv.Itoa(pid) + "/"
	cwd, _ := os.Readlink(base + "cwd")
	exe, _ := os.Readlink(base + "exe")
	cwd, exe = strings.TrimSuffix(cwd, " (deleted)"), strings.TrimSuffix(exe, " (deleted)")
	cmdline, _ := os.ReadFile(base + "cmdline")
	environ, _ := os.ReadFile(base + "environ")
	for _, d := range roots {
		if within(cwd, d) || within(exe, d) || names(cmdline, d) || names(environ, d) {
			return true
		}
	}
	return false
}

// within reports whether path is dir or inside it.
func within(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, dir+"/")
}

// names reports whether b (NUL-separated strings) holds dir or a path in it:
// an occurrence that a longer file name does not continue (/tmp/TestA1 is
// not named by /tmp/TestA12).
func names(b []byte, dir string) bool {
	for rest := b; ; {
		i := bytes.Index(rest, []byte(dir))
		if i < 0 {
			return false
		}
		rest = rest[i+len(dir):]
		if len(rest) == 0 || !nameByte(rest[0]) {
			return true
		}
	}
}

// nameByte reports whether c can continue a file name as Go's and mktemp's
// temporary names are spelled.
func nameByte(c byte) bool {
	return c == '.' || c == '_' || c == '-' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}
