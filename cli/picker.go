package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"charm.land/bubbles/v2/spinner"
	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/paddockhq/paddock/api"
)

// The state of a picker row, in words.
const (
	wordLive            = "live"
	wordNeedsApproval   = "needs approval" // live, and its agent waits for a permission answer
	wordResumable       = "resumable"
	wordNotResumable    = "not resumable"
	wordError           = "error"
	wordNodeUnavailable = "node unavailable"
	wordStarting        = "starting"
	wordUnknown         = "unknown"
)

// pickRow is one session of the picker, with everything the row and its
// detail lines show and whether it can be selected.
type pickRow struct {
	ID           string
	TaskID       string
	Title        string
	Agent        string
	Model        string // the agent's model, when it reports one
	Protocol     string // the agent profile's protocol ("pty", "acp"), "" when unknown
	State        api.SessionState
	LastActivity time.Time
	Word         string // live, needs approval, resumable, not resumable, error, node unavailable
	Outcome      string // the last turn's outcome, "" before any
	Running      bool   // the agent runs: select attaches at once
	NeedsResume  bool   // select resumes before attaching
	Disabled     string // why the row cannot be selected; "" when it can
	Detail       string // error_message or resume_message
	Failure      string // a failed load, recheck or resume of this row
}

// selectable reports whether Enter may act on the row.
func (r pickRow) selectable() bool { return r.Disabled == "" && r.Failure == "" }

// pickerSource is what the picker asks the server on a selection. Both run
// outside the UI loop, as commands.
type pickerSource struct {
	// check reloads one row, re-running every check (a stale listing never
	// bypasses them).
	check func(ctx context.Context, id string) (pickRow, error)
	// resume resumes the session and returns once its agent takes prompts.
	resume func(ctx context.Context, id string) error
}

// Messages of the picker's commands.
type (
	checkedMsg struct {
		id  string
		row pickRow
		err error
	}
	resumedMsg struct {
		id  string
		err error
	}
)

// picker is the Bubble Tea model of `paddock resume`.
type picker struct {
	rows   []pickRow // newest activity first
	shown  []int     // indexes of rows matching the filter
	cursor int       // index into shown
	filter textinput.Model
	spin   spinner.Model
	src    pickerSource
	now    func() time.Time
	width  int
	height int

	busy      string // id being checked or resumed
	busyWhat  string // "checking", "resuming"
	note      string // one line about the last key (e.g. why Enter did nothing)
	chosen    *pickRow
	cancelled bool
}

// Styles of the picker.
var (
	pickTitleStyle    = lipgloss.NewStyle().Bold(true)
	pickCursorStyle   = lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("12"))
	pickDimStyle      = lipgloss.NewStyle().Faint(true)
	pickDisabledStyle = lipgloss.NewStyle().Faint(true)
	pickErrStyle      = lipgloss.NewStyle().Foreground(lipgloss.Color("9"))
	pickWordStyles    = map[string]lipgloss.Style{
		wordLive:            lipgloss.NewStyle().Foreground(lipgloss.Color("10")),
		wordNeedsApproval:   lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("13")),
		wordResumable:       lipgloss.NewStyle().Foreground(lipgloss.Color("14")),
		wordError:           lipgloss.NewStyle().Foreground(lipgloss.Color("9")),
		wordNodeUnavailable: lipgloss.NewStyle().Foreground(lipgloss.Color("11")),
	}
)

// newPicker returns the picker over rows (sorted here, newest activity first).
func newPicker(rows []pickRow, src pickerSource, now func() time.Time) *picker {
	sortRows(rows)
	ti := textinput.New()
	ti.Prompt = "Filter: "
	ti.Placeholder = "title or session id"
	ti.SetWidth(40)
	st := ti.Styles()
	st.Cursor.Blink = false // a steady cursor: nothing redraws while idle
	ti.SetStyles(st)
	ti.Focus()
	p := &picker{
		rows:   rows,
		filter: ti,
		spin:   spinner.New(spinner.WithSpinner(spinner.Line)),
		src:    src,
		now:    now,
		width:  100,
	}
	p.refilter()
	return p
}

// sortRows orders rows by last activity, newest first, then by id.
func sortRows(rows []pickRow) {
	for i := 1; i < len(rows); i++ {
		for j := i; j > 0 && rowBefore(rows[j], rows[j-1]); j-- {
			rows[j], rows[j-1] = rows[j-1], rows[j]
		}
	}
}

func rowBefore(a, b pickRow) bool {
	if !a.LastActivity.Equal(b.LastActivity) {
		return a.LastActivity.After(b.LastActivity)
	}
	return a.ID < b.ID
}

// refilter recomputes the rows that match the filter, keeping the
// highlighted session when it still matches.
func (p *picker) refilter() {
	keep := ""
	if r := p.current(); r != nil {
		keep = r.ID
	}
	q := strings.ToLower(strings.TrimSpace(p.filter.Value()))
	p.shown = p.shown[:0]
	p.cursor = 0
	for i, r := range p.rows {
		if q == "" || strings.Contains(strings.ToLower(r.Title), q) || strings.Contains(strings.ToLower(r.ID), q) {
			if r.ID == keep {
				p.cursor = len(p.shown)
			}
			p.shown = append(p.shown, i)
		}
	}
}

// current is the highlighted row, nil when none matches.
func (p *picker) current() *pickRow {
	if p.cursor < 0 || p.cursor >= len(p.shown) {
		return nil
	}
	return &p.rows[p.shown[p.cursor]]
}

func (p *picker) rowByID(id string) *pickRow {
	for i := range p.rows {
		if p.rows[i].ID == id {
			return &p.rows[i]
		}
	}
	return nil
}

// Init implements tea.Model.
func (p *picker) Init() tea.Cmd { return nil }

// Update implements tea.Model.
func (p *picker) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		p.width, p.height = msg.Width, msg.Height
		return p, nil
	case spinner.TickMsg:
		if p.busy == "" {
			return p, nil
		}
		var cmd tea.Cmd
		p.spin, cmd = p.spin.Update(msg)
		return p, cmd
	case checkedMsg:
		return p.checked(msg)
	case resumedMsg:
		return p.resumed(msg)
	case tea.KeyPressMsg:
		return p.key(msg)
	}
	return p, nil
}

func (p *picker) key(msg tea.KeyPressMsg) (tea.Model, tea.Cmd) {
	k := msg.String()
	if k == "ctrl+c" || (k == "esc" && p.busy == "") {
		p.cancelled = true
		return p, tea.Quit
	}
	if p.busy != "" {
		return p, nil // a check or resume is under way
	}
	p.note = ""
	switch k {
	case "up", "ctrl+p":
		if p.cursor > 0 {
			p.cursor--
		}
		return p, nil
	case "down", "ctrl+n":
		if p.cursor < len(p.shown)-1 {
			p.cursor++
		}
		return p, nil
	case "enter":
		return p.enter()
	}
	var cmd tea.Cmd
	before := p.filter.Value()
	p.filter, cmd = p.filter.Update(msg)
	if p.filter.Value() != before {
		p.refilter()
	}
	return p, cmd
}

// enter selects the highlighted row: the server re-checks it first.
func (p *picker) enter() (tea.Model, tea.Cmd) {
	r := p.current()
	if r == nil {
		p.note = "No session to select"
		return p, nil
	}
	if !r.selectable() {
		p.note = "Cannot select this session: " + firstOf(r.Disabled, r.Failure)
		return p, nil
	}
	p.busy, p.busyWhat = r.ID, "checking"
	id, check := r.ID, p.src.check
	return p, tea.Batch(p.spin.Tick, func() tea.Msg {
		row, err := check(context.Background(), id)
		return checkedMsg{id: id, row: row, err: err}
	})
}

func (p *picker) checked(msg checkedMsg) (tea.Model, tea.Cmd) {
	r := p.rowByID(msg.id)
	if r == nil || p.busy != msg.id {
		return p, nil
	}
	if msg.err != nil {
		p.busy = ""
		r.Failure = msg.err.Error()
		return p, nil
	}
	*r = msg.row
	if !r.selectable() {
		p.busy = ""
		p.note = "Cannot select this session: " + firstOf(r.Disabled, r.Failure)
		return p, nil
	}
	if r.Running && !r.NeedsResume {
		p.busy = ""
		chosen := *r
		p.chosen = &chosen
		return p, tea.Quit
	}
	p.busyWhat = "resuming"
	id, resume := r.ID, p.src.resume
	return p, func() tea.Msg {
		return resumedMsg{id: id, err: resume(context.Background(), id)}
	}
}

func (p *picker) resumed(msg resumedMsg) (tea.Model, tea.Cmd) {
	r := p.rowByID(msg.id)
	if r == nil || p.busy != msg.id {
		return p, nil
	}
	p.busy = ""
	if msg.err != nil {
		r.Failure = "resume failed: " + msg.err.Error()
		r.Word = wordError
		return p, nil
	}
	r.Running, r.NeedsResume, r.Word = true, false, wordLive
	chosen := *r
	p.chosen = &chosen
	return p, tea.Quit
}

// Column widths of a row.
const (
	colTitle   = 26
	colWord    = 16
	colOutcome = 12
	colAgent   = 18
)

// View implements tea.Model.
func (p *picker) View() tea.View {
	v := tea.NewView(p.render())
	v.AltScreen = true
	return v
}

// render draws the whole frame.
func (p *picker) render() string {
	var b strings.Builder
	b.WriteString(pickTitleStyle.Render(fmt.Sprintf("Resume a session (%d of %d)", len(p.shown), len(p.rows))))
	b.WriteString("\n")
	b.WriteString(p.filter.View())
	b.WriteString("\n\n")
	if len(p.shown) == 0 {
		if len(p.rows) == 0 {
			b.WriteString(pickDimStyle.Render("  No sessions here"))
		} else {
			b.WriteString(pickDimStyle.Render("  No session matches"))
		}
		b.WriteString("\n")
	}
	if len(p.shown) > 0 {
		b.WriteString(pickDimStyle.Render("  " + fit("TASK", colTitle) + fit("STATE", colWord) + fit("LAST TURN", colOutcome) + fit("AGENT", colAgent) + "SESSION"))
		b.WriteString("\n")
	}
	first, last := p.window()
	for i := first; i < last; i++ {
		b.WriteString(p.renderRow(p.rows[p.shown[i]], i == p.cursor))
		b.WriteString("\n")
	}
	b.WriteString(pickDimStyle.Render(strings.Repeat("─", max(10, min(p.width, 100)))))
	b.WriteString("\n")
	for _, l := range p.details() {
		b.WriteString(l)
		b.WriteString("\n")
	}
	b.WriteString("\n")
	b.WriteString(pickDimStyle.Render("↑/↓ move · type to filter · enter resume and attach · esc cancel"))
	return b.String()
}

// window is the range of shown rows that fit the screen, around the cursor.
func (p *picker) window() (int, int) {
	room := 10
	if p.height > 0 {
		room = max(3, p.height-12)
	}
	if len(p.shown) <= room {
		return 0, len(p.shown)
	}
	first := max(0, min(p.cursor-room/2, len(p.shown)-room))
	return first, first + room
}

func (p *picker) renderRow(r pickRow, highlighted bool) string {
	marker := "  "
	if highlighted {
		marker = pickCursorStyle.Render("> ")
	}
	word := r.Word
	if p.busy == r.ID {
		word = p.spin.View() + " " + p.busyWhat
	}
	agent := r.Agent
	if r.Model != "" {
		agent += " (" + r.Model + ")"
	}
	title := fit(cell(r.Title), colTitle)
	wordCell := fit(word, colWord)
	if st, ok := pickWordStyles[r.Word]; ok && p.busy != r.ID && r.selectable() {
		wordCell = st.Render(wordCell)
	}
	rest := fit(orDefault(r.Outcome, "-"), colOutcome) + fit(cell(agent), colAgent)
	id := pickDimStyle.Render(r.ID)
	if !r.selectable() {
		// Disabled rows stay readable but faint, and say so.
		return marker + pickDisabledStyle.Render(title+fit(word, colWord)+rest) + id
	}
	if highlighted {
		title = pickTitleStyle.Render(title)
	}
	return marker + title + wordCell + rest + id
}

// details are the lines under the list about the highlighted row.
func (p *picker) details() []string {
	r := p.current()
	if r == nil {
		return []string{pickDimStyle.Render("No session selected")}
	}
	lines := []string{fmt.Sprintf("Session %s · task %s · %s · last activity %s",
		r.ID, cell(r.Title), orDefault(string(r.State), "unknown state"), age(r.LastActivity, p.now()))}
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
	return lines
}

// fit truncates s to width w (with an ellipsis) and pads it to w, plus a gap.
func fit(s string, w int) string {
	s = ansi.Truncate(s, w-1, "…")
	return s + strings.Repeat(" ", max(0, w-ansi.StringWidth(s)))
}

func firstOf(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}
