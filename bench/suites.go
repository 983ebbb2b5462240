package bench

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/paddockhq/paddock/bench/harness"
)

// Env is what every suite gets.
type Env struct {
	Bin   string // directory with paddock, agentctl, plugins/
	Quick bool
	Dir   string // scratch directory
	Logf  func(format string, args ...any)
}

// ClusterSuite measures API writes on a 3-node cluster of real processes at
// 1 and 64 clients, and leader failover (kill -9 until a write succeeds).
func ClusterSuite(ctx context.Context, env Env) ([]Result, error) {
	dir, err := os.MkdirTemp(env.Dir, "cluster-")
	if err != nil {
		return nil, err
	}
	c, err := harness.Start(harness.Options{Bin: env.Bin, Dir: dir, Size: 3, LogLevel: "warn"})
	if err != nil {
		return nil, err
	}
	defer c.Stop()
	leader, err := c.Leader(30 * time.Second)
	if err != nil {
		return nil, err
	}
	trials, d, kills := 5, 5*time.Second, 25
	if env.Quick {
		trials, d, kills = 2, 2*time.Second, 5
	}
	var out []Result
	for _, clients := range []int{1, 64} {
		var rates, lats []float64
		errs := 0
		for t := 0; t < trials; t++ {
			load := RunWrites(ctx, clients, d, PaddockWriter(leader.URL()))
			rates = append(rates, load.Rate)
			lats = append(lats, load.Latencies...)
			errs += load.Errors
		}
		env.Logf("paddock writes c%d: %.0f/s median, %d errors", clients, Percentile(rates, 50), errs)
		rate := Summary(Result{Name: fmt.Sprintf("writes_per_s_c%d", clients), Area: "Cluster: writes and failover", Unit: "writes/s",
			Note: fmt.Sprintf("POST /v1/tasks to the leader, 3 processes on one host, %d×%s trials, %d errors", trials, d, errs)}, rates, true)
		if clients == 64 {
			rate.Goal = "≥ 5000"
			rate = Verdict(rate, rate.P50 >= 5000)
		}
		out = append(out, rate)
		out = append(out, Summary(Result{Name: fmt.Sprintf("write_latency_ms_c%d", clients), Area: "Cluster: writes and failover", Unit: "ms",
			Note: "per-write latency over every write of the trials"}, lats, false))
	}
	times, err := Failover(ctx, c, kills, func(n *harness.Node) Writer { return PaddockWriter(n.URL()) })
	if err != nil {
		return out, fmt.Errorf("failover: %w", err)
	}
	fo := Summary(Result{Name: "failover_to_write_ms", Area: "Cluster: writes and failover", Unit: "ms", Goal: "p50 ≤ 600, p99 ≤ 1500",
		Note: fmt.Sprintf("kill -9 of the leader until a write through a survivor succeeds, %d kills, default raft timing (300ms)", len(times))}, times, false)
	out = append(out, Verdict(fo, fo.P50 <= 600 && fo.P99 <= 1500))
	return out, nil
}
