package cli

import (
	"fmt"
	"io"
	"strings"
	"time"

	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
)

// The chat's line editor on a terminal: a Bubble Tea program in the
// terminal's normal screen whose view is the line being typed (and the
// agent's line still streaming above it); everything the chat prints goes
// above the view. ←/→, home/end, ctrl-a/e/k/u/w edit, ↑/↓ walk this chat's
// prompts, ctrl-r searches them backwards as a shell's reverse-i-search
// does, a pasted text with newlines stays one prompt (shown with ⏎), Enter
// hands the line to the chat.

// typedLine is one line of the user's: its text and the prompt it was typed
// at ("" when read from a pipe).
type typedLine struct {
	text  string
	label string
}

// promptLabel is the editor's prompt for a prompt to the agent.
const promptLabel = "> "

// newlineMark shows a pasted newline in the one-line editor.
const newlineMark = "⏎"

// Messages from the chat to the editor's model.
type (
	labelMsg   string // the prompt to show
	partialMsg string // the output line not ended yet
	runningMsg bool   // a turn runs (the placeholder says what Enter does)
	closeMsg   struct{}
)

// editorModel is the Bubble Tea model of the line editor.
type editorModel struct {
	in       textinput.Model
	lines    chan<- typedLine // Enter; closed on ctrl-d at an empty line
	intr     chan<- struct{}  // ctrl-c
	ready    chan struct{}    // closed at the first window size: lines printed before it are lost
	closed   bool
	partial  string
	width    int
	history  []string // the prompts typed here, oldest first (as shown)
	at       int      // the history entry shown; len(history) is the draft
	draft    string   // what was typed before ↑
	search   *historySearch
	quitting bool
}

// historySearch is a ctrl-r search under way, as readline's
// reverse-i-search: the query typed so far and the history entry it found
// (-1 for none). Enter sends the entry found, ctrl-r finds an older one,
// esc or ctrl-g puts back the line from before the search, and a key that
// moves the cursor takes the entry into the editor to be changed.
type historySearch struct {
	query string
	hit   int
	saved string
}

func newEditorModel(lines chan<- typedLine, intr chan<- struct{}) *editorModel {
	in := textinput.New()
	in.Prompt = promptLabel
	st := in.Styles()
	st.Cursor.Blink = false
	in.SetStyles(st)
	in.KeyMap.NextSuggestion.SetEnabled(false)
	in.KeyMap.PrevSuggestion.SetEnabled(false)
	in.KeyMap.AcceptSuggestion.SetEnabled(false)
	in.Focus()
	return &editorModel{in: in, lines: lines, intr: intr, width: 80, ready: make(chan struct{})}
}

func (m *editorModel) Init() tea.Cmd { return nil }

func (m *editorModel) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		if m.width = msg.Width; m.ready != nil {
			close(m.ready)
			m.ready = nil
		}
		m.in.SetWidth(max(10, msg.Width-len([]rune(m.in.Prompt))-1))
		return m, nil
	case labelMsg:
		m.in.Prompt = string(msg)
		m.in.SetWidth(max(10, m.width-len([]rune(m.in.Prompt))-1))
		return m, nil
	case partialMsg:
		m.partial = string(msg)
		return m, nil
	case runningMsg:
		m.in.Placeholder = ""
		if msg {
			m.in.Placeholder = "a turn runs: Enter queues a prompt, ctrl-c cancels the turn"
		}
		return m, nil
	case closeMsg:
		m.quitting = true
		return m, tea.Quit
	case tea.PasteMsg:
		if m.search != nil {
			m.searchFor(m.search.query+strings.NewReplacer("\r", " ", "\n", " ").Replace(msg.Content), len(m.history)-1)
			return m, nil
		}
		// A terminal may send a pasted line end as CR (tmux does).
		text := strings.NewReplacer("\r\n", newlineMark, "\r", newlineMark, "\n", newlineMark).Replace(msg.Content)
		m.insert(strings.TrimRight(text, newlineMark))
		return m, nil
	case tea.KeyPressMsg:
		if m.search != nil {
			if handled := m.searchKey(msg); handled {
				return m, nil
			}
			// A key that moves the cursor edits the entry found.
			m.endSearch(true)
			break
		}
		switch msg.String() {
		case "ctrl+r":
			if m.in.Prompt == promptLabel && len(m.history) > 0 {
				m.search = &historySearch{hit: -1, saved: m.in.Value()}
			}
			return m, nil
		case "enter":
			m.submit()
			return m, nil
		case "ctrl+c":
			select {
			case m.intr <- struct{}{}:
			default:
			}
			return m, nil
		case "ctrl+d":
			if m.in.Value() == "" {
				m.close()
				return m, nil
			}
		case "up", "ctrl+p":
			m.walk(-1)
			return m, nil
		case "down", "ctrl+n":
			m.walk(1)
			return m, nil
		}
	}
	var cmd tea.Cmd
	m.in, cmd = m.in.Update(msg)
	return m, cmd
}

// searchKey handles a key during a ctrl-r search; false hands it to the
// editor after the search ends with its entry.
func (m *editorModel) searchKey(k tea.KeyPressMsg) bool {
	q := m.search
	switch k.String() {
	case "ctrl+r":
		if q.hit > 0 {
			m.searchFor(q.query, q.hit-1)
		}
	case "enter":
		m.endSearch(true)
		m.submit()
	case "esc", "ctrl+g", "ctrl+c":
		m.endSearch(false)
	case "backspace", "ctrl+h":
		if r := []rune(q.query); len(r) > 0 {
			m.searchFor(string(r[:len(r)-1]), len(m.history)-1)
		}
	case "left", "right", "home", "end", "ctrl+a", "ctrl+e", "ctrl+b", "ctrl+f", "up", "down":
		return false
	default:
		if k.Text != "" {
			// Typing searches on from the entry found (it stays while it
			// still matches).
			from := q.hit
			if from < 0 {
				from = len(m.history) - 1
			}
			m.searchFor(q.query+k.Text, from)
		}
	}
	return true
}

// searchFor sets the search's query and finds the newest entry at or
// before from that holds it; the entry found before stays when none does
// (the view then says the search is failing).
func (m *editorModel) searchFor(query string, from int) {
	q := m.search
	q.query = query
	for i := min(from, len(m.history)-1); i >= 0; i-- {
		if strings.Contains(m.history[i], query) {
			q.hit = i
			return
		}
	}
	if query == "" {
		q.hit = -1
	}
}

// searchFailing reports whether no entry holds the query.
func (q *historySearch) failing(history []string) bool {
	return q.query != "" && (q.hit < 0 || !strings.Contains(history[q.hit], q.query))
}

// endSearch leaves the search with the entry found in the editor (take),
// or with the line from before it.
func (m *editorModel) endSearch(take bool) {
	q := m.search
	m.search = nil
	if take && q.hit >= 0 {
		m.at, m.draft = q.hit, q.saved
		m.in.SetValue(m.history[q.hit])
		m.in.CursorEnd()
		return
	}
	m.in.SetValue(q.saved)
	m.in.CursorEnd()
}

// insert puts s at the cursor.
func (m *editorModel) insert(s string) {
	v := []rune(m.in.Value())
	pos := min(m.in.Position(), len(v))
	ins := []rune(strings.ReplaceAll(s, "\t", " "))
	m.in.SetValue(string(v[:pos]) + string(ins) + string(v[pos:]))
	m.in.SetCursor(pos + len(ins))
}

// walk shows the previous (-1) or next (1) prompt of the history.
func (m *editorModel) walk(d int) {
	to := m.at + d
	if to < 0 || to > len(m.history) {
		return
	}
	if m.at == len(m.history) {
		m.draft = m.in.Value()
	}
	m.at = to
	if to == len(m.history) {
		m.in.SetValue(m.draft)
	} else {
		m.in.SetValue(m.history[to])
	}
	m.in.CursorEnd()
}

// submit hands the line to the chat; a prompt joins the history.
func (m *editorModel) submit() {
	shown := m.in.Value()
	if m.closed || strings.TrimSpace(shown) == "" && m.in.Prompt == promptLabel {
		return
	}
	if m.in.Prompt == promptLabel && (len(m.history) == 0 || m.history[len(m.history)-1] != shown) {
		m.history = append(m.history, shown)
	}
	m.at, m.draft = len(m.history), ""
	m.in.SetValue("")
	select {
	case m.lines <- typedLine{text: strings.ReplaceAll(shown, newlineMark, "\n"), label: m.in.Prompt}:
	default: // the chat is far behind; a line typed then is dropped
	}
}

func (m *editorModel) close() {
	if !m.closed {
		m.closed = true
		close(m.lines)
	}
}

func (m *editorModel) View() tea.View {
	if m.quitting {
		return tea.NewView("")
	}
	// Always two lines, so the view never changes height under the lines
	// printed above it: the output line still streaming (its last
	// screenful of characters), then the editor.
	partial := m.partial
	if w := ansi.StringWidth(partial); w > m.width-1 {
		partial = ansi.TruncateLeft(partial, w-(m.width-1), "")
	}
	line := m.in.View()
	if q := m.search; q != nil {
		found, label := "", "(reverse-i-search)"
		if q.hit >= 0 {
			found = m.history[q.hit]
		}
		if q.failing(m.history) {
			label = "(failing reverse-i-search)"
		}
		line = ansi.Truncate(fmt.Sprintf("%s`%s': %s", label, q.query, found), max(10, m.width-1), "…")
	}
	return tea.NewView(partial + "\x1b[m\n" + line)
}

// lineEditor runs the editor's program and is the chat's output: Write
// prints ended lines above the editor and shows the rest of the last one in
// it. Only the chat's loop writes.
type lineEditor struct {
	p       *tea.Program
	lines   chan typedLine
	intr    chan struct{}
	exited  chan struct{}
	out     io.Writer // the terminal, for what is printed after the program ended
	partial string
	label   string
	running bool
}

// startLineEditor starts the editor on the terminal in and out.
func startLineEditor(in io.Reader, out io.Writer) *lineEditor {
	ed := &lineEditor{lines: make(chan typedLine, 64), intr: make(chan struct{}, 1), exited: make(chan struct{}), out: out, label: promptLabel}
	m := newEditorModel(ed.lines, ed.intr)
	ready := m.ready
	ed.p = tea.NewProgram(m, tea.WithInput(in), tea.WithOutput(out), tea.WithoutSignalHandler())
	go func() {
		defer close(ed.exited)
		_, _ = ed.p.Run()
	}()
	// The renderer places printed lines by the window's size, and erases
	// its screen at the first frame after learning it: lines printed before
	// that frame are lost. Wait for the size, then for a few frames.
	select {
	case <-ready:
		time.Sleep(100 * time.Millisecond)
	case <-ed.exited:
	case <-time.After(2 * time.Second):
	}
	return ed
}

func (ed *lineEditor) Write(b []byte) (int, error) {
	s := ed.partial + strings.ReplaceAll(string(b), "\t", "    ")
	lines := strings.Split(s, "\n")
	ed.partial = lines[len(lines)-1]
	if done := lines[:len(lines)-1]; len(done) > 0 {
		for i, l := range done {
			if l == "" {
				done[i] = " " // Println leaves out an empty line
			}
		}
		ed.println(strings.Join(done, "\n"))
	}
	ed.send(partialMsg(ed.partial))
	return len(b), nil
}

// println prints above the editor, or on the terminal once it ended.
func (ed *lineEditor) println(s string) {
	sent := make(chan struct{})
	go func() {
		ed.p.Println(s + "\x1b[m")
		close(sent)
	}()
	select {
	case <-sent:
	case <-ed.exited:
		fmt.Fprintln(ed.out, s)
	}
}

func (ed *lineEditor) send(msg tea.Msg) {
	select {
	case <-ed.exited:
	default:
		ed.p.Send(msg)
	}
}

// setLabel shows the prompt the next line answers.
func (ed *lineEditor) setLabel(label string) {
	if label != ed.label {
		ed.label = label
		ed.send(labelMsg(label))
	}
}

// setRunning says whether a turn runs.
func (ed *lineEditor) setRunning(running bool) {
	if running != ed.running {
		ed.running = running
		ed.send(runningMsg(running))
	}
}

// close ends the editor, leaving the terminal as it found it.
func (ed *lineEditor) close() {
	if ed.partial != "" {
		ed.println(ed.partial)
		ed.partial = ""
	}
	ed.send(closeMsg{})
	<-ed.exited
}
