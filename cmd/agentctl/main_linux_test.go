package main

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestRunMakesProcessNonDumpable: agentctl marks itself non-dumpable before
// anything else (before the secret is read), so same-uid processes cannot
// read its memory.
func TestRunMakesProcessNonDumpable(t *testing.T) {
	dumpable := func() int {
		t.Helper()
		v, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if dumpable() != 1 {
		t.Fatal("the test process is already non-dumpable; the test could not tell")
	}
	if code := run(nil); code != 2 { // usage error: returns at once
		t.Fatalf("run(nil) = %d, want 2", code)
	}
	if got := dumpable(); got != 0 {
		t.Fatalf("PR_GET_DUMPABLE after run = %d, want 0", got)
	}
}
