package telemetry

import (
	"strconv"
	"strings"
	"sync"
	"time"

	metrics "github.com/hashicorp/go-metrics/compat"
	gmprom "github.com/hashicorp/go-metrics/compat/prometheus"
	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
)

// The raft metrics every node exports from its start (declared up front, so
// they are there before raft first reports them and never expire). Timers
// are summaries in milliseconds, as go-metrics reports them; their names are
// raft's keys with the "paddock" prefix ("raft.commitTime" becomes
// paddock_raft_commitTime).
var raftSummaries = []gmprom.SummaryDefinition{
	{Name: []string{"paddock", "raft", "commitTime"}, Help: "Milliseconds from a raft log entry's dispatch on the leader to its commit (a quorum has it)."},
	{Name: []string{"paddock", "raft", "fsm", "applyBatch"}, Help: "Milliseconds to apply one batch of committed entries to Paddock's state (its FSM applies in batches)."},
	{Name: []string{"paddock", "raft", "fsm", "applyBatchNum"}, Help: "Entries in each batch applied to Paddock's state."},
	{Name: []string{"paddock", "raft", "leader", "lastContact"}, Help: "Milliseconds since the leader last heard from a quorum, sampled on the leader (raft's leader.lastContact)."},
	{Name: []string{"paddock", "raft", "leader", "dispatchLog"}, Help: "Milliseconds for the leader to write a batch of entries to its own log."},
	{Name: []string{"paddock", "raft", "rpc", "appendEntries"}, Help: "Milliseconds a follower takes to handle one AppendEntries RPC."},
}

var raftCounters = []gmprom.CounterDefinition{
	{Name: []string{"paddock", "raft", "apply"}, Help: "Raft log entries this node applied as leader (commands it proposed)."},
	{Name: []string{"paddock", "raft", "state", "leader"}, Help: "Times this node became raft leader."},
	{Name: []string{"paddock", "raft", "state", "candidate"}, Help: "Times this node started an election."},
	{Name: []string{"paddock", "raft", "transition", "heartbeat_timeout"}, Help: "Times this follower lost its leader's heartbeat."},
}

// raftBlocked are raft keys repeated once per peer id in the name (raft also
// reports them with a peer label); they would make one family per server.
// blockingSink leaves them out.
var raftBlocked = []string{
	"paddock.raft.replication.heartbeat.",
	"paddock.raft.replication.appendEntries.rpc.",
	"paddock.raft.replication.appendEntries.logs.",
	"paddock.raft.replication.installSnapshot.",
}

// blockingSink passes every metric but raftBlocked's to the Prometheus sink.
// It does what go-metrics' own filter (Config.BlockedPrefixes) would, which
// joins each key and looks it up in a radix tree on every call: raft reports
// a few metrics per write and per AppendEntries, and that filter was ~1.5% of
// a leader's CPU at 64 concurrent writers.
type blockingSink struct{ metrics.MetricSink }

func blocked(key []string) bool {
	for _, p := range raftBlocked {
		if joinedHasPrefix(key, p) {
			return true
		}
	}
	return false
}

// joinedHasPrefix reports whether strings.Join(parts, ".") begins with
// prefix, without joining.
func joinedHasPrefix(parts []string, prefix string) bool {
	for i, p := range parts {
		if i > 0 {
			if prefix == "" {
				return true
			}
			if prefix[0] != '.' {
				return false
			}
			prefix = prefix[1:]
		}
		if len(prefix) <= len(p) {
			return strings.HasPrefix(p, prefix)
		}
		if prefix[:len(p)] != p {
			return false
		}
		prefix = prefix[len(p):]
	}
	return prefix == ""
}

func (s blockingSink) SetGauge(key []string, val float32) {
	if !blocked(key) {
		s.MetricSink.SetGauge(key, val)
	}
}

func (s blockingSink) SetGaugeWithLabels(key []string, val float32, labels []metrics.Label) {
	if !blocked(key) {
		s.MetricSink.SetGaugeWithLabels(key, val, labels)
	}
}

func (s blockingSink) EmitKey(key []string, val float32) {
	if !blocked(key) {
		s.MetricSink.EmitKey(key, val)
	}
}

func (s blockingSink) IncrCounter(key []string, val float32) {
	if !blocked(key) {
		s.MetricSink.IncrCounter(key, val)
	}
}

func (s blockingSink) IncrCounterWithLabels(key []string, val float32, labels []metrics.Label) {
	if !blocked(key) {
		s.MetricSink.IncrCounterWithLabels(key, val, labels)
	}
}

func (s blockingSink) AddSample(key []string, val float32) {
	if !blocked(key) {
		s.MetricSink.AddSample(key, val)
	}
}

func (s blockingSink) AddSampleWithLabels(key []string, val float32, labels []metrics.Label) {
	if !blocked(key) {
		s.MetricSink.AddSampleWithLabels(key, val, labels)
	}
}

var (
	raftOnce     sync.Once
	raftRegistry *prometheus.Registry
	raftErr      error
)

// Raft returns the Prometheus families of raft's own metrics. The first call
// installs a go-metrics Prometheus sink as go-metrics' global sink (raft
// reports through the global, so there is one per process; in-process test
// clusters share it). The sink is installed through go-metrics/compat, the
// package hashicorp/raft and its log stores report through: compat routes
// to armon/go-metrics by default and to hashicorp/go-metrics under the
// hashicorpmetrics build tag, and sink and reporters follow the same
// route whichever tag a build sets. Metrics raft stops reporting expire
// after ten minutes, except the declared ones above.
func Raft() (prometheus.Gatherer, error) {
	raftOnce.Do(func() {
		reg := prometheus.NewRegistry()
		sink, err := gmprom.NewPrometheusSinkFrom(gmprom.PrometheusOpts{
			Registerer:         reg,
			Expiration:         10 * time.Minute,
			Name:               "paddock_raft",
			SummaryDefinitions: raftSummaries,
			CounterDefinitions: raftCounters,
		})
		if err != nil {
			raftErr = err
			return
		}
		conf := metrics.DefaultConfig("paddock")
		conf.EnableHostname = false
		conf.EnableRuntimeMetrics = false // the Go collector reports the runtime
		if _, err := metrics.NewGlobal(conf, blockingSink{sink}); err != nil {
			raftErr = err
			return
		}
		raftRegistry = reg
	})
	return raftRegistry, raftErr
}

// RaftLog returns gauges of the raft log's size: entries since the last
// snapshot (what a restart replays and what the next snapshot compacts)
// and the bytes of the log store on disk, as storeBytes reports them,
// labelled with the store ("bolt" or "wal", server.raft_store).
func RaftLog(r *raft.Raft, store string, storeBytes func() int64) []prometheus.Collector {
	stat := func(key string) float64 {
		n, _ := strconv.ParseUint(r.Stats()[key], 10, 64)
		return float64(n)
	}
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "paddock_raft_log_entries",
			Help: "Raft log entries after the last snapshot (last log index minus last snapshot index)."},
			func() float64 {
				s := r.Stats()
				last, _ := strconv.ParseUint(s["last_log_index"], 10, 64)
				snap, _ := strconv.ParseUint(s["last_snapshot_index"], 10, 64)
				if last < snap {
					return 0
				}
				return float64(last - snap)
			}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "paddock_raft_log_store_bytes",
			Help:        "Size of this node's raft log store on disk in bytes (raft.db for bolt, the write-ahead log's preallocated segments for wal), labelled with the store.",
			ConstLabels: prometheus.Labels{"store": store}},
			func() float64 { return float64(storeBytes()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "paddock_raft_last_log_index", Help: "Index of the last entry in this node's raft log."},
			func() float64 { return stat("last_log_index") }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "paddock_raft_commit_index", Help: "Raft commit index as this node knows it."},
			func() float64 { return stat("commit_index") }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "paddock_raft_term", Help: "This node's current raft term."},
			func() float64 { return stat("term") }),
	}
}
