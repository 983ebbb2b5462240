package term

import (
	"errors"
	"fmt"
	"sync"

	"github.com/paddockhq/paddock/api/termproto"
)

// DefaultReplayBytes is the ring size used when none is configured.
const DefaultReplayBytes = 256 << 10

// MaxChunk is the largest Chunk that Replay and Read return.
const MaxChunk = 32 << 10

// ErrOverwritten is returned by Read when the requested offset is older than the ring.
var ErrOverwritten = errors.New("term: offset overwritten")

// Chunk is a run of stream bytes starting at absolute stream offset Offset.
type Chunk struct {
	Offset int64
	Data   []byte
}

// End is the offset just past the chunk.
func (c Chunk) End() int64 { return c.Offset + int64(len(c.Data)) }

type span struct{ start, end int64 }

// Ring is a replay buffer of the last N bytes of a terminal's output stream, indexed by
// absolute stream offset. It parses the stream as it arrives and keeps the parser's state
// at checkpoints, so a replay never starts inside an escape sequence or a UTF-8
// character, and it records where terminal queries (DA, DSR/CPR, DECRQM, OSC colour
// queries, XTVERSION, DECRQSS, …) lie so a replay leaves them out. Ring is safe for
// concurrent use.
type Ring struct {
	mu sync.Mutex
	// buf holds the window and up to checkSlack bytes before it, at offset mod len(buf),
	// so the parser state at the window's start can be rebuilt from a checkpoint.
	buf     []byte
	size    int64     // the window: the last size bytes are readable
	next    int64     // offset of the next byte to be written
	head    seqParser // state after byte next-1
	checks  []checkpoint
	queries []span // query spans that still overlap the window, in order
	// safeFrom caches the first safe cut point >= oldest (valid when safeValid).
	safeFrom  int64
	safeValid bool
}

// checkpoint is the head parser's state after byte off-1. The first checkpoint of a
// Ring is at or before the window's start and its bytes from there on are still in buf;
// checkpoints are less than 2*checkEvery bytes apart, and the last is less than that
// before next.
type checkpoint struct {
	off int64
	p   seqParser
}

// checkEvery is how often (in stream bytes) the ring records a checkpoint; checkSlack is
// how far before its window the ring keeps bytes, enough to reach the checkpoint before
// the window's start. Each byte is parsed once as it arrives and at most checkSlack
// bytes are parsed again when a full replay needs the window start's state.
const (
	checkEvery = 8 << 10
	checkSlack = 2 * checkEvery
)

// NewRing returns a ring that keeps the last size bytes (DefaultReplayBytes if size <= 0).
func NewRing(size int) *Ring {
	if size <= 0 {
		size = DefaultReplayBytes
	}
	return &Ring{buf: make([]byte, size+checkSlack), size: int64(size), checks: []checkpoint{{}}}
}

// Size is the ring's capacity in bytes.
func (r *Ring) Size() int { return int(r.size) }

// Next is the offset one past the newest byte (the total number of bytes written).
func (r *Ring) Next() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.next
}

// Oldest is the offset of the oldest byte still held.
func (r *Ring) Oldest() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.oldest()
}

func (r *Ring) oldest() int64 {
	if o := r.next - r.size; o > 0 {
		return o
	}
	return 0
}

// Write appends p to the stream. It never fails and never blocks on readers.
func (r *Ring) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	oldOldest := r.oldest()
	newNext := r.next + int64(len(p))
	newOldest := max(newNext-r.size, 0)

	// Parse everything for queries, recording checkpoints on the way.
	for done := 0; done < len(p); {
		n := min(len(p)-done, checkEvery)
		off := r.next + int64(done)
		r.head.feed(p[done:done+n], off, &r.queries)
		done += n
		if end := off + int64(n); end-r.checks[len(r.checks)-1].off >= checkEvery {
			r.checks = append(r.checks, checkpoint{off: end, p: r.head})
		}
	}
	// Keep the last checkpoint at or before the window's start and those after it.
	drop := 0
	for drop+1 < len(r.checks) && r.checks[drop+1].off <= newOldest {
		drop++
	}
	if drop > 0 {
		r.checks = append(r.checks[:0], r.checks[drop:]...)
	}
	if newOldest > oldOldest {
		r.safeValid = false
	}

	// Store the bytes that stay in the buffer.
	capacity := int64(len(r.buf))
	keep := p
	if int64(len(keep)) > capacity {
		keep = keep[int64(len(keep))-capacity:]
	}
	pos := (newNext - int64(len(keep))) % capacity
	n := copy(r.buf[pos:], keep)
	copy(r.buf, keep[n:])
	r.next = newNext

	// Forget queries that ended before the window.
	drop = 0
	for drop < len(r.queries) && r.queries[drop].end <= newOldest {
		drop++
	}
	if drop > 0 {
		r.queries = append(r.queries[:0], r.queries[drop:]...)
	}
	return len(p), nil
}

// tailState returns the parser state after byte oldest-1, rebuilt from the checkpoint at
// or before it.
func (r *Ring) tailState() seqParser {
	c := r.checks[0]
	p := c.p
	r.feedStored(&p, c.off, r.oldest())
	return p
}

// feedStored runs parser p over the stored bytes [from, to), which must still be in
// buf (from no earlier than checkSlack before the window), as at most two contiguous
// runs of the buffer.
func (r *Ring) feedStored(p *seqParser, from, to int64) {
	if from >= to {
		return
	}
	size := int64(len(r.buf))
	s := from % size
	first := min(to-from, size-s)
	p.feed(r.buf[s:s+first], from, nil)
	if rest := to - from - first; rest > 0 {
		p.feed(r.buf[:rest], from+first, nil)
	}
}

// firstSafe returns the first safe cut point >= oldest, or next if there is none.
func (r *Ring) firstSafe() int64 {
	oldest := r.oldest()
	if r.safeValid && r.safeFrom >= oldest {
		return r.safeFrom
	}
	p := r.tailState()
	off := oldest
	size := int64(len(r.buf))
	for ; off < r.next && !p.safe(); off++ {
		p.step(r.buf[off%size], off)
	}
	if !p.safe() {
		off = r.next
	}
	if off == 0 {
		// Nothing was ever evicted: the stream's own start is the cleanest cut
		// (a fresh client must see the shell's first line).
		r.safeFrom, r.safeValid = 0, true
		return 0
	}
	// The window starts inside the stream: prefer the start of a line a little further
	// on, so the replay does not begin with a partial line (or a lone combining mark) at
	// the top of the screen.
	limit := min(r.next, off+lineSearch)
	for o := off; o < limit; o++ {
		b := r.buf[o%size]
		wasGround := p.safe()
		p.step(b, o)
		if b == '\n' && wasGround && p.safe() {
			off = o + 1
			break
		}
	}
	r.safeFrom, r.safeValid = off, true
	return off
}

// lineSearch is how far past the first safe cut point a full replay looks for a line start.
const lineSearch = 4 << 10

// SafeStart is the first offset a full replay may start at.
func (r *Ring) SafeStart() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.firstSafe()
}

// copyRange returns a copy of the bytes [from, to), which must be inside the window.
func (r *Ring) copyRange(from, to int64) []byte {
	size := int64(len(r.buf))
	out := make([]byte, to-from)
	s := from % size
	n := copy(out, r.buf[s:min(size, s+(to-from))])
	copy(out[n:], r.buf)
	return out
}

// Replay returns what a client whose stream position is from needs, as frames that
// leave terminal queries out, and end, the offset where live output continues (Next at
// the time of the call). from < 0 asks for a full replay (a fresh client). A from inside
// the window gives a delta (or none when the client is up to date); a from that was
// overwritten or lies beyond Next gives a full replay from the oldest safe cut point.
func (r *Ring) Replay(from int64) (frames []Chunk, kind termproto.ReplayKind, end int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	kind = termproto.ReplayDelta
	switch {
	case from == r.next && from >= 0:
		return nil, termproto.ReplayNone, r.next
	case from < 0 || from < r.oldest() || from > r.next:
		kind = termproto.ReplayFull
		from = r.firstSafe()
	}
	return r.frames(from, r.next), kind, r.next
}

// frames cuts [from, to) into chunks of at most MaxChunk bytes that skip query spans.
func (r *Ring) frames(from, to int64) []Chunk {
	var out []Chunk
	emit := func(a, b int64) {
		for a < b {
			e := min(b, a+MaxChunk)
			out = append(out, Chunk{Offset: a, Data: r.copyRange(a, e)})
			a = e
		}
	}
	pos := from
	for _, q := range r.queries {
		if q.end <= pos {
			continue
		}
		if q.start >= to {
			break
		}
		emit(pos, min(q.start, to))
		pos = max(pos, q.end)
	}
	if pos < to {
		emit(pos, to)
	}
	return out
}

// Read returns live bytes starting at from (queries included), at most max bytes
// (MaxChunk if max <= 0). It returns an empty chunk when from == Next and
// ErrOverwritten when from is older than the window.
func (r *Ring) Read(from int64, max int) (Chunk, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if max <= 0 || max > MaxChunk {
		max = MaxChunk
	}
	if from < r.oldest() {
		return Chunk{Offset: from}, fmt.Errorf("read at %d, oldest is %d: %w", from, r.oldest(), ErrOverwritten)
	}
	if from > r.next {
		return Chunk{Offset: from}, fmt.Errorf("read at %d beyond end %d", from, r.next)
	}
	to := min(r.next, from+int64(max))
	return Chunk{Offset: from, Data: r.copyRange(from, to)}, nil
}

// ReadAt copies live bytes starting at from (queries included) into p and returns how
// many it copied: 0 when from == Next. It fails with ErrOverwritten when from is older
// than the window.
func (r *Ring) ReadAt(p []byte, from int64) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if from < r.oldest() {
		return 0, fmt.Errorf("read at %d, oldest is %d: %w", from, r.oldest(), ErrOverwritten)
	}
	if from > r.next {
		return 0, fmt.Errorf("read at %d beyond end %d", from, r.next)
	}
	n := int(min(int64(len(p)), r.next-from))
	size := int64(len(r.buf))
	s := from % size
	c := copy(p[:n], r.buf[s:])
	copy(p[c:n], r.buf)
	return n, nil
}

// Queries returns the query spans inside the window, for tests and diagnostics.
func (r *Ring) Queries() [][2]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([][2]int64, 0, len(r.queries))
	for _, q := range r.queries {
		out = append(out, [2]int64{q.start, q.end})
	}
	return out
}
