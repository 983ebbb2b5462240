package demoagent

import (
	"context"
	"os"
	"path/filepath"
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

func TestStreamSendsEachChunkOnItsOwn(t *testing.T) {
	ws := t.TempDir()
	c, err := Open(ws, "s", false)
	if err != nil {
		t.Fatal(err)
	}
	var chunks []string
	if err := c.Turn(context.Background(), Config{Workspace: ws, ChunkDelay: time.Microsecond}, "stream 3",
		func(ch string) error { chunks = append(chunks, ch); return nil }); err != nil {
		t.Fatal(err)
	}
	want := []string{"chunk 1 of 3\n", "chunk 2 of 3\n", "chunk 3 of 3\n", "streamed 3"}
	if strings.Join(chunks, "|") != strings.Join(want, "|") {
		t.Fatalf("stream 3 sent %q, want %q", chunks, want)
	}
	// Out of range or not a number: an ordinary turn, nothing streamed.
	for _, in := range []string{"stream 0", "stream -1", "stream x", "stream 100001",
		"stream 3 every 0", "stream 3 every x", "stream 3 every 60001", "stream 3 each 5", "stream 3 every"} {
		var got string
		_ = c.Turn(context.Background(), Config{Workspace: ws, ChunkDelay: time.Microsecond}, in, func(ch string) error { got += ch; return nil })
		if strings.Contains(got, "chunk") || !strings.HasSuffix(got, ": "+in) {
			t.Fatalf("%q → %q, want an ordinary turn reply", in, got)
		}
	}
}

// A stream turn leaves when it handed each chunk on in the workspace: a
// load test measures each chunk's latency from its emission, not from the
// pace the agent should have kept.
func TestStreamRecordsWhenEachChunkWasEmitted(t *testing.T) {
	ws := t.TempDir()
	c, err := Open(ws, "s", false)
	if err != nil {
		t.Fatal(err)
	}
	var seen []time.Time // when emit was entered, after the recorded moment
	if err := c.Turn(context.Background(), Config{Workspace: ws, ChunkDelay: time.Millisecond}, "stream 5",
		func(string) error { seen = append(seen, time.Now()); return nil }); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(ws, StoreDir, StreamTimesFile))
	if err != nil {
		t.Fatal(err)
	}
	st, err := ReadStreamTimes(b)
	if err != nil {
		t.Fatal(err)
	}
	if st.Chunks != 5 || len(st.EmittedUnixNano) != len(seen) {
		t.Fatalf("stream times %+v, want 5 chunks and %d times", st, len(seen))
	}
	for i, ns := range st.EmittedUnixNano {
		at := time.Unix(0, ns)
		if at.After(seen[i]) || i > 0 && !at.After(seen[i-1]) {
			t.Errorf("chunk %d recorded at %s, emitted at %s (previous at %s)", i+1, at, seen[i], seen[max(i-1, 0)])
		}
	}
	// An ordinary turn leaves the last stream's times alone.
	if err := c.Turn(context.Background(), Config{Workspace: ws}, "hello", func(string) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if b2, _ := os.ReadFile(filepath.Join(ws, StoreDir, StreamTimesFile)); string(b2) != string(b) {
		t.Fatal("an ordinary turn rewrote the stream times")
	}
}

func TestStreamInTerminalModeIsOneReplyLinePerChunk(t *testing.T) {
	ws := t.TempDir()
	var out strings.Builder
	err := ServeTTY(context.Background(), Config{Workspace: ws, ChunkDelay: time.Microsecond}, "t", false,
		strings.NewReader("stream 2\n"), &out)
	if err != nil {
		t.Fatal(err)
	}
	want := TTYPrompt + "agent: chunk 1 of 2\nagent: chunk 2 of 2\nagent: streamed 2\n" + TTYPrompt
	if !strings.Contains(out.String(), want) {
		t.Fatalf("terminal output %q lacks %q", out.String(), want)
	}
}

// "stream N every MS" keeps a fixed schedule: chunk i is due at the turn's
// start + i×MS. A chunk whose emit was held up does not push the next ones
// back: the agent catches up without pausing, so the load it offers stays
// N chunks in N×MS.
func TestPacedStreamKeepsItsScheduleAndCatchesUp(t *testing.T) {
	ws := t.TempDir()
	c, err := Open(ws, "p", false)
	if err != nil {
		t.Fatal(err)
	}
	const n, every = 10, 20 * time.Millisecond
	var chunks []string
	var seen []time.Time
	began := time.Now()
	err = c.Turn(context.Background(), Config{Workspace: ws}, "stream 10 every 20", func(ch string) error {
		seen = append(seen, time.Now())
		chunks = append(chunks, ch)
		if len(chunks) == 3 {
			time.Sleep(5 * every) // a reader that stalls: chunks 4…8 fall due meanwhile
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(chunks, ""), strings.Join(StreamChunks(n), ""); got != want {
		t.Fatalf("paced stream sent %q, want the reply of stream %d: %q", got, n, want)
	}
	b, err := os.ReadFile(filepath.Join(ws, StoreDir, StreamTimesFile))
	if err != nil {
		t.Fatal(err)
	}
	st, err := ReadStreamTimes(b)
	if err != nil {
		t.Fatal(err)
	}
	if st.Chunks != n || st.IntervalNano != int64(every) || len(st.EmittedUnixNano) != n+1 {
		t.Fatalf("stream times %+v, want %d chunks, interval %s and %d times", st, n, every, n+1)
	}
	start := time.Unix(0, st.StartUnixNano)
	if start.Before(began) || start.After(seen[0]) {
		t.Fatalf("start %s not between the turn's call (%s) and its first chunk (%s)", start, began, seen[0])
	}
	for i, ns := range st.EmittedUnixNano {
		at, due := time.Unix(0, ns), st.Due(i)
		if !due.Equal(start.Add(time.Duration(i) * every)) {
			t.Fatalf("chunk %d due %s, want start + %d×%s", i, due, i, every)
		}
		if at.Before(due) {
			t.Errorf("chunk %d emitted %s before it was due", i, due.Sub(at))
		}
	}
	// The stall held chunk 4 (index 3) back by ~4 intervals; chunks 4…7 were
	// all due by then and went out back to back, not an interval apart.
	caughtUp := time.Unix(0, st.EmittedUnixNano[7]).Sub(time.Unix(0, st.EmittedUnixNano[3]))
	if caughtUp >= 3*every {
		t.Errorf("chunks 4…8 (indexes 3…7) took %s after the stall, want them sent at once (behind schedule, no pause)", caughtUp)
	}
	// The whole turn still took its schedule's length: the last chunk was
	// not due before n×every.
	if last := time.Unix(0, st.EmittedUnixNano[n]); last.Sub(start) < time.Duration(n)*every {
		t.Errorf("the closing line went out %s after the start, before its due time %s", last.Sub(start), time.Duration(n)*every)
	}
	// An unpaced turn records no schedule.
	if err := c.Turn(context.Background(), Config{Workspace: ws, ChunkDelay: time.Microsecond}, "stream 2", func(string) error { return nil }); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(filepath.Join(ws, StoreDir, StreamTimesFile))
	if st, err := ReadStreamTimes(b); err != nil || st.IntervalNano != 0 || !st.Due(0).IsZero() {
		t.Fatalf("unpaced stream times %+v (%v), want no schedule", st, err)
	}
}
