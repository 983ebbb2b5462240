package main

import (
	"os"
	goruntime "runtime"
	"testing"
)

// agentctl serve runs the Go scheduler on one processor, and on one per
// CPU while two or more terminals are attached; GOMAXPROCS in the
// environment overrides both.
func TestProcessorsFollowAttachedTerminals(t *testing.T) {
	if os.Getenv("GOMAXPROCS") != "" {
		t.Skip("GOMAXPROCS is set: agentctl leaves the scheduler alone")
	}
	if goruntime.NumCPU() < 2 {
		t.Skip("one CPU: one processor either way")
	}
	defer goruntime.GOMAXPROCS(goruntime.GOMAXPROCS(0))
	onAttached := processors()
	for _, c := range []struct{ attached, want int }{
		{0, 1}, {1, 1}, {2, goruntime.NumCPU()}, {3, goruntime.NumCPU()}, {1, 1}, {0, 1},
	} {
		onAttached(c.attached)
		if got := goruntime.GOMAXPROCS(0); got != c.want {
			t.Fatalf("%d terminals attached: %d processors, want %d", c.attached, got, c.want)
		}
	}
	t.Setenv("GOMAXPROCS", "3")
	if processors() != nil {
		t.Fatal("GOMAXPROCS=3 in the environment, and agentctl still switches processors")
	}
}
