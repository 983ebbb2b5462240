package monitor

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

func TestStreamAtItsOwnLevel(t *testing.T) {
	var out bytes.Buffer
	root := hclog.NewInterceptLogger(&hclog.LoggerOptions{Name: "paddock", Level: hclog.Info, Output: &out})
	s := Open(root, Options{Level: hclog.Debug})
	defer s.Close()
	root.Named("sessions").Debug("a debug line", "session", "s1")
	root.Trace("a trace line")
	select {
	case line := <-s.Lines():
		if !strings.Contains(string(line), "[DEBUG] paddock.sessions: a debug line: session=s1") {
			t.Errorf("streamed %q", line)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the debug line was not streamed")
	}
	if len(s.Lines()) != 0 {
		t.Errorf("a trace line reached a debug stream")
	}
	if strings.Contains(out.String(), "debug line") {
		t.Errorf("the server's own info-level output got the debug line: %q", out.String())
	}
	s.Close()
	root.Info("after close")
	if len(s.Lines()) != 0 {
		t.Errorf("a closed stream still receives lines")
	}
}

// TestSlowStreamDropsAndCounts: a stream nobody reads never holds up the
// logger; it keeps Buffer lines and counts the rest.
func TestSlowStreamDropsAndCounts(t *testing.T) {
	root := hclog.NewInterceptLogger(&hclog.LoggerOptions{Name: "paddock", Level: hclog.Info, Output: &bytes.Buffer{}})
	s := Open(root, Options{Level: hclog.Info, Buffer: 4})
	defer s.Close()
	done := make(chan struct{})
	go func() {
		for i := 0; i < 1000; i++ {
			root.Info("line", "i", i)
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("logging blocked on a stream nobody reads")
	}
	if got := len(s.Lines()); got != 4 {
		t.Errorf("buffered %d lines, want 4", got)
	}
	if got := s.Dropped(); got != 996 {
		t.Errorf("dropped %d lines, want 996", got)
	}
}

func TestStreamJSON(t *testing.T) {
	root := hclog.NewInterceptLogger(&hclog.LoggerOptions{Name: "paddock", Level: hclog.Info, Output: &bytes.Buffer{}})
	s := Open(root, Options{JSON: true})
	defer s.Close()
	root.Info("hello", "k", "v")
	line := <-s.Lines()
	if !strings.HasPrefix(string(line), "{") || !strings.Contains(string(line), `"@message":"hello"`) || !strings.Contains(string(line), `"k":"v"`) {
		t.Errorf("JSON line %q", line)
	}
}
