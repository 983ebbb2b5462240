package chaos

import (
	"fmt"
	"sort"
	"time"
)

// Execution is one agent process of a session, rebuilt from agentctl's
// execution journal (and, for an agent whose stop was never journaled
// because its agentctl was killed, from watching the process).
type Execution struct {
	SessionID string
	PID       int
	// Token is the fencing token agentctl had admitted when it started it.
	Token uint64
	// Start is when the process started (from /proc, rounded down).
	Start time.Time
	// End is when the process was seen gone (journaled after it was
	// reaped, or observed dead by the watcher): never earlier than the real
	// end. Zero while it runs.
	End time.Time
	// LastSeen is set for an end the watcher observed (no journaled stop:
	// its agentctl was killed): the last time it saw the process alive, or
	// Start when it never did. The real end lies between LastSeen and End.
	LastSeen time.Time
	// Alive is set when the process still ran when it was last checked.
	Alive bool
}

// startSlack bounds how much earlier than the real start a journaled start
// may be: agentctl derives it from /proc's 10 ms clock ticks, rounded down,
// less a 10 ms pad (agentctl's procStartTime).
const startSlack = 20 * time.Millisecond

// aliveUntil is the latest moment the execution is known to have run: its
// journaled end, the watcher's last sighting of it alive, or at while it
// runs.
func (e Execution) aliveUntil(at time.Time) time.Time {
	switch {
	case e.End.IsZero():
		return at
	case !e.LastSeen.IsZero():
		return e.LastSeen
	}
	return e.End
}

// Grant is one lease change committed by the cluster (a session.lease_changed
// event), in raft order.
type Grant struct {
	SessionID string
	Index     uint64
	Token     uint64
	State     string
	Holder    string
	Nonce     string
}

// Violation is one broken invariant.
type Violation struct {
	SessionID string
	What      string
}

func (v Violation) String() string { return v.SessionID + ": " + v.What }

// Check proves, per session:
//   - no two agent executions overlapped in time (the strongest form of "no
//     two executions overlapped while both held a valid token": lease
//     grants are exclusive, so an overlap is only safe if it never
//     happens). An overlap is one the records prove: the later execution
//     started (allowing for startSlack) before the earlier one was last
//     known to run. An end the watcher observed is known only to its poll
//     interval, so a gap shorter than that and startSlack cannot be told
//     from an overlap and is not reported (agentctl ends a killed
//     agentctl's leftover agent, and waits for it to be gone, before it
//     serves: the next start then follows within milliseconds);
//   - execution tokens never went backwards (in start order);
//   - committed grants never went backwards: a held lease's token is never
//     lower than an earlier one, and a new holder always gets a strictly
//     higher token;
//   - every execution ran under a token the cluster granted (when the
//     session's grants are known).
//
// now stands for the end of executions still running.
func Check(execs []Execution, grants []Grant, now time.Time) []Violation {
	var out []Violation
	bySess := map[string][]Execution{}
	for _, e := range execs {
		bySess[e.SessionID] = append(bySess[e.SessionID], e)
	}
	granted := map[string]map[uint64]bool{}
	gBySess := map[string][]Grant{}
	for _, g := range grants {
		gBySess[g.SessionID] = append(gBySess[g.SessionID], g)
	}
	for id, gs := range gBySess {
		sort.Slice(gs, func(i, j int) bool { return gs[i].Index < gs[j].Index })
		granted[id] = map[uint64]bool{}
		var last Grant
		for i, g := range gs {
			if g.State == "held" {
				granted[id][g.Token] = true
			}
			if i > 0 && g.Token < last.Token {
				out = append(out, Violation{id, fmt.Sprintf("grant token went backwards: %d (index %d) after %d (index %d)", g.Token, g.Index, last.Token, last.Index)})
			}
			if i > 0 && g.State == "held" && last.State == "held" && g.Holder+"/"+g.Nonce != last.Holder+"/"+last.Nonce && g.Token == last.Token && !launchNonce(last.Nonce) {
				out = append(out, Violation{id, fmt.Sprintf("holder changed from %s/%s to %s/%s without a new token (%d)", last.Holder, last.Nonce, g.Holder, g.Nonce, g.Token)})
			}
			last = g
		}
	}
	for id, es := range bySess {
		sort.Slice(es, func(i, j int) bool { return es[i].Start.Before(es[j].Start) })
		for i := range es {
			for j := i + 1; j < len(es); j++ {
				a, b := es[i], es[j]
				if b.Start.Add(startSlack).Before(a.aliveUntil(now)) {
					out = append(out, Violation{id, fmt.Sprintf("executions overlap: pid %d (token %d, %s–%s%s) and pid %d (token %d, from %s)",
						a.PID, a.Token, ts(a.Start), endStr(a), lastSeenStr(a), b.PID, b.Token, ts(b.Start))})
				}
			}
			if i > 0 && es[i].Token < es[i-1].Token {
				out = append(out, Violation{id, fmt.Sprintf("execution token went backwards: pid %d has %d after pid %d with %d", es[i].PID, es[i].Token, es[i-1].PID, es[i-1].Token)})
			}
			if g, ok := granted[id]; ok && !g[es[i].Token] {
				out = append(out, Violation{id, fmt.Sprintf("pid %d ran under token %d, which was never granted", es[i].PID, es[i].Token)})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// launchNonce reports a holder nonce the supervisor uses between its claim
// and agentctl's first answer (replaced by agentctl's nonce, same token).
func launchNonce(n string) bool { return len(n) > 7 && n[:7] == "launch-" }

func ts(t time.Time) string { return t.Format("15:04:05.000") }

func lastSeenStr(e Execution) string {
	if e.LastSeen.IsZero() {
		return ""
	}
	return ", last seen alive " + ts(e.LastSeen)
}

func endStr(e Execution) string {
	if e.End.IsZero() {
		return "running"
	}
	return ts(e.End)
}

// cutSlack widens the window in which an execution's end explains an
// unanswered prompt (journal and watcher times are taken by other
// processes, on 10 ms /proc ticks, polled every 25 ms).
const cutSlack = time.Second

// CheckPrompts proves, per session:
//   - the session answered the final recall (else it is a lost session);
//   - the recall lists only words sent to that session, and every word
//     whose "remember" the agent confirmed, in the order they were sent
//     (the agent saves a turn before it ends it, so a confirmed word is
//     durable across every later kill and resume);
//   - every accepted prompt that was not answered lost its turn to the end
//     of an agent execution of that session between when it was sent and
//     when its outcome was seen (an answer is never dropped while the agent
//     that gives it keeps running).
//
// words holds every word sent per session (accepted or not); recalls the
// words each session's final recall listed (absent: never answered).
func CheckPrompts(sessions []string, prompts []Prompt, execs []Execution, words map[string][]string, recalls map[string][]string) []Violation {
	var out []Violation
	ends := map[string][]time.Time{}
	for _, e := range execs {
		if !e.End.IsZero() {
			ends[e.SessionID] = append(ends[e.SessionID], e.End)
		}
	}
	confirmed := map[string][]Prompt{}
	for _, p := range prompts {
		if p.Answered {
			confirmed[p.SessionID] = append(confirmed[p.SessionID], p)
			continue
		}
		cut := false
		for _, end := range ends[p.SessionID] {
			if !end.Before(p.Sent.Add(-cutSlack)) && !end.After(p.Seen.Add(cutSlack)) {
				cut = true
				break
			}
		}
		if !cut {
			out = append(out, Violation{p.SessionID, fmt.Sprintf("prompt %q sent at %s was never answered, yet no agent execution ended before its turn was seen over at %s",
				"remember "+p.Word, ts(p.Sent), ts(p.Seen))})
		}
	}
	for _, id := range sessions {
		got, ok := recalls[id]
		if !ok {
			out = append(out, Violation{id, "lost session: it never answered the final recall"})
			continue
		}
		sent := map[string]bool{}
		for _, w := range words[id] {
			sent[w] = true
		}
		for _, w := range got {
			if !sent[w] {
				out = append(out, Violation{id, fmt.Sprintf("the final recall lists %q, which was never sent to this session", w)})
			}
		}
		ps := confirmed[id]
		sort.Slice(ps, func(i, j int) bool { return ps[i].Sent.Before(ps[j].Sent) })
		j := 0
		for _, p := range ps {
			for j < len(got) && got[j] != p.Word {
				j++
			}
			if j == len(got) {
				out = append(out, Violation{id, fmt.Sprintf("the final recall lost %q (confirmed at %s) or listed it out of order: %v", p.Word, ts(p.Seen), got)})
				break
			}
			j++
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}
