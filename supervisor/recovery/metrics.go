package recovery

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paddockhq/paddock/supervisor/sessions"
)

// Collectors are Prometheus gauges of this node's last completed recovery
// run (all zero before one): how long it took, how many sessions it went
// through by outcome (skipped among them), how many needed retries, failed
// or were left pending, and when it finished. An operator (and the benchmark)
// reads how much of a failover was recovery.
func (r *Recovery) Collectors() []prometheus.Collector {
	last := func(f func(*Report) float64) func() float64 {
		return func() float64 {
			if rep := r.Last(); rep != nil {
				return f(rep)
			}
			return 0
		}
	}
	out := []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "paddock_recovery_last_duration_seconds",
			Help: "Duration of this node's last completed startup recovery."},
			last(func(rep *Report) float64 { return rep.Duration.Seconds() })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "paddock_recovery_last_finished_timestamp_seconds",
			Help: "Unix time when this node's last startup recovery finished."},
			last(func(rep *Report) float64 {
				return float64(rep.Started.Add(rep.Duration).UnixNano()) / 1e9
			})),
	}
	for _, g := range []struct {
		name, help string
		value      func(*Report) int
	}{
		{"paddock_recovery_last_retried_sessions", "Sessions this node's last startup recovery recovered only after retrying a transient failure (a pending leadership transfer, a timeout).",
			func(rep *Report) int { return rep.Retried }},
		{"paddock_recovery_last_retries", "Retries of transient failures in this node's last startup recovery, all sessions together.",
			func(rep *Report) int { return rep.Retries }},
		{"paddock_recovery_last_failed_sessions", "Sessions whose recovery in this node's last startup recovery ended with an error that is not transient.",
			func(rep *Report) int { return rep.Failed }},
		{"paddock_recovery_last_pending_sessions", "Sessions this node's last startup recovery left unfinished because leadership ended.",
			func(rep *Report) int { return rep.Pending }},
	} {
		out = append(out, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: g.name, Help: g.help},
			last(func(rep *Report) float64 { return float64(g.value(rep)) })))
	}
	for _, o := range []sessions.Outcome{sessions.OutcomeContinued, sessions.OutcomeResumed, sessions.OutcomeWorkspace,
		sessions.OutcomeLost, sessions.OutcomeStarted, sessions.OutcomeStopped, sessions.OutcomeSkipped} {
		out = append(out, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "paddock_recovery_last_sessions",
			Help: "Sessions this node's last startup recovery went through, by outcome.", ConstLabels: prometheus.Labels{"outcome": string(o)}},
			last(func(rep *Report) float64 { return float64(rep.Outcomes[o]) })))
	}
	return out
}
