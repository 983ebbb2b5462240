package cli

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/paddockhq/paddock/api"
)

// How the agent's work reads on a terminal: a tool call is one line
// ("[tool] edit Edit notes.txt — completed (+1 −0 lines) · notes.txt"), a
// plan a checklist, a thought a dim indented paragraph. `session messages`,
// `session prompt` and `chat` share these renderings.

// Faint text on a terminal (SGR 2, undone by SGR 22).
const (
	dimOn  = "\x1b[2m"
	dimOff = "\x1b[22m"
)

// thoughtPrefix starts a thought; its other lines are indented under it.
const thoughtPrefix = "  thought: "

// toolSummary is a tool call on one line, without the role tag: its kind,
// title, status, the size of its diffs, then the files it touches and the
// terminals its command runs in. Server text loses its control characters.
func toolSummary(tc *api.ToolCall) string {
	if tc == nil {
		return "(no tool call)"
	}
	kind := orDefault(string(tc.Kind), string(api.ToolOther))
	title := orDefault(tc.Title, tc.ID)
	status := orDefault(string(tc.Status), string(api.ToolPending))
	s := fmt.Sprintf("%s %s — %s", oneLineText(kind), oneLineText(title), oneLineText(status))
	if added, removed, ok := diffStat(tc); ok {
		s += fmt.Sprintf(" (+%d −%d lines)", added, removed)
	}
	var where []string
	for _, l := range tc.Locations {
		loc := l.Path
		if l.Line != nil {
			loc += ":" + strconv.Itoa(*l.Line)
		}
		where = append(where, oneLineText(loc))
	}
	for _, c := range tc.Content {
		if c.Type == api.ContentTerminal && c.Terminal != "" {
			where = append(where, "terminal "+oneLineText(c.Terminal))
		}
	}
	if len(where) > 0 {
		s += " · " + strings.Join(where, ", ")
	}
	return s
}

// oneLineText is server text made one line: controls become spaces.
func oneLineText(s string) string { return strings.TrimSpace(noControls(s, "")) }

// diffStat counts the lines the call's diffs add and remove; ok is false
// when it carries no diff.
func diffStat(tc *api.ToolCall) (added, removed int, ok bool) {
	for _, c := range tc.Content {
		if c.Type != api.ContentDiff {
			continue
		}
		ok = true
		old := ""
		if c.OldText != nil {
			old = *c.OldText
		}
		a, r := lineDiff(splitLines(old), splitLines(c.NewText))
		added += a
		removed += r
	}
	return added, removed, ok
}

// splitLines splits text into its lines; a final newline ends the last
// line rather than starting an empty one.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// maxDiffCells bounds the work of lineDiff's longest common subsequence;
// past it the lines between the common head and tail all count as changed.
const maxDiffCells = 4_000_000

// lineDiff counts the lines a minimal line diff from `from` to `to` adds and
// removes: lines outside a longest common subsequence of the two.
func lineDiff(from, to []string) (added, removed int) {
	for len(from) > 0 && len(to) > 0 && from[0] == to[0] {
		from, to = from[1:], to[1:]
	}
	for len(from) > 0 && len(to) > 0 && from[len(from)-1] == to[len(to)-1] {
		from, to = from[:len(from)-1], to[:len(to)-1]
	}
	if len(from) == 0 || len(to) == 0 || len(from)*len(to) > maxDiffCells {
		return len(to), len(from)
	}
	prev := make([]int, len(to)+1)
	cur := make([]int, len(to)+1)
	for i := range from {
		for j := range to {
			switch {
			case from[i] == to[j]:
				cur[j+1] = prev[j] + 1
			case prev[j+1] >= cur[j]:
				cur[j+1] = prev[j+1]
			default:
				cur[j+1] = cur[j]
			}
		}
		prev, cur = cur, prev
	}
	common := prev[len(to)]
	return len(to) - common, len(from) - common
}

// planLines are a plan as a checklist: "[x]" done, "[~]" in progress,
// "[ ]" pending.
func planLines(p *api.Plan) []string {
	if p == nil || len(p.Entries) == 0 {
		return []string{"(empty plan)"}
	}
	lines := make([]string, 0, len(p.Entries))
	for _, en := range p.Entries {
		mark := "[ ]"
		switch en.Status {
		case "completed":
			mark = "[x]"
		case "in_progress":
			mark = "[~]"
		}
		lines = append(lines, mark+" "+oneLineText(en.Content))
	}
	return lines
}

// isWorkEntry reports whether a message is a tool call or plan entry,
// which is shown whole (and again when it changes) rather than streamed.
func isWorkEntry(m api.Message) bool {
	return m.Role == api.RoleTool || m.Role == api.RolePlan
}

// workLines renders a tool or plan entry, its role tag first and the
// lines of a plan indented under it.
func workLines(m api.Message) []string {
	if m.Role == api.RoleTool {
		return []string{"[tool] " + toolSummary(m.ToolCall)}
	}
	plan := planLines(m.Plan)
	out := []string{"[plan] " + plan[0]}
	for _, l := range plan[1:] {
		out = append(out, strings.Repeat(" ", len("[plan] "))+l)
	}
	return out
}

// entryKey is what a reader has seen of a complete message: a tool call or
// plan entry is shown again when its rendering changes (a new status, a
// bigger diff, a step done); any other message once.
func entryKey(m api.Message) string {
	if isWorkEntry(m) {
		return strings.Join(workLines(m), "\n")
	}
	return "shown"
}

// thoughtText renders a thought: prefixed, its lines indented under the
// first, faint when dim is set.
func thoughtText(text string, dim bool) string {
	body := strings.ReplaceAll(text, "\n", "\n"+strings.Repeat(" ", len(thoughtPrefix)))
	if dim {
		return dimOn + thoughtPrefix + body + dimOff
	}
	return thoughtPrefix + body
}
