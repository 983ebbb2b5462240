package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/paddockhq/paddock/bench/harness"
)

// Writer performs one small write against a store (Paddock or a peer).
type Writer func(ctx context.Context, client *http.Client, i int) error

// WriteLoad is the result of one closed-loop write trial.
type WriteLoad struct {
	Rate      float64   // writes per second
	Latencies []float64 // milliseconds
	Errors    int
}

// RunWrites runs `clients` closed-loop writers for d and measures the rate
// and per-write latency.
func RunWrites(ctx context.Context, clients int, d time.Duration, write Writer) WriteLoad {
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients}}
	defer hc.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var (
		mu     sync.Mutex
		lats   []float64
		errs   int
		wg     sync.WaitGroup
		start  = time.Now()
		counts = make([]int, clients)
	)
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var local []float64
			for i := 0; ctx.Err() == nil; i++ {
				t0 := time.Now()
				err := write(ctx, hc, c*1_000_000+i)
				if ctx.Err() != nil {
					break
				}
				if err != nil {
					mu.Lock()
					errs++
					mu.Unlock()
					continue
				}
				local = append(local, float64(time.Since(t0).Microseconds())/1000)
				counts[c]++
			}
			mu.Lock()
			lats = append(lats, local...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	total := 0
	for _, n := range counts {
		total += n
	}
	return WriteLoad{Rate: float64(total) / time.Since(start).Seconds(), Latencies: lats, Errors: errs}
}

// PaddockWriter writes a small task record through the HTTP API of url.
func PaddockWriter(url string) Writer {
	return func(ctx context.Context, hc *http.Client, i int) error {
		body := fmt.Sprintf(`{"title":"bench-%d"}`, i)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/tasks", bytes.NewBufferString(body))
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			return fmt.Errorf("status %s", resp.Status)
		}
		return nil
	}
}

// PaddockReader lists tasks (GET /v1/tasks) through url: a consistent read,
// or with stale the local node's state (?stale=true). It has the Writer
// shape so that RunWrites drives it as a closed loop.
func PaddockReader(url string, stale bool) Writer {
	target := url + "/v1/tasks"
	if stale {
		target += "?stale=true"
	}
	return func(ctx context.Context, hc *http.Client, _ int) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %s", resp.Status)
		}
		return nil
	}
}

// readSeed is how many tasks the read benchmark lists: a short list, so a
// read's latency is the read path's, not the JSON encoding of a long one.
const readSeed = 20

// readLatencies measures consistent reads on the leader (each confirmed by a
// read round) beside etcd's linearizable range reads of its leader (when
// etcdURL is not empty) and ?stale=true reads of the same Paddock leader's
// local state (no round: what every read cost before reads were made
// linearizable), at 1 and 64 closed-loop clients, trials alternating the
// three. Both stores hold the same readSeed records: etcd's values are the
// JSON of Paddock's tasks. It runs before the write benchmarks.
func readLatencies(ctx context.Context, env Env, lead func(what string) *harness.Node, etcdURL string, trials int, d time.Duration) ([]Result, error) {
	hc := &http.Client{Timeout: 10 * time.Second}
	defer hc.CloseIdleConnections()
	leader := lead("reads")
	seed := PaddockWriter(leader.URL())
	for i := 0; i < readSeed; i++ {
		if err := seed(ctx, hc, -1-i); err != nil {
			return nil, fmt.Errorf("seed tasks for the read benchmark: %w", err)
		}
	}
	if etcdURL != "" {
		var list struct {
			Tasks []json.RawMessage `json:"tasks"`
		}
		if err := getJSON(leader.URL()+"/v1/tasks", &list); err != nil {
			return nil, fmt.Errorf("read the seeded tasks: %w", err)
		}
		values := make([][]byte, len(list.Tasks))
		for i, t := range list.Tasks {
			values[i] = t
		}
		if err := EtcdSeed(ctx, etcdURL, values); err != nil {
			return nil, err
		}
	}
	var out []Result
	for _, clients := range []int{1, 64} {
		var lats, staleLats, peerLats, rates, staleRates, peerRates []float64
		errs, staleErrs, peerErrs := 0, 0, 0
		for t := 0; t < trials; t++ {
			leader := lead("reads")
			load := RunWrites(ctx, clients, d, PaddockReader(leader.URL(), false))
			lats, rates, errs = append(lats, load.Latencies...), append(rates, load.Rate), errs+load.Errors
			load = RunWrites(ctx, clients, d, PaddockReader(leader.URL(), true))
			staleLats, staleRates, staleErrs = append(staleLats, load.Latencies...), append(staleRates, load.Rate), staleErrs+load.Errors
			if etcdURL != "" {
				load = RunWrites(ctx, clients, d, EtcdReader(etcdURL, readSeed))
				peerLats, peerRates, peerErrs = append(peerLats, load.Latencies...), append(peerRates, load.Rate), peerErrs+load.Errors
			}
		}
		env.Logf("reads c%d: consistent p50 %.3fms %.0f/s (%d errors), ?stale=true p50 %.3fms %.0f/s (%d errors), etcd p50 %.3fms %.0f/s (%d errors)",
			clients, Percentile(lats, 50), Percentile(rates, 50), errs, Percentile(staleLats, 50), Percentile(staleRates, 50), staleErrs,
			Percentile(peerLats, 50), Percentile(peerRates, 50), peerErrs)
		workload := fmt.Sprintf("closed loop, %d client(s), each GET /v1/tasks (%d tasks) on the leader, a consistent read (a read round: VerifyLeader shared by concurrent reads, then the FSM caught up); etcd: POST /v3/kv/range of %d keys holding the same tasks' JSON through its JSON gateway to its leader, linearizable (etcd's default: a ReadIndex round); %d×%s trials alternating Paddock consistent, Paddock ?stale=true, etcd",
			clients, readSeed, readSeed, trials, d)
		lat := Summary(Result{Name: fmt.Sprintf("read_latency_ms_c%d", clients), Area: areaCluster, Unit: "ms",
			Note: fmt.Sprintf("%s; against ?stale=true reads of the same node: p50 %.3f ms, ratio %.2f; %d/%d/%d errors (consistent/stale/etcd)",
				workload, Percentile(staleLats, 50), ratio(Percentile(lats, 50), Percentile(staleLats, 50)), errs, staleErrs, peerErrs)}, lats, false)
		rate := Summary(Result{Name: fmt.Sprintf("reads_per_s_c%d", clients), Area: areaCluster, Unit: "reads/s",
			Note: fmt.Sprintf("the reads of read_latency_ms_c%d, the rate of each %s trial; ?stale=true reads p50 %.0f/s", clients, d, Percentile(staleRates, 50))}, rates, true)
		if len(peerRates) > 0 {
			lat = withPeer(lat, Percentile(peerLats, 50), true)
			rate = withPeer(rate, Percentile(peerRates, 50), false)
		}
		stale := Summary(Result{Name: fmt.Sprintf("stale_read_latency_ms_c%d", clients), Area: areaCluster, Unit: "ms",
			Note: fmt.Sprintf("the baseline of read_latency_ms_c%d: the same reads with ?stale=true, served from the leader's local state without a read round; %.0f reads/s at p50", clients, Percentile(staleRates, 50))}, staleLats, false)
		out = append(out, lat, rate, stale)
	}
	return out, nil
}

// ratio is a/b (0 when b is 0).
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// FailoverTrial is one leader kill: milliseconds from the kill until a
// survivor said it leads (Leader) and until a write through a survivor
// succeeded (Write).
type FailoverTrial struct {
	Leader, Write float64
}

// Failover kills the leader `kills` times and measures the time from the
// kill until a survivor leads and until a write succeeds through a
// surviving node. Before each kill the cluster has settled: one agreed
// leader and every running node applied everything the leader had committed
// (a node restarted by the previous trial has caught up). The killed node is
// then restarted from its data_dir.
func Failover(ctx context.Context, c *harness.Cluster, kills int, writerFor func(*harness.Node) Writer) ([]FailoverTrial, error) {
	var out []FailoverTrial
	for k := 0; k < kills; k++ {
		leader, err := c.Leader(30 * time.Second)
		if err != nil {
			return out, err
		}
		if err := caughtUp(ctx, c, leader); err != nil {
			return out, err
		}
		var writers []Writer
		var survivors []*harness.Node
		for _, n := range c.Running() {
			if n != leader {
				writers = append(writers, writerFor(n))
				survivors = append(survivors, n)
			}
		}
		start := time.Now()
		leader.Kill()
		led := firstTime(ctx, start, func() bool { return anyLeads(survivors) })
		if err := untilWrite(ctx, writers); err != nil {
			return out, fmt.Errorf("kill %d: %w", k, err)
		}
		t := FailoverTrial{Write: ms(time.Since(start))}
		t.Leader = <-led
		out = append(out, t)
		if err := leader.Start(); err != nil {
			return out, err
		}
	}
	return out, nil
}

// firstTime polls cond every 5 ms (from its own goroutine) and delivers the
// milliseconds since start at which it first held (-1 when ctx ended or 60 s
// passed first).
func firstTime(ctx context.Context, start time.Time, cond func() bool) <-chan float64 {
	out := make(chan float64, 1)
	go func() {
		for time.Since(start) < time.Minute && ctx.Err() == nil {
			if cond() {
				out <- ms(time.Since(start))
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
		out <- -1
	}()
	return out
}

var statusClient = &http.Client{Timeout: time.Second}

// anyLeads reports whether one of nodes says it leads (GET /v1/health).
func anyLeads(nodes []*harness.Node) bool {
	for _, n := range nodes {
		if l, err := n.Leads(); err == nil && l {
			return true
		}
	}
	return false
}

// raftIndexes reads a node's commit and applied index (GET
// /v1/status?stale=true, answered locally).
func raftIndexes(n *harness.Node) (commit, applied uint64, err error) {
	var st struct {
		CommitIndex  uint64 `json:"commit_index"`
		AppliedIndex uint64 `json:"applied_index"`
	}
	err = n.GetJSON("/v1/status?stale=true", &st)
	return st.CommitIndex, st.AppliedIndex, err
}

func getJSON(url string, v any) error {
	resp, err := statusClient.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// caughtUp waits until every running node has applied what the leader had
// committed when the wait began.
func caughtUp(ctx context.Context, c *harness.Cluster, leader *harness.Node) error {
	commit, _, err := raftIndexes(leader)
	if err != nil {
		return fmt.Errorf("status of the leader: %w", err)
	}
	return waitUntil(ctx, 60*time.Second, 10*time.Millisecond, "every node to catch up with the leader", func() bool {
		for _, n := range c.Running() {
			if _, applied, err := raftIndexes(n); err != nil || applied < commit {
				return false
			}
		}
		return true
	})
}

// untilWrite starts a write attempt every 20 ms, round robin over writers
// (each attempt may wait up to 5 s, as a client would), and returns when the
// first one succeeds: the time to a successful write is not quantised by a
// per-attempt timeout, for Paddock and etcd alike.
func untilWrite(ctx context.Context, writers []Writer) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	hc := &http.Client{Timeout: 5 * time.Second}
	defer hc.CloseIdleConnections()
	ok := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	defer wg.Wait()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if writers[i%len(writers)](ctx, hc, i) == nil {
				once.Do(func() { close(ok) })
			}
		}()
		select {
		case <-ok:
			cancel()
			return nil
		case <-ctx.Done():
			select {
			case <-ok:
				return nil
			default:
			}
			return fmt.Errorf("no write succeeded within 60s of the leader kill")
		case <-tick.C:
		}
	}
}

// raftSummary is one of raft's timings as a node exports it on /v1/metrics
// (a go-metrics summary over its last 10 s, in milliseconds).
type raftSummary struct{ P50, P99 float64 }

// raftTimings reads the raft summaries of a node's /v1/metrics, by metric
// name (paddock_raft_commitTime, …); empty when unread.
func raftTimings(n *harness.Node) map[string]raftSummary {
	resp, err := statusClient.Get(n.URL() + "/v1/metrics")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	return parseRaftSummaries(string(body))
}

// parseRaftSummaries picks the quantiles of paddock_raft_* summaries out of
// Prometheus text.
func parseRaftSummaries(text string) map[string]raftSummary {
	out := map[string]raftSummary{}
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, "paddock_raft_") {
			continue
		}
		name, rest, ok := strings.Cut(line, "{quantile=\"")
		if !ok {
			continue
		}
		q, val, ok := strings.Cut(rest, "\"} ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil || math.IsNaN(v) {
			continue
		}
		s := out[name]
		switch q {
		case "0.5":
			s.P50 = v
		case "0.99":
			s.P99 = v
		}
		out[name] = s
	}
	return out
}

// raftBreakdown says where a write's raft time went in the last 10 s before
// it was read: the leader's own log write, dispatch to commit (the leader's
// write, replication and a follower's write), a follower's handling of
// AppendEntries (its log write included) and the FSM apply.
func raftBreakdown(leader, follower map[string]raftSummary) string {
	if len(leader) == 0 {
		return ""
	}
	f := func(m map[string]raftSummary, name string) string {
		s, ok := m[name]
		if !ok {
			return "?"
		}
		return fmt.Sprintf("%.2f/%.2f", s.P50, s.P99)
	}
	return fmt.Sprintf("; raft's own timings over the last 10 s of the last Paddock trial, p50/p99: the leader's log write %s ms, dispatch to commit %s ms, a follower's AppendEntries %s ms, FSM apply of a batch %s ms (entries per batch %s)",
		f(leader, "paddock_raft_leader_dispatchLog"), f(leader, "paddock_raft_commitTime"),
		f(follower, "paddock_raft_rpc_appendEntries"), f(leader, "paddock_raft_fsm_applyBatch"), f(leader, "paddock_raft_fsm_applyBatchNum"))
}
