package cli

import (
	"fmt"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/paddockhq/paddock/api"
)

// Drawing the picker. A session is two lines, so that a person can tell
// conversations apart at a glance in 80 columns:
//
//	> ★ make the login page redirect after SSO  resumable        3h ago     1a2b3c4d
//	    Done: the callback now redirects to /h…  12 msgs · demo · ⎇ paddock/1a2b3c4d
//
// The first line is what the conversation is called (its name, else its
// first prompt) and the state, last activity and 8-character id; the
// second is the first line of the agent's last reply (in a search that
// matched the transcript, the text that matched), the message count, the
// agent and the worktree branch. The id is never cut: the label and the
// reply give way.

// Styles of the picker.
var (
	pickTitleStyle    = lipgloss.NewStyle().Bold(true)
	pickCursorStyle   = lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("12"))
	pickDimStyle      = lipgloss.NewStyle().Faint(true)
	pickDisabledStyle = lipgloss.NewStyle().Faint(true)
	pickErrStyle      = lipgloss.NewStyle().Foreground(lipgloss.Color("9"))
	pickRoleStyle     = lipgloss.NewStyle().Bold(true)
	pickWordStyles    = map[string]lipgloss.Style{
		wordLive:            lipgloss.NewStyle().Foreground(lipgloss.Color("10")),
		wordNeedsApproval:   lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("13")),
		wordResumable:       lipgloss.NewStyle().Foreground(lipgloss.Color("14")),
		wordError:           lipgloss.NewStyle().Foreground(lipgloss.Color("9")),
		wordNodeUnavailable: lipgloss.NewStyle().Foreground(lipgloss.Color("11")),
	}
)

// Column widths of a row's first line (each with its gap).
const (
	colMarker = 2  // "> "
	colPin    = 2  // "★ "
	colWord   = 17 // "node unavailable" and a space
	colAge    = 11 // "2026-11-03" and a space
	colID     = 8
	// rowIndent starts the second line under the label.
	rowIndent = colMarker + colPin
	// minListWidth is the width rows are laid out for at the least.
	minListWidth = 80
	minLabel     = 12
)

// The preview pane, like fzf's: the last messages of the highlighted
// session, so a person can tell two sessions with the same first prompt
// apart without leaving the picker. It shows by itself when there is room
// for it and the list: at the right of the list on a terminal of 140
// columns or more (the list keeps its 80), else below it on one of 24 lines
// or more (a standard 80x24 terminal still shows 4 sessions). On a smaller
// terminal the list comes first and the pane is hidden; ctrl-t shows or
// hides it whatever the size.
type previewPlace int

const (
	previewNone previewPlace = iota
	previewRight
	previewBelow
)

const (
	previewRightMinWidth = 140
	previewBelowMinLines = 24
	// The frame's lines besides the rows and the preview: title, filter,
	// a blank, the separator, up to detailLines of details, a blank and
	// the help line.
	detailLines = 4
	frameLines  = 3 + 1 + detailLines + 2
)

// previewLayout says where the preview pane goes.
func (p *picker) previewLayout() previewPlace {
	if p.previewHidden {
		return previewNone
	}
	if p.width >= previewRightMinWidth {
		return previewRight
	}
	if p.height == 0 || p.height >= previewBelowMinLines || p.previewShown {
		return previewBelow
	}
	return previewNone
}

// previewBelowHeight is the preview's lines under the list: about a third
// of the terminal (at least 5, at most 12), and the lines a short list
// leaves free.
func (p *picker) previewBelowHeight() int {
	if p.previewLayout() != previewBelow {
		return 0
	}
	h := p.height
	if h == 0 {
		h = 30
	}
	base := max(5, min(12, (h-frameLines)/3))
	rows := min(len(p.rows), max(2, (h-frameLines-base)/2))
	return max(base, h-frameLines-1-2*max(1, rows))
}

// room is how many sessions the list shows at once (two lines each).
func (p *picker) room() int {
	if p.height == 0 {
		return 5
	}
	return max(2, (p.height-frameLines-p.previewBelowHeight())/2)
}

// listWidth is the width of the list's column.
func (p *picker) listWidth() int {
	if p.previewLayout() == previewRight {
		return max(minListWidth, p.width*11/20)
	}
	return max(minListWidth, p.width)
}

// View implements tea.Model.
func (p *picker) View() tea.View {
	v := tea.NewView(p.render())
	v.AltScreen = true
	return v
}

// render draws the whole frame.
func (p *picker) render() string {
	lw := p.listWidth()
	var left []string
	left = append(left, pickTitleStyle.Render(p.heading()), p.filter.View(), "")
	switch {
	case p.loadErr != "":
		left = append(left, pickErrStyle.Render(ansi.Truncate("  "+p.loadErr, lw, "…")))
	case len(p.rows) == 0 && (p.searching || p.paging || p.next != ""):
		left = append(left, pickDimStyle.Render("  Searching…"))
	case len(p.rows) == 0 && p.query == "":
		left = append(left, pickDimStyle.Render("  No sessions here"))
	case len(p.rows) == 0:
		left = append(left, pickDimStyle.Render("  No session matches"))
	}
	first, last := p.window()
	for i := first; i < last; i++ {
		a, b := p.renderRow(p.rows[i], i == p.cursor, lw)
		left = append(left, a, b)
	}
	if last == len(p.rows) && p.next != "" {
		left = append(left, pickDimStyle.Render("  … more below"))
	}
	left = append(left, pickDimStyle.Render(strings.Repeat("─", lw)))
	for _, l := range p.details() {
		left = append(left, ansi.Truncate(l, lw, "…"))
	}

	var out []string
	switch p.previewLayout() {
	case previewRight:
		pw := p.width - lw - 3
		h := max(len(left), p.height-2)
		right := p.previewLines(pw, h)
		for i := 0; i < max(len(left), len(right)); i++ {
			l, r := "", ""
			if i < len(left) {
				l = left[i]
			}
			if i < len(right) {
				r = right[i]
			}
			out = append(out, l+strings.Repeat(" ", max(0, lw-ansi.StringWidth(l)))+pickDimStyle.Render(" │ ")+r)
		}
	case previewBelow:
		out = append(left, p.previewLines(lw, p.previewBelowHeight())...)
	default:
		out = left
	}
	out = append(out, "", pickDimStyle.Render("↑/↓ move · type to search · enter resume · ctrl-t preview · esc cancel"))
	return strings.Join(out, "\n")
}

// heading is the title line: how many sessions are listed ("50+" while
// more pages wait), for which search, and whether one is under way.
func (p *picker) heading() string {
	n := fmt.Sprintf("%d", len(p.rows))
	if p.next != "" {
		n += "+"
	}
	h := "Resume a session (" + n + ")"
	if p.query != "" {
		h = fmt.Sprintf("Resume a session (%s matching %q)", n, p.query)
	}
	if p.searching || p.paging {
		h += " " + p.spin.View() + " searching"
	}
	return h
}

// window is the range of rows that fit the screen, around the cursor.
func (p *picker) window() (int, int) {
	room := p.room()
	if len(p.rows) <= room {
		return 0, len(p.rows)
	}
	first := max(0, min(p.cursor-room/2, len(p.rows)-room))
	return first, first + room
}

// renderRow draws a session's two lines in width columns.
func (p *picker) renderRow(r pickRow, highlighted bool, width int) (string, string) {
	marker := "  "
	if highlighted {
		marker = pickCursorStyle.Render("> ")
	}
	pin := "  "
	if r.Pinned {
		pin = "★ "
	}
	word := r.Word
	if p.busy == r.ID {
		word = p.spin.View() + " " + p.busyWhat
	}
	labelW := max(minLabel, width-colMarker-colPin-colWord-colAge-colID)
	label := fit(oneLine(r.label()), labelW)
	wordCell := fit(word, colWord)
	if st, ok := pickWordStyles[r.Word]; ok && p.busy != r.ID && r.selectable() {
		wordCell = st.Render(wordCell)
	}
	ageCell := fit(rowAge(r.LastActivity, p.now()), colAge)
	id := pickDimStyle.Render(short8(r.ID))

	meta := rowMeta(r)
	textW := max(minLabel, width-rowIndent-ansi.StringWidth(meta)-1)
	text := oneLine(r.LastReply)
	if r.MatchField == api.MatchTranscript && r.Match != "" && p.query != "" {
		// Listed for what its transcript says: show that.
		text = "found: " + oneLine(r.Match)
	}
	if text == "" {
		text = "no reply yet"
	}
	text = fit(text, textW)
	second := strings.Repeat(" ", rowIndent) + text + " " + meta

	if !r.selectable() {
		// Disabled rows stay readable but faint, and say so.
		return marker + pickDisabledStyle.Render(pin+label+fit(word, colWord)+ageCell) + id,
			pickDisabledStyle.Render(second)
	}
	if highlighted {
		label = pickTitleStyle.Render(label)
	}
	return marker + pin + label + wordCell + ageCell + id, pickDimStyle.Render(second)
}

// rowMeta is the right end of a row's second line: message count, agent
// (and model) and worktree branch, each cut to a bound.
func rowMeta(r pickRow) string {
	msgs := fmt.Sprintf("%d msgs", r.Messages)
	if r.Messages == 1 {
		msgs = "1 msg"
	}
	parts := []string{msgs}
	agent := r.Agent
	if r.Model != "" {
		agent += " (" + r.Model + ")"
	}
	if agent != "" {
		parts = append(parts, ansi.Truncate(oneLine(agent), 16, "…"))
	}
	if r.Branch != "" {
		parts = append(parts, "⎇ "+ansi.Truncate(oneLine(r.Branch), 20, "…"))
	}
	return strings.Join(parts, " · ")
}

// rowAge is last activity for a row: age's words, and "just now" for a
// time a little ahead of this clock (another node's).
func rowAge(t, now time.Time) string {
	if t.After(now) {
		return "just now"
	}
	return age(t, now)
}

// short8 is an id's first 8 characters, as tables show them.
func short8(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// oneLine is s's first non-empty line, without control characters.
func oneLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(noControls(l, "")); l != "" {
			return l
		}
	}
	return ""
}

// details are the lines under the list about the highlighted row.
func (p *picker) details() []string {
	r := p.current()
	if r == nil {
		if p.note != "" {
			return []string{pickErrStyle.Render(p.note)}
		}
		return []string{pickDimStyle.Render("No session selected")}
	}
	head := "Session " + r.ID
	if r.Name != "" {
		head += " " + fmt.Sprintf("%q", oneLine(r.Name))
	}
	head = fmt.Sprintf("%s · task %s · %s · last activity %s", head, cell(r.Title), orDefault(string(r.State), "unknown state"), age(r.LastActivity, p.now()))
	if r.Outcome != "" {
		head += " · last turn " + r.Outcome
	}
	lines := []string{head}
	if r.Failure != "" {
		lines = append(lines, pickErrStyle.Render("Error: "+cell(r.Failure)))
	}
	if r.Disabled != "" {
		lines = append(lines, "Cannot select: "+cell(r.Disabled))
	}
	if r.Detail != "" {
		lines = append(lines, cell(r.Detail))
	}
	if r.Outcome == string(api.TurnInterrupted) {
		lines = append(lines, "The last turn was interrupted; it is not sent again: prompt the agent yourself once attached.")
	}
	if p.note != "" {
		lines = append(lines, pickErrStyle.Render(p.note))
	}
	if len(lines) > detailLines {
		// The note says what the last key did: it stays.
		lines = append(lines[:detailLines-1], lines[len(lines)-1])
	}
	return lines
}

// Roles as the preview names them.
var previewRoles = map[api.Role]string{
	api.RoleUser:   "you",
	api.RoleAgent:  "agent",
	api.RoleSystem: "system",
	api.RoleTool:   "tool",
}

// previewTextLines bounds the lines of one message in the preview.
const previewTextLines = 3

// previewLines draws the preview pane, width columns by at most height
// lines: the highlighted session's last messages, the newest at the
// bottom, each a role and its first lines.
func (p *picker) previewLines(width, height int) []string {
	if height <= 0 {
		return nil
	}
	r := p.current()
	title := pickDimStyle.Render(ansi.Truncate("─ Last messages "+strings.Repeat("─", width), width, ""))
	if r == nil {
		return []string{title}
	}
	e := p.preview[r.ID]
	switch {
	case e == nil || e.loading:
		return []string{title, pickDimStyle.Render("Loading the conversation…")}
	case e.err != nil:
		return []string{title, pickErrStyle.Render(ansi.Truncate("Could not load the conversation: "+e.err.Error(), width, "…"))}
	}
	body := previewBody(e.msgs, width, height-1)
	if len(body) == 0 {
		body = []string{pickDimStyle.Render("No messages yet")}
	}
	return append([]string{title}, body...)
}

// previewBody lays out the last messages that fit in height lines, oldest
// of them first.
func previewBody(msgs []api.Message, width, height int) []string {
	const roleW = 7
	textW := max(10, width-roleW)
	var blocks [][]string
	used := 0
	for i := len(msgs) - 1; i >= 0 && used < height; i-- {
		m := msgs[i]
		role, ok := previewRoles[m.Role]
		if !ok {
			continue // plans: the agent's working notes, not the conversation
		}
		var text []string
		if m.Role == api.RoleTool {
			if m.ToolCall == nil {
				continue
			}
			text = []string{oneLine(m.ToolCall.Title) + " (" + string(m.ToolCall.Status) + ")"}
		} else {
			for _, l := range strings.Split(m.Text, "\n") {
				if l = strings.TrimSpace(noControls(l, "")); l != "" {
					text = append(text, l)
				}
				if len(text) == previewTextLines {
					break
				}
			}
		}
		if len(text) == 0 {
			continue
		}
		if used+len(text) > height {
			text = text[:height-used]
		}
		var block []string
		for j, l := range text {
			lead := strings.Repeat(" ", roleW)
			if j == 0 {
				lead = pickRoleStyle.Render(fit(role, roleW))
			}
			block = append(block, lead+ansi.Truncate(l, textW, "…"))
		}
		blocks = append(blocks, block)
		used += len(block)
	}
	var out []string
	for i := len(blocks) - 1; i >= 0; i-- {
		out = append(out, blocks[i]...)
	}
	return out
}

// fit truncates s to width w (with an ellipsis) and pads it to w, plus a gap.
func fit(s string, w int) string {
	s = ansi.Truncate(s, w-1, "…")
	return s + strings.Repeat(" ", max(0, w-ansi.StringWidth(s)))
}
