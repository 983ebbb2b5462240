package cli

import (
	"strings"
	"testing"

	"github.com/paddockhq/paddock/api"
)

// lineDiff counts the lines outside a longest common subsequence.
func TestLineDiff(t *testing.T) {
	cases := []struct {
		old, new       string
		added, removed int
	}{
		{"", "a\nb\n", 2, 0},
		{"a\nb\n", "", 0, 2},
		{"a\nb\n", "a\nb\n", 0, 0},
		{"a\nb\nc\n", "a\nx\nc\n", 1, 1},
		{"a\nb\nc\nd\n", "b\nc\nd\ne\n", 1, 1},
		{"a\nb\n", "a\nb", 0, 0},
		{"x\ny\nz\n", "z\ny\nx\n", 2, 2},
	}
	for _, tc := range cases {
		a, r := lineDiff(splitLines(tc.old), splitLines(tc.new))
		if a != tc.added || r != tc.removed {
			t.Errorf("%q → %q: +%d −%d, want +%d −%d", tc.old, tc.new, a, r, tc.added, tc.removed)
		}
	}
	// Past the bound every changed line counts, without the quadratic work.
	big := strings.Repeat("x\n", 3000)
	if a, r := lineDiff(splitLines("a\n"+big), splitLines("b\n"+big+"c\n")); a != 3002 || r != 3001 {
		t.Errorf("a big diff: +%d −%d", a, r)
	}
}

// A tool call's line holds its kind, title, status, diff size, files and
// terminals, with the server's control characters gone; a new file's diff
// counts every line as added; a call without a diff shows no count.
func TestToolSummary(t *testing.T) {
	line := 7
	tc := &api.ToolCall{ID: "t1", Title: "Write\x1b[2J new.txt", Kind: api.ToolEdit, Status: api.ToolFailed,
		Locations: []api.ToolLocation{{Path: "new.txt", Line: &line}, {Path: "other.txt"}},
		Content:   []api.ToolContent{{Type: api.ContentDiff, Path: "new.txt", NewText: "a\nb\nc"}, {Type: api.ContentTerminal, Terminal: "cmd-2"}}}
	if got, want := toolSummary(tc), "edit Write [2J new.txt — failed (+3 −0 lines) · new.txt:7, other.txt, terminal cmd-2"; got != want {
		t.Errorf("summary %q, want %q", got, want)
	}
	if got, want := toolSummary(&api.ToolCall{ID: "t2"}), "other t2 — pending"; got != want {
		t.Errorf("an empty call: %q, want %q", got, want)
	}
}
