package sessions

import (
	"testing"
	"time"
)

// A session's timed flushes replicate at most maxFlushBytesPerSecond of
// message text: small messages flush every flushInterval, a large one
// holds the next flush back in proportion to its size.
func TestFlushDelayBoundsReplicatedBytes(t *testing.T) {
	now := time.Now()
	p := &pumper{}
	if d := p.flushDelay(now); d != flushInterval {
		t.Fatalf("first flush after %s, want %s", d, flushInterval)
	}
	cases := []struct {
		written int
		want    time.Duration
	}{
		{100, flushInterval},                         // well under the bound: ~10 writes/s
		{maxFlushBytesPerSecond / 10, flushInterval}, // exactly the bound at 10 writes/s
		{maxFlushBytesPerSecond, time.Second},
		{4 * maxFlushBytesPerSecond, 4 * time.Second},
	}
	for _, c := range cases {
		p.notBefore = now.Add(flushCost(c.written))
		if d := p.flushDelay(now); d != c.want {
			t.Errorf("after a flush of %d bytes: next in %s, want %s", c.written, d, c.want)
		}
		// A message that grows at the bound's rate is written every
		// flushCost: bytes per second stay under the bound.
		if rate := float64(c.written) / max(flushCost(c.written), flushInterval).Seconds(); rate > maxFlushBytesPerSecond+1 {
			t.Errorf("%d-byte writes replicate %.0f bytes/s", c.written, rate)
		}
	}
	// Chunks that come long after the last flush wait flushInterval only.
	p.notBefore = now.Add(time.Second)
	if d := p.flushDelay(now.Add(5 * time.Second)); d != flushInterval {
		t.Fatalf("late chunks wait %s, want %s", d, flushInterval)
	}
}
