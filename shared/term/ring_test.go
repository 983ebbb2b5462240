package term

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/ansi/parser"
	"github.com/paddockhq/paddock/api/termproto"
)

// groundAt runs an independent VT parser (charmbracelet/x/ansi) over s and reports, for
// every offset k, whether a cut before s[k] is outside any sequence and UTF-8 character.
func groundAt(s []byte) []bool {
	p := ansi.NewParser()
	out := make([]bool, len(s)+1)
	out[0] = true
	for i, b := range s {
		p.Advance(b)
		out[i+1] = p.State() == parser.GroundState
	}
	return out
}

func writeChunks(rng *rand.Rand, r *Ring, s []byte, maxChunk int) {
	for i := 0; i < len(s); {
		n := min(len(s)-i, 1+rng.IntN(maxChunk))
		if _, err := r.Write(s[i : i+n]); err != nil {
			panic(err)
		}
		i += n
	}
}

func concat(frames []Chunk) []byte {
	var b bytes.Buffer
	for _, f := range frames {
		b.Write(f.Data)
	}
	return b.Bytes()
}

func TestRingBasics(t *testing.T) {
	r := NewRing(8)
	if r.Oldest() != 0 || r.Next() != 0 {
		t.Fatalf("empty ring: oldest %d next %d", r.Oldest(), r.Next())
	}
	if frames, kind, end := r.Replay(-1); kind != termproto.ReplayFull || len(frames) != 0 || end != 0 {
		t.Fatalf("empty full replay: %v %v %d", frames, kind, end)
	}
	_, _ = r.Write([]byte("abcdef"))
	_, _ = r.Write([]byte("ghij"))
	if r.Oldest() != 2 || r.Next() != 10 {
		t.Fatalf("oldest %d next %d, want 2 10", r.Oldest(), r.Next())
	}
	buf := make([]byte, 100)
	n, err := r.ReadAt(buf, 2)
	if err != nil || string(buf[:n]) != "cdefghij" {
		t.Fatalf("ReadAt(2) = %q, %v", buf[:n], err)
	}
	if _, err := r.ReadAt(buf, 1); !errors.Is(err, ErrOverwritten) {
		t.Fatalf("ReadAt(1) err = %v, want ErrOverwritten", err)
	}
	if _, err := r.ReadAt(buf, 11); err == nil {
		t.Fatal("ReadAt beyond end: no error")
	}
	if n, _ := r.ReadAt(buf, 10); n != 0 {
		t.Fatalf("ReadAt(next) = %d bytes", n)
	}
	if _, kind, _ := r.Replay(10); kind != termproto.ReplayNone {
		t.Fatalf("Replay(next) kind %v", kind)
	}
	if f, kind, end := r.Replay(7); kind != termproto.ReplayDelta || string(concat(f)) != "hij" || end != 10 {
		t.Fatalf("Replay(7) = %q %v %d", concat(f), kind, end)
	}
	if f, kind, _ := r.Replay(1); kind != termproto.ReplayFull || string(concat(f)) != "cdefghij" {
		t.Fatalf("Replay(1) = %q %v", concat(f), kind)
	}
	if _, kind, _ := r.Replay(99); kind != termproto.ReplayFull {
		t.Fatalf("Replay(99) kind %v", kind)
	}
	// A single write larger than the ring keeps only its tail.
	_, _ = r.Write([]byte("0123456789ABCDEF"))
	if n, _ := r.ReadAt(buf, r.Oldest()); string(buf[:n]) != "89ABCDEF" {
		t.Fatalf("after big write: %q", buf[:n])
	}
}

// A fresh client's full replay of a ring that never wrapped starts at the
// stream's start: the shell's first lines are not skipped for a line start.
func TestRingFullReplayOfUnwrappedRingStartsAtZero(t *testing.T) {
	r := NewRing(64 << 10)
	_, _ = r.Write([]byte("first line\r\n"))
	_, _ = r.Write([]byte("second line\r\n$ "))
	f, kind, end := r.Replay(-1)
	if want := "first line\r\nsecond line\r\n$ "; kind != termproto.ReplayFull || string(concat(f)) != want || end != int64(len(want)) {
		t.Fatalf("full replay = %q %v %d, want %q", concat(f), kind, end, want)
	}
	if r.SafeStart() != 0 {
		t.Fatalf("SafeStart = %d, want 0", r.SafeStart())
	}
}

func TestRingSkipsPartialSequences(t *testing.T) {
	r := NewRing(10)
	// The window starts inside the CSI, then inside 世 (3 bytes).
	_, _ = r.Write([]byte("\x1b[31mab世cd"))
	// stream: ESC [ 3 1 m a b E4 B8 96 c d = 12 bytes, window = offsets 2..11
	if got := r.SafeStart(); got != 5 {
		t.Fatalf("safe start %d, want 5 (after the CSI)", got)
	}
	_, _ = r.Write([]byte("e"))
	_, _ = r.Write([]byte("f"))
	_, _ = r.Write([]byte("g"))  // window = 5..14: "ab世cdefg" minus nothing
	_, _ = r.Write([]byte("hi")) // window = 7..16: starts at E4
	if got := r.SafeStart(); got != 7 {
		t.Fatalf("safe start %d, want 7", got)
	}
	_, _ = r.Write([]byte("j")) // window = 8..17: starts at B8, inside 世
	if got := r.SafeStart(); got != 10 {
		t.Fatalf("safe start %d, want 10 (after 世)", got)
	}
	f, _, _ := r.Replay(-1)
	if string(concat(f)) != "cdefghij" {
		t.Fatalf("full replay %q", concat(f))
	}
}

func TestRingLeavesQueriesOut(t *testing.T) {
	r := NewRing(1 << 10)
	_, _ = r.Write([]byte("a\x1b[6nb\x1b]11;?\x1b\\c\x1b[>cd"))
	f, kind, _ := r.Replay(-1)
	if kind != termproto.ReplayFull || string(concat(f)) != "abcd" || len(f) != 4 {
		t.Fatalf("replay %q in %d frames (%v)", concat(f), len(f), kind)
	}
	for _, c := range f {
		if c.Offset < 0 {
			t.Fatalf("bad offset %d", c.Offset)
		}
	}
	if f[1].Offset != 5 || f[2].Offset != 14 {
		t.Fatalf("frames start at %d and %d, want 5 and 14", f[1].Offset, f[2].Offset)
	}
	// A live read includes the queries (the client's terminal must answer them).
	buf := make([]byte, 100)
	n, _ := r.ReadAt(buf, 0)
	if !bytes.Contains(buf[:n], []byte("\x1b[6n")) {
		t.Fatalf("live read lost the query: %q", buf[:n])
	}
}

// TestRingProperties writes random streams in random chunk sizes into rings of random
// sizes and checks every invariant against the generator's own record and an
// independent parser.
func TestRingProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, uint64(len(t.Name()))))
	for trial := range 300 {
		s, qs := genStream(rng, 2000+rng.IntN(30000))
		ground := groundAt(s)
		size := 16 + rng.IntN(8000)
		r := NewRing(size)
		writeChunks(rng, r, s, 1+rng.IntN(2000))
		next := int64(len(s))
		oldest := max(0, next-int64(size))
		if r.Next() != next || r.Oldest() != oldest {
			t.Fatalf("trial %d: next %d oldest %d, want %d %d", trial, r.Next(), r.Oldest(), next, oldest)
		}
		buf := make([]byte, size)
		n, err := r.ReadAt(buf, oldest)
		if err != nil || !bytes.Equal(buf[:n], s[oldest:]) {
			t.Fatalf("trial %d: window content differs (err %v)", trial, err)
		}
		var wantQ [][2]int64
		for _, q := range qs {
			if q[1] > oldest {
				wantQ = append(wantQ, q)
			}
		}
		gotQ := r.Queries()
		if len(gotQ) != len(wantQ) {
			t.Fatalf("trial %d: %d queries, want %d: %v vs %v", trial, len(gotQ), len(wantQ), gotQ, wantQ)
		}
		for i := range gotQ {
			if gotQ[i] != wantQ[i] {
				t.Fatalf("trial %d: query %d at %v, want %v", trial, i, gotQ[i], wantQ[i])
			}
		}
		safe := r.SafeStart()
		if safe < oldest || safe > next || !ground[safe] {
			t.Fatalf("trial %d: safe start %d (oldest %d) is not a ground state", trial, safe, oldest)
		}
		// No safe point was skipped beyond the line search.
		first := oldest
		for first < next && !ground[first] {
			first++
		}
		if safe > first+lineSearch+1 {
			t.Fatalf("trial %d: safe start %d, first safe %d", trial, safe, first)
		}

		frames, kind, end := r.Replay(-1)
		if kind != termproto.ReplayFull || end != next {
			t.Fatalf("trial %d: full replay kind %v end %d", trial, kind, end)
		}
		checkFrames(t, s, frames)
		if got, want := concat(frames), withoutQueries(s, qs, safe, next); !bytes.Equal(got, want) {
			t.Fatalf("trial %d: full replay differs from stream minus queries", trial)
		}
		if len(frames) > 0 && frames[0].Offset != safe && !isQueryStart(qs, safe) {
			t.Fatalf("trial %d: replay starts at %d, safe start %d", trial, frames[0].Offset, safe)
		}

		from := oldest + rng.Int64N(next-oldest+1)
		frames, kind, _ = r.Replay(from)
		wantKind := termproto.ReplayDelta
		if from == next {
			wantKind = termproto.ReplayNone
		}
		if kind != wantKind {
			t.Fatalf("trial %d: replay from %d kind %v, want %v", trial, from, kind, wantKind)
		}
		checkFrames(t, s, frames)
		if got, want := concat(frames), withoutQueries(s, qs, from, next); !bytes.Equal(got, want) {
			t.Fatalf("trial %d: delta replay from %d differs", trial, from)
		}
		if oldest > 0 {
			if _, kind, _ := r.Replay(oldest - 1); kind != termproto.ReplayFull {
				t.Fatalf("trial %d: replay from an overwritten offset: %v", trial, kind)
			}
		}
	}
}

func isQueryStart(qs [][2]int64, off int64) bool {
	for _, q := range qs {
		if q[0] == off {
			return true
		}
	}
	return false
}

// checkFrames checks that each frame holds exactly the stream bytes at its offset,
// frames are ordered, and none is larger than MaxChunk.
func checkFrames(t *testing.T, s []byte, frames []Chunk) {
	t.Helper()
	var last int64 = -1
	for _, f := range frames {
		if f.Offset < last {
			t.Fatalf("frames out of order: %d after %d", f.Offset, last)
		}
		if len(f.Data) == 0 || len(f.Data) > MaxChunk {
			t.Fatalf("frame of %d bytes", len(f.Data))
		}
		if !bytes.Equal(f.Data, s[f.Offset:f.End()]) {
			t.Fatalf("frame at %d does not match the stream", f.Offset)
		}
		last = f.End()
	}
}

func FuzzRing(f *testing.F) {
	f.Add([]byte("\x1b[6nhello\x1b]11;?\a世界"), uint16(7), uint8(3))
	f.Add([]byte("\x1bP$qm\x1b\\\x1b]0;x\x1bc🎉"), uint16(5), uint8(1))
	f.Fuzz(func(t *testing.T, s []byte, size uint16, chunk uint8) {
		r := NewRing(int(size%512) + 1)
		c := int(chunk%64) + 1
		for i := 0; i < len(s); i += c {
			_, _ = r.Write(s[i:min(len(s), i+c)])
		}
		frames, _, end := r.Replay(-1)
		if end != int64(len(s)) {
			t.Fatalf("end %d, want %d", end, len(s))
		}
		checkFrames(t, s, frames)
		for _, fr := range frames {
			if fr.Offset < r.Oldest() {
				t.Fatalf("frame before oldest")
			}
		}
	})
}

// groundAfter reports whether the byte-at-a-time parser is between characters and
// sequences after s[:k].
func groundAfter(s []byte, k int64) bool {
	var p seqParser
	stepAll(&p, s[:k], 0)
	return p.safe()
}

// TestRingParsersMatchByteParser writes streams through rings of several sizes in
// PTY-like chunks (so the tail parser reads runs that wrap around the buffer and
// sequences straddle writes) and checks the head and tail parsers against parsers fed
// the same bytes one at a time.
func TestRingParsersMatchByteParser(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 17))
	streams := map[string][]byte{}
	for _, kind := range []string{"plain", "sgr", "utf8", "mixed"} {
		streams[kind] = benchText(kind, 200<<10)
	}
	gen, _ := genStream(rng, 200<<10)
	streams["generated"] = gen
	for name, s := range streams {
		for _, tc := range [][2]int{{7, 5000}, {100, 5000}, {4093, 5000}, {64 << 10, 5000}, {7, 100 << 10}, {64 << 10, 100 << 10}} {
			size, maxChunk := tc[0], tc[1] // chunks of up to 100 KiB overrun the whole buffer
			r := NewRing(size)
			for i := 0; i < len(s); {
				n := min(len(s)-i, 1+rng.IntN(maxChunk))
				_, _ = r.Write(s[i : i+n])
				i += n
			}
			var head, tail seqParser
			wantQ, _ := stepAll(&head, s, 0)
			oldest := r.Oldest()
			stepAll(&tail, s[:oldest], 0)
			rebuilt := r.tailState()
			for _, pair := range [][2]*seqParser{{&r.head, &head}, {&rebuilt, &tail}} {
				got, want := *pair[0], *pair[1]
				if !sameParser(got, want) {
					t.Fatalf("%s, ring of %d: parser state %+v, want %+v", name, size, got, want)
				}
			}
			var inWindow []span
			for _, q := range wantQ {
				if q.end > oldest {
					inWindow = append(inWindow, q)
				}
			}
			// The replay's start is the first ground state at or after the window's start
			// (or a line start a little further on).
			first := oldest
			for first < int64(len(s)) && !groundAfter(s, first) {
				first++
			}
			if got := r.SafeStart(); got < first || got > first+lineSearch+1 || !groundAfter(s, got) {
				t.Fatalf("%s, ring of %d: safe start %d, first ground state at %d", name, size, got, first)
			}
			if len(r.queries) != len(inWindow) || (len(inWindow) > 0 && !slices.Equal(r.queries, inWindow)) {
				t.Fatalf("%s, ring of %d: queries %v, want %v", name, size, r.queries, inWindow)
			}
		}
	}
}
