package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	wire "github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/bench/harness"
	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/supervisor/config"
)

const (
	areaRecovery = "Recovery: failover to usable sessions"
	areaScale    = "Scale: one node, many idle sessions"
)

// eventSource is an event stream that reopens itself after the server
// dropped it for falling behind (client.ErrLagged), from the last index
// read. Events of that same index not yet delivered are not replayed
// (since= is exclusive); answerAll's backup poll covers them.
type eventSource struct {
	ctx    context.Context
	api    *client.Client
	filter client.EventFilter
	last   uint64 // read by Next only

	mu     sync.Mutex // guards stream and closed (Close comes from another goroutine)
	stream *client.EventStream
	closed bool
}

func openEvents(ctx context.Context, api *client.Client, f client.EventFilter) (*eventSource, error) {
	s, err := api.Events(ctx, f, 0)
	if err != nil {
		return nil, err
	}
	return &eventSource{ctx: ctx, api: api, filter: f, stream: s}, nil
}

// Next returns the next event, reopening the stream when it lagged.
func (s *eventSource) Next() (wire.Event, error) {
	for {
		s.mu.Lock()
		cur := s.stream
		s.mu.Unlock()
		e, err := cur.Next()
		if err == nil {
			s.last = e.Index
			return e, nil
		}
		if !errors.Is(err, client.ErrLagged) {
			return e, err
		}
		_ = cur.Close()
		next, err := s.api.Events(s.ctx, s.filter, s.last)
		if err != nil {
			return wire.Event{}, fmt.Errorf("reopen after lag: %w", err)
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			_ = next.Close()
			return wire.Event{}, client.ErrStreamClosed
		}
		s.stream = next
		s.mu.Unlock()
	}
}

// Close closes the current stream; Next then returns client.ErrStreamClosed.
func (s *eventSource) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return s.stream.Close()
}

// prompted is what answerAll saw of each session: when its prompt was
// accepted and when it was seen answered; and how many sessions only the
// backup poll saw answering.
type prompted struct {
	polled int
	// first is when each session's prompt was first sent, accepted when a
	// send of it was accepted, answered when the reply was seen.
	first, accepted, answered map[string]time.Time
	// tries are each session's refused or failed sends before the one
	// accepted, as "+MS error" from the first send.
	tries map[string][]string
}

// slowest describes the session whose prompt was accepted last: when, and
// the sends that failed before (empty when none was accepted).
func (p prompted) slowest(t0 time.Time) string {
	id, last := "", time.Time{}
	for sid, at := range p.accepted {
		if at.After(last) {
			id, last = sid, at
		}
	}
	if id == "" {
		return ""
	}
	return fmt.Sprintf("session %s accepted after %.0f ms, after %d failed sends %v", id, ms(last.Sub(t0)), len(p.tries[id]), p.tries[id])
}

// lastAccepted is the time from t0 until the last prompt was accepted.
func (p prompted) lastAccepted(t0 time.Time) float64 {
	var last time.Time
	for _, at := range p.accepted {
		if at.After(last) {
			last = at
		}
	}
	return ms(last.Sub(t0))
}

// acceptWaits are the times from each prompt's first send to the send
// that was accepted.
func (p prompted) acceptWaits() []float64 { return waits(p.first, p.accepted) }

// waits are, for each session in both, the time from from's to to's.
func waits(from, to map[string]time.Time) []float64 {
	var out []float64
	for id, end := range to {
		if start, ok := from[id]; ok {
			out = append(out, ms(max(0, end.Sub(start))))
		}
	}
	return out
}

// refusals says how many prompts were sent more than once and why the
// sends before the accepted one failed, the commonest reason first ("" when
// every first send was accepted).
func (p prompted) refusals() string {
	why := map[string]int{}
	sessions, sends := 0, 0
	for _, tries := range p.tries {
		if len(tries) == 0 {
			continue
		}
		sessions++
		sends += len(tries)
		for _, t := range tries {
			_, reason, _ := strings.Cut(t, " ") // "+MS error"
			why[clip(reason, 120)]++
		}
	}
	if sessions == 0 {
		return ""
	}
	reasons := make([]string, 0, len(why))
	for r := range why {
		reasons = append(reasons, r)
	}
	sort.Slice(reasons, func(i, j int) bool {
		if why[reasons[i]] != why[reasons[j]] {
			return why[reasons[i]] > why[reasons[j]]
		}
		return reasons[i] < reasons[j]
	})
	for i, r := range reasons[:min(2, len(reasons))] {
		reasons[i] = fmt.Sprintf("%d× %s", why[r], r)
	}
	return fmt.Sprintf("%d prompt(s) were sent more than once (%d failed sends: %s)", sessions, sends, strings.Join(reasons[:min(2, len(reasons))], "; "))
}

// answeredBy counts the sessions that had answered by t.
func (p prompted) answeredBy(t time.Time) int {
	n := 0
	for _, at := range p.answered {
		if !at.After(t) {
			n++
		}
	}
	return n
}

// answerWaits are the times from each prompt's acceptance to its answer.
func (p prompted) answerWaits() []float64 { return waits(p.accepted, p.answered) }

// answerAll prompts every session with text (through send, retried until
// accepted) and returns when each has answered it: the event stream showed
// the agent's complete reply to text, or the session going RUNNING and back
// to WAITING_FOR_INPUT after its prompt was sent. A poll of the messages
// through check (every 500 ms) backs up the stream.
func answerAll(ctx context.Context, stream *eventSource, send func(id, text string) error, check *client.Client, ids []string, text string, par int, timeout time.Duration) (prompted, error) {
	const (
		sent = iota + 1
		running
		answered
	)
	var mu sync.Mutex
	phase := map[string]int{}
	for _, id := range ids {
		phase[id] = 0
	}
	left := len(ids)
	seen := prompted{first: map[string]time.Time{}, accepted: map[string]time.Time{}, answered: map[string]time.Time{}, tries: map[string][]string{}}
	all := make(chan struct{})
	mark := func(id string) { // mu held
		if phase[id] >= sent && phase[id] != answered {
			phase[id] = answered
			seen.answered[id] = time.Now()
			left--
			if left == 0 {
				close(all)
			}
		}
	}
	readErr := make(chan error, 1)
	go func() {
		for {
			e, err := stream.Next()
			if err != nil {
				readErr <- err
				return
			}
			mu.Lock()
			p, ok := phase[e.SessionID]
			switch {
			case !ok || p < sent || p == answered:
			case e.Type == wire.EventStateChanged:
				to, _ := e.Data["to"].(string)
				if p == sent && to == string(wire.SessionRunning) {
					phase[e.SessionID] = running
				} else if p == running && to == string(wire.SessionWaitingForInput) {
					mark(e.SessionID)
				}
			case e.Type == wire.EventMessageAdded || e.Type == wire.EventMessageUpdated:
				m, _ := e.Data["message"].(map[string]any)
				role, _ := m["role"].(string)
				complete, _ := m["complete"].(bool)
				txt, _ := m["text"].(string)
				if role == string(wire.RoleAgent) && complete && strings.HasSuffix(txt, ": "+text) {
					mark(e.SessionID)
				}
			}
			mu.Unlock()
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	work := make(chan string)
	var wg sync.WaitGroup
	for w := 0; w < par; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range work {
				first := time.Now()
				mu.Lock()
				phase[id] = sent
				seen.first[id] = first
				mu.Unlock()
				for ctx.Err() == nil {
					err := send(id, text)
					if err == nil || (client.IsCode(err, "conflict") && hasUserMessage(ctx, check, id, text)) {
						mu.Lock()
						seen.accepted[id] = time.Now()
						mu.Unlock()
						break // accepted (a 409 can also mean "being recovered": retried)
					}
					mu.Lock()
					seen.tries[id] = append(seen.tries[id], fmt.Sprintf("+%.0fms %v", ms(time.Since(first)), err))
					mu.Unlock()
					time.Sleep(25 * time.Millisecond)
				}
			}
		}()
	}
	go func() {
		defer close(work)
		for _, id := range ids {
			select {
			case work <- id:
			case <-ctx.Done():
				return
			}
		}
	}()
	wg.Add(1)
	go func() { // the backup poll
		defer wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case <-all:
				return
			case <-time.After(500 * time.Millisecond):
			}
			mu.Lock()
			var todo []string
			for id, p := range phase {
				if p >= sent && p != answered {
					todo = append(todo, id)
				}
			}
			mu.Unlock()
			for _, id := range todo {
				msgs, err := check.Messages(ctx, id, client.Stale())
				if err != nil || len(msgs) == 0 {
					continue
				}
				m := msgs[len(msgs)-1]
				if m.Role == wire.RoleAgent && m.Complete && strings.HasSuffix(m.Text, ": "+text) {
					mu.Lock()
					if phase[id] != answered {
						seen.polled++
						mark(id)
					}
					mu.Unlock()
				}
			}
		}
	}()
	defer wg.Wait()
	select {
	case <-all:
		cancel()
		mu.Lock()
		defer mu.Unlock()
		return seen, nil
	case err := <-readErr:
		cancel()
		return prompted{}, fmt.Errorf("event stream: %w", err)
	case <-ctx.Done():
		mu.Lock()
		defer mu.Unlock()
		var missing []string
		never := 0
		for id, p := range phase {
			switch {
			case p == 0:
				never++
			case p != answered && len(missing) < 5:
				missing = append(missing, fmt.Sprintf("%s (phase %d)", id, p))
			}
		}
		return seen, fmt.Errorf("%d of %d sessions did not answer within %s (%d never had a prompt accepted while the %d prompters retried; e.g. %s)", left, len(ids), timeout, never, par, strings.Join(missing, ", "))
	}
}

// hasUserMessage reports whether the session's messages hold text from the user.
func hasUserMessage(ctx context.Context, api *client.Client, id, text string) bool {
	msgs, err := api.Messages(ctx, id)
	if err != nil {
		return false
	}
	for _, m := range msgs {
		if m.Role == wire.RoleUser && m.Text == text {
			return true
		}
	}
	return false
}

// surviving returns a running node other than not, preferring a follower.
func surviving(c *harness.Cluster, not *harness.Node) *harness.Node {
	for _, n := range c.Running() {
		if n != not {
			return n
		}
	}
	return nil
}

// promptVia sends prompts round robin through the given nodes.
func promptVia(nodes []*harness.Node) func(id, text string) error {
	apis := make([]*client.Client, len(nodes))
	for i, n := range nodes {
		apis[i], _ = client.New(n.URL(), "", client.WithTimeout(2*time.Second))
	}
	var mu sync.Mutex
	i := 0
	return func(id, text string) error {
		mu.Lock()
		a := apis[i%len(apis)]
		i++
		mu.Unlock()
		return a.Prompt(context.Background(), id, text)
	}
}

// allWaiting waits until every session of the task waits for input.
func allWaiting(ctx context.Context, api *client.Client, taskID string, n int, timeout time.Duration) error {
	var last string
	err := waitUntil(ctx, timeout, 200*time.Millisecond, "every session to wait for input", func() bool {
		ss, err := api.ListSessions(ctx, taskID, "")
		if err != nil {
			last = err.Error()
			return false
		}
		ok := 0
		for _, s := range ss {
			if s.State == wire.SessionWaitingForInput {
				ok++
			}
		}
		last = fmt.Sprintf("%d/%d waiting", ok, n)
		return ok >= n
	})
	if err != nil {
		return fmt.Errorf("%w (%s)", err, last)
	}
	return nil
}

// usable is one failover-to-usable trial, in milliseconds from the kill:
// until a survivor led, until the new leader's recovery run finished (its
// paddock_recovery_last_finished_timestamp_seconds; -1 when unknown), until
// the last prompt was accepted, and until every session had answered a
// prompt; and each prompt's wait from its acceptance to its answer.
type usable struct {
	Leader, Recovered, LastAccepted, Total float64
	AnswerWaits                            []float64
	// AcceptWaits are the prompts' times from first sent to accepted;
	// Refusals why some had to be sent again.
	AcceptWaits []float64
	Refusals    string
	// CPU is where the machine's CPU went from the kill until every
	// session answered; Profile the new leader's profile summary (only
	// for a profiled kill).
	CPU, Profile string
}

// failoverToUsable kills the leader (and, with killAgents, every session's
// agentctl) and measures until every session answered a prompt.
func failoverToUsable(ctx context.Context, env Env, c *harness.Cluster, taskID string, ids []string, killAgents bool, profile string) (usable, error) {
	leader, err := c.Leader(60 * time.Second)
	if err != nil {
		return usable{}, err
	}
	api := apiOf(leader)
	if err := allWaiting(ctx, api, taskID, len(ids), 120*time.Second); err != nil {
		return usable{}, err
	}
	var pids []int
	if killAgents {
		for _, id := range ids {
			pid, err := agentctlPID(ctx, api, id)
			if err != nil {
				return usable{}, err
			}
			pids = append(pids, pid)
		}
	}
	obs := surviving(c, leader)
	stream, err := openEvents(ctx, apiOf(obs), client.EventFilter{TaskID: taskID})
	if err != nil {
		return usable{}, fmt.Errorf("events on %s: %w", obs.Name, err)
	}
	defer stream.Close()
	var survivors []*harness.Node
	for _, n := range c.Running() {
		if n != leader {
			survivors = append(survivors, n)
		}
	}
	// A profile covers the survivors from just before the kill, so the new
	// leader's election, recovery and the prompts all fall inside it.
	profiled := map[*harness.Node]func() string{}
	if profile != "" {
		for _, n := range survivors {
			profiled[n] = cpuProfile(env, n, profile+"-"+n.Name, 5*time.Second)
		}
	}
	cpu0 := takeCPUSplit()
	t0 := time.Now()
	leader.Kill()
	led := firstTime(ctx, t0, func() bool { return anyLeads(survivors) })
	for _, p := range pids {
		killWait(p)
	}
	seen, err := answerAll(ctx, stream, promptVia(survivors), apiOf(obs), ids, fmt.Sprintf("ping-%d", rand.Int64()), 16, 120*time.Second)
	u := usable{Total: ms(time.Since(t0)), Leader: <-led, Recovered: -1, LastAccepted: seen.lastAccepted(t0), AnswerWaits: seen.answerWaits(),
		CPU: takeCPUSplit().since(cpu0), AcceptWaits: seen.acceptWaits(), Refusals: seen.refusals()}
	var newLeader *harness.Node
	// The last sessions can answer before the run has noted its end.
	_ = waitUntil(ctx, 30*time.Second, 20*time.Millisecond, "the new leader's recovery run to finish", func() bool {
		for _, n := range survivors {
			if l, lerr := n.Leads(); lerr == nil && l {
				newLeader = n
				if at := recoveryFinished(n); at.After(t0) {
					u.Recovered = ms(at.Sub(t0))
					return true
				}
			}
		}
		return false
	})
	if seen.polled > 0 {
		env.Logf("%d sessions were seen answering only by the backup poll", seen.polled)
	}
	if u.Recovered >= 0 && u.LastAccepted-u.Recovered > 1000 {
		env.Logf("the last prompt was accepted long after the recovery run: %s", seen.slowest(t0))
	}
	for n, wait := range profiled {
		if path := wait(); path != "" {
			env.Logf("CPU profile of a survivor over the 5 s from the kill: %s", path)
			if n == newLeader {
				u.Profile = profileTop(path, 5)
			}
		}
	}
	if serr := leader.Start(); serr != nil {
		return u, errors.Join(err, serr)
	}
	return u, err
}

// scaleProfile is how long the restarted server is profiled for in the
// scale suite, from when it leads again.
const scaleProfile = 6 * time.Second

// scaleGoalSessions is the session count restart_recovery_ms_at_scale's
// goals are set for (every session answered ≤ 6 s, the recovery run ≤ 2 s
// from the kill).
const scaleGoalSessions = 1000

// whereTheTimeWent is a Note's account of one kill's CPU: the machine's
// split from the kill until every session answered and the new leader's
// profile summary, when there are.
func whereTheTimeWent(which string, u usable) string {
	s := ""
	if u.Refusals != "" {
		s += fmt.Sprintf("; in %s %s", which, u.Refusals)
	}
	if u.CPU != "" {
		s += fmt.Sprintf("; where %s's time went: from the kill until every session answered, %s", which, u.CPU)
	}
	if u.Profile != "" {
		s += "; the new leader's CPU over the 5 s from the kill: " + u.Profile
	}
	return s
}

// recoveryFinished reads when a node's last recovery run finished from its
// metrics (zero time when unknown).
func recoveryFinished(n *harness.Node) time.Time {
	resp, err := statusClient.Get(n.URL() + "/v1/metrics")
	if err != nil {
		return time.Time{}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return time.Time{}
	}
	const name = "paddock_recovery_last_finished_timestamp_seconds "
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil || f <= 0 {
				return time.Time{}
			}
			return time.Unix(0, int64(f*1e9))
		}
	}
	return time.Time{}
}

// RecoverySuite measures failover to usable sessions on a 3-node cluster of
// real processes with N live standalone sessions (N = 10 and 100).
func RecoverySuite(ctx context.Context, env Env) ([]Result, error) {
	type variant struct {
		n             int
		kills, kills2 int
	}
	vs := []variant{{10, 5, 4}, {100, 10, 4}}
	if env.Quick {
		vs = []variant{{10, 3, 2}}
	}
	var out []Result
	for _, v := range vs {
		res, err := recoveryAt(ctx, env, v.n, v.kills, v.kills2)
		out = append(out, res...)
		if err != nil {
			return out, err
		}
	}
	if env.Quick {
		out = append(out, Result{Name: "failover_to_usable_ms_n100", Area: areaRecovery, Unit: "ms", Goal: "p50 ≤ leader + 500, p99 ≤ 2000",
			Note: "not run in quick mode (N = 10 only)"})
	}
	return out, nil
}

func recoveryAt(ctx context.Context, env Env, n, kills, kills2 int) ([]Result, error) {
	c, _, stop, err := paddockCluster(env, fmt.Sprintf("recovery%d", n), 3, true, "enable_debug = true")
	if err != nil {
		return nil, err
	}
	defer stop()
	leader, err := c.Leader(60 * time.Second)
	if err != nil {
		return nil, err
	}
	api := apiOf(leader)
	task, err := api.CreateTask(ctx, wire.CreateTaskRequest{Title: fmt.Sprintf("recovery %d", n)})
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	ids, err := createSessions(ctx, api, task.ID, n, 4)
	if err != nil {
		return nil, err
	}
	env.Logf("recovery n=%d: %d sessions started in %s", n, n, time.Since(t0).Round(time.Millisecond))
	var out []Result
	if n == 100 { // the floor of the goal set at N = 100
		warm, err := warmPasses(ctx, env, c, task.ID, ids, 3)
		if err != nil {
			return nil, err
		}
		out = append(out, warm)
	}
	for _, killAgents := range []bool{false, true} {
		k := kills
		if killAgents {
			k = kills2
		}
		var times, elect, recovered, lastAccepted, answerWaits, acceptWaits []float64
		var failed error
		where := "" // the first kill's CPU split and profile
		for i := 0; i < k && failed == nil; i++ {
			profile := ""
			if i == 0 && !killAgents && n >= 100 {
				profile = fmt.Sprintf("failover-to-usable-n%d", n)
			}
			u, err := failoverToUsable(ctx, env, c, task.ID, ids, killAgents, profile)
			if err != nil {
				failed = fmt.Errorf("n=%d kill %d (agentctl killed too: %v): %w", n, i, killAgents, err)
				break
			}
			if i == 0 {
				where = whereTheTimeWent("the first kill", u)
			}
			times, elect = append(times, u.Total), append(elect, u.Leader)
			lastAccepted, answerWaits = append(lastAccepted, u.LastAccepted), append(answerWaits, u.AnswerWaits...)
			acceptWaits = append(acceptWaits, u.AcceptWaits...)
			if u.Recovered >= 0 {
				recovered = append(recovered, u.Recovered)
			}
			env.Logf("recovery n=%d agents-killed=%v: %.0fms (leader after %.0fms, its recovery run finished after %.0fms, the last prompt accepted after %.0fms; accepted to answered p50 %.0fms)", n, killAgents, u.Total, u.Leader, u.Recovered, u.LastAccepted, Percentile(u.AnswerWaits, 50))
		}
		name := fmt.Sprintf("failover_to_usable_ms_n%d", n)
		note := fmt.Sprintf("3 server processes (separate loopback IPs), %d live demo sessions on the standalone runtime (real agentctl processes); kill -9 of the leader until every session answered a prompt through the new leader (prompts sent through the survivors, 16 at a time, retried every 25 ms; answered = RUNNING then WAITING_FOR_INPUT on a survivor's event stream); killed node restarted between kills; %d kills; default raft timing (heartbeat %s, election %s)", n, k, config.DefaultHeartbeatTimeout, config.DefaultElectionTimeout)
		if killAgents {
			name += "_agentctl_killed"
			note = fmt.Sprintf("as above, but every session's agentctl is kill -9'd with the leader: the new leader resumes each from its token (auto_resume) before it can answer. The executors belong to the killed node and only its plugin can prove them gone, so the survivor that takes them over (shared workspace root) cannot: each lease must expire first (default TTL %s + the new leader's grace of 2×election timeout + TTL/5), by design; %d kills", config.DefaultLeaseTTL, k)
		}
		if len(elect) > 0 {
			note += fmt.Sprintf("; from the kill, a survivor led after p50 %.0f ms (max %.0f)", Percentile(elect, 50), Percentile(elect, 100))
		}
		if len(recovered) > 0 {
			note += fmt.Sprintf(", its recovery run (every session's executor recovered and its agent attached or resumed; paddock_recovery_last_finished_timestamp_seconds) finished after p50 %.0f ms (max %.0f); the rest is the prompts' round trips", Percentile(recovered, 50), Percentile(recovered, 100))
		}
		if len(lastAccepted) > 0 {
			note += fmt.Sprintf(": the last prompt was accepted after p50 %.0f ms (max %.0f), a prompt was accepted p50 %.0f ms (p99 %.0f) after it was first sent, and a session answered p50 %.0f ms (p99 %.0f) after its prompt was accepted (the demo agent streams a reply of 3 chunks 10 ms apart)", Percentile(lastAccepted, 50), Percentile(lastAccepted, 100), Percentile(acceptWaits, 50), Percentile(acceptWaits, 99), Percentile(answerWaits, 50), Percentile(answerWaits, 99))
		}
		r := Summary(Result{Name: name, Area: areaRecovery, Unit: "ms", Note: note + where}, times, false)
		if n == 100 && !killAgents && len(elect) > 0 {
			// The floor is the election in the same kills: what is
			// measured against it is Paddock's own part (recovery and
			// the prompts' round trips).
			floor := Percentile(elect, 50)
			r.Goal = "p50 ≤ leader + 500, p99 ≤ 2000"
			r.Peer, r.PeerP50 = "leader", floor
			r.Ratio = r.P50 / floor
			r.Note += fmt.Sprintf("; goal: p50 ≤ the same kills' time to a leader (p50 %.0f ms) + 500 ms = %.0f ms", floor, floor+500)
			r = Verdict(r, r.P50 <= floor+500 && r.P99 <= 2000)
		}
		if failed != nil {
			r.Note += "; STOPPED: " + failed.Error()
			r.Met = "no"
		}
		out = append(out, r)
		if failed != nil {
			if !killAgents {
				out = append(out, Result{Name: name + "_agentctl_killed", Area: areaRecovery, Unit: "ms",
					Note: "not run: the variant above failed"})
			}
			return out, failed
		}
	}
	return out, nil
}

// warmPasses is failover_to_usable's floor: the same prompt pass (one
// prompt to every session, 16 in flight, sent round robin through the
// leader and a follower as the failover's go through the survivors) on the
// warm cluster, with no kill; the median of trials.
func warmPasses(ctx context.Context, env Env, c *harness.Cluster, taskID string, ids []string, trials int) (Result, error) {
	leader, err := c.Leader(60 * time.Second)
	if err != nil {
		return Result{}, err
	}
	via := []*harness.Node{leader, surviving(c, leader)}
	var times, acceptWaits, answerWaits []float64
	cpu := "" // the first trial's
	for i := 0; i < trials; i++ {
		if err := allWaiting(ctx, apiOf(leader), taskID, len(ids), 120*time.Second); err != nil {
			return Result{}, err
		}
		stream, err := openEvents(ctx, apiOf(via[1]), client.EventFilter{TaskID: taskID})
		if err != nil {
			return Result{}, err
		}
		wait := func() string { return "" }
		if i == 0 {
			wait = cpuProfile(env, leader, fmt.Sprintf("failover-warm-pass-n%d-leader", len(ids)), time.Second)
		}
		cpu0 := takeCPUSplit()
		t0 := time.Now()
		seen, err := answerAll(ctx, stream, promptVia(via), apiOf(via[1]), ids, fmt.Sprintf("warm-%d", rand.Int64()), 16, 120*time.Second)
		stream.Close()
		if err != nil {
			return Result{}, fmt.Errorf("warm pass: %w", err)
		}
		times = append(times, ms(time.Since(t0)))
		if i == 0 {
			cpu = takeCPUSplit().since(cpu0)
			if top := profileTop(wait(), 5); top != "" {
				cpu += "; the leader's CPU over the first second: " + top
			}
		}
		acceptWaits, answerWaits = append(acceptWaits, seen.acceptWaits()...), append(answerWaits, seen.answerWaits()...)
	}
	env.Logf("recovery n=%d: warm passes %v ms", len(ids), times)
	return Summary(Result{Name: fmt.Sprintf("failover_warm_pass_ms_n%d", len(ids)), Area: areaRecovery, Unit: "ms",
		Note: fmt.Sprintf("the floor of failover_to_usable_ms_n%d: one prompt to each of the %d idle sessions on the warm cluster (no kill), 16 in flight, sent round robin through the leader and a follower, until every session answered; %d trials; a prompt was accepted p50 %.0f ms (p99 %.0f) after it was sent and answered p50 %.0f ms (p99 %.0f) after it was accepted; the first trial's CPU: %s",
			len(ids), len(ids), trials, Percentile(acceptWaits, 50), Percentile(acceptWaits, 99), Percentile(answerWaits, 50), Percentile(answerWaits, 99), cpu)}, times, false), nil
}

// ScaleSuite starts as many idle sessions as fit (up to 1,000; 100 in
// quick mode) on one node and measures memory per session, API latency at
// that size, and recovery of all of them after a kill -9 and restart.
func ScaleSuite(ctx context.Context, env Env) ([]Result, error) {
	target := 1000
	if env.Quick {
		target = 100
	}
	const reserveKiB = 6 << 20 // stop when less than 6 GiB is available
	c, _, stop, err := paddockCluster(env, "scale", 1, false, "enable_debug = true")
	if err != nil {
		return nil, err
	}
	defer stop()
	node, err := c.Leader(60 * time.Second)
	if err != nil {
		return nil, err
	}
	api := apiOf(node)
	task, err := api.CreateTask(ctx, wire.CreateTaskRequest{Title: "scale"})
	if err != nil {
		return nil, err
	}
	availBefore := memAvailableKiB()
	var ids []string
	limit := ""
	t0 := time.Now()
	for len(ids) < target {
		if memAvailableKiB() < reserveKiB {
			limit = fmt.Sprintf("stopped at %d sessions: MemAvailable below %d GiB", len(ids), reserveKiB>>20)
			break
		}
		batch := min(20, target-len(ids))
		got, err := createSessions(ctx, api, task.ID, batch, 4)
		for _, id := range got {
			if id != "" {
				ids = append(ids, id)
			}
		}
		if err != nil {
			limit = fmt.Sprintf("stopped at %d sessions: %v", len(ids), err)
			break
		}
		if len(ids)%100 == 0 {
			env.Logf("scale: %d sessions (%s)", len(ids), time.Since(t0).Round(time.Second))
		}
	}
	n := len(ids)
	if limit == "" {
		limit = fmt.Sprintf("all %d sessions started", n)
	}
	env.Logf("scale: %s in %s", limit, time.Since(t0).Round(time.Second))
	var out []Result
	if n == 0 {
		return out, errors.New("scale: no session started: " + limit)
	}
	time.Sleep(2 * time.Second)
	// Memory: RSS of every agentctl and its agent, per session.
	var per []float64
	for _, id := range ids {
		pid, err := agentctlPID(ctx, api, id)
		if err != nil {
			continue
		}
		kib := rssKiB(pid)
		for _, ch := range harness.ChildPIDs(pid) {
			kib += rssKiB(ch)
		}
		per = append(per, float64(kib)/1024)
	}
	availDelta := float64(availBefore-memAvailableKiB()) / 1024 / float64(n)
	out = append(out, Summary(Result{Name: "session_idle_rss_mib", Area: areaScale, Unit: "MiB",
		Note: fmt.Sprintf("RSS of each idle session's agentctl plus its demo agent (shared pages counted in each), over %d sessions on one node; MemAvailable fell by %.1f MiB per session (includes the server's and plugin's growth); %s; started in %s", len(per), availDelta, limit, time.Since(t0).Round(time.Second))}, per, false))
	// API latency at size.
	var st, list []float64
	for i := 0; i < 200; i++ {
		id := ids[rand.IntN(n)]
		t := time.Now()
		if _, err := api.SessionStatus(ctx, id); err != nil {
			return out, fmt.Errorf("status: %w", err)
		}
		st = append(st, ms(time.Since(t)))
	}
	for i := 0; i < 30; i++ {
		t := time.Now()
		ss, err := api.ListSessions(ctx, "", "")
		if err != nil {
			return out, fmt.Errorf("list: %w", err)
		}
		if len(ss) < n {
			return out, fmt.Errorf("list returned %d sessions, want %d", len(ss), n)
		}
		list = append(list, ms(time.Since(t)))
	}
	out = append(out,
		Summary(Result{Name: "session_status_ms_at_scale", Area: areaScale, Unit: "ms",
			Note: fmt.Sprintf("GET /v1/sessions/{id}/status of a random session with %d sessions on the node (consistent read on the leader), 200 sequential calls", n)}, st, false),
		Summary(Result{Name: "session_list_ms_at_scale", Area: areaScale, Unit: "ms",
			Note: fmt.Sprintf("GET /v1/sessions returning all %d sessions, 30 sequential calls", n)}, list, false))
	// The floor: the same prompt pass on the warm cluster (every agent
	// attached, nothing to recover), through the same event stream.
	sort.Strings(ids)
	warm, err := openEvents(ctx, api, client.EventFilter{TaskID: task.ID})
	if err != nil {
		return out, err
	}
	tw := time.Now()
	_, err = answerAll(ctx, warm, promptVia([]*harness.Node{node}), api, ids, "warm-pass", 16, 600*time.Second)
	warmMS := ms(time.Since(tw))
	warm.Close()
	if err != nil {
		return out, fmt.Errorf("warm pass: %w", err)
	}
	env.Logf("scale: the warm pass over %d sessions took %.0f ms", n, warmMS)
	out = append(out, Result{Name: "restart_warm_pass_ms_at_scale", Area: areaScale, Unit: "ms", P50: warmMS, P99: warmMS, Samples: 1,
		Note: fmt.Sprintf("the floor of restart_recovery_ms_at_scale: one prompt to each of the %d idle sessions on the warm node (no restart), 16 in flight, until every session answered", n)})

	// Recovery after kill -9 and restart (the agentctl processes live on),
	// three trials: the median is the figure.
	const trials = 3
	var recs, runs []float64
	var notes []string
	for trial := 0; trial < trials; trial++ {
		rec, runMS, note, err := restartAndAnswer(ctx, env, node, api, task.ID, ids, trial)
		if err != nil {
			out = append(out, Result{Name: "restart_recovery_ms_at_scale", Area: areaScale, Unit: "ms", Met: "no",
				Note: fmt.Sprintf("kill -9 and restart of the only node with %d idle sessions: NOT all usable again in trial %d: %v", n, trial+1, err)})
			return out, fmt.Errorf("recovery after restart: %w", err)
		}
		recs = append(recs, rec)
		if runMS >= 0 {
			runs = append(runs, runMS)
		}
		notes = append(notes, fmt.Sprintf("trial %d: %s", trial+1, note))
	}
	r := Summary(Result{Name: "restart_recovery_ms_at_scale", Area: areaScale, Unit: "ms",
		Note: fmt.Sprintf("kill -9 of the only node with %d idle sessions, restart from its data_dir, until every session answered a prompt (16 prompts in flight, sessions prompted in id order, not recovery order), %d trials; the warm pass (restart_warm_pass_ms_at_scale) took %.0f ms; %s", n, trials, warmMS, strings.Join(notes, "; "))}, recs, false)
	run := Summary(Result{Name: "restart_recovery_run_ms_at_scale", Area: areaScale, Unit: "ms",
		Note: fmt.Sprintf("from the kill until the restarted node's recovery run finished (every executor found, every agent attached; paddock_recovery_last_finished_timestamp_seconds), the same %d trials (%d read)", trials, len(runs))}, runs, false)
	if n >= scaleGoalSessions {
		r.Goal = "p50 ≤ warm pass + 2000"
		r = Verdict(r, r.P50 <= warmMS+2000)
		run.Goal = "p50 ≤ 2000"
		run = Verdict(run, len(runs) == trials && run.P50 <= 2000)
	}
	return append(out, r, run), nil
}

// restartAndAnswer kills the scale suite's node, starts it again and
// prompts every session until each answered: the time from the kill, the
// recovery run's (-1 when unknown) and a note of where the time went.
func restartAndAnswer(ctx context.Context, env Env, node *harness.Node, api *client.Client, taskID string, ids []string, trial int) (float64, float64, string, error) {
	cpu0 := takeCPUSplit()
	node.Kill()
	t1 := time.Now()
	if err := node.Start(); err != nil {
		return 0, -1, "", err
	}
	var stream *eventSource
	if err := waitUntil(ctx, 120*time.Second, 10*time.Millisecond, "the restarted node to lead and stream events", func() bool {
		h, err := api.Health(ctx)
		if err != nil || !h.Leader {
			return false
		}
		stream, err = openEvents(ctx, api, client.EventFilter{TaskID: taskID})
		return err == nil
	}); err != nil {
		return 0, -1, "", err
	}
	lead := time.Since(t1)
	defer stream.Close()
	// The first trial's profile covers the recovery run and most of the
	// prompts.
	profiled := func() string { return "" }
	if trial == 0 {
		profiled = cpuProfile(env, node, "scale-restart-recovery", scaleProfile)
	}
	seen, err := answerAll(ctx, stream, promptVia([]*harness.Node{node}), api, ids, fmt.Sprintf("after-restart-%d", trial+1), 16, 600*time.Second)
	rec := time.Since(t1)
	split := takeCPUSplit().since(cpu0)
	if err != nil {
		return 0, -1, "", err
	}
	where := ""
	if r := seen.refusals(); r != "" {
		where = "; " + r
	}
	if split != "" {
		where += "; where the time went: from the kill until every session answered, " + split
	}
	if path := profiled(); path != "" {
		env.Logf("scale: CPU profile of the first %s of recovery: %s", scaleProfile, path)
		if top := profileTop(path, 5); top != "" {
			where += fmt.Sprintf("; the restarted server's CPU over the first %s after it led: %s", scaleProfile, top)
		}
	}
	if seen.polled > 0 {
		env.Logf("scale: %d sessions were seen answering only by the backup poll", seen.polled)
	}
	recovered, runMS := "unknown", -1.0
	if at := recoveryFinished(node); at.After(t1) {
		recovered, runMS = at.Sub(t1).Round(time.Millisecond).String(), ms(at.Sub(t1))
		// The prompt pass shares the machine with the recovery run: the
		// turns it ran meanwhile are CPU the run did not get.
		recovered += fmt.Sprintf(" (by then %d sessions had answered their prompt)", seen.answeredBy(at))
	}
	env.Logf("scale: trial %d: restart to all %d answering: %s (leader after %s, recovery run finished after %s)", trial+1, len(ids), rec.Round(time.Millisecond), lead.Round(time.Millisecond), recovered)
	note := fmt.Sprintf("%.0f ms; the node led again after %s and its recovery run finished after %s; the last prompt was accepted after %.0f ms, a prompt was accepted p50 %.0f ms (p99 %.0f) after it was first sent, and a session answered p50 %.0f ms (p99 %.0f) after its prompt was accepted%s",
		ms(rec), lead.Round(time.Millisecond), recovered, seen.lastAccepted(t1), Percentile(seen.acceptWaits(), 50), Percentile(seen.acceptWaits(), 99), Percentile(seen.answerWaits(), 50), Percentile(seen.answerWaits(), 99), where)
	return ms(rec), runMS, note, nil
}
