package api

import (
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/supervisor/state"
)

// metrics are the API's own Prometheus families and the handler of
// GET /v1/metrics, which serves them with whatever else was registered in
// Options.Registry and gathered from Options.Gatherers (raft's metrics).
type metrics struct {
	requests    *prometheus.HistogramVec
	connections *prometheus.GaugeVec
	// monitorDropped counts log lines dropped by slow monitor streams.
	monitorDropped prometheus.Counter
	handler        http.Handler
}

// Stream names of paddock_streams.
const (
	streamTerminal = "terminal"
	streamEvents   = "events"
	streamMonitor  = "monitor"
)

func newMetrics(reg *prometheus.Registry, extra []prometheus.Gatherer, c Cluster, p Plugins) *metrics {
	m := &metrics{
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "paddock_http_request_duration_seconds",
			Help:    "HTTP API request latency by route and status.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}, []string{"route", "code"}),
		connections: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "paddock_streams",
			Help: "Open streams this node serves, by stream: terminal and events (WebSockets), monitor (log streams).",
		}, []string{"stream"}),
		monitorDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "paddock_monitor_dropped_lines_total",
			Help: "Log lines dropped because a monitor stream's reader fell behind.",
		}),
	}
	for _, s := range []string{streamTerminal, streamEvents, streamMonitor} {
		m.connections.WithLabelValues(s)
	}
	reg.MustRegister(m.requests, m.connections, m.monitorDropped,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "paddock_raft_is_leader", Help: "1 when this node is the raft leader."},
			func() float64 {
				if c.IsLeader() {
					return 1
				}
				return 0
			}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "paddock_state_applied_index", Help: "Raft index applied to local state."},
			func() float64 { return float64(c.Store().LastIndex()) }),
		&stateCollector{store: c.Store()},
	)
	if p != nil {
		reg.MustRegister(&pluginCollector{plugins: p})
	}
	m.handler = promhttp.HandlerFor(append(prometheus.Gatherers{reg}, extra...), promhttp.HandlerOpts{})
	return m
}

func (m *metrics) observe(route string, code int, d time.Duration) {
	m.requests.WithLabelValues(route, strconv.Itoa(code)).Observe(d.Seconds())
}

// stream counts one open WebSocket stream until the returned func is called.
func (m *metrics) stream(name string) func() {
	g := m.connections.WithLabelValues(name)
	g.Inc()
	return g.Dec
}

func (s *Server) metricsHandler(w http.ResponseWriter, r *http.Request) error {
	s.metrics.handler.ServeHTTP(w, r)
	return nil
}

var (
	sessionsDesc = prometheus.NewDesc("paddock_sessions",
		"Sessions in this node's copy of the replicated state, by state.", []string{"state"}, nil)
	executorsDesc = prometheus.NewDesc("paddock_executors",
		"Executor rows in this node's copy of the replicated state, by runtime and status.", []string{"runtime", "status"}, nil)
	pluginHealthyDesc = prometheus.NewDesc("paddock_plugin_healthy",
		"1 when this node's runtime plugin is loaded and answering, else 0.", []string{"plugin"}, nil)
	pluginRestartsDesc = prometheus.NewDesc("paddock_plugin_restarts_total",
		"Attempts this node made to start a runtime plugin again after losing it.", []string{"plugin"}, nil)
)

// stateCollector counts sessions and executors at scrape time from local
// state (every node applies the same log, so every node reports the same).
type stateCollector struct{ store *state.Store }

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- sessionsDesc
	ch <- executorsDesc
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	// Every state is reported, zero included, so a graph's series never vanish.
	bySession := map[api.SessionState]int{}
	for st := range sessionStates {
		bySession[st] = 0
	}
	for _, sess := range c.store.Sessions(state.SessionFilter{}) {
		bySession[sess.State]++
	}
	for st, n := range bySession {
		ch <- prometheus.MustNewConstMetric(sessionsDesc, prometheus.GaugeValue, float64(n), string(st))
	}
	type key struct{ runtime, status string }
	byExecutor := map[key]int{}
	for _, ex := range c.store.Executors("") {
		byExecutor[key{ex.Runtime, string(ex.Status)}]++
	}
	keys := make([]key, 0, len(byExecutor))
	for k := range byExecutor {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].runtime+keys[i].status < keys[j].runtime+keys[j].status })
	for _, k := range keys {
		ch <- prometheus.MustNewConstMetric(executorsDesc, prometheus.GaugeValue, float64(byExecutor[k]), k.runtime, k.status)
	}
}

// pluginCollector reports this node's runtime plugins.
type pluginCollector struct{ plugins Plugins }

func (c *pluginCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- pluginHealthyDesc
	ch <- pluginRestartsDesc
}

func (c *pluginCollector) Collect(ch chan<- prometheus.Metric) {
	for _, p := range c.plugins.List() {
		healthy := 0.0
		if p.Healthy {
			healthy = 1
		}
		ch <- prometheus.MustNewConstMetric(pluginHealthyDesc, prometheus.GaugeValue, healthy, p.Name)
		ch <- prometheus.MustNewConstMetric(pluginRestartsDesc, prometheus.CounterValue, float64(p.Restarts), p.Name)
	}
}
