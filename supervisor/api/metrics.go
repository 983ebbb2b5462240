package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

type metrics struct {
	requests *prometheus.HistogramVec
	handler  http.Handler
}

func newMetrics(reg *prometheus.Registry, c Cluster) *metrics {
	m := &metrics{
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "paddock_http_request_duration_seconds",
			Help:    "HTTP API request latency by route and status.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}, []string{"route", "code"}),
	}
	reg.MustRegister(m.requests,
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
	)
	m.handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	return m
}

func (m *metrics) observe(route string, code int, d time.Duration) {
	m.requests.WithLabelValues(route, strconv.Itoa(code)).Observe(d.Seconds())
}

func (s *Server) metricsHandler(w http.ResponseWriter, r *http.Request) error {
	s.metrics.handler.ServeHTTP(w, r)
	return nil
}
