package cli

import (
	"context"
	"time"

	"charm.land/bubbles/v2/spinner"
	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"

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
	Title        string // the task's title
	Name         string // the session's name ("paddock session rename"), "" for none
	Pinned       bool
	Branch       string // the worktree branch, "" when the session has none
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
	conversation
}

// conversation is what the server's list says of a session's transcript:
// what tells one conversation from another.
type conversation struct {
	FirstPrompt string // the first line of the first prompt
	LastReply   string // the first line of the agent's last reply
	Messages    int    // transcript entries
	Match       string // in a search, the text around what matched
	MatchField  string // and where (api.MatchTranscript, ...)
}

// selectable reports whether Enter may act on the row.
func (r pickRow) selectable() bool { return r.Disabled == "" && r.Failure == "" }

// label is what the row is called: the session's name, else its first
// prompt, else (no prompt yet) its task's title.
func (r pickRow) label() string {
	return firstOf(r.Name, r.FirstPrompt, r.Title, r.TaskID)
}

// pickPage is one page of the server's answer to a search, already
// narrowed to the picker's scope: rows in the server's order and the
// cursor of the next page ("" after the last).
type pickPage struct {
	rows []pickRow
	next string
}

// pickerSource is what the picker asks the server. Every call runs outside
// the UI loop, as a command.
type pickerSource struct {
	// search returns the page of sessions matching q ("" for all) after
	// cursor ("" for the first page).
	search func(ctx context.Context, q, cursor string) (pickPage, error)
	// messages reads a session's transcript, for the preview.
	messages func(ctx context.Context, id string) ([]api.Message, error)
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
	// searchDueMsg: the filter has been still for the debounce delay.
	searchDueMsg struct{ seq int }
	// searchedMsg is a page of the search seq asked for, after cursor.
	searchedMsg struct {
		seq    int
		q      string
		cursor string
		page   pickPage
		err    error
	}
	previewMsg struct {
		id   string
		msgs []api.Message
		err  error
	}
)

// searchDebounce is how long the filter must be still before the server is
// asked: a word typed at speed is one search, not one per letter.
const searchDebounce = 150 * time.Millisecond

// previewEntry is a session's transcript as the preview shows it.
type previewEntry struct {
	loading bool
	msgs    []api.Message
	err     error
}

// picker is the Bubble Tea model of `paddock resume`.
type picker struct {
	// rows are the answer to the search query so far, in the server's
	// order (pinned first, then newest activity); next is the cursor of
	// its next page ("" when rows is all of it).
	rows  []pickRow
	next  string
	query string
	// seq counts the filter's edits. An answer carries the seq it was
	// asked for and only the current one is taken: a slow answer to an
	// older query never overwrites a newer one.
	seq       int
	searching bool   // the search of seq is due or under way
	paging    bool   // the next page of seq is being loaded
	loadErr   string // the last search or page that failed
	debounce  time.Duration

	cursor  int // index into rows
	filter  textinput.Model
	spin    spinner.Model
	src     pickerSource
	now     func() time.Time
	width   int
	height  int
	preview map[string]*previewEntry // by session id, loaded once each
	// ctrl-t hides the preview pane, or shows it on a terminal too small
	// for it to show by itself (see previewLayout).
	previewHidden, previewShown bool

	busy      string // id being checked or resumed
	busyWhat  string // "checking", "resuming"
	note      string // one line about the last key (e.g. why Enter did nothing)
	chosen    *pickRow
	cancelled bool
}

// newPicker returns the picker over the first page of the server's list.
func newPicker(first pickPage, src pickerSource, now func() time.Time) *picker {
	ti := textinput.New()
	ti.Prompt = "Filter: "
	ti.Placeholder = "name, prompt, reply text, title, agent or session id"
	ti.SetWidth(56)
	st := ti.Styles()
	st.Cursor.Blink = false // a steady cursor: nothing redraws while idle
	ti.SetStyles(st)
	ti.Focus()
	return &picker{
		rows:     first.rows,
		next:     first.next,
		debounce: searchDebounce,
		filter:   ti,
		spin:     spinner.New(spinner.WithSpinner(spinner.Line)),
		src:      src,
		now:      now,
		width:    100,
		preview:  map[string]*previewEntry{},
	}
}

// current is the highlighted row, nil when the list is empty.
func (p *picker) current() *pickRow {
	if p.cursor < 0 || p.cursor >= len(p.rows) {
		return nil
	}
	return &p.rows[p.cursor]
}

func (p *picker) rowByID(id string) *pickRow {
	for i := range p.rows {
		if p.rows[i].ID == id {
			return &p.rows[i]
		}
	}
	return nil
}

// Init implements tea.Model: the preview of the first row, and more rows
// if the first page does not fill the screen.
func (p *picker) Init() tea.Cmd { return p.follow() }

// follow is what a change of the highlight or of the rows asks for: the
// highlighted row's preview and, near the end of the loaded rows, the
// next page.
func (p *picker) follow() tea.Cmd {
	return tea.Batch(p.loadPreview(), p.more())
}

// Update implements tea.Model.
func (p *picker) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		p.width, p.height = msg.Width, msg.Height
		return p, p.follow()
	case spinner.TickMsg:
		if p.busy == "" && !p.searching && !p.paging {
			return p, nil
		}
		var cmd tea.Cmd
		p.spin, cmd = p.spin.Update(msg)
		return p, cmd
	case searchDueMsg:
		if msg.seq != p.seq {
			return p, nil // the filter changed again since
		}
		return p, p.fetch(p.filter.Value(), "")
	case searchedMsg:
		return p.searched(msg)
	case previewMsg:
		p.preview[msg.id] = &previewEntry{msgs: msg.msgs, err: msg.err}
		return p, nil
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
		return p, p.move(-1)
	case "down", "ctrl+n":
		return p, p.move(1)
	case "pgup":
		return p, p.move(-p.room())
	case "pgdown":
		return p, p.move(p.room())
	case "ctrl+t":
		shown := p.previewLayout() != previewNone
		p.previewHidden, p.previewShown = shown, !shown
		return p, p.follow()
	case "enter":
		return p.enter()
	}
	var cmd tea.Cmd
	before := p.filter.Value()
	p.filter, cmd = p.filter.Update(msg)
	if p.filter.Value() != before {
		return p, tea.Batch(cmd, p.edited())
	}
	return p, cmd
}

// move moves the highlight by n rows, within the loaded ones.
func (p *picker) move(n int) tea.Cmd {
	p.cursor = max(0, min(p.cursor+n, len(p.rows)-1))
	return p.follow()
}

// edited starts a new search for the filter's text once it has been
// still for the debounce delay.
func (p *picker) edited() tea.Cmd {
	p.seq++
	p.searching, p.paging = true, false
	seq := p.seq
	if p.debounce <= 0 {
		return p.fetch(p.filter.Value(), "")
	}
	return tea.Batch(p.spin.Tick, tea.Tick(p.debounce, func(time.Time) tea.Msg { return searchDueMsg{seq: seq} }))
}

// fetch asks the server for the page of q after cursor, for the current seq.
func (p *picker) fetch(q, cursor string) tea.Cmd {
	seq, search := p.seq, p.src.search
	if cursor == "" {
		p.searching = true
	} else {
		p.paging = true
	}
	return func() tea.Msg {
		page, err := search(context.Background(), q, cursor)
		return searchedMsg{seq: seq, q: q, cursor: cursor, page: page, err: err}
	}
}

// more loads the next page when the highlight comes within a screenful of
// the end of the loaded rows: the list is never cut short, and scrolling
// past what is loaded brings the rest.
func (p *picker) more() tea.Cmd {
	if p.next == "" || p.searching || p.paging || p.busy != "" {
		return nil
	}
	if len(p.rows) > p.cursor+p.room() {
		return nil
	}
	return tea.Batch(p.spin.Tick, p.fetch(p.query, p.next))
}

// searched takes a page of the server's answer, if it answers the current
// search.
func (p *picker) searched(msg searchedMsg) (tea.Model, tea.Cmd) {
	if msg.seq != p.seq {
		return p, nil // an answer to an older filter, arrived late
	}
	if msg.cursor != "" && (!p.paging || msg.cursor != p.next) {
		return p, nil
	}
	p.loadErr = ""
	if msg.cursor == "" {
		p.searching = false
		keep := ""
		if r := p.current(); r != nil {
			keep = r.ID
		}
		if msg.err != nil {
			p.loadErr = "Search failed: " + msg.err.Error()
			p.rows, p.next, p.query, p.cursor = nil, "", msg.q, 0
			return p, nil
		}
		p.rows, p.next, p.query, p.cursor = msg.page.rows, msg.page.next, msg.q, 0
		for i, r := range p.rows {
			if r.ID == keep {
				p.cursor = i
			}
		}
		return p, p.follow()
	}
	p.paging = false
	if msg.err != nil {
		// The rows so far stay; moving down asks for the page again.
		p.loadErr = "Loading more sessions failed: " + msg.err.Error()
		return p, nil
	}
	seen := make(map[string]bool, len(p.rows))
	for _, r := range p.rows {
		seen[r.ID] = true
	}
	for _, r := range msg.page.rows {
		// A session active between two pages moves up the list: it may
		// come again, and is listed once.
		if !seen[r.ID] {
			p.rows = append(p.rows, r)
			seen[r.ID] = true
		}
	}
	p.next = msg.page.next
	return p, p.follow()
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
	// The check reads the session, not its transcript's summary: the
	// row keeps the one it was listed with.
	conv := r.conversation
	*r = msg.row
	r.conversation = conv
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

// loadPreview reads the highlighted session's transcript once, when the
// preview shows.
func (p *picker) loadPreview() tea.Cmd {
	r := p.current()
	if r == nil || p.src.messages == nil || p.previewLayout() == previewNone {
		return nil
	}
	if _, ok := p.preview[r.ID]; ok {
		return nil
	}
	p.preview[r.ID] = &previewEntry{loading: true}
	id, messages := r.ID, p.src.messages
	return func() tea.Msg {
		msgs, err := messages(context.Background(), id)
		return previewMsg{id: id, msgs: msgs, err: err}
	}
}

func firstOf(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}
