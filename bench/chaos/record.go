package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/shared/agentctl"
)

// JournalPath is the execution journal of a session run by the standalone
// runtime under workspaceRoot.
func JournalPath(workspaceRoot, sessionID string) string {
	return filepath.Join(workspaceRoot, sessionID, "state", agentctl.JournalFile)
}

// execKey names one journaled execution.
type execKey struct {
	session  string
	agentctl int
	pid      int
	start    time.Time
}

// Watcher rebuilds executions from the journals under a standalone
// workspace root and watches the processes whose stop was never journaled
// (their agentctl was killed), recording when each was first seen gone.
type Watcher struct {
	root string
	mu   sync.Mutex
	dead map[execKey]time.Time
	// alive is when each watched process was last seen alive.
	alive map[execKey]time.Time
	// read caches each journal as last parsed, by size and mtime (journals
	// only grow; parsing every one on every poll would cost a core).
	read map[string]journalCache
}

type journalCache struct {
	size    int64
	mod     time.Time
	entries []agentctl.JournalEntry
}

// NewWatcher watches the journals under workspaceRoot.
func NewWatcher(workspaceRoot string) *Watcher {
	return &Watcher{root: workspaceRoot, dead: map[execKey]time.Time{}, alive: map[execKey]time.Time{}, read: map[string]journalCache{}}
}

// journal returns a journal's entries, parsed again only when it changed.
func (w *Watcher) journal(path string) ([]agentctl.JournalEntry, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	w.mu.Lock()
	c, ok := w.read[path]
	w.mu.Unlock()
	if ok && c.size == st.Size() && c.mod.Equal(st.ModTime()) {
		return c.entries, nil
	}
	entries, err := agentctl.ReadJournal(path)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	w.read[path] = journalCache{size: st.Size(), mod: st.ModTime(), entries: entries}
	w.mu.Unlock()
	return entries, nil
}

// Run polls every interval until ctx ends.
func (w *Watcher) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		_, _ = w.Executions()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Executions returns every journaled execution with its end (or Alive).
func (w *Watcher) Executions() ([]Execution, error) {
	files, err := filepath.Glob(filepath.Join(w.root, "*", "state", agentctl.JournalFile))
	if err != nil {
		return nil, err
	}
	var out []Execution
	now := time.Now()
	for _, f := range files {
		session := filepath.Base(filepath.Dir(filepath.Dir(f)))
		entries, err := w.journal(f)
		if err != nil {
			return nil, err
		}
		open := map[[2]int]int{} // (agentctl, pid) → index in out
		for _, e := range entries {
			k := [2]int{e.AgentctlPID, e.PID}
			switch e.Event {
			case agentctl.JournalStart:
				open[k] = len(out)
				out = append(out, Execution{SessionID: session, PID: e.PID, Token: e.FencingToken, Start: e.Time})
			case agentctl.JournalStop:
				if i, ok := open[k]; ok {
					out[i].End = e.Time
					delete(open, k)
				}
			}
		}
		for k, i := range open {
			ex := &out[i]
			key := execKey{session, k[0], k[1], ex.Start}
			w.mu.Lock()
			gone, seen := w.dead[key]
			if !seen {
				if processIs(ex.PID, ex.Start) {
					w.alive[key] = now
				} else {
					gone, seen = now, true
					w.dead[key] = now
				}
			}
			last, sighted := w.alive[key]
			w.mu.Unlock()
			if seen {
				ex.End, ex.LastSeen = gone, ex.Start
				if sighted {
					ex.LastSeen = last
				}
			} else {
				ex.Alive = true
			}
		}
	}
	return out, nil
}

// processIs reports whether pid runs and started at about start (not a
// reused pid). pid may be a pid in a child pid namespace (agentctl journals
// the pids it sees): then a process whose innermost NSpid is pid and whose
// start time matches counts.
func processIs(pid int, start time.Time) bool {
	if startsAt(pid, start) {
		return true
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		root, err := strconv.Atoi(e.Name())
		if err != nil || root == pid {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) > 2 && f[0] == "NSpid:" && f[len(f)-1] == strconv.Itoa(pid) && startsAt(root, start) {
				return true
			}
		}
	}
	return false
}

func startsAt(pid int, start time.Time) bool {
	st, ok := procStart(pid)
	if !ok {
		return false
	}
	d := st.Sub(start)
	return d > -200*time.Millisecond && d < 200*time.Millisecond
}

// procStart is when pid started (false when gone or a zombie).
func procStart(pid int) (time.Time, bool) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return time.Time{}, false
	}
	up, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return time.Time{}, false
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return time.Time{}, false
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 20 || f[0] == "Z" || f[0] == "X" {
		return time.Time{}, false
	}
	ticks, err1 := strconv.ParseUint(f[19], 10, 64)
	uf := strings.Fields(string(up))
	if err1 != nil || len(uf) == 0 {
		return time.Time{}, false
	}
	uptime, err := strconv.ParseFloat(uf[0], 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Now().Add(-time.Duration((uptime - float64(ticks)/100) * float64(time.Second))), true
}

// Grants records session.lease_changed events from whichever node answers,
// reconnecting with ?since= after the last index seen.
type Grants struct {
	mu     sync.Mutex
	grants []Grant
	seen   map[uint64]bool
	last   uint64
}

// NewGrants returns an empty recorder.
func NewGrants() *Grants { return &Grants{seen: map[uint64]bool{}} }

// All returns the grants recorded so far.
func (g *Grants) All() []Grant {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]Grant(nil), g.grants...)
}

// Run follows the event stream of nodes (tried in turn) until ctx ends.
func (g *Grants) Run(ctx context.Context, urls func() []string) {
	for i := 0; ctx.Err() == nil; i++ {
		us := urls()
		if len(us) == 0 {
			sleepCtx(ctx, 100*time.Millisecond)
			continue
		}
		_ = g.follow(ctx, us[i%len(us)])
		sleepCtx(ctx, 50*time.Millisecond)
	}
}

// CatchUp reads the events after the last one seen from url until it has
// been quiet for a moment (or bound passes).
func (g *Grants) CatchUp(ctx context.Context, url string, bound time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	return g.follow(ctx, url)
}

func (g *Grants) follow(ctx context.Context, url string) error {
	c, err := client.New(url, "", client.WithTimeout(2*time.Second), client.WithStaleReads(true))
	if err != nil {
		return err
	}
	g.mu.Lock()
	since := g.last
	g.mu.Unlock()
	s, err := c.Events(ctx, client.EventFilter{}, max(since, 1))
	if err != nil {
		return err
	}
	defer s.Close()
	for {
		e, err := s.Next()
		if err != nil {
			return err
		}
		g.add(e)
	}
}

func (g *Grants) add(e api.Event) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if e.Index > g.last {
		g.last = e.Index
	}
	if e.Type != api.EventLeaseChanged {
		return
	}
	b, _ := json.Marshal(e.Data["lease"])
	var l api.Lease
	if json.Unmarshal(b, &l) != nil {
		return
	}
	key := e.Index<<8 ^ uint64(len(l.State))
	if g.seen[key] {
		return
	}
	g.seen[key] = true
	g.grants = append(g.grants, Grant{SessionID: e.SessionID, Index: e.Index, Token: l.FencingToken, State: string(l.State), Holder: l.HolderExecutorID, Nonce: l.HolderNonce})
}
