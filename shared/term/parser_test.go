package term

import (
	"bytes"
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
