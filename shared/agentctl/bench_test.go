package agentctl_test

import (
	"sort"
	"testing"
	"time"

	"github.com/paddockhq/paddock/shared/agentctl"
)

// BenchmarkPromptRoundTrip measures prompt → turn_finished through a real
// agentctl process and the real demo agent (ACP). It reports p50/p99 in ms.
func BenchmarkPromptRoundTrip(b *testing.B) {
	p := startServe(b, b.TempDir())
	c := p.c
	c.SetFencingToken(1)
	prof := agentctl.Profile{Protocol: "acp", Command: []string{"paddock-demo-agent", "--chunk-delay", "1ms"}}
	if _, err := c.StartAgent(ctx(b), prof, ""); err != nil {
		b.Fatal(err)
	}
	w := newWatcher(c)
	w.waitEvent(b, agentctl.EventAgentStarted, nil, 10*time.Second)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if _, err := c.Prompt(ctx(b), "hello there"); err != nil {
			b.Fatal(err)
		}
		w.waitEvent(b, agentctl.EventTurnFinished, nil, 10*time.Second)
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	q := func(f float64) float64 { return float64(lat[int(f*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
}
