package term

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
)

// queriesIn feeds s to a fresh parser and returns the query spans it reports.
func queriesIn(s string) [][2]int64 {
	var p seqParser
	var out [][2]int64
	for i := 0; i < len(s); i++ {
		if q, start := p.step(s[i], int64(i)); q {
			out = append(out, [2]int64{start, int64(i + 1)})
		}
	}
	return out
}

func TestParserQueries(t *testing.T) {
	cases := []struct {
		name  string
		in    string
		query bool
	}{
		{"DA1", "\x1b[c", true},
		{"DA1 with 0", "\x1b[0c", true},
		{"DA2", "\x1b[>c", true},
		{"DA3", "\x1b[=c", true},
		{"DSR status", "\x1b[5n", true},
		{"CPR", "\x1b[6n", true},
		{"DECXCPR", "\x1b[?6n", true},
		{"DECRQM ansi", "\x1b[4$p", true},
		{"DECRQM private", "\x1b[?2026$p", true},
		{"XTVERSION", "\x1b[>q", true},
		{"XTVERSION 0", "\x1b[>0q", true},
		{"kitty keyboard query", "\x1b[?u", true},
		{"window size report", "\x1b[18t", true},
		{"cell size report", "\x1b[16t", true},
		{"DECREQTPARM", "\x1b[x", true},
		{"XTQMODKEYS", "\x1b[?4m", true},
		{"OSC 10 BEL", "\x1b]10;?\a", true},
		{"OSC 11 ST", "\x1b]11;?\x1b\\", true},
		{"OSC 4 palette", "\x1b]4;1;?\a", true},
		{"OSC 4 several", "\x1b]4;1;?;2;?\a", true},
		{"OSC 52 clipboard read", "\x1b]52;c;?\a", true},
		{"DECRQSS", "\x1bP$qm\x1b\\", true},
		{"XTGETTCAP", "\x1bP+q544e\x1b\\", true},
		{"DECID", "\x1bZ", true},
		{"ENQ", "\x05", true},

		{"SGR", "\x1b[1;31m", false},
		{"cursor position", "\x1b[10;20H", false},
		{"erase", "\x1b[2J", false},
		{"private mode set", "\x1b[?1049h", false},
		{"DECSCUSR", "\x1b[2 q", false},
		{"XTMODKEYS set", "\x1b[>4;1m", false},
		{"push title", "\x1b[22;0t", false},
		{"resize window", "\x1b[8;24;80t", false},
		{"OSC title", "\x1b]0;what?\a", false},
		{"OSC title ?", "\x1b]2;?\a", false},
		{"OSC colour set", "\x1b]11;#000000\a", false},
		{"OSC hyperlink", "\x1b]8;;https://example.test/?q\x1b\\", false},
		{"DCS sixel", "\x1bPq#0;2;0;0;0~~\x1b\\", false},
		{"DECSCA", "\x1b[1\"q", false},
		{"charset", "\x1b(0", false},
		{"DECSC", "\x1b7", false},
		{"RIS", "\x1bc", false},
		{"text", "hello 世界 🎉", false},
		{"cancelled CSI", "\x1b[6\x18n", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := "ab" + tc.in + "cd"
			got := queriesIn(in)
			if !tc.query {
				if len(got) != 0 {
					t.Fatalf("%q: unexpected query spans %v", tc.in, got)
				}
				return
			}
			want := [][2]int64{{2, int64(2 + len(tc.in))}}
			if len(got) != 1 || got[0] != want[0] {
				t.Fatalf("%q: spans %v, want %v", tc.in, got, want)
			}
		})
	}
}

func TestParserSafePoints(t *testing.T) {
	// safe[i] says whether a cut before byte i is allowed.
	cases := []struct {
		in   string
		safe string // 'y' or 'n' per byte position 0..len(in)
	}{
		{"ab", "yyy"},
		{"é", "yny"},         // 2-byte UTF-8
		{"世", "ynny"},        // 3-byte
		{"🎉", "ynnny"},       // 4-byte
		{"\x1b[1m", "ynnny"}, // CSI
		{"\x1b]0;t\a", "ynnnnny"},
		{"\x1b]0;t\x1b\\", "ynnnnnny"},
		{"\x1bP$qm\x1b\\", "ynnnnnny"},
		{"\x1b(B", "ynny"},
		{"\x1b[\x1b[m", "ynnnny"},     // ESC restarts a sequence
		{"\xe4a", "yny"},              // a broken UTF-8 sequence ends at the next byte
		{"\x1b]0;x\x1bc", "ynnnnnny"}, // a string cancelled by ESC c
	}
	for _, tc := range cases {
		var p seqParser
		var got bytes.Buffer
		for i := 0; i <= len(tc.in); i++ {
			if p.safe() {
				got.WriteByte('y')
			} else {
				got.WriteByte('n')
			}
			if i < len(tc.in) {
				p.step(tc.in[i], int64(i))
			}
		}
		if got.String() != tc.safe {
			t.Errorf("%q: safe points %s, want %s", tc.in, got.String(), tc.safe)
		}
	}
}

// stepAll is the reference: step for every byte, recording query spans and, after each
// byte, whether the parser is in the ground state.
func stepAll(p *seqParser, data []byte, off int64) (qs []span, ground []bool) {
	for i, b := range data {
		if q, start := p.step(b, off+int64(i)); q {
			qs = append(qs, span{start, off + int64(i) + 1})
		}
		ground = append(ground, p.safe())
	}
	return qs, ground
}

// sameParser compares the parts of two parsers' states that can still matter: in the
// ground state only the state itself (the fast path skips whole characters and CSI
// sequences without filling in need, seqStart or the collected bytes, which nothing
// reads there); need only inside a character; elsewhere every field, the collected
// bytes up to n.
func sameParser(a, b seqParser) bool {
	if a.state != b.state {
		return false
	}
	if a.state == stGround {
		return true
	}
	if a.state == stUTF8 {
		return a.need == b.need
	}
	return a.strKind == b.strKind && a.seqStart == b.seqStart &&
		a.n == b.n && a.dropped == b.dropped && bytes.Equal(a.buf[:a.n], b.buf[:b.n])
}

// checkFeedSplit feeds data to one parser through feed, cut at each of cuts, and to
// another byte by byte through step, and fails unless both report the same queries and
// end in the same state.
func checkFeedSplit(t *testing.T, data []byte, cuts []int) {
	t.Helper()
	var fast, ref seqParser
	var got []span
	prev := 0
	for _, c := range append(cuts, len(data)) {
		c = min(max(c, prev), len(data))
		fast.feed(data[prev:c], int64(prev), &got)
		prev = c
	}
	want, _ := stepAll(&ref, data, 0)
	if len(got) != len(want) {
		t.Fatalf("%q cut at %v: queries %v, want %v", data, cuts, got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%q cut at %v: queries %v, want %v", data, cuts, got, want)
		}
	}
	if !sameParser(fast, ref) {
		t.Fatalf("%q cut at %v: state %+v, want %+v", data, cuts, fast, ref)
	}
}

// TestParserFeedMatchesStep checks the bulk fast path against the byte-at-a-time
// parser on inputs whose sequences and characters straddle the 8-byte words of the
// fast scan and the cuts between writes.
func TestParserFeedMatchesStep(t *testing.T) {
	inputs := []string{
		"",
		"plain ascii text that is longer than a few words\r\n",
		"1234567\x1b[1;31mred\x1b[0m",       // ESC at the last byte of a word
		"12345678\x1b[6n",                   // a query at a word boundary
		"1234567\x05abc",                    // ENQ
		"abcdefg世界 and é and 🎉 and │─┼\r\n", // multi-byte characters across words
		"abcdefg\xe4\xb8",                   // a character cut off by the end of the data
		"abcdefg\xe4a\xb8\xe4\xb8\xe4",      // malformed UTF-8
		"\xf0\x9f\x8e\x89\xf0\x9f\x8e",      // a 4-byte emoji, then a truncated one
		"\x80\xbf\xc0\xc1\xf5\xff text",     // bytes that are never lead bytes
		"\x1b]11;?\x1b\\tail after an OSC query",
		"\x1bP$qm\x1b\\\x1b]0;title\atext",
		"\x1b[\x1b[m\x1b]0;x\x1bc",
		"tab\tbackspace\bbell\anul\x00del\x7f done",
		strings.Repeat("0123456789", 20) + "\x1b[38;5;208m" + strings.Repeat("x", 17) + "\x1b[0m",
		// CSI sequences the whole-sequence fast path must leave to step, or classify.
		"ab\x1b[", "ab\x1b[1;3", "ab\x1b[1\n2m", "ab\x1b[1\x7f2m", "ab\x1b[1\x1b[6n", "ab\x1b[1\x18m",
		"ab\x1b[1é2m", "\x1b[?2026$p\x1b[>c\x1b[2 q\x1b[18t\x1b[8;24;80t",
		"ab\x1b[6\x7fn", "ab\x1b[6\nn", // a control inside a query executes; the query still counts
		"\x1b[" + strings.Repeat("1;", 31) + "6n", "\x1b[" + strings.Repeat("1;", 31) + "16n", // 63 and 64 parameter bytes
		"\x1b[" + strings.Repeat("1;", 32) + "6n", // 65: too long to classify
		"\x1b[" + strings.Repeat("1;", 40) + "6n after",
	}
	for _, in := range inputs {
		data := []byte(in)
		checkFeedSplit(t, data, nil)
		for c := 0; c <= len(data); c++ {
			checkFeedSplit(t, data, []int{c})
		}
		for c := 1; c < len(data); c++ {
			checkFeedSplit(t, data, []int{c - 1, c, c + 1, c + 9})
		}
	}
	rng := rand.New(rand.NewPCG(3, 5))
	for range 200 {
		s, _ := genStream(rng, 1+rng.IntN(4000))
		var cuts []int
		for c := 0; c < len(s); c += 1 + rng.IntN(300) {
			cuts = append(cuts, c)
		}
		checkFeedSplit(t, s, cuts)
	}
	for _, kind := range []string{"plain", "sgr", "utf8", "mixed"} {
		s := benchText(kind, 64<<10)
		checkFeedSplit(t, s, []int{4095, 8191, 8193, 32 << 10})
	}
}

// FuzzParserFeed compares feed, cut into two writes anywhere, with step.
func FuzzParserFeed(f *testing.F) {
	f.Add([]byte("1234567\x1b[6nhello\x1b]11;?\a世界🎉"), uint16(8))
	f.Add([]byte("abcdefg\xe4\xb8\xadz\x05\x1bP+q544e\x1b\\"), uint16(9))
	f.Fuzz(func(t *testing.T, data []byte, cut uint16) {
		checkFeedSplit(t, data, []int{int(cut) % (len(data) + 1)})
	})
}
