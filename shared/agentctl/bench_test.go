package agentctl_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddockhq/paddock/shared/agentctl"
)

// BenchmarkPromptRoundTrip measures prompt → turn_finished through a real
// agentctl process and the real demo agent (ACP). It reports p50/p99 in ms.
func BenchmarkPromptRoundTrip(b *testing.B) {
	p := startServe(b, b.TempDir())
	c := p.c
	c.SetFencingToken(1)
	prof := agentctl.Profile{Protocol: "acp", Command: []string{"paddock-demo-agent", "--chunk-delay", "1ms"}}
	if _, err := c.StartAgent(ctx(b), prof, ""); err != nil {
		b.Fatal(err)
	}
	w := newWatcher(c)
	w.waitEvent(b, agentctl.EventAgentStarted, nil, 10*time.Second)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if _, err := c.Prompt(ctx(b), "hello there"); err != nil {
			b.Fatal(err)
		}
		w.waitEvent(b, agentctl.EventTurnFinished, nil, 10*time.Second)
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	q := func(f float64) float64 { return float64(lat[int(f*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
}

// BenchmarkStreamCPU measures what one "stream 500" turn of the real demo
// agent (ACP, its default 10 ms between chunks) costs in CPU through a real
// agentctl process, polled the way the supervisor's pump polls (compact
// answers gathered for 100 ms, the next poll at once). It reports the CPU
// of agentctl and of the agent per turn, from /proc, in ms.
func BenchmarkStreamCPU(b *testing.B) {
	p := startServe(b, b.TempDir())
	c := p.c
	c.SetFencingToken(1)
	st, err := c.StartAgent(ctx(b), acpProfile, "")
	if err != nil {
		b.Fatal(err)
	}
	w := newWatcher(c)
	w.waitEvent(b, agentctl.EventAgentStarted, nil, 10*time.Second)
	var ctlCPU, agentCPU time.Duration
	var ctlSwitches int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ctl0, agent0 := procCPU(b, p.cmd.Process.Pid), procCPU(b, st.PID)
		sw0 := procSwitches(p.cmd.Process.Pid)
		if _, err := c.Prompt(ctx(b), "stream 500"); err != nil {
			b.Fatal(err)
		}
		for done := false; !done; {
			resp, err := c.Poll(ctx(b), agentctl.EventsQuery{Since: w.next, Wait: 10 * time.Second, Compact: true, Gather: 100 * time.Millisecond})
			if err != nil {
				b.Fatal(err)
			}
			w.next = resp.Next
			for _, ev := range resp.Events {
				done = done || ev.Type == agentctl.EventTurnFinished
			}
		}
		ctlCPU += procCPU(b, p.cmd.Process.Pid) - ctl0
		agentCPU += procCPU(b, st.PID) - agent0
		ctlSwitches += procSwitches(p.cmd.Process.Pid) - sw0
	}
	b.StopTimer()
	b.ReportMetric(float64(ctlCPU.Microseconds())/1000/float64(b.N), "agentctl-cpu-ms/turn")
	b.ReportMetric(float64(agentCPU.Microseconds())/1000/float64(b.N), "agent-cpu-ms/turn")
	b.ReportMetric(float64(ctlSwitches)/float64(b.N), "agentctl-switches/turn")
}

// procCPU is a process's CPU time so far, from /proc: the time its
// threads ran (schedstat, in nanoseconds), or user+system time in clock
// ticks where schedstat is not kept.
func procCPU(t testing.TB, pid int) time.Duration {
	t.Helper()
	if d, ok := procSchedCPU(pid); ok {
		return d
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond // USER_HZ 100
}

// procSchedCPU sums the run time of a process's threads from
// /proc/PID/task/*/schedstat. A thread that exited in between is not
// counted, which the Go runtime's threads, kept for the process's life,
// do not do.
func procSchedCPU(pid int) (time.Duration, bool) {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return 0, false
	}
	var sum time.Duration
	for _, task := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, task.Name()))
		if err != nil {
			continue
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			return 0, false
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, false
		}
		sum += time.Duration(ns)
	}
	return sum, true
}

// procSwitches is how many times a process's threads were switched out
// so far (voluntary and not), from /proc/PID/task/*/status.
func procSwitches(pid int) int64 {
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	var n int64
	for _, task := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/status", pid, task.Name()))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.HasSuffix(k, "ctxt_switches") {
				c, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				n += c
			}
		}
	}
	return n
}

// BenchmarkLeaseRenewal measures what one lease renewal (POST /v1/lease,
// fenced) costs: agentctl's CPU per renewal, from /proc, and the client's
// (this process: what the leader's lease keeper pays), from getrusage.
func BenchmarkLeaseRenewal(b *testing.B) {
	p := startServeArgs(b, b.TempDir(), []string{"-log-level", "info"})
	c := p.c
	c.SetFencingToken(1)
	if _, err := c.RenewLease(ctx(b), 10*time.Second); err != nil {
		b.Fatal(err)
	}
	ctl0, self0 := procCPU(b, p.cmd.Process.Pid), selfCPU()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.RenewLease(ctx(b), 10*time.Second); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64((procCPU(b, p.cmd.Process.Pid)-ctl0).Microseconds())/float64(b.N), "agentctl-cpu-µs/op")
	b.ReportMetric(float64((selfCPU()-self0).Microseconds())/float64(b.N), "client-cpu-µs/op")
}

// selfCPU is this process's user+system CPU time so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// pacedChunks and pacedEvery are BenchmarkPacedStreamCPU's turn: the demo
// agent's "stream N every MS" at the paced storm's 20 chunks/s (bench/
// pace.go), shorter than the storm's 600 so a run of several counts fits
// in a minute or two.
const (
	pacedChunks = 100
	pacedEvery  = 50 * time.Millisecond
)

// BenchmarkPacedStreamCPU measures agentctl's CPU per streamed chunk at a
// real agent's pace, as the paced storm (bench/pace.go, storm-paced) runs
// it: a real agentctl process and the real demo agent streaming "stream
// 100 every 50" (a chunk every 50 ms on a fixed schedule), polled as the
// supervisor's pump follows it (pacedTurn). It reports agentctl's CPU per
// chunk in µs, from /proc, with its context switches and the stream's
// frames per chunk.
func BenchmarkPacedStreamCPU(b *testing.B) {
	p := startServeArgs(b, b.TempDir(), []string{"-log-level", "info"})
	c := p.c
	c.SetFencingToken(1)
	st, err := c.StartAgent(ctx(b), acpProfile, "")
	if err != nil {
		b.Fatal(err)
	}
	w := newWatcher(c)
	w.waitEvent(b, agentctl.EventAgentStarted, nil, 10*time.Second)
	var ctlCPU, agentCPU time.Duration
	var switches, polls int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ctl0, agent0, sw0 := procCPU(b, p.cmd.Process.Pid), procCPU(b, st.PID), procSwitches(p.cmd.Process.Pid)
		n := pacedTurn(b, c, w)
		ctlCPU += procCPU(b, p.cmd.Process.Pid) - ctl0
		agentCPU += procCPU(b, st.PID) - agent0
		switches += procSwitches(p.cmd.Process.Pid) - sw0
		polls += int64(n)
	}
	b.StopTimer()
	chunks := float64(b.N * pacedChunks)
	b.ReportMetric(float64(ctlCPU.Nanoseconds())/1000/chunks, "agentctl-cpu-µs/chunk")
	b.ReportMetric(float64(agentCPU.Nanoseconds())/1000/chunks, "agent-cpu-µs/chunk")
	b.ReportMetric(float64(switches)/chunks, "agentctl-switches/chunk")
	b.ReportMetric(float64(polls)/chunks, "frames/chunk")
}

// BenchmarkPacedStreamInProcess is BenchmarkPacedStreamCPU with agentctl's
// server in the test process, so that -cpuprofile and -memprofile see
// agentctl's code (and the polling client's, which a profile tells apart
// by its functions); ns/op is a turn's wall time, set by the pace.
func BenchmarkPacedStreamInProcess(b *testing.B) {
	_, _, c := inProcess(b, agentctl.Options{})
	c.SetFencingToken(1)
	if _, err := c.StartAgent(ctx(b), acpProfile, ""); err != nil {
		b.Fatal(err)
	}
	w := newWatcher(c)
	w.waitEvent(b, agentctl.EventAgentStarted, nil, 10*time.Second)
	b.ReportAllocs()
	cpu0 := selfCPU()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		pacedTurn(b, c, w)
	}
	b.StopTimer()
	b.ReportMetric(float64((selfCPU()-cpu0).Nanoseconds())/1000/float64(b.N*pacedChunks), "process-cpu-µs/chunk")
}

// pacedTurn prompts one paced stream and follows its events as the pump
// does (the event stream, gathered for 100 ms, and a lease renewal every
// 2 s as the lease keeper sends them at the default TTL) until the turn
// ends, checking that the reply came whole; it returns the frames that
// carried events.
func pacedTurn(b *testing.B, c *agentctl.Client, w *eventWatcher) int {
	b.Helper()
	if _, err := c.Prompt(ctx(b), fmt.Sprintf("stream %d every %d", pacedChunks, pacedEvery.Milliseconds())); err != nil {
		b.Fatal(err)
	}
	frames := 0
	var last agentctl.Message
	renewed := time.Now()
	errTurnOver := errors.New("the turn is over")
	err := c.Stream(ctx(b), agentctl.EventsQuery{Since: w.next, Gather: 100 * time.Millisecond}, func(f agentctl.EventsResponse) error {
		w.next = f.Next
		if len(f.Events) > 0 {
			frames++
		}
		if time.Since(renewed) >= 2*time.Second {
			if _, err := c.RenewLease(ctx(b), 10*time.Second); err != nil {
				return err
			}
			renewed = time.Now()
		}
		for _, ev := range f.Events {
			if ev.Type == agentctl.EventTurnFinished {
				return errTurnOver
			}
			if ev.Message != nil && ev.Message.Role == agentctl.RoleAgent {
				last = *ev.Message
			}
		}
		return nil
	})
	if !errors.Is(err, errTurnOver) {
		b.Fatal(err)
	}
	if want := fmt.Sprintf("chunk %d of %d\n", pacedChunks, pacedChunks); !strings.Contains(last.Text, want) || !last.Complete {
		b.Fatalf("the reply's last update is not the whole reply: %q…", truncateForLog(last.Text))
	}
	return frames
}

func truncateForLog(s string) string { return s[:min(len(s), 200)] }
