package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	wire "github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/bench/harness"
	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/plugins/standalone/localexec"
	"github.com/paddockhq/paddock/shared/agentctl"
	"github.com/paddockhq/paddock/shared/demoagent"
	"github.com/paddockhq/paddock/shared/nice"
	"github.com/paddockhq/paddock/shared/runtime/agentctlproc"
	"github.com/paddockhq/paddock/shared/runtime/workspace"
)

const areaBurst = "Prompt burst: many agents streaming as fast as they can"

// demoChunkDelay is the demo agent's pause between streamed chunks (its
// default; the bench clusters do not change it).
const demoChunkDelay = 10 * time.Millisecond

// PromptBurstSuite starts many demo sessions on a 3-node cluster and
// prompts every one of them with "stream N" at the same moment: each agent
// streams N chunks 10 ms apart, which the supervisor coalesces into
// replicated message writes. The load it offers (20,000 chunks/s with 200
// sessions) is several times what a small host carries, so it measures an
// overload; the paced storm (PromptStormSuite) measures a real agent's
// pace. A subscriber on a follower's event stream notes when each chunk
// first shows in a message; the final transcripts are checked for lost or
// reordered chunks. `make bench` does not run it (-only storm-burst does).
func PromptBurstSuite(ctx context.Context, env Env) ([]Result, error) {
	sessions, chunks := 200, 500
	if env.Quick {
		sessions, chunks = 50, 200
	}
	// Each idle session holds ~14 MiB (agentctl and its agent); leave the
	// machine's other users a reserve.
	if avail := memAvailableKiB(); avail > 0 {
		if fit := (avail - 4<<20) / (16 << 10); fit < sessions {
			sessions = max(fit, 10)
			env.Logf("prompt burst: memory fits %d sessions", sessions)
		}
	}
	c, dir, stop, err := paddockCluster(env, "burst", 3, true, "enable_debug = true")
	if err != nil {
		return nil, err
	}
	defer stop()
	leader, err := c.Leader(60 * time.Second)
	if err != nil {
		return nil, err
	}
	api := apiOf(leader)
	// Prompts wait up to a minute for their answer: one that timed out
	// while the leader still worked on it was sent again, and a copy that
	// came after the first turn ended started a second turn (a transcript
	// read while it streamed then showed lost chunks).
	promptAPI, err := client.New(leader.URL(), "", client.WithTimeout(time.Minute), client.WithTLS(leader.TLS))
	if err != nil {
		return nil, err
	}
	task, err := api.CreateTask(ctx, wire.CreateTaskRequest{Title: "prompt burst"})
	if err != nil {
		return nil, err
	}
	// Sessions that fail to start are replaced (stormCluster.grow).
	starter := &stormCluster{env: env, c: c, dir: dir, api: api, leader: leader, taskID: task.ID}
	if err := starter.grow(ctx, sessions); err != nil {
		return nil, err
	}
	ids := starter.ids

	follower := surviving(c, leader)
	watch, err := watchChunks(ctx, follower, task.ID, ids, chunks)
	if err != nil {
		return nil, err
	}
	defer watch.close()

	commit0, _, err := raftIndexes(leader)
	if err != nil {
		return nil, err
	}
	cpu0 := procCPU(leader.PID())
	stream := demoChunkDelay * time.Duration(chunks)
	profile := cpuProfile(env, leader, "prompt-burst-leader", stream)
	leaders := watchLeaders(ctx, c)
	split0 := takeCPUSplit()
	start := time.Now()
	sent := make([]time.Time, len(ids))
	text := fmt.Sprintf("stream %d", chunks)
	var wg sync.WaitGroup
	var promptErrs []error
	deliveredBy := map[string]string{} // session → how its prompt was taken for delivered
	retried := 0
	var mu sync.Mutex
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The first attempt's time stays the origin: a prompt that had
			// to be sent again counts its retries in its chunks' latency.
			sent[i] = time.Now()
			n, how, err := promptUntilDelivered(ctx, promptAPI, id, text)
			mu.Lock()
			defer mu.Unlock()
			deliveredBy[id] = how
			retried += min(n, 1)
			if err != nil {
				promptErrs = append(promptErrs, fmt.Errorf("prompt %s: %w", id, err))
			}
		}()
	}
	wg.Wait()
	if retried > 0 {
		env.Logf("prompt burst: failed prompt attempts: %s", promptFailures)
	}
	// A storm the cluster does not get through is reported, not dropped:
	// its figures say what did arrive.
	trouble := ""
	if starter.failed != "" {
		trouble = "; " + starter.failed
	}
	if len(promptErrs) > 0 {
		trouble += fmt.Sprintf("; %d prompt(s) were never accepted (first: %v)", len(promptErrs), promptErrs[0])
	}
	if err := allWaiting(ctx, api, task.ID, len(ids), stream+120*time.Second); err != nil {
		trouble += fmt.Sprintf("; not every session waited for input again: %v", err)
	}
	if trouble != "" {
		env.Logf("prompt burst: %s", strings.TrimPrefix(trouble, "; "))
	}
	elapsed := time.Since(start)
	cpu := procCPU(leader.PID()) - cpu0
	split := takeCPUSplit().since(split0)
	commit1, _, err := raftIndexes(leader)
	if err != nil {
		trouble += fmt.Sprintf("; the first leader's commit index was not read after the storm: %v", err)
	}
	profPath := profile()
	watch.close()
	changes := leaders()

	// Latency of chunk k: when the subscriber first saw it, minus when the
	// agent emitted it (the demo agent's record of the turn). The
	// pace-based figure counts from when the agent could have sent it at
	// the earliest (its prompt sent, then k−1 chunk pauses): it adds the
	// prompt's delivery and an agent's lag behind its pace.
	var lats, fromPrompt []float64
	seen, lost, timed := 0, 0, 0
	var turns []float64 // each agent's first to last chunk, s
	for i, id := range ids {
		emitted := emissions(ctx, api, id, chunks)
		if emitted != nil {
			timed++
			turns = append(turns, emitted[len(emitted)-1].Sub(emitted[0]).Seconds())
		}
		for k, at := range watch.firstSeen(id) {
			if at.IsZero() {
				continue
			}
			seen++
			fromPrompt = append(fromPrompt, ms(at.Sub(sent[i].Add(demoChunkDelay*time.Duration(k)))))
			if emitted != nil {
				lats = append(lats, ms(at.Sub(emitted[k])))
			}
		}
	}
	pace := fmt.Sprintf("the agents took p50 %.2f s, p99 %.2f s from their first chunk to their last (%s at the nominal pace; %d of %d agents' emission times read)",
		Percentile(turns, 50), Percentile(turns, 99), demoChunkDelay*time.Duration(chunks-1), timed, len(ids))
	want := strings.Join(demoagent.StreamChunks(chunks), "")
	var bad []string
	unchecked, twice, unprompted := 0, 0, 0
	// A turn agentctl cut short by self-fencing (no leader renewed the
	// lease within its TTL minus the margin, e.g. across a slow election on
	// a starved host) is counted apart: the agent was stopped, its session
	// resumed from its token and waits for input, and the rest of the reply
	// was never produced, so nothing was lost between agentctl and the
	// transcript.
	fencedSessions, fencedChunks := 0, 0
	for _, id := range ids {
		var msgs []wire.Message
		var merr error
		if waitUntil(ctx, 30*time.Second, 500*time.Millisecond, "the session's messages", func() bool {
			msgs, merr = api.Messages(ctx, id)
			return merr == nil
		}) != nil {
			env.Logf("prompt burst: messages of %s: %v", id, merr)
			unchecked++
			continue
		}
		if n := lostChunks(msgs, want, chunks); n > 0 && selfFenced(dir, id) {
			fencedSessions++
			fencedChunks += n
		} else if n > 0 {
			lost += n
			bad = append(bad, id)
			if countPrompts(msgs, text) == 0 {
				unprompted++
				env.Logf("prompt burst: session %s lacks its prompt, which was taken for delivered by %q", id, deliveredBy[id])
			}
		}
		if prompts := countPrompts(msgs, text); prompts > 1 {
			twice++
		}
	}
	if len(bad) > 0 {
		env.Logf("prompt burst: %d sessions with lost or reordered chunks (%d of them without the prompt in their transcript: it never reached the agent; %d transcripts hold the prompt more than once), first: %v", len(bad), unprompted, twice, bad[:min(len(bad), 5)])
	}
	if fencedSessions > 0 {
		env.Logf("prompt burst: %d sessions' turns were interrupted by a fenced agent (agentctl stopped it when its lease was not renewed in time; %d chunks never streamed)", fencedSessions, fencedChunks)
	}
	writes := 0.0
	if commit1 > commit0 {
		writes = float64(commit1-commit0) / elapsed.Seconds()
	}
	env.Logf("prompt burst: %d sessions × %d chunks in %s; chunk latency from emission p50 %.0f ms p99 %.0f ms, pace-based from the prompt p50 %.0f ms p99 %.0f ms (%d of %d chunks seen streaming, %d stream reopenings); %s; %.0f raft entries/s; leader CPU %.0f%%; %d lost or reordered; %d turns interrupted by a fenced agent (%d chunks); %d leader changes, %d prompts sent again",
		len(ids), chunks, elapsed.Round(time.Millisecond), Percentile(lats, 50), Percentile(lats, 99), Percentile(fromPrompt, 50), Percentile(fromPrompt, 99), seen, len(ids)*chunks, watch.reopened, pace, writes, 100*cpu.Seconds()/elapsed.Seconds(), lost, fencedSessions, fencedChunks, changes, retried)
	where := fmt.Sprintf("%d demo sessions on a 3-node cluster (standalone runtime, real agentctl processes; each agent in a scheduling group of its own at the runtime's default nice %d, each node's agentctls together in its runtime plugin's group at 0, the leader's %s) prompted with \"stream %d\" at the same moment (one goroutine each): every agent streams %d chunks %s apart (%s in all), the supervisor coalesces them (at most ~10 message writes/s per session, and at most 64 KiB/s of message text per session)", len(ids), localexec.DefaultNice, schedulingGroup(leader.PID()), chunks, chunks, demoChunkDelay, stream)
	where += fmt.Sprintf("; the leader changed %d time(s) during the storm and %d prompt(s) had to be sent again (a prompt whose leader lost its leadership fails; it is retried until the transcript holds it)%s", changes, retried, trouble)

	lat := Summary(Result{Name: "prompt_burst_chunk_latency_ms", Area: areaBurst, Unit: "ms", Goal: "p99 ≤ 500",
		Note: fmt.Sprintf("%s; from the moment the agent emitted chunk k (the demo agent records it, %s in the workspace, read back through the files API) until a subscriber to a follower's /v1/events (one WebSocket, the task's events) first saw the chunk in the message; %s; %d of %d chunks seen while streaming, the stream reopened %d times after lagging",
			where, demoagent.StoreDir+"/"+demoagent.StreamTimesFile, pace, seen, len(ids)*chunks, watch.reopened)}, lats, false)
	lat = Verdict(lat, lat.P99 <= 500)
	if split != "" {
		lat.Note += "; where the time went: from the first prompt until every session waited for input again, " + split
	}
	if top := profileTop(profPath, 5); top != "" {
		lat.Note += fmt.Sprintf("; the leader's CPU over the first %s of the storm: %s", stream, top)
	}
	paced := Summary(Result{Name: "prompt_burst_chunk_latency_from_prompt_ms", Area: areaBurst, Unit: "ms",
		Note: fmt.Sprintf("the same chunks, from the earliest moment the agent could emit chunk k (its prompt sent + (k−1)×%s): adds the prompt's delivery and each agent's lag behind its pace, an upper bound", demoChunkDelay)}, fromPrompt, false)
	watch.mu.Lock()
	fromWrite := append([]float64(nil), watch.fromWrite...)
	watch.mu.Unlock()
	written := Summary(Result{Name: "prompt_burst_chunk_write_to_subscriber_ms", Area: areaBurst, Unit: "ms",
		Note: "the same chunks, from the leader building the message write that first carried each (the message's updated_at, the leader's clock on this host) until the subscriber saw it: replication, apply and fan-out; the coalescing wait before that write (up to 100 ms, longer for a message over the byte bound) and the agent-to-agentctl-to-pump hops are not in it"}, fromWrite, false)
	wr := Result{Name: "prompt_burst_writes_per_s", Area: areaBurst, Unit: "entries/s", P50: writes, P99: writes, Samples: 1,
		Note: fmt.Sprintf("raft entries committed by the leader (commit index before and after) over the storm, from the first prompt until every session waited for input again (%s); the subscriber received %.1f MiB of event frames (each message update carries its message's whole text so far)",
			elapsed.Round(time.Millisecond), float64(watch.bytes)/(1<<20))}
	cpuPct := 100 * cpu.Seconds() / elapsed.Seconds()
	lc := Result{Name: "prompt_burst_leader_cpu_pct", Area: areaBurst, Unit: "% of a core", P50: cpuPct, P99: cpuPct, Samples: 1,
		Note: fmt.Sprintf("user+system CPU of the leader process over the same interval, from /proc/PID/stat; CPU profile of the leader during the stream: %s", orNone(profPath))}
	lo := Verdict(Result{Name: "prompt_burst_lost_chunks", Area: areaBurst, Unit: "chunks", Goal: "0", P50: float64(lost), P99: float64(lost), Samples: len(ids) - unchecked - fencedSessions,
		Note: fmt.Sprintf("chunks missing, repeated or out of order in the final transcripts (GET /v1/sessions/{id}/messages: the agent's reply must be exactly \"chunk 1 of %d\\n…chunk %d of %d\\nstreamed %d\"), over %d sessions; %d session(s) whose messages could not be read within 30 s are not counted, nor the %d whose turn a fenced agent cut short (prompt_burst_fenced_turns)", chunks, chunks, chunks, chunks, len(ids)-unchecked-fencedSessions, unchecked, fencedSessions)}, lost == 0 && unchecked == 0)
	fe := Result{Name: "prompt_burst_fenced_turns", Area: areaBurst, Unit: "sessions", P50: float64(fencedSessions), P99: float64(fencedSessions), Samples: len(ids) - unchecked,
		Note: fmt.Sprintf("sessions whose streamed turn ended early because agentctl stopped the agent itself (its log says so) when no leader renewed the lease within the lease TTL minus its margin (8 s of the default 10 s): the session was resumed from its token and waits for input, the rest of its reply (%d chunks in all) was never produced; the leader changed %d time(s) in this run: a renewal gap comes from an election, or from renewals that do not get through the oversubscribed host in time", fencedChunks, changes)}
	return []Result{lat, paced, written, wr, lc, lo, fe}, nil
}

// selfFenced reports whether a session's agentctl (standalone runtime, its
// workspaces under dir) stopped its agent because its lease was not
// renewed in time.
func selfFenced(dir, id string) bool {
	stateDir := workspace.Layout{SessionDir: filepath.Join(dir, "workspaces", id)}.StateDir()
	b, err := os.ReadFile(agentctlproc.LogFile(stateDir))
	return err == nil && bytes.Contains(b, []byte(agentctl.SelfFenceLog))
}

// emissions reads when a session's agent emitted each chunk of its "stream
// n" reply (the demo agent's record in the workspace): nil when it cannot
// be read or is not that turn's.
func emissions(ctx context.Context, api *client.Client, id string, n int) []time.Time {
	b, err := api.ReadFile(ctx, id, demoagent.StoreDir+"/"+demoagent.StreamTimesFile)
	if err != nil {
		return nil
	}
	st, err := demoagent.ReadStreamTimes(b)
	if err != nil || st.Chunks != n || len(st.EmittedUnixNano) < n {
		return nil
	}
	out := make([]time.Time, len(st.EmittedUnixNano))
	for i, ns := range st.EmittedUnixNano {
		out[i] = time.Unix(0, ns)
	}
	return out
}

func orNone(s string) string {
	if s == "" {
		return "none taken"
	}
	return s
}

// lostChunks counts the chunks of a "stream n" reply (the session's last
// agent message) that are missing, repeated or out of order in its
// transcript: n+1 when there is no reply at all, at least 1 when the reply
// differs from want in any way (its closing line, or never completed).
func lostChunks(msgs []wire.Message, want string, n int) int {
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i]
		if m.Role != wire.RoleAgent {
			continue
		}
		if m.Text == want && m.Complete {
			return 0
		}
		got := chunkNumbers(m.Text, n)
		bad := 0
		for k := 1; k <= n; k++ {
			if k > len(got) || got[k-1] != k {
				bad++
			}
		}
		return max(bad, 1)
	}
	return n + 1
}

// countPrompts counts the user messages of a transcript that are text.
func countPrompts(msgs []wire.Message, text string) int {
	n := 0
	for _, m := range msgs {
		if m.Role == wire.RoleUser && m.Text == text {
			n++
		}
	}
	return n
}

// chunkNumbers parses the "chunk k of n" lines of a message, in order.
func chunkNumbers(text string, n int) []int {
	var out []int
	suffix := " of " + strconv.Itoa(n)
	for _, line := range strings.Split(text, "\n") {
		rest, ok := strings.CutPrefix(line, "chunk ")
		if !ok {
			continue
		}
		num, ok := strings.CutSuffix(rest, suffix)
		if !ok {
			continue
		}
		if k, err := strconv.Atoi(num); err == nil {
			out = append(out, k)
		}
	}
	return out
}

// schedulingGroup says at what nice value process pid's scheduling group
// is (the servers raise theirs to server.nice where they may).
func schedulingGroup(pid int) string {
	g, ok, err := nice.GroupOf(pid)
	switch {
	case err != nil:
		return "scheduling group unread: " + err.Error()
	case !ok:
		return "in no scheduling group (the kernel weighs it by its nice value)"
	}
	return fmt.Sprintf("at nice %d (server.nice)", g)
}

// promptUntilDelivered sends a prompt until it is accepted or the
// session's transcript shows it arrived anyway (a prompt can fail after
// delivery when its leader loses leadership), for up to 2 minutes. It
// returns how many attempts failed and how delivery was decided:
// "accepted" (the API answered success) or "transcript".
func promptUntilDelivered(ctx context.Context, api *client.Client, id, text string) (int, string, error) {
	deadline := time.Now().Add(2 * time.Minute)
	for failed := 0; ; failed++ {
		err := api.Prompt(ctx, id, text)
		if err == nil {
			return failed, "accepted", nil
		}
		promptFailures.note(err)
		if time.Now().After(deadline) || ctx.Err() != nil {
			return failed, "", err
		}
		// Refused as running a turn: an earlier attempt may have reached
		// the agent (nothing else prompts these sessions), or the state
		// is a lost prompt's that recovery has not set right yet. Only
		// the transcript tells: wait for the prompt in it, or for the
		// session to stop running, then send again.
		if client.IsCode(err, "conflict") {
			_ = waitUntil(ctx, 30*time.Second, 500*time.Millisecond, "the session to stop running", func() bool {
				if hasUserMessage(ctx, api, id, text) {
					return true
				}
				sess, gerr := api.GetSession(ctx, id)
				return gerr == nil && sess.State != wire.SessionRunning
			})
			if hasUserMessage(ctx, api, id, text) {
				return failed + 1, "transcript", nil
			}
			continue
		}
		delivered := waitUntil(ctx, 2*time.Second, 500*time.Millisecond, "the prompt in the transcript", func() bool {
			return hasUserMessage(ctx, api, id, text)
		}) == nil
		if delivered {
			return failed + 1, "transcript", nil
		}
	}
}

// promptFailures counts the errors prompts failed with, by message.
var promptFailures = &errorCounts{counts: map[string]int{}}

type errorCounts struct {
	mu     sync.Mutex
	counts map[string]int
}

func (c *errorCounts) note(err error) {
	msg := err.Error()
	if len(msg) > 160 {
		msg = msg[:160]
	}
	c.mu.Lock()
	c.counts[msg]++
	c.mu.Unlock()
}

// String lists the errors, most frequent first, and resets the counts.
func (c *errorCounts) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	type kv struct {
		msg string
		n   int
	}
	var all []kv
	for m, n := range c.counts {
		all = append(all, kv{m, n})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].n > all[j].n })
	var b strings.Builder
	for _, e := range all[:min(len(all), 4)] {
		fmt.Fprintf(&b, "%d× %q; ", e.n, e.msg)
	}
	c.counts = map[string]int{}
	return strings.TrimSuffix(b.String(), "; ")
}

// watchLeaders polls which node leads every 100 ms until the returned func
// is called, which stops it and reports how many times the leader changed.
func watchLeaders(ctx context.Context, c *harness.Cluster) func() int {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan int, 1)
	go func() {
		changes, last := 0, ""
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			for _, n := range c.Running() {
				if l, err := n.Leads(); err == nil && l {
					if last != "" && n.Name != last {
						changes++
					}
					last = n.Name
					break
				}
			}
			select {
			case <-ctx.Done():
				done <- changes
				return
			case <-t.C:
			}
		}
	}()
	return func() int {
		cancel()
		return <-done
	}
}
