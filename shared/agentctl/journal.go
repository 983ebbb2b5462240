package agentctl

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Execution journal. agentctl appends one line per agent start and stop to
// STATE_DIR/executions.jsonl (fsync'd before it goes on), so that a checker
// can rebuild every execution interval of a session's agent, with the fencing
// token it ran under, even across agentctl restarts on the same state dir.

// JournalFile is the execution journal's file name in the state dir.
const JournalFile = "executions.jsonl"

// Journal events.
const (
	JournalStart = "start"
	JournalStop  = "stop"
)

// JournalEntry is one line of the execution journal.
type JournalEntry struct {
	// Event is JournalStart or JournalStop.
	Event string `json:"event"`
	// PID is the agent process.
	PID int `json:"pid"`
	// FencingToken is the highest token agentctl had admitted (durably)
	// when the entry was written; a start request is admitted only with a
	// token at least that high, so it is the token the execution runs under.
	FencingToken uint64 `json:"fencing_token"`
	// Time is when the agent process started (from /proc, else when the
	// start was recorded) or when its exit was seen (after it was reaped).
	Time time.Time `json:"time"`
	// AgentctlPID is the agentctl process that ran the agent.
	AgentctlPID int `json:"agentctl_pid"`
	// ExitCode is the agent's exit code (stop entries only).
	ExitCode *int `json:"exit_code,omitempty"`
}

// journalStart records an agent start. Errors are logged, never fatal: the
// journal is evidence for checkers, not state agentctl depends on.
func (m *manager) journalStart(pid int) {
	m.journal(JournalEntry{Event: JournalStart, PID: pid, Time: procStartTime(pid, time.Now())})
}

// journalStop records an agent exit (after the process was reaped).
func (m *manager) journalStop(pid, code int) {
	m.journal(JournalEntry{Event: JournalStop, PID: pid, Time: time.Now(), ExitCode: &code})
}

func (m *manager) journal(e JournalEntry) {
	if f, err := loadFence(m.stateDir); err == nil {
		e.FencingToken = f.Highest()
	}
	e.AgentctlPID = os.Getpid()
	if err := AppendJournal(filepath.Join(m.stateDir, JournalFile), e); err != nil {
		m.log.Warn("execution journal", "error", err)
	}
}

// AppendJournal appends e as one line to the journal at path and fsyncs it.
func AppendJournal(path string, e JournalEntry) error {
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encode journal entry: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open journal: %w", err)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("append to journal %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync journal %s: %w", path, err)
	}
	return f.Close()
}

// ReadJournal reads a journal file (a missing file is an empty journal).
func ReadJournal(path string) ([]JournalEntry, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open journal: %w", err)
	}
	defer f.Close()
	out, err := DecodeJournal(f)
	if err != nil {
		return out, fmt.Errorf("journal %s: %w", path, err)
	}
	return out, nil
}

// DecodeJournal decodes journal lines. A last line without its newline (a
// write cut short by a crash) is ignored; any other malformed line is an error.
func DecodeJournal(r io.Reader) ([]JournalEntry, error) {
	br := bufio.NewReader(r)
	var out []JournalEntry
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			return out, nil // a partial last line, if any, is a torn write
		}
		if err != nil {
			return out, err
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		var e JournalEntry
		if err := json.Unmarshal(line, &e); err != nil {
			return out, fmt.Errorf("line %d: %w", n, err)
		}
		if (e.Event != JournalStart && e.Event != JournalStop) || e.PID <= 0 || e.Time.IsZero() {
			return out, fmt.Errorf("line %d: want event start|stop, a pid and a time, got %s", n, line)
		}
		out = append(out, e)
	}
}

// procStartTime is when process pid started, from /proc (clock ticks since
// boot, assumed 100 per second as on every Linux port Paddock runs on); it
// returns fallback when /proc cannot tell. The result is rounded down.
func procStartTime(pid int, fallback time.Time) time.Time {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return fallback
	}
	up, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return fallback
	}
	now := time.Now()
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return fallback
	}
	fields := strings.Fields(string(stat[i+1:]))
	// fields[0] is field 3 (state); starttime is field 22.
	if len(fields) < 20 {
		return fallback
	}
	ticks, err := strconv.ParseUint(fields[19], 10, 64)
	if err != nil {
		return fallback
	}
	upFields := strings.Fields(string(up))
	if len(upFields) == 0 {
		return fallback
	}
	uptime, err := strconv.ParseFloat(upFields[0], 64)
	if err != nil {
		return fallback
	}
	age := time.Duration((uptime-float64(ticks)/100)*float64(time.Second)) + 10*time.Millisecond
	if age < 0 || age > time.Hour*24*365 {
		return fallback
	}
	if t := now.Add(-age); t.Before(fallback) {
		return t
	}
	return fallback
}

// endLeftovers ends the agents an earlier agentctl on this state dir
// started and never saw exit. An agentctl killed outright (kill -9, a
// crash) leaves its agent running, since the agent leads a session of its
// own, until the agent acts on its closed stdin or PTY: a slow or busy one
// (a long tool call, a low CPU priority on a loaded host) can outlive it by
// long enough that the agent the next start brings up runs beside it, two
// executions of one session at once. A leftover is a journal start with no
// stop whose pid still names a process started then; its process group
// (the agent's session: agentctl started it as a session leader) gets
// SIGKILL, and endLeftovers returns once each is gone or after wait.
func endLeftovers(stateDir string, wait time.Duration, log hclog.Logger) error {
	entries, err := ReadJournal(filepath.Join(stateDir, JournalFile))
	if err != nil {
		return err
	}
	open := map[[2]int]JournalEntry{} // (agentctl, agent) → its start
	for _, e := range entries {
		k := [2]int{e.AgentctlPID, e.PID}
		if e.Event == JournalStart {
			open[k] = e
		} else {
			delete(open, k)
		}
	}
	var left []int
	for _, e := range open {
		if !runsSince(e.PID, e.Time) {
			continue
		}
		log.Warn("an agent an earlier agentctl started is still running; ending it before any new agent starts",
			"pid", e.PID, "agentctl_pid", e.AgentctlPID, "started", e.Time)
		_ = syscall.Kill(-e.PID, syscall.SIGKILL)
		_ = syscall.Kill(e.PID, syscall.SIGKILL)
		left = append(left, e.PID)
	}
	deadline := time.Now().Add(wait)
	for _, pid := range left {
		if !waitExited(pid, time.Until(deadline)) {
			return fmt.Errorf("an earlier agent of this session (pid %d) still runs %s after SIGKILL", pid, wait)
		}
	}
	return nil
}

// runsSince reports whether pid is a live process (not a zombie) that
// started at start, as procStartTime recorded it (to its 10 ms ticks and
// the uptime clock's drift): a pid reused since names another process.
func runsSince(pid int, start time.Time) bool {
	if !alive(pid) {
		return false
	}
	d := procStartTime(pid, time.Now()).Sub(start)
	return d > -time.Second && d < time.Second
}

// alive reports whether pid is a process that has not exited (a zombie,
// exited and not yet reaped, has).
func alive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] != 'Z' && stat[i+2] != 'X'
}
