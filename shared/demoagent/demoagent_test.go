package demoagent

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestReplies(t *testing.T) {
	ws := t.TempDir()
	cfg := Config{Workspace: ws, ChunkDelay: time.Millisecond}
	c, err := Open(ws, "conv-1", false)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct{ in, want string }{
		{"recall", "nothing to recall"},
		{"remember a b", "ok, remembering a b"},
		{"hello world", "turn 3: hello world"},
		{"remember c", "ok, remembering c"},
		{"sleep 0", "slept 0"},
		{"sleep x", "turn 6: sleep x"},
	}
	for _, s := range steps {
		var chunks []string
		if err := c.Turn(context.Background(), cfg, s.in, func(ch string) error { chunks = append(chunks, ch); return nil }); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(chunks, ""); got != s.want || len(chunks) < 2 {
			t.Fatalf("%q → %q in %d chunks, want %q in several", s.in, got, len(chunks), s.want)
		}
	}
	// Resumed from disk, the conversation remembers and keeps counting.
	c2, err := Open(ws, "conv-1", true)
	if err != nil {
		t.Fatal(err)
	}
	var got string
	_ = c2.Turn(context.Background(), cfg, "recall", func(ch string) error { got += ch; return nil })
	if got != "you asked me to remember: a, b, c" || c2.Turns != 7 {
		t.Fatalf("after resume: %q turns=%d", got, c2.Turns)
	}
	if _, err := Open(ws, "nope", true); err == nil {
		t.Fatal("resume of an unknown conversation succeeded")
	}
	if _, err := Open(ws, "../x", false); err == nil {
		t.Fatal("path-like id accepted")
	}
}

func TestSleepIsCancellable(t *testing.T) {
	ws := t.TempDir()
	c, _ := Open(ws, "c", false)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := c.Turn(ctx, Config{Workspace: ws}, "sleep 30", func(string) error { return nil })
	if err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("sleep not cancelled: %v after %s", err, time.Since(start))
	}
}
