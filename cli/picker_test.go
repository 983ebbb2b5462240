package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"charm.land/bubbles/v2/spinner"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/paddockhq/paddock/api"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files under testdata/")

var pickerNow = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// pickerRows are four sessions of a workspace, in no particular order.
func pickerRows() []pickRow {
	return []pickRow{
		{ID: "aaaa0001-old-resumable", TaskID: "t1", Title: "fix login bug", Agent: "demo", Protocol: "acp",
			State: api.SessionStopped, LastActivity: pickerNow.Add(-3 * time.Hour), Word: wordResumable,
			Outcome: "completed", NeedsResume: true, Detail: "The agent is not running. Resume the session to continue the conversation.",
			conversation: conversation{FirstPrompt: "make the login page redirect after SSO", LastReply: "Done: the callback now redirects to /home.", Messages: 12}},
		{ID: "bbbb0002-live", TaskID: "t2", Title: "write docs", Agent: "demo-tty", Protocol: "pty",
			State: api.SessionWaitingForInput, LastActivity: pickerNow.Add(-1 * time.Minute), Word: wordLive, Outcome: "interrupted", Running: true,
			Branch: "paddock/bbbb0002", conversation: conversation{FirstPrompt: "document the CLI", Messages: 1}},
		{ID: "cccc0003-noresume", TaskID: "t1", Title: "fix login bug", Name: "login: second try", Agent: "demo-noresume",
			State: api.SessionStopped, LastActivity: pickerNow.Add(-2 * time.Hour), Word: wordNotResumable,
			Disabled:     "not resumable: This agent cannot resume previous sessions. Create a new session.",
			conversation: conversation{FirstPrompt: "make the login page redirect after SSO", LastReply: "I could not reproduce it.", Messages: 4}},
		{ID: "dddd0004-broken", TaskID: "t3", Title: "flaky test", Agent: "demo",
			State: api.SessionError, LastActivity: pickerNow.Add(-30 * time.Minute), Word: wordUnknown,
			Failure: "could not load its status: connection refused"},
	}
}

// fakeSource is a server for the picker: it searches its rows as GET
// /v1/sessions does (pinned first, then newest; q in the name, title,
// agent or transcript, or a prefix of the id) and pages them pageSize at
// a time; and it records what the picker asks.
type fakeSource struct {
	all        []pickRow
	transcript map[string]string // more text of a session's messages, searched
	pageSize   int
	searches   []string // "q@cursor" of each search
	messages   map[string][]api.Message
	reads      []string // sessions whose messages were read
	checks     []string
	resumes    []string
	rows       map[string]pickRow // what a check returns; absent → the row as listed
	resumeErr  error
}

func newFakeSource(rows []pickRow) *fakeSource {
	return &fakeSource{all: rows, pageSize: 50, rows: map[string]pickRow{}, transcript: map[string]string{}, messages: map[string][]api.Message{}}
}

func (f *fakeSource) find(q, cursor string) (pickPage, error) {
	rows := append([]pickRow(nil), f.all...)
	sortRows(rows)
	q = strings.ToLower(strings.TrimSpace(q))
	var hits []pickRow
	for _, r := range rows {
		text := strings.ToLower(strings.Join([]string{r.Name, r.Title, r.Agent, r.FirstPrompt, r.LastReply, f.transcript[r.ID]}, "\n"))
		if q == "" || strings.Contains(text, q) || strings.HasPrefix(strings.ToLower(r.ID), q) {
			if q != "" && strings.Contains(strings.ToLower(f.transcript[r.ID]), q) {
				r.Match, r.MatchField = f.transcript[r.ID], api.MatchTranscript
			}
			hits = append(hits, r)
		}
	}
	from := 0
	if cursor != "" {
		from, _ = strconv.Atoi(cursor)
	}
	to := min(len(hits), from+f.pageSize)
	page := pickPage{rows: hits[from:to]}
	if to < len(hits) {
		page.next = strconv.Itoa(to)
	}
	return page, nil
}

func (f *fakeSource) listed(id string) pickRow {
	for _, r := range f.all {
		if r.ID == id {
			return r
		}
	}
	return pickRow{}
}

func (f *fakeSource) source() pickerSource {
	return pickerSource{
		search: func(_ context.Context, q, cursor string) (pickPage, error) {
			f.searches = append(f.searches, q+"@"+cursor)
			return f.find(q, cursor)
		},
		messages: func(_ context.Context, id string) ([]api.Message, error) {
			f.reads = append(f.reads, id)
			return f.messages[id], nil
		},
		check: func(_ context.Context, id string) (pickRow, error) {
			f.checks = append(f.checks, id)
			if r, ok := f.rows[id]; ok {
				return r, nil
			}
			r := f.listed(id)
			r.conversation = conversation{} // a check reads no transcript summary
			return r, nil
		},
		resume: func(_ context.Context, id string) error {
			f.resumes = append(f.resumes, id)
			return f.resumeErr
		},
	}
}

// openPicker opens the picker over f's first page in a terminal of
// width x height, as runResumePicker does, with no debounce (each key
// searches at once) unless a test sets one.
func openPicker(t *testing.T, f *fakeSource, width, height int) *picker {
	t.Helper()
	first, _ := f.find("", "")
	p := newPicker(first, f.source(), func() time.Time { return pickerNow })
	p.debounce = 0
	drive(p, p.Init())
	_, cmd := p.Update(tea.WindowSizeMsg{Width: width, Height: height})
	drive(p, cmd)
	return p
}

func newTestPicker(t *testing.T) (*picker, *fakeSource) {
	t.Helper()
	f := newFakeSource(pickerRows())
	return openPicker(t, f, 110, 30), f
}

// press sends one key and runs the commands it returns, as the program
// would (spinner ticks aside); it reports whether the picker quit.
func press(p *picker, k tea.KeyPressMsg) bool {
	_, cmd := p.Update(k)
	return drive(p, cmd)
}

func drive(p *picker, cmd tea.Cmd) bool {
	if cmd == nil {
		return false
	}
	switch msg := cmd().(type) {
	case nil, spinner.TickMsg:
		return false
	case tea.QuitMsg:
		return true
	case tea.BatchMsg:
		quit := false
		for _, c := range msg {
			quit = drive(p, c) || quit
		}
		return quit
	default:
		_, next := p.Update(msg)
		return drive(p, next)
	}
}

func key(code rune) tea.KeyPressMsg { return tea.KeyPressMsg{Code: code} }
func ctrl(r rune) tea.KeyPressMsg   { return tea.KeyPressMsg{Code: r, Mod: tea.ModCtrl} }

func typeText(p *picker, s string) {
	for _, r := range s {
		press(p, tea.KeyPressMsg{Code: r, Text: string(r)})
	}
}

// screen is the frame as a person sees it (no colours).
func screen(p *picker) string { return ansi.Strip(p.View().Content) }

// listed returns the session ids of the list, top to bottom.
func listed(p *picker) []string {
	var ids []string
	for _, r := range p.rows {
		ids = append(ids, r.ID)
	}
	return ids
}

// The picker lists sessions as the server orders them (pinned first,
// then newest activity), each as two lines: the name or first prompt,
// state, age and short id; then the last reply, message count, agent and
// branch.
func TestPickerListsPinnedThenNewestActivityFirst(t *testing.T) {
	rows := pickerRows()
	rows[0].Pinned = true // the oldest
	p := openPicker(t, newFakeSource(rows), 80, 40)
	want := []string{"aaaa0001-old-resumable", "bbbb0002-live", "dddd0004-broken", "cccc0003-noresume"}
	if got := listed(p); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("order = %v, want %v", got, want)
	}
	assertInOrder(t, screen(p), []string{
		"> ★ make the login page redirect after SSO", "resumable", "3h ago", "aaaa0001",
		"Done: the callback now redirects to /home.", "12 msgs · demo",
		"document the CLI", "live", "1m ago", "bbbb0002",
		"no reply yet", "1 msg · demo-tty · ⎇ paddock/bbbb0002",
		"flaky test", "unknown", "30m ago", "dddd0004",
		"login: second try", "not resumable", "2h ago", "cccc0003",
		"I could not reproduce it.", "4 msgs · demo-noresume",
	})
}

// At 80 columns every line fits, and long names, replies, agents and
// branches give way to the 8-character id, which is never cut.
func TestPickerRowsFit80Columns(t *testing.T) {
	long := strings.Repeat("very long words ", 20)
	rows := pickerRows()
	rows = append(rows, pickRow{ID: "eeee0005-long", TaskID: "t5", Title: long, Name: "N" + long, Agent: "an-agent-profile-with-a-long-name",
		Model: "model-x", State: api.SessionStopped, LastActivity: pickerNow.AddDate(0, 0, -9), Word: wordNodeUnavailable,
		Branch: "feature/" + long, Pinned: true,
		conversation: conversation{FirstPrompt: long, LastReply: "R" + long + "\nsecond line", Messages: 999}})
	p := openPicker(t, newFakeSource(rows), 80, 40)
	out := screen(p)
	for _, l := range strings.Split(out, "\n") {
		if w := ansi.StringWidth(l); w > 80 {
			t.Errorf("a line is %d columns wide: %q", w, l)
		}
	}
	for _, r := range rows {
		found := false
		for _, l := range strings.Split(out, "\n") {
			if strings.HasSuffix(l, r.ID[:8]) {
				found = true
			}
		}
		if !found {
			t.Errorf("no line ends with the id %s:\n%s", r.ID[:8], out)
		}
	}
	assertInOrder(t, out, []string{"> ★ Nvery long words", "…", "node unavailable", "2026-11-22", "eeee0005",
		"Rvery long words", "…", "999 msgs · an-agent-profil… · ⎇ feature/very long w…"})
	if strings.Contains(out, "second line") {
		t.Errorf("a row shows more than the reply's first line:\n%s", out)
	}
}

// The filter is the server's search: what it answers is what is listed,
// a transcript match says what matched, and nothing found says so.
func TestPickerFilterSearchesTheServer(t *testing.T) {
	cases := []struct {
		typed string
		want  []string
	}{
		{"login", []string{"cccc0003-noresume", "aaaa0001-old-resumable"}},
		{"LOGIN", []string{"cccc0003-noresume", "aaaa0001-old-resumable"}},
		{"dddd", []string{"dddd0004-broken"}},
		{"second try", []string{"cccc0003-noresume"}},
		{"kiwi", []string{"bbbb0002-live"}},
		{"nothing like it", nil},
	}
	for _, tc := range cases {
		t.Run(tc.typed, func(t *testing.T) {
			f := newFakeSource(pickerRows())
			f.transcript["bbbb0002-live"] = "remember kiwi"
			p := openPicker(t, f, 110, 30)
			typeText(p, tc.typed)
			if got := listed(p); strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("after typing %q: %v, want %v", tc.typed, got, tc.want)
			}
			if last := f.searches[len(f.searches)-1]; last != tc.typed+"@" {
				t.Errorf("the last search was %q, want %q", last, tc.typed+"@")
			}
			if !strings.Contains(screen(p), "Filter: "+tc.typed) {
				t.Errorf("the filter line does not show %q:\n%s", tc.typed, screen(p))
			}
			if tc.want == nil && !strings.Contains(screen(p), "No session matches") {
				t.Errorf("an empty result does not say so:\n%s", screen(p))
			}
			if tc.typed == "kiwi" && !strings.Contains(screen(p), "found: remember kiwi") {
				t.Errorf("a transcript match does not show what matched:\n%s", screen(p))
			}
		})
	}
}

// Typing waits for the filter to be still before searching, and an answer
// to an older filter that arrives after a newer one's is dropped.
func TestPickerSearchIsDebouncedAndTheLatestAnswerWins(t *testing.T) {
	f := newFakeSource(pickerRows())
	p := openPicker(t, f, 110, 30)
	p.debounce = time.Hour // never fires by itself here
	before := len(f.searches)
	for _, r := range "login" {
		p.Update(tea.KeyPressMsg{Code: r, Text: string(r)})
	}
	if len(f.searches) != before {
		t.Fatalf("typing searched before the filter was still: %v", f.searches[before:])
	}
	if !strings.Contains(screen(p), "searching") {
		t.Errorf("a pending search is not shown:\n%s", screen(p))
	}
	// An older keystroke's timer fires: nothing happens.
	if _, cmd := p.Update(searchDueMsg{seq: p.seq - 1}); cmd != nil {
		t.Fatal("a stale debounce timer started a search")
	}
	// The current one: one search, for the whole word.
	_, cmd := p.Update(searchDueMsg{seq: p.seq})
	newer := cmd().(searchedMsg)
	if got := f.searches[before:]; strings.Join(got, ",") != "login@" {
		t.Fatalf("searches %v, want one for login", got)
	}
	// The user types on; the answer for "login" comes, then the one for
	// "logins" (none), then late, "login"'s again: "logins" stands.
	p.Update(tea.KeyPressMsg{Code: 's', Text: "s"})
	p.Update(newer) // for a filter that is no longer current
	if len(p.rows) != 4 {
		t.Fatalf("an answer to an older filter replaced the list: %v", listed(p))
	}
	_, cmd = p.Update(searchDueMsg{seq: p.seq})
	p.Update(cmd())
	p.Update(newer)
	if got := listed(p); len(got) != 0 || !strings.Contains(screen(p), "No session matches") {
		t.Fatalf("after the late answer: %v\n%s", got, screen(p))
	}
}

// The list is never cut short: scrolling towards the end of what is
// loaded asks for the next page with the server's cursor.
func TestPickerPagesWhenScrollingPastTheLoadedRows(t *testing.T) {
	var rows []pickRow
	for i := range 23 {
		rows = append(rows, pickRow{ID: fmt.Sprintf("%08d-x", i), TaskID: "t1", Title: "task", Word: wordResumable,
			LastActivity: pickerNow.Add(-time.Duration(i) * time.Minute), conversation: conversation{FirstPrompt: fmt.Sprintf("prompt %d", i)}})
	}
	f := newFakeSource(rows)
	f.pageSize = 5
	p := openPicker(t, f, 80, 24) // 4 rows on screen
	if n := len(p.rows); n < 5 || n >= 23 {
		t.Fatalf("%d rows loaded at first, want a screenful and not all", n)
	}
	if !strings.Contains(screen(p), "+)") {
		t.Errorf("the heading does not say more sessions wait:\n%s", screen(p))
	}
	for range 30 {
		press(p, key(tea.KeyDown))
	}
	if got := listed(p); len(got) != 23 || got[22] != "00000022-x" {
		t.Fatalf("after scrolling to the end: %d rows, %v", len(got), got)
	}
	if p.current().ID != "00000022-x" {
		t.Errorf("highlighted %s, want the last session", p.current().ID)
	}
	for _, q := range f.searches {
		if !strings.HasPrefix(q, "@") {
			t.Errorf("a search for %q while scrolling", q)
		}
	}
	if out := screen(p); !strings.Contains(out, "(23 )") && !strings.Contains(out, "(23)") {
		t.Errorf("the heading does not count every session:\n%s", out)
	}
}

// The preview shows the highlighted session's last messages, read once
// per session.
func TestPickerPreviewShowsTheLastMessages(t *testing.T) {
	f := newFakeSource(pickerRows())
	msg := func(role api.Role, text string) api.Message { return api.Message{Role: role, Text: text} }
	f.messages["bbbb0002-live"] = []api.Message{
		msg(api.RoleUser, "the oldest question"),
		msg(api.RoleAgent, "the oldest answer"),
		msg(api.RoleUser, "document the CLI"),
		{Role: api.RoleTool, ToolCall: &api.ToolCall{Title: "Read docs/CLI.md", Status: "completed"}},
		msg(api.RoleAgent, "Here is the plan:\n\n1. list the commands\n2. write examples\n3. more\n4. hidden"),
	}
	p := openPicker(t, f, 80, 30) // the preview below the list
	assertInOrder(t, screen(p), []string{"─ Last messages", "you    the oldest question", "agent  the oldest answer",
		"you    document the CLI", "tool   Read docs/CLI.md (completed)", "agent  Here is the plan:", "1. list the commands", "2. write examples"})
	if out := screen(p); strings.Contains(out, "3. more") {
		t.Errorf("the preview shows more than 3 lines of a message:\n%s", out)
	}
	// On 24 lines, the newest that fits.
	short := openPicker(t, f, 80, 24)
	assertInOrder(t, screen(short), []string{"─ Last messages", "tool   Read docs/CLI.md (completed)", "agent  Here is the plan:", "2. write examples"})
	if out := screen(short); strings.Contains(out, "document the CLI\n") || strings.Contains(out, "oldest") || strings.Count(out, "\n") > 23 {
		t.Errorf("the preview shows more than fits in 24 lines:\n%s", out)
	}
	press(p, key(tea.KeyDown))
	press(p, key(tea.KeyUp))
	if strings.Join(f.reads, ",") != "bbbb0002-live,bbbb0002-live,dddd0004-broken" {
		t.Errorf("messages read %v: want each highlighted session once per picker", f.reads)
	}
	press(p, key(tea.KeyDown))
	if !strings.Contains(screen(p), "No messages yet") {
		t.Errorf("an empty conversation is not said so:\n%s", screen(p))
	}
	// ctrl-t hides it; at 140 columns it is at the right of the list.
	press(p, ctrl('t'))
	if strings.Contains(screen(p), "Last messages") {
		t.Errorf("ctrl-t did not hide the preview:\n%s", screen(p))
	}
	wide := openPicker(t, f, 150, 24)
	for _, l := range strings.Split(screen(wide), "\n") {
		if strings.Contains(l, "bbbb0002") && !strings.Contains(l, "│") {
			t.Errorf("the preview is not beside the list: %q", l)
		}
	}
	assertInOrder(t, screen(wide), []string{"│ ─ Last messages", "│ you    document the CLI", "│ agent  Here is the plan:"})
	// On a small terminal it hides, and ctrl-t shows it.
	small := openPicker(t, f, 80, 16)
	if strings.Contains(screen(small), "Last messages") {
		t.Errorf("the preview shows on 16 lines:\n%s", screen(small))
	}
	press(small, ctrl('t'))
	if !strings.Contains(screen(small), "Last messages") {
		t.Errorf("ctrl-t did not show the preview:\n%s", screen(small))
	}
}

func TestPickerKeysMoveTheHighlight(t *testing.T) {
	p, _ := newTestPicker(t)
	steps := []struct {
		key  tea.KeyPressMsg
		want string
	}{
		{key(tea.KeyDown), "dddd0004-broken"},
		{ctrl('n'), "cccc0003-noresume"},
		{key(tea.KeyDown), "aaaa0001-old-resumable"},
		{key(tea.KeyDown), "aaaa0001-old-resumable"}, // stays on the last row
		{key(tea.KeyUp), "cccc0003-noresume"},
		{ctrl('p'), "dddd0004-broken"},
		{ctrl('p'), "bbbb0002-live"},
		{key(tea.KeyUp), "bbbb0002-live"}, // stays on the first row
	}
	for i, s := range steps {
		press(p, s.key)
		if got := p.current().ID; got != s.want {
			t.Fatalf("step %d (%s): highlighted %s, want %s", i, s.key, got, s.want)
		}
		if !strings.Contains(screen(p), ">   "+p.current().label()) {
			t.Fatalf("step %d: the marker is not on %q:\n%s", i, p.current().label(), screen(p))
		}
	}
}

func TestPickerEscapeCancelsAndChangesNothing(t *testing.T) {
	p, f := newTestPicker(t)
	press(p, key(tea.KeyDown))
	if !press(p, key(tea.KeyEscape)) {
		t.Fatal("esc did not quit")
	}
	if !p.cancelled || p.chosen != nil || len(f.checks)+len(f.resumes) != 0 {
		t.Errorf("cancelled %v, chosen %v, checks %v, resumes %v", p.cancelled, p.chosen, f.checks, f.resumes)
	}
}

func TestPickerDisabledRowsShowWhyAndCannotBeSelected(t *testing.T) {
	p, f := newTestPicker(t)
	press(p, key(tea.KeyDown)) // dddd0004-broken: failed to load
	out := screen(p)
	if !strings.Contains(out, "Error: could not load its status: connection refused") {
		t.Errorf("the failing row's error is not shown:\n%s", out)
	}
	if press(p, key(tea.KeyEnter)) || len(f.checks) != 0 {
		t.Errorf("enter on a row that failed to load acted: checks %v", f.checks)
	}
	press(p, key(tea.KeyDown)) // cccc0003-noresume
	out = screen(p)
	if !strings.Contains(out, "Cannot select: not resumable: This agent cannot resume previous sessions.") {
		t.Errorf("the disabled row's reason is not on the detail line:\n%s", out)
	}
	if press(p, key(tea.KeyEnter)) || len(f.checks) != 0 || p.chosen != nil {
		t.Errorf("enter on a disabled row acted: checks %v", f.checks)
	}
	if !strings.Contains(screen(p), "Cannot select this session: not resumable") {
		t.Errorf("enter on a disabled row does not say why nothing happened:\n%s", screen(p))
	}
}

func TestPickerEnterOnALiveSessionRechecksThenChoosesIt(t *testing.T) {
	p, f := newTestPicker(t)
	if !press(p, key(tea.KeyEnter)) {
		t.Fatal("enter on a live session did not quit")
	}
	if strings.Join(f.checks, ",") != "bbbb0002-live" || len(f.resumes) != 0 {
		t.Errorf("checks %v, resumes %v: want one check and no resume of a live session", f.checks, f.resumes)
	}
	if p.chosen == nil || p.chosen.ID != "bbbb0002-live" || p.cancelled {
		t.Errorf("chosen %+v", p.chosen)
	}
}

func TestPickerResumesAStoppedSessionBeforeChoosingIt(t *testing.T) {
	p, f := newTestPicker(t)
	typeText(p, "aaaa0001")
	if !press(p, key(tea.KeyEnter)) {
		t.Fatal("the picker did not quit after the resume")
	}
	if strings.Join(f.checks, ",") != "aaaa0001-old-resumable" || strings.Join(f.resumes, ",") != "aaaa0001-old-resumable" {
		t.Errorf("checks %v, resumes %v", f.checks, f.resumes)
	}
	if p.chosen == nil || p.chosen.ID != "aaaa0001-old-resumable" || !p.chosen.Running {
		t.Errorf("chosen %+v", p.chosen)
	}
}

func TestPickerShowsASpinnerWhileResuming(t *testing.T) {
	p, _ := newTestPicker(t)
	typeText(p, "aaaa0001")
	_, cmd := p.Update(key(tea.KeyEnter))
	if cmd == nil {
		t.Fatal("enter returned no command")
	}
	if !strings.Contains(screen(p), "checking") {
		t.Errorf("no progress on the row while the server checks it:\n%s", screen(p))
	}
	// Keys other than ctrl-c wait while the check runs.
	p.Update(key(tea.KeyEscape))
	if p.cancelled {
		t.Error("esc cancelled a selection under way")
	}
}

func TestPickerAFailedResumeStaysOnItsRow(t *testing.T) {
	p, f := newTestPicker(t)
	f.resumeErr = errors.New("session aaaa0001-old-resumable failed to resume: workspace is gone")
	typeText(p, "aaaa0001")
	if press(p, key(tea.KeyEnter)) {
		t.Fatal("the picker quit after a failed resume")
	}
	out := screen(p)
	if !strings.Contains(out, "Error: resume failed: session aaaa0001-old-resumable failed to resume: workspace is gone") {
		t.Errorf("the failure is not on the row's details:\n%s", out)
	}
	if p.chosen != nil || p.busy != "" {
		t.Errorf("chosen %v, busy %q", p.chosen, p.busy)
	}
	if press(p, key(tea.KeyEnter)) || len(f.resumes) != 1 {
		t.Errorf("a failed row was resumed again: %v", f.resumes)
	}
}

func TestPickerStaleListingNeverBypassesTheServerChecks(t *testing.T) {
	p, f := newTestPicker(t)
	// Listed as resumable; meanwhile another client took its terminal.
	now := f.listed("aaaa0001-old-resumable")
	now.Disabled = "its agent terminal is controlled by another client (laptop, pid 42, since 11:59:00)"
	f.rows["aaaa0001-old-resumable"] = now
	typeText(p, "aaaa0001")
	if press(p, key(tea.KeyEnter)) {
		t.Fatal("the picker chose a row the recheck refused")
	}
	if len(f.checks) != 1 || len(f.resumes) != 0 {
		t.Errorf("checks %v, resumes %v: want a recheck and no resume", f.checks, f.resumes)
	}
	if !strings.Contains(screen(p), "Cannot select: its agent terminal is controlled by another client (laptop, pid 42") {
		t.Errorf("the recheck's reason is not shown:\n%s", screen(p))
	}
}

func TestPickerFrameGolden(t *testing.T) {
	p, _ := newTestPicker(t)
	press(p, key(tea.KeyDown))
	press(p, key(tea.KeyDown))
	got := screen(p)
	path := filepath.Join("testdata", "picker.golden")
	if *updateGolden {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if got != string(want) {
		t.Errorf("frame differs from %s (run with -update after checking it):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
	// The id is secondary text: faint.
	if !strings.Contains(p.View().Content, pickDimStyle.Render("bbbb0002")) {
		t.Error("the session id is not dim")
	}
}

func TestClassify(t *testing.T) {
	// A pid of this host that has exited.
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	deadPID := gone.Process.Pid
	str := func(s string) *string { return &s }
	agents := map[string]api.Agent{"demo": {Name: "demo", Protocol: "acp"}, "tty": {Name: "tty", Protocol: "pty"}}
	sess := func(id, agent string, st api.SessionState) api.Session {
		return api.Session{ID: id, TaskID: "t1", Agent: agent, State: st}
	}
	cases := []struct {
		name        string
		s           api.Session
		st          *api.Status
		self        string
		loadErr     error
		word        string
		disabledHas string
		selectable  bool
	}{
		{"live", sess("a", "demo", api.SessionWaitingForInput), &api.Status{State: api.SessionWaitingForInput, IsAgentRunning: true, IsResumable: true, Model: str("demo-1")}, "", nil, wordLive, "", true},
		{"needs approval", sess("a", "demo", api.SessionRunning), &api.Status{State: api.SessionRunning, IsAgentRunning: true, IsResumable: true, PendingPermissions: 2}, "", nil, wordNeedsApproval, "", true},
		{"resumable", sess("a", "demo", api.SessionStopped), &api.Status{State: api.SessionStopped, IsResumable: true, NeedsResume: true, ResumeReason: str(api.ReasonAgentNotRunning)}, "", nil, wordResumable, "", true},
		{"error but resumable", sess("a", "demo", api.SessionError), &api.Status{State: api.SessionError, IsResumable: true, NeedsResume: true}, "", nil, wordError, "", true},
		{"not resumable", sess("a", "demo", api.SessionStopped), &api.Status{State: api.SessionStopped, ResumeReason: str(api.ReasonNotResumable), ResumeMessage: str("This agent cannot resume previous sessions. Create a new session.")}, "", nil, wordNotResumable, "not resumable: This agent cannot resume", false},
		{"node unavailable", sess("a", "demo", api.SessionWaitingForInput), &api.Status{State: api.SessionWaitingForInput, IsResumable: true, ResumeReason: str(api.ReasonNodeUnavailable), ResumeMessage: str("The session's node n2 does not answer.")}, "", nil, wordNodeUnavailable, "its node does not answer", false},
		{"own session", sess("me", "demo", api.SessionWaitingForInput), &api.Status{State: api.SessionWaitingForInput, IsAgentRunning: true}, "me", nil, wordLive, "your own session", false},
		{"another live owner", sess("a", "tty", api.SessionWaitingForInput), &api.Status{State: api.SessionWaitingForInput, IsAgentRunning: true, Controller: &api.Controller{Host: "laptop", PID: 42, Nonce: "n"}}, "", nil, wordLive, "controlled by another client (laptop, pid 42", false},
		{"someone chats in it", sess("a", "demo", api.SessionWaitingForInput), &api.Status{State: api.SessionWaitingForInput, IsAgentRunning: true, Controller: &api.Controller{Host: "laptop", PID: 42, Nonce: "n", Via: api.ViaChat}}, "", nil, wordLive, "it is in chat on laptop (pid 42) since", false},
		{"a browser controls it", sess("a", "tty", api.SessionWaitingForInput), &api.Status{State: api.SessionWaitingForInput, IsAgentRunning: true, Controller: &api.Controller{}}, "", nil, wordLive, "controlled by another client (a client that did not say who it is", false},
		{"its controller here has exited", sess("a", "tty", api.SessionWaitingForInput), &api.Status{State: api.SessionWaitingForInput, IsAgentRunning: true, Controller: &api.Controller{Host: self().Host, PID: deadPID, Nonce: "n"}}, "", nil, wordLive, "", true},
		{"this pid under another nonce", sess("a", "tty", api.SessionWaitingForInput), &api.Status{State: api.SessionWaitingForInput, IsAgentRunning: true, Controller: &api.Controller{Host: self().Host, PID: os.Getpid(), Nonce: "an older process"}}, "", nil, wordLive, "", true},
		{"agent not configured", sess("a", "gone", api.SessionStopped), &api.Status{State: api.SessionStopped, IsResumable: true, NeedsResume: true}, "", nil, wordResumable, "agent not configured", false},
		{"failed to load", sess("a", "demo", api.SessionStopped), nil, "", errors.New("boom"), wordUnknown, "", false},
		{"starting", sess("a", "demo", api.SessionStarting), &api.Status{State: api.SessionStarting, IsResumable: true}, "", nil, wordStarting, "still starting", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := classify(api.SessionItem{Session: tc.s}, "title", tc.st, agents, tc.self, tc.loadErr)
			if tc.st != nil && tc.st.Model != nil && r.Model != *tc.st.Model {
				t.Errorf("model %q, want %q", r.Model, *tc.st.Model)
			}
			if r.Word != tc.word {
				t.Errorf("word %q, want %q", r.Word, tc.word)
			}
			if !strings.Contains(r.Disabled, tc.disabledHas) || (tc.disabledHas == "") != (r.Disabled == "") {
				t.Errorf("disabled %q, want it to say %q", r.Disabled, tc.disabledHas)
			}
			if r.selectable() != tc.selectable {
				t.Errorf("selectable %v, want %v (%+v)", r.selectable(), tc.selectable, r)
			}
			if tc.loadErr != nil && !strings.Contains(r.Failure, "boom") {
				t.Errorf("failure %q does not carry the load error", r.Failure)
			}
			if m := tc.st; m != nil && m.ResumeMessage != nil && strings.Contains(r.Disabled, *m.ResumeMessage) && strings.Contains(r.Detail, *m.ResumeMessage) {
				t.Errorf("the row says its reason twice: disabled %q, detail %q", r.Disabled, r.Detail)
			}
		})
	}
}

// A session whose agent waits for a permission answer says so on its row
// and, highlighted, how many requests wait.
func TestPickerRowSaysNeedsApproval(t *testing.T) {
	st := &api.Status{State: api.SessionRunning, IsAgentRunning: true, IsResumable: true, PendingPermissions: 1}
	s := api.Session{ID: "s-asks-0005", TaskID: "t9", Agent: "demo", State: api.SessionRunning, LastActivityAt: pickerNow}
	rows := append(pickerRows(), classify(api.SessionItem{Session: s}, "approve me", st, map[string]api.Agent{"demo": {Name: "demo", Protocol: "acp"}}, "", nil))
	p := openPicker(t, newFakeSource(rows), 110, 30)
	assertInOrder(t, screen(p), []string{"approve me", "needs approval", "s-asks-0",
		"Session s-asks-0005", "The agent waits for an answer to 1 permission request: select it to answer."})
}

// An empty scope says so and points at -all instead of opening an empty
// full-screen picker (or, without a terminal, failing with exit 2).
func TestResumeWithNothingHerePointsAtAll(t *testing.T) {
	_, addr := startFake(t)
	code, out, errOut := runCLI(addr, "resume")
	if code != 0 || !strings.Contains(out, "No sessions of tasks in this directory") || !strings.Contains(out, `"paddock resume -all"`) {
		t.Fatalf("resume in a directory without tasks: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// sortRows orders rows as the server lists them: pinned first, then by
// last activity, newest first, then by id.
func sortRows(rows []pickRow) {
	for i := 1; i < len(rows); i++ {
		for j := i; j > 0 && rowBefore(rows[j], rows[j-1]); j-- {
			rows[j], rows[j-1] = rows[j-1], rows[j]
		}
	}
}

func rowBefore(a, b pickRow) bool {
	if a.Pinned != b.Pinned {
		return a.Pinned
	}
	if !a.LastActivity.Equal(b.LastActivity) {
		return a.LastActivity.After(b.LastActivity)
	}
	return a.ID < b.ID
}

// A page may hold none of the picker's sessions (the server's page was
// other directories' sessions, or its search reached its work bound): the
// picker asks for the next one until it has a screenful or the end.
func TestPickerPagesPastEmptyPages(t *testing.T) {
	f := newFakeSource(pickerRows())
	src := f.source()
	asked := 0
	src.search = func(_ context.Context, q, cursor string) (pickPage, error) {
		asked++
		if cursor == "" || cursor == "empty1" {
			return pickPage{next: cursor + "empty1"}, nil
		}
		return f.find(q, "")
	}
	p := newPicker(pickPage{next: "empty1"}, src, func() time.Time { return pickerNow })
	p.debounce = 0
	drive(p, p.Init())
	if got := listed(p); len(got) != 4 || asked != 2 {
		t.Fatalf("after the empty pages: %v, %d searches", got, asked)
	}
	typeText(p, "z")
	if asked != 5 || !strings.Contains(screen(p), "No session matches") {
		t.Fatalf("after typing: %d searches, want 3 more (two empty pages, then the answer):\n%s", asked, screen(p))
	}
}
