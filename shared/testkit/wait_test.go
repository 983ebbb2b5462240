package testkit

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// A wait that times out reports the last reason its check gave.
func TestWaitReportsTheLastReason(t *testing.T) {
	n := 0
	err := Wait(100*time.Millisecond, func() (bool, error) {
		n++
		return false, errors.New("attempt " + strings.Repeat("I", min(n, 3)))
	})
	if err == nil || err.Error() != "attempt III" {
		t.Fatalf("Wait: %v, want the last reason (attempt III)", err)
	}
	if err := Wait(time.Second, func() (bool, error) { n++; return n > 5, nil }); err != nil {
		t.Fatalf("Wait of a condition that comes to hold: %v", err)
	}
	if err := Wait(0, Cond(func() bool { return false })); err == nil || !strings.Contains(err.Error(), "did not hold") {
		t.Fatalf("Wait without a reason: %v", err)
	}
}
