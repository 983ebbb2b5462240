package term

import (
	"bytes"
	"fmt"
	"math/rand/v2"
)

// genStream builds a random terminal stream of about n bytes out of well-formed tokens
// (text, CJK, emoji, SGR, cursor moves, titles, hyperlinks, queries) and returns it with
// the spans of the queries it contains.
func genStream(rng *rand.Rand, n int) ([]byte, [][2]int64) {
	var b bytes.Buffer
	var qs [][2]int64
	queries := []string{
		"\x1b[c", "\x1b[>c", "\x1b[=c", "\x1b[5n", "\x1b[6n", "\x1b[?6n", "\x1b[?2026$p",
		"\x1b[4$p", "\x1b[>q", "\x1b]10;?\a", "\x1b]11;?\x1b\\", "\x1b]4;3;?\a",
		"\x1bP$qm\x1b\\", "\x1bP+q544e\x1b\\", "\x1b[18t", "\x1b[?u",
	}
	words := []string{"hello", "world", "paddock", "terminal", "replay", "ls", "-la", "src/"}
	wide := []string{"世界", "漢字", "日本語", "한국어", "🎉", "👍🏽", "👨‍👩‍👧", "🇫🇷", "é", "e\u0301", "ñ", "→", "⠋"}
	for b.Len() < n {
		switch rng.IntN(12) {
		case 0, 1, 2:
			b.WriteString(words[rng.IntN(len(words))])
			b.WriteByte(' ')
		case 3:
			b.WriteString(wide[rng.IntN(len(wide))])
		case 4:
			fmt.Fprintf(&b, "\x1b[%d;38;5;%dm", rng.IntN(2), rng.IntN(256))
		case 5:
			fmt.Fprintf(&b, "\x1b[38;2;%d;%d;%dm", rng.IntN(256), rng.IntN(256), rng.IntN(256))
		case 6:
			b.WriteString("\x1b[0m\r\n")
		case 7:
			fmt.Fprintf(&b, "\x1b[%d;%dH", 1+rng.IntN(24), 1+rng.IntN(80))
		case 8:
			fmt.Fprintf(&b, "\x1b]0;title %d\a", rng.IntN(100))
		case 9:
			fmt.Fprintf(&b, "\x1b]8;;file:///tmp/%d\x1b\\link\x1b]8;;\x1b\\", rng.IntN(100))
		case 10:
			q := queries[rng.IntN(len(queries))]
			start := int64(b.Len())
			b.WriteString(q)
			qs = append(qs, [2]int64{start, int64(b.Len())})
		case 11:
			b.WriteString("\x1b[K\x1b7\x1b[24;1H\x1b[7m status \x1b[0m\x1b8")
		}
	}
	return b.Bytes(), qs
}

// withoutQueries returns s[from:to] with the query spans removed.
func withoutQueries(s []byte, qs [][2]int64, from, to int64) []byte {
	var out []byte
	pos := from
	for _, q := range qs {
		if q[1] <= pos || q[0] >= to {
			continue
		}
		if q[0] > pos {
			out = append(out, s[pos:q[0]]...)
		}
		pos = max(pos, q[1])
	}
	if pos < to {
		out = append(out, s[pos:to]...)
	}
	return out
}

// colourStream is an ls --color style listing: every line sets and resets its colours.
func colourStream(rng *rand.Rand, lines int) []byte {
	var b bytes.Buffer
	for i := range lines {
		fmt.Fprintf(&b, "\x1b[0m-rw-r--r-- 1 user user %6d \x1b[01;%dm%s-%04d\x1b[0m", rng.IntN(100000), 31+rng.IntN(7), "file", i)
		if i%7 == 0 {
			fmt.Fprintf(&b, " \x1b[38;2;%d;%d;%dmtruecolour\x1b[39m", rng.IntN(256), rng.IntN(256), rng.IntN(256))
		}
		if i%50 == 0 {
			b.WriteString("\x1b[c\x1b]11;?\a") // a prompt that asks the terminal things
		}
		b.WriteString("\r\n")
	}
	return b.Bytes()
}

// cjkStream is scrolling text of wide characters, emoji (with ZWJ sequences and skin
// tones) and combining marks.
func cjkStream(rng *rand.Rand, lines int) []byte {
	parts := []string{"世界", "こんにちは", "漢字テスト", "한국어", "🎉", "👍🏽", "👨‍👩‍👧", "🇯🇵", "e\u0301", "中文", "🙂", "ｆｕｌｌ"}
	var b bytes.Buffer
	for i := range lines {
		fmt.Fprintf(&b, "%04d ", i)
		w := 5
		for w < 60 {
			p := parts[rng.IntN(len(parts))]
			b.WriteString(p)
			w += 4
		}
		if i%40 == 0 {
			b.WriteString("\x1b[6n")
		}
		b.WriteString("\r\n")
	}
	return b.Bytes()
}

// statusStream is a log that scrolls while a status line at the bottom is redrawn
// after every line (save cursor, move, erase, draw, restore), as progress UIs do.
func statusStream(rng *rand.Rand, lines int) []byte {
	var b bytes.Buffer
	spin := []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}
	for i := range lines {
		fmt.Fprintf(&b, "\x1b[24;1H\x1b[2K\x1b[23;1Hlog line %d: fetched %d objects\r\n", i, rng.IntN(1000))
		fmt.Fprintf(&b, "\x1b7\x1b[24;1H\x1b[2K\x1b[42;30m %s Progress: [%3d%%] \x1b[0m\x1b8", spin[i%len(spin)], i*100/lines)
		if i%30 == 0 {
			b.WriteString("\x1b[?2026$p\x1bP$q\"p\x1b\\")
		}
	}
	return b.Bytes()
}

// redrawStream is a full-screen program (alternate screen, cursor-addressed, every frame
// redraws all rows, like top), with colours, line drawing and a DA query at start.
func redrawStream(rng *rand.Rand, frames, cols, rows int) []byte {
	var b bytes.Buffer
	b.WriteString("\x1b[?1049h\x1b[>c\x1b[?25l")
	for f := range frames {
		b.WriteString("\x1b[H")
		for r := 1; r <= rows; r++ {
			fmt.Fprintf(&b, "\x1b[%d;1H", r)
			switch r {
			case 1:
				fmt.Fprintf(&b, "\x1b[7mtop - frame %5d  load %d.%02d\x1b[0m\x1b[K", f, rng.IntN(9), rng.IntN(100))
			case 2:
				b.WriteString("\x1b(0lqqqqqqqqqqqqqqqqqqqqk\x1b(B\x1b[K")
			default:
				fmt.Fprintf(&b, "%5d \x1b[3%dmproc-%02d\x1b[0m %5.1f%% 世界\x1b[K", rng.IntN(99999), 1+rng.IntN(6), r, rng.Float64()*100)
			}
		}
		fmt.Fprintf(&b, "\x1b[%d;%dH", 1+rng.IntN(rows), 1+rng.IntN(cols-10))
	}
	return b.Bytes()
}
