package bench

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	wire "github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/bench/harness"
	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/plugins/standalone/localexec"
	"github.com/paddockhq/paddock/shared/demoagent"
)

const (
	areaStorm    = "Prompt storm: many agents streaming at a real agent's pace"
	areaCapacity = "Streaming capacity: how many sessions stream at 20 chunks/s"
)

// paceEvery is the paced storms' chunk interval: 20 chunks/s per session,
// about what a real agent streams.
const paceEvery = 50 * time.Millisecond

// The CPU split's labels (programLabels) that are Paddock's own processes.
var paddockLabels = []string{"servers", "agentctls", "runtime plugins"}

// PromptStormSuite is `make bench`'s storm: many demo sessions on a 3-node
// cluster each stream a reply at a real agent's pace ("stream N every 50":
// 20 chunks/s on a fixed schedule, so the offered load is exact) at the
// same time, then the capacity steps (streamingCapacity). It measures
// whether the agents keep their pace, each chunk's latency from its
// emission to a subscriber on a follower, the transcripts' integrity, the
// replicated bytes per chunk, and the CPU each program spends per chunk.
func PromptStormSuite(ctx context.Context, env Env) ([]Result, error) {
	out, err := pacedStorm(ctx, env)
	if err != nil {
		return out, err
	}
	capacity, err := streamingCapacity(ctx, env)
	return append(out, capacity...), err
}

// PacedStormSuite is the paced storm alone (-only storm-paced).
func PacedStormSuite(ctx context.Context, env Env) ([]Result, error) { return pacedStorm(ctx, env) }

// CapacitySuite is the capacity steps alone (-only storm-capacity).
func CapacitySuite(ctx context.Context, env Env) ([]Result, error) {
	return streamingCapacity(ctx, env)
}

// stormCluster is a 3-node cluster with one task whose demo sessions the
// paced storms prompt.
type stormCluster struct {
	env       Env
	c         *harness.Cluster
	dir       string
	stop      func()
	api       *client.Client // the first leader's
	promptAPI *client.Client // the same with a minute's timeout
	leader    *harness.Node
	taskID    string
	ids       []string
	failed    string // sessions that did not start, when some did not
}

func startStormCluster(ctx context.Context, env Env, name string) (*stormCluster, error) {
	c, dir, stop, err := paddockCluster(env, name, 3, true, "enable_debug = true")
	if err != nil {
		return nil, err
	}
	s := &stormCluster{env: env, c: c, dir: dir, stop: stop}
	if s.leader, err = c.Leader(60 * time.Second); err != nil {
		stop()
		return nil, err
	}
	s.api = apiOf(s.leader)
	// Prompts wait up to a minute for their answer (see PromptBurstSuite:
	// one sent again after a timeout can start a second turn).
	if s.promptAPI, err = client.New(s.leader.URL(), "", client.WithTimeout(time.Minute), client.WithTLS(s.leader.TLS)); err != nil {
		stop()
		return nil, err
	}
	task, err := s.api.CreateTask(ctx, wire.CreateTaskRequest{Title: name})
	if err != nil {
		stop()
		return nil, err
	}
	s.taskID = task.ID
	return s, nil
}

// grow starts sessions until the task has n waiting for input. A session
// that does not start (on a loaded host one can end in ERROR before its
// first turn) is deleted and another started in its place, up to n more
// times in all; the failures are logged and kept in s.failed.
func (s *stormCluster) grow(ctx context.Context, n int) error {
	t0, failures := time.Now(), 0
	var first error
	for len(s.ids) < n && failures <= n {
		want := n - len(s.ids)
		ids := make([]string, want)
		errs := make([]error, want)
		var wg sync.WaitGroup
		sem := make(chan struct{}, 4)
		for i := range ids {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				sess, err := s.api.CreateSession(ctx, s.taskID, wire.CreateSessionRequest{Agent: "demo", Runtime: "standalone"})
				if err != nil {
					errs[i] = err
					return
				}
				ids[i] = sess.ID
				errs[i] = waitSession(ctx, s.api, sess.ID, wire.SessionWaitingForInput, 120*time.Second, 100*time.Millisecond)
			}()
		}
		wg.Wait()
		for i, id := range ids {
			if errs[i] == nil {
				s.ids = append(s.ids, id)
				continue
			}
			failures++
			first = cmp.Or(first, errs[i])
			if id != "" {
				_, _ = s.api.DeleteSession(ctx, id)
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	if failures > 0 {
		s.failed = fmt.Sprintf("%d session(s) did not start and were replaced (first: %v)", failures, first)
		s.env.Logf("%s", s.failed)
	}
	if len(s.ids) < n {
		return fmt.Errorf("%d of %d sessions started: %v", len(s.ids), n, first)
	}
	s.env.Logf("sessions started in %s (%d in all)", time.Since(t0).Round(time.Millisecond), len(s.ids))
	return nil
}

// sessionsThatFit caps want by memory: each idle session holds ~14 MiB
// (agentctl and its agent), and the machine's other users keep a reserve.
func sessionsThatFit(env Env, want int) int {
	if avail := memAvailableKiB(); avail > 0 {
		if fit := (avail - 4<<20) / (16 << 10); fit < want {
			env.Logf("memory fits %d sessions", fit)
			return max(fit, 10)
		}
	}
	return want
}

// stepOutcome is one paced storm's figures.
type stepOutcome struct {
	sessions, chunks int
	every, elapsed   time.Duration
	// lats are the chunks' latencies from emission to the subscriber,
	// fromWrite from the leader's write, in ms; seen how many chunks the
	// subscriber saw.
	lats, fromWrite []float64
	seen            int
	// onTime chunks were emitted within one interval of their due time,
	// of offered; shares is each session's onTime share; emitted counts
	// the chunks the agents' records hold (offered for a session whose
	// record was not read), timed the sessions whose record was read.
	onTime, offered, emitted, timed int
	shares                          []float64
	// late is each emitted chunk's time past its due time, ms.
	late                         []float64
	lost, unchecked              int
	fencedSessions, fencedChunks int
	// cpu is each program's CPU over the storm (the cluster's processes
	// by program, the bench, every other process as "other"); cpuText
	// says it in words. idle is the same over idleFor before the prompts.
	cpu, idle         map[string]time.Duration
	cpuText           string
	idleFor           time.Duration
	commit0, commit1  uint64
	changes, retried  int
	trouble           string
	frames, reopened  int
	frameBytes        int64
	profile, leaderID string
	// followerProfiles are the followers' profile summaries (profiled
	// steps only).
	followerProfiles []string
}

// pace is the share of the offered chunks emitted on time.
func (o stepOutcome) pace() float64 {
	if o.offered == 0 {
		return 0
	}
	return float64(o.onTime) / float64(o.offered)
}

// usPerChunk is the CPU of the programs labels per chunk emitted, in µs.
func (o stepOutcome) usPerChunk(labels ...string) float64 {
	var d time.Duration
	for _, l := range labels {
		d += o.cpu[l]
	}
	return float64(d.Microseconds()) / float64(max(o.emitted, 1))
}

// idlePct is the idle CPU of the programs labels, in % of a core.
func (o stepOutcome) idlePct(labels ...string) float64 {
	var d time.Duration
	for _, l := range labels {
		d += o.idle[l]
	}
	return 100 * d.Seconds() / max(o.idleFor.Seconds(), 1e-9)
}

// split says the CPU per chunk of each program.
func (o stepOutcome) split() string {
	return fmt.Sprintf("agentctls %.0f µs/chunk, servers %.0f, runtime plugins %.1f (Paddock %.0f), demo agents %.0f, the bench %.0f, the machine's other processes %.0f",
		o.usPerChunk("agentctls"), o.usPerChunk("servers"), o.usPerChunk("runtime plugins"), o.usPerChunk(paddockLabels...),
		o.usPerChunk("demo agents"), o.usPerChunk("the bench"), o.usPerChunk("other"))
}

// holds says whether a capacity step meets its bounds.
func (o stepOutcome) holds() bool {
	return Percentile(o.lats, 99) <= 1000 && o.pace() >= 0.95 && o.lost == 0 && o.seen > 0
}

// summary is a step's figures in one line.
func (o stepOutcome) summary() string {
	return fmt.Sprintf("%d sessions × %d chunks every %s: pace held %.3f (worst session %.3f; emitted p99 %.0f ms past due), latency from emission p50 %.0f ms p99 %.0f ms (%d of %d chunks seen), %d lost or reordered, %d fenced turns; CPU per chunk: %s; idle before it: Paddock %.0f%% of a core, agents %.0f%%",
		o.sessions, o.chunks, o.every, o.pace(), Percentile(o.shares, 0), Percentile(o.late, 99), Percentile(o.lats, 50), Percentile(o.lats, 99), o.seen, o.sessions*o.chunks,
		o.lost, o.fencedSessions, o.split(), o.idlePct(paddockLabels...), o.idlePct("demo agents"))
}

// step prompts every session with "stream chunks every EVERY" at once and
// measures until every session waits for input again. idleFor first
// measures the cluster's CPU with the sessions idle. profile names the
// leader's CPU profile over the stream ("": none).
func (s *stormCluster) step(ctx context.Context, chunks int, every, idleFor time.Duration, profile string) (stepOutcome, error) {
	o := stepOutcome{sessions: len(s.ids), chunks: chunks, every: every, offered: len(s.ids) * chunks, idleFor: idleFor}
	if s.failed != "" {
		o.trouble = "; " + s.failed
		s.failed = ""
	}
	leader, err := s.c.Leader(60 * time.Second)
	if err != nil {
		return o, err
	}
	o.leaderID = leader.Name
	idle0 := takeCPUSplitUnder(s.dir)
	time.Sleep(idleFor) // the measurement window of the idle baseline
	o.idle = takeCPUSplitUnder(s.dir).by(idle0)

	watch, err := watchChunks(ctx, surviving(s.c, leader), s.taskID, s.ids, chunks)
	if err != nil {
		return o, err
	}
	defer watch.close()
	if o.commit0, _, err = raftIndexes(leader); err != nil {
		return o, err
	}
	stream := every * time.Duration(chunks)
	wait := func() string { return "" }
	var followerWaits []func() string
	if profile != "" {
		wait = cpuProfile(s.env, leader, profile+"-leader", stream)
		// The followers too: each stores and applies every write, and
		// one of them serves the watch's subscription.
		for _, n := range s.c.Running() {
			if n != leader {
				followerWaits = append(followerWaits, cpuProfile(s.env, n, profile+"-follower-"+n.Name, stream))
			}
		}
	}
	leaders := watchLeaders(ctx, s.c)
	split0 := takeCPUSplitUnder(s.dir)
	start := time.Now()
	text := fmt.Sprintf("stream %d every %d", chunks, every.Milliseconds())
	var wg sync.WaitGroup
	var mu sync.Mutex
	var promptErrs []error
	for _, id := range s.ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, _, err := promptUntilDelivered(ctx, s.promptAPI, id, text)
			mu.Lock()
			defer mu.Unlock()
			o.retried += min(n, 1)
			if err != nil {
				promptErrs = append(promptErrs, fmt.Errorf("prompt %s: %w", id, err))
			}
		}()
	}
	wg.Wait()
	if o.retried > 0 {
		s.env.Logf("paced storm: failed prompt attempts: %s", promptFailures)
	}
	if len(promptErrs) > 0 {
		o.trouble += fmt.Sprintf("; %d prompt(s) were never accepted (first: %v)", len(promptErrs), promptErrs[0])
	}
	if err := allWaiting(ctx, s.api, s.taskID, len(s.ids), stream+120*time.Second); err != nil {
		o.trouble += fmt.Sprintf("; not every session waited for input again: %v", err)
	}
	o.elapsed = time.Since(start)
	split1 := takeCPUSplitUnder(s.dir)
	o.cpu, o.cpuText = split1.by(split0), split1.since(split0)
	if o.commit1, _, err = raftIndexes(leader); err != nil {
		o.trouble += fmt.Sprintf("; the leader's commit index was not read after the storm: %v", err)
	}
	watch.close()
	o.changes = leaders()
	o.profile = wait()
	for _, w := range followerWaits {
		if top := profileTop(w(), 4); top != "" {
			o.followerProfiles = append(o.followerProfiles, top)
		}
	}
	o.frames, o.frameBytes, o.reopened, o.fromWrite = watch.frames, watch.bytes, watch.reopened, watch.fromWrite
	if o.trouble != "" {
		s.env.Logf("paced storm: %s", strings.TrimPrefix(o.trouble, "; "))
	}

	// Each session's record of its turn and its final transcript, read
	// 4 at a time.
	want := strings.Join(demoagent.StreamChunks(chunks), "")
	type checked struct {
		times  *demoagent.StreamTimes
		lost   int
		fenced bool
		err    error
	}
	res := make([]checked, len(s.ids))
	sem := make(chan struct{}, 4)
	for i, id := range s.ids {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			res[i].times = paceRecord(ctx, s.api, id, chunks, start)
			var msgs []wire.Message
			res[i].err = waitUntil(ctx, 30*time.Second, 500*time.Millisecond, "the session's messages", func() bool {
				var err error
				msgs, err = s.api.Messages(ctx, id)
				return err == nil
			})
			if res[i].err == nil {
				res[i].lost = lostChunks(msgs, want, chunks)
				res[i].fenced = res[i].lost > 0 && selfFenced(s.dir, id)
			}
		}()
	}
	wg.Wait()
	for i, id := range s.ids {
		r := res[i]
		switch {
		case r.err != nil:
			s.env.Logf("paced storm: messages of %s: %v", id, r.err)
			o.unchecked++
		case r.fenced:
			o.fencedSessions++
			o.fencedChunks += r.lost
		default:
			o.lost += r.lost
		}
		seen := watch.firstSeen(id)
		for _, at := range seen {
			if !at.IsZero() {
				o.seen++
			}
		}
		st := r.times
		if st == nil {
			o.emitted += chunks
			o.shares = append(o.shares, 0)
			continue
		}
		o.timed++
		on := 0
		for k := 0; k < chunks && k < len(st.EmittedUnixNano); k++ {
			o.emitted++
			at := time.Unix(0, st.EmittedUnixNano[k])
			o.late = append(o.late, ms(at.Sub(st.Due(k))))
			if at.Sub(st.Due(k)) <= every {
				on++
			}
			if k < len(seen) && !seen[k].IsZero() {
				o.lats = append(o.lats, ms(seen[k].Sub(at)))
			}
		}
		o.onTime += on
		o.shares = append(o.shares, float64(on)/float64(chunks))
	}
	s.env.Logf("paced storm: %s", o.summary())
	return o, nil
}

// paceRecord reads a session's record of its latest paced "stream n" turn
// (the demo agent's StreamTimes): nil when it cannot be read or is an
// earlier turn's (started before since).
func paceRecord(ctx context.Context, api *client.Client, id string, n int, since time.Time) *demoagent.StreamTimes {
	b, err := api.ReadFile(ctx, id, demoagent.StoreDir+"/"+demoagent.StreamTimesFile)
	if err != nil {
		return nil
	}
	st, err := demoagent.ReadStreamTimes(b)
	if err != nil || st.Chunks != n || st.IntervalNano <= 0 || st.StartUnixNano < since.UnixNano() {
		return nil
	}
	return &st
}

// pacedStorm runs 100 sessions × 20 chunks/s for 30 s (quick: 25 for 10 s),
// after 5 s (quick: 2 s) measuring the same sessions idle, and reports the
// storm's goals.
func pacedStorm(ctx context.Context, env Env) ([]Result, error) {
	sessions, chunks, idle := 100, 600, 5*time.Second
	if env.Quick {
		sessions, chunks, idle = 25, 200, 2*time.Second
	}
	sessions = sessionsThatFit(env, sessions)
	s, err := startStormCluster(ctx, env, "storm")
	if err != nil {
		return nil, err
	}
	defer s.stop()
	if err := s.grow(ctx, sessions); err != nil {
		return nil, err
	}
	o, err := s.step(ctx, chunks, paceEvery, idle, "prompt-storm")
	if err != nil {
		return nil, err
	}
	// Replicated bytes: the raft log entries of the storm, read from a
	// follower (stopped for it: the suite is done with the cluster).
	var rb raftBytes
	rbErr := fmt.Errorf("no follower")
	if l, err := s.c.Leader(10 * time.Second); err == nil && o.commit1 > o.commit0 {
		rb, rbErr = readRaftBytes(surviving(s.c, l), o.commit0+1, o.commit1)
	}
	if rbErr != nil {
		env.Logf("paced storm: raft log not read: %v", rbErr)
	}
	return stormResults(o, rb, rbErr), nil
}

// stormResults are the paced storm's results.
func stormResults(o stepOutcome, rb raftBytes, rbErr error) []Result {
	where := fmt.Sprintf("%d demo sessions on a 3-node cluster (standalone runtime, real agentctl processes, each agent at the runtime's default nice %d) each prompted at the same moment with \"stream %d every %d\": the agent streams %d chunks on a fixed schedule, chunk i due %s × i after its turn began (20 chunks/s; an agent behind schedule sends at once, so the offered load is exactly %d chunks/s), the supervisor coalesces them into replicated message writes; from the first prompt until every session waited for input again took %s; the leader changed %d time(s), %d prompt(s) had to be sent again%s",
		o.sessions, localexec.DefaultNice, o.chunks, o.every.Milliseconds(), o.chunks, o.every, o.sessions*int(time.Second/o.every), o.elapsed.Round(time.Millisecond), o.changes, o.retried, o.trouble)
	pace := Summary(Result{Name: "prompt_storm_pace_held", Area: areaStorm, Unit: "fraction", Goal: "≥ 0.95",
		Note: fmt.Sprintf("%s; the share of the offered chunks (%d) the agents emitted within one interval (%s) of their due time, from each agent's record of its turn (%s in the workspace: the turn's start, the interval and each chunk's emission; read through the files API): p50 is that share over all chunks together, p99 the worst 1%% of sessions' own shares (worst session %.3f); the chunks were emitted p50 %.0f ms, p99 %.0f ms after their due time; a chunk never emitted, or of a session whose record was not read (%d of %d were read), counts as late. An agent falls behind when its CPU is taken or agentctl does not read its output",
			where, o.offered, o.every, demoagent.StoreDir+"/"+demoagent.StreamTimesFile, Percentile(o.shares, 0), Percentile(o.late, 50), Percentile(o.late, 99), o.timed, o.sessions)}, o.shares, true)
	pace.P50 = o.pace()
	pace = Verdict(pace, pace.P50 >= 0.95)

	lat := Summary(Result{Name: "prompt_storm_chunk_latency_ms", Area: areaStorm, Unit: "ms", Goal: "p50 ≤ 100, p99 ≤ 300",
		Note: fmt.Sprintf("the same storm; from the moment the agent emitted chunk k (its record) until a subscriber to a follower's /v1/events (one WebSocket, the task's events, decoding only what it needs) first saw the chunk in the message; %d of %d chunks seen while streaming, the stream reopened %d times after lagging; where the time went, from the first prompt until every session waited again: %s",
			o.seen, o.offered, o.reopened, o.cpuText)}, o.lats, false)
	lat = Verdict(lat, lat.P50 <= 100 && lat.P99 <= 300 && len(o.lats) > 0)
	if top := profileTop(o.profile, 5); top != "" {
		lat.Note += fmt.Sprintf("; the leader's CPU over the first %s of the storm: %s", o.every*time.Duration(o.chunks), top)
	}
	for i, top := range o.followerProfiles {
		lat.Note += fmt.Sprintf("; follower %d's CPU over the same time: %s", i+1, top)
	}
	written := Summary(Result{Name: "prompt_storm_chunk_write_to_subscriber_ms", Area: areaStorm, Unit: "ms",
		Note: "the same chunks, from the leader building the message write that first carried each (the message's updated_at, the leader's clock on this host) until the subscriber saw it: replication, apply and fan-out; the coalescing wait before that write and the agent-to-agentctl-to-pump hops are not in it"}, o.fromWrite, false)

	checked := o.sessions - o.unchecked - o.fencedSessions
	lost := Verdict(Result{Name: "prompt_storm_lost_chunks", Area: areaStorm, Unit: "chunks", Goal: "0", P50: float64(o.lost), P99: float64(o.lost), Samples: checked,
		Note: fmt.Sprintf("chunks missing, repeated or out of order in the final transcripts (GET /v1/sessions/{id}/messages: the agent's reply must be exactly \"chunk 1 of %d\\n…chunk %d of %d\\nstreamed %d\"), over %d sessions; %d whose messages could not be read within 30 s are not counted, nor the %d whose turn a fenced agent cut short (prompt_storm_fenced_turns: agentctl stopped its agent when no leader renewed its lease in time; %d chunks never streamed)",
			o.chunks, o.chunks, o.chunks, o.chunks, checked, o.unchecked, o.fencedSessions, o.fencedChunks)}, o.lost == 0 && o.unchecked == 0)
	fenced := Result{Name: "prompt_storm_fenced_turns", Area: areaStorm, Unit: "sessions", P50: float64(o.fencedSessions), P99: float64(o.fencedSessions), Samples: o.sessions - o.unchecked,
		Note: "sessions whose streamed turn agentctl cut short by stopping its agent itself (its lease not renewed within the TTL minus the margin); their chunks are not counted as lost"}

	perChunk := fmt.Sprintf("CPU (user+system, /proc) from the first prompt until every session waited for input again, divided by the %d chunks the agents emitted (their records)", o.emitted)
	cpu := Result{Name: "stream_cpu_us_per_chunk", Area: areaStorm, Unit: "µs", Goal: "≤ 100", P50: o.usPerChunk(paddockLabels...), Samples: 1,
		Note: fmt.Sprintf("%s, of Paddock's own processes: the 3 servers, the agentctls and the runtime plugins (this cluster's processes only: those under its directory and their descendants), not the demo agents and not the bench. Split: %s. With the sessions idle for %s before the storm, Paddock's processes used %.0f%% of a core (lease renewals, polls): %.0f µs of each chunk's figure at this storm's length and rate (stream_cpu_us_per_chunk_above_idle)",
			perChunk, o.split(), o.idleFor, o.idlePct(paddockLabels...), o.idlePct(paddockLabels...)/100*o.elapsed.Seconds()*1e6/float64(max(o.emitted, 1)))}
	cpu.P99 = cpu.P50
	cpu = Verdict(cpu, cpu.P50 <= 100)
	one := func(name, label, what string) Result {
		v := o.usPerChunk(label)
		return Result{Name: name, Area: areaStorm, Unit: "µs", P50: v, P99: v, Samples: 1, Note: fmt.Sprintf("%s: %s, per chunk (part of stream_cpu_us_per_chunk's split)", label, what)}
	}
	agentctl := one("stream_cpu_us_per_chunk_agentctl", "agentctls", "every session's agentctl process")
	servers := one("stream_cpu_us_per_chunk_servers", "servers", "the 3 paddock server processes")
	agents := one("stream_cpu_us_per_chunk_agents", "demo agents", "the demo agents (not Paddock's: what emitting costs the agents themselves)")
	agents.Note = strings.Replace(agents.Note, "part of stream_cpu_us_per_chunk's split", "not in stream_cpu_us_per_chunk", 1)
	bench := o.cpu["the bench"]
	sub := Result{Name: "prompt_storm_subscriber_cpu_us_per_chunk", Area: areaStorm, Unit: "µs", P50: o.usPerChunk("the bench"), Samples: 1,
		Note: fmt.Sprintf("the bench process's CPU over the storm per chunk: %.2f s, %.1f%% of a core; mostly its subscriber (it read %d event frames, %.1f MiB: each message update carries its message's whole text so far), with the prompts sent at the start and the polls for the sessions' state", bench.Seconds(), 100*bench.Seconds()/o.elapsed.Seconds(), o.frames, float64(o.frameBytes)/(1<<20))}
	sub.P99 = sub.P50
	idleShare := o.idlePct(paddockLabels...) / 100 * o.elapsed.Seconds() * 1e6 / float64(max(o.emitted, 1))
	above := Result{Name: "stream_cpu_us_per_chunk_above_idle", Area: areaStorm, Unit: "µs", P50: max(cpu.P50-idleShare, 0), Samples: 1,
		Note: fmt.Sprintf("stream_cpu_us_per_chunk less what Paddock's processes use with the same sessions idle (their CPU over %s before the storm, scaled to the storm's %s): what streaming adds", o.idleFor, o.elapsed.Round(time.Millisecond))}
	above.P99 = above.P50
	out := []Result{pace, lat, written, lost, fenced, cpu, above, agentctl, servers, agents, sub}
	if rbErr == nil && o.emitted > 0 {
		per := rb.Estimate() / float64(o.emitted)
		out = append(out, Result{Name: "prompt_storm_replicated_bytes_per_chunk", Area: areaStorm, Unit: "bytes", P50: per, P99: per, Samples: rb.Read,
			Note: fmt.Sprintf("raft log payload (each entry's command bytes, which the leader sends to each of the 2 followers, before framing) from the leader's commit index before the storm to after it, divided by the %d chunks emitted (each chunk line is ~16 bytes); read from a follower's raft.db once the storm was over (no server exports a byte counter): %s; %.2f entries per chunk", o.emitted, rb, float64(rb.Entries)/float64(o.emitted))})
	}
	return out
}

// capacityGoal is streaming_capacity_sessions' goal on this machine.
const capacityGoal = 200

// streamingCapacity steps the number of sessions streaming at 20 chunks/s
// (50, 100, 200, 400; quick: 10, 25) until a step's p99 latency passes 1 s,
// its pace held drops below 0.95 or it loses a chunk, and reports the
// largest number that held.
func streamingCapacity(ctx context.Context, env Env) ([]Result, error) {
	steps, chunks, idle := []int{50, 100, 200, 400}, 300, time.Duration(0)
	if env.Quick {
		steps, chunks, idle = []int{10, 25}, 160, 2*time.Second
	} else {
		idle = 3 * time.Second
	}
	s, err := startStormCluster(ctx, env, "capacity")
	if err != nil {
		return nil, err
	}
	defer s.stop()
	var out []Result
	var lines []string
	held, skipped := 0, ""
	for _, n := range steps {
		if fit := sessionsThatFit(env, n-len(s.ids)) + len(s.ids); fit < n {
			skipped = fmt.Sprintf("; the step to %d sessions was not run: memory fits %d", n, fit)
			break
		}
		if err := s.grow(ctx, n); err != nil {
			return out, err
		}
		// Every step is profiled: where the servers' time goes in the
		// step that does not hold is the note of a missed goal.
		o, err := s.step(ctx, chunks, paceEvery, idle, fmt.Sprintf("capacity-n%d", n))
		if err != nil {
			return out, err
		}
		ok := o.holds()
		verdict := map[bool]string{true: "held", false: "did not hold"}[ok]
		lines = append(lines, fmt.Sprintf("%d sessions %s (pace %.3f, p99 %.0f ms, %d lost)", n, verdict, o.pace(), Percentile(o.lats, 99), o.lost))
		r := Summary(Result{Name: fmt.Sprintf("streaming_capacity_n%d_chunk_latency_ms", n), Area: areaCapacity, Unit: "ms",
			Note: fmt.Sprintf("step of %d: %s; %s; where the time went: %s%s", n, verdict, o.summary(), o.cpuText, o.trouble)}, o.lats, false)
		if top := profileTop(o.profile, 5); top != "" {
			r.Note += fmt.Sprintf("; the leader's CPU over the step's %s of streaming: %s", paceEvery*time.Duration(chunks), top)
		}
		for i, top := range o.followerProfiles {
			r.Note += fmt.Sprintf("; follower %d's: %s", i+1, top)
		}
		out = append(out, r)
		if !ok {
			break
		}
		held = n
	}
	capRes := Result{Name: "streaming_capacity_sessions", Area: areaCapacity, Unit: "sessions", Goal: fmt.Sprintf("≥ %d", capacityGoal), P50: float64(held), P99: float64(held), Samples: len(lines),
		Note: fmt.Sprintf("the most sessions that stream together at 20 chunks/s (\"stream %d every %d\", %s per step, all prompted at once, after %s of idle CPU measured) on a 3-node cluster with chunk latency from emission p99 ≤ 1 s, pace held ≥ 0.95 and no chunk lost; sessions are added between steps (%s), stopping at the first step that does not hold: %s%s",
			chunks, paceEvery.Milliseconds(), paceEvery*time.Duration(chunks), idle, joinInts(steps), strings.Join(lines, "; "), skipped)}
	if held == steps[len(steps)-1] {
		capRes.Note += fmt.Sprintf("; every step held: the capacity is at least %d, the largest step tried", held)
	}
	capRes = Verdict(capRes, held >= capacityGoal)
	return append([]Result{capRes}, out...), nil
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, " → ")
}
