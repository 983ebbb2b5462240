package api

import (
	"testing"
	"time"
)

// TestRateLimitBuckets: each client has its own bucket of rate requests,
// refilled at rate per second up to rate; a refusal says how long to wait;
// idle buckets are dropped.
func TestRateLimitBuckets(t *testing.T) {
	l := newRateLimit(4)
	t0 := time.Unix(1_000_000, 0)
	for i := 0; i < 4; i++ {
		if ok, _ := l.allow("a", t0); !ok {
			t.Fatalf("request %d of a burst of 4 refused", i)
		}
	}
	ok, wait := l.allow("a", t0)
	if ok || wait != 250*time.Millisecond {
		t.Fatalf("fifth request: ok=%v wait=%s, want refused for 250ms", ok, wait)
	}
	if ok, _ := l.allow("b", t0); !ok {
		t.Fatal("another client was refused by a's bucket")
	}
	if ok, _ := l.allow("a", t0.Add(250*time.Millisecond)); !ok {
		t.Fatal("a refilled token was refused")
	}
	// A long pause refills to the burst, never beyond.
	later := t0.Add(10 * time.Second)
	for i := 0; i < 4; i++ {
		if ok, _ := l.allow("a", later); !ok {
			t.Fatalf("request %d after a pause refused", i)
		}
	}
	if ok, _ := l.allow("a", later); ok {
		t.Fatal("the bucket held more than its burst after a pause")
	}
	l.allow("c", later.Add(2*idleBucket))
	if _, kept := l.buckets["a"]; kept {
		t.Fatal("an idle bucket was kept")
	}
	if newRateLimit(0) != nil {
		t.Fatal("max_request_rate 0 made a limiter")
	}
}

func TestSocketCount(t *testing.T) {
	c := &socketCount{max: 2}
	if !c.acquire() || !c.acquire() || c.acquire() {
		t.Fatal("want two slots and a refusal")
	}
	c.release()
	if !c.acquire() {
		t.Fatal("a released slot was not reused")
	}
	unlimited := &socketCount{}
	for i := 0; i < 100; i++ {
		if !unlimited.acquire() {
			t.Fatal("max 0 refused a socket")
		}
	}
}
