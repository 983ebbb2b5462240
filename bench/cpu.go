package bench

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/paddockhq/paddock/shared/runtime/runtimetest"
)

// Where a trial's CPU went: each process's time from /proc, and the whole
// machine's. On this kind of host the servers, the agentctls, the agents
// and the load generator share the same few CPUs, so a missed latency goal
// is as often the machine's CPU split as anything on the request's path.

// clockTick is the unit of /proc CPU times (USER_HZ, 100 on Linux).
const clockTick = 10 * time.Millisecond

// procCPU is the user+system CPU time of process pid, all its threads (0 if
// it cannot be read).
func procCPU(pid int) time.Duration {
	_, cpu, ok := readProcStat(pid)
	if !ok {
		return 0
	}
	return cpu
}

// readProcStat reads a process's command name (the kernel keeps its first
// 15 bytes) and its user+system CPU time from /proc/PID/stat.
func readProcStat(pid int) (comm string, cpu time.Duration, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", 0, false
	}
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return "", 0, false
	}
	// After ")": state(0) ppid … utime(11) stime(12).
	f := strings.Fields(string(b[end+1:]))
	if len(f) < 13 {
		return "", 0, false
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	sy, _ := strconv.ParseInt(f[12], 10, 64)
	return string(b[open+1 : end]), time.Duration(u+sy) * clockTick, true
}

// machineCPU returns the busy and total CPU ticks of the whole machine.
func machineCPU() (busy, total int64) {
	t := machineTicks()
	return t.busy, t.total
}

// ticks are the whole machine's CPU times from /proc/stat, in clock ticks
// summed over its CPUs: busy (all but idle and iowait) of total, and of busy
// the time in interrupt handlers (irq and softirq: on a host talking to
// itself over loopback, mostly the network stack's receive side) and the
// time stolen (a virtual machine's CPUs running its host's other work).
type ticks struct{ busy, total, irq, steal int64 }

func machineTicks() ticks {
	var t ticks
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return t
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return t
	}
	for i, v := range f[1:] {
		n, _ := strconv.ParseInt(v, 10, 64)
		if i < 8 { // user nice system idle iowait irq softirq steal (guest is in user)
			t.total += n
			if i != 3 && i != 4 {
				t.busy += n
			}
			switch i {
			case 5, 6:
				t.irq += n
			case 7:
				t.steal += n
			}
		}
	}
	return t
}

// programLabels names the programs a CPU split counts apart, by command
// name (as the kernel cuts it); every other process is "other" and this
// process "the bench".
var programLabels = map[string]string{
	"paddock":         "servers",
	"agentctl":        "agentctls",
	"paddock-demo-ag": "demo agents",
	"paddock-runtime": "runtime plugins",
	"etcd":            "etcd",
}

// cpuSplit is a snapshot of the CPU time each process on the machine has
// used so far, with what kind of program it is, and of the machine's busy
// and total time.
type cpuSplit struct {
	procs   map[int]procTime
	machine ticks
}

type procTime struct {
	label string
	cpu   time.Duration
}

// takeCPUSplit reads every process's CPU time from /proc.
func takeCPUSplit() cpuSplit { return takeCPUSplitOf(nil) }

// takeCPUSplitUnder is takeCPUSplit that labels only the processes of one
// cluster as what they are: those working in, running from or naming one
// of dirs and their descendants (runtimetest.ProcessesUnder: the servers,
// their plugins, agentctls and agents); every other process, such as
// another cluster's servers on a shared machine, is "other".
func takeCPUSplitUnder(dirs ...string) cpuSplit {
	ours := map[int]bool{}
	for _, pid := range runtimetest.ProcessesUnder(dirs...) {
		ours[pid] = true
	}
	return takeCPUSplitOf(ours)
}

// takeCPUSplitOf reads every process's CPU time; with ours set, only its
// processes get their program's label.
func takeCPUSplitOf(ours map[int]bool) cpuSplit {
	s := cpuSplit{procs: map[int]procTime{}}
	s.machine = machineTicks()
	ents, _ := os.ReadDir("/proc")
	self := os.Getpid()
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, cpu, ok := readProcStat(pid)
		if !ok {
			continue
		}
		label, known := programLabels[comm]
		switch {
		case pid == self:
			label = "the bench"
		case !known, ours != nil && !ours[pid]:
			label = "other"
		}
		s.procs[pid] = procTime{label, cpu}
	}
	return s
}

// by is each kind of program's CPU time from then until s: a process that
// started in between counts from zero.
func (s cpuSplit) by(then cpuSplit) map[string]time.Duration {
	by := map[string]time.Duration{}
	for pid, p := range s.procs {
		d := p.cpu
		if was, ok := then.procs[pid]; ok && was.label == p.label {
			d -= was.cpu
		}
		if d > 0 {
			by[p.label] += d
		}
	}
	return by
}

// since says what the machine's CPUs did from then until s: how busy they
// were over how long, and each kind of program's CPU time, largest first,
// then the interrupt handlers', the hypervisor's (stolen) and what is left:
// busy time no process still running accounts for (a process that exited
// in between).
func (s cpuSplit) since(then cpuSplit) string {
	total := s.machine.total - then.machine.total
	if total <= 0 {
		return ""
	}
	type part struct {
		label string
		cpu   time.Duration
	}
	var parts []part
	var counted time.Duration
	for label, cpu := range s.by(then) {
		parts = append(parts, part{label, cpu})
		counted += cpu
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i].cpu > parts[j].cpu })
	words := make([]string, 0, len(parts)+2)
	for _, p := range parts {
		words = append(words, fmt.Sprintf("%s %.2f s", p.label, p.cpu.Seconds()))
	}
	busy := s.machine.busy - then.machine.busy
	irq := time.Duration(s.machine.irq-then.machine.irq) * clockTick
	steal := time.Duration(s.machine.steal-then.machine.steal) * clockTick
	words = append(words, fmt.Sprintf("interrupt handlers %.2f s", irq.Seconds()))
	if steal > 0 {
		words = append(words, fmt.Sprintf("stolen by the hypervisor %.2f s", steal.Seconds()))
	}
	if rest := time.Duration(busy)*clockTick - irq - steal - counted; rest > 0 {
		words = append(words, fmt.Sprintf("exited processes and the rest %.2f s", rest.Seconds()))
	}
	cpus := runtime.NumCPU()
	wall := time.Duration(total) * clockTick / time.Duration(cpus)
	return fmt.Sprintf("the %d CPUs %.0f%% busy over %.1f s: %s", cpus, 100*float64(busy)/float64(total), wall.Seconds(), strings.Join(words, ", "))
}
