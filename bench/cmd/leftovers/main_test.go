package main

import (
	"bytes"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestKillsAndListsWhatWasLeft: a process left working in the directory is
// killed and named; a second run finds nothing; no directory is a usage error.
func TestKillsAndListsWhatWasLeft(t *testing.T) {
	dir := t.TempDir()
	left := exec.Command("sleep", "600")
	left.Dir = dir
	if err := left.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = left.Process.Kill() })
	exited := make(chan error, 1)
	go func() { exited <- left.Wait() }()

	var out, errOut bytes.Buffer
	if code := run([]string{dir}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, &errOut)
	}
	if want := strconv.Itoa(left.Process.Pid) + " sleep 600"; !strings.Contains(out.String(), want) {
		t.Errorf("output %q does not name %q", &out, want)
	}
	if err := <-exited; err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("the left process ended with %v; want killed", err)
	}
	out.Reset()
	if code := run([]string{dir}, &out, &errOut); code != 0 || out.Len() != 0 {
		t.Errorf("second run: exit %d, output %q; want 0 and nothing", code, &out)
	}
	if code := run(nil, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "usage") {
		t.Errorf("no directory: exit %d, %q; want 2 and the usage", code, &errOut)
	}
}
