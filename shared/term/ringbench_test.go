package term

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// benchText returns about n bytes of terminal output as a PTY delivers it: 80-column
// lines ending in \r\n. kind picks the mix: "plain" (ASCII only), "sgr" (every line
// coloured, like ls --color or a coloured log), "utf8" (every line with multi-byte
// characters: accents, CJK, box drawing, emoji) or "mixed" (60% plain, 25% SGR, 15%
// UTF-8).
func benchText(kind string, n int) []byte {
	rng := rand.New(rand.NewPCG(7, 11))
	words := strings.Fields("lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt ut labore et dolore magna aliqua 0x1f 404 GET /v1/sessions main.go:42")
	utf := []string{"é", "ü", "ñ", "世界", "終了", "│", "─", "┼", "→", "✓", "🎉", "Ω"}
	sgr := []string{"\x1b[1;31m", "\x1b[32m", "\x1b[38;5;208m", "\x1b[1m", "\x1b[4;34m", "\x1b[38;2;10;200;30m"}
	out := make([]byte, 0, n+128)
	for len(out) < n {
		style := kind
		if kind == "mixed" {
			switch r := rng.IntN(100); {
			case r < 60:
				style = "plain"
			case r < 85:
				style = "sgr"
			default:
				style = "utf8"
			}
		}
		cols := 0
		for cols < 70 {
			w := words[rng.IntN(len(words))]
			switch {
			case style == "sgr" && rng.IntN(3) == 0:
				out = append(out, sgr[rng.IntN(len(sgr))]...)
				out = append(out, w...)
				out = append(out, "\x1b[0m"...)
			case style == "utf8" && rng.IntN(2) == 0:
				u := utf[rng.IntN(len(utf))]
				out = append(out, u...)
				out = append(out, w...)
				cols++
			default:
				out = append(out, w...)
			}
			out = append(out, ' ')
			cols += len(w) + 1
		}
		out = append(out, "\r\n"...)
	}
	return out
}

// BenchmarkRingWrite is the terminal output hot path inside agentctl: PTY reads of
// chunk bytes written into a full 256 KiB ring (so both the head parser and the tail
// parser of bytes leaving the window run, as in a flood).
func BenchmarkRingWrite(b *testing.B) {
	for _, kind := range []string{"plain", "sgr", "utf8", "mixed"} {
		data := benchText(kind, 4<<20)
		for _, chunk := range []int{4 << 10, 32 << 10} {
			b.Run(fmt.Sprintf("%s/chunk=%dK", kind, chunk>>10), func(b *testing.B) {
				r := NewRing(DefaultReplayBytes)
				_, _ = r.Write(data[:DefaultReplayBytes+1000])
				b.SetBytes(int64(chunk))
				b.ReportAllocs()
				pos := 0
				b.ResetTimer()
				for range b.N {
					if pos+chunk > len(data) {
						pos = 0
					}
					_, _ = r.Write(data[pos : pos+chunk])
					pos += chunk
				}
			})
		}
	}
}

// BenchmarkRingReadAt is the writer's side: copying live output out of a full ring.
func BenchmarkRingReadAt(b *testing.B) {
	data := benchText("mixed", 1<<20)
	r := NewRing(DefaultReplayBytes)
	_, _ = r.Write(data)
	buf := make([]byte, MaxChunk)
	from := r.Oldest()
	b.SetBytes(MaxChunk)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		off := from + int64(i%7)*int64(MaxChunk)
		if _, err := r.ReadAt(buf, off); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRingReplay is a fresh client's full replay of a full ring.
func BenchmarkRingReplay(b *testing.B) {
	data := benchText("mixed", 1<<20)
	r := NewRing(DefaultReplayBytes)
	_, _ = r.Write(data)
	b.SetBytes(DefaultReplayBytes)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		_, _ = r.Write([]byte("x")) // invalidates the cached safe start
		if frames, _, _ := r.Replay(-1); len(frames) == 0 {
			b.Fatal("no replay")
		}
	}
}
