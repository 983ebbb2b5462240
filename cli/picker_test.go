package cli

import (
	"context"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
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
		{ID: "s-old-resumable-0001", TaskID: "t1", Title: "fix login bug", Agent: "demo", Protocol: "acp",
			State: api.SessionStopped, LastActivity: pickerNow.Add(-3 * time.Hour), Word: wordResumable,
			Outcome: "completed", NeedsResume: true, Detail: "The agent is not running. Resume the session to continue the conversation."},
		{ID: "s-live-0002", TaskID: "t2", Title: "write docs", Agent: "demo-tty", Protocol: "pty",
			State: api.SessionWaitingForInput, LastActivity: pickerNow.Add(-1 * time.Minute), Word: wordLive, Outcome: "interrupted", Running: true},
		{ID: "s-noresume-0003", TaskID: "t1", Title: "fix login bug", Agent: "demo-noresume",
			State: api.SessionStopped, LastActivity: pickerNow.Add(-2 * time.Hour), Word: wordNotResumable,
			Disabled: "not resumable: This agent cannot resume previous sessions. Create a new session."},
		{ID: "s-broken-0004", TaskID: "t3", Title: "flaky test", Agent: "demo",
			State: api.SessionError, LastActivity: pickerNow.Add(-30 * time.Minute), Word: wordUnknown,
			Failure: "could not load its status: connection refused"},
	}
}

// fakeSource records what the picker asks the server.
type fakeSource struct {
	checks    []string
	resumes   []string
	rows      map[string]pickRow // what a check returns; absent → the row as listed
	listed    map[string]pickRow
	resumeErr error
}

func (f *fakeSource) source() pickerSource {
	return pickerSource{
		check: func(_ context.Context, id string) (pickRow, error) {
			f.checks = append(f.checks, id)
			if r, ok := f.rows[id]; ok {
				return r, nil
			}
			return f.listed[id], nil
		},
		resume: func(_ context.Context, id string) error {
			f.resumes = append(f.resumes, id)
			return f.resumeErr
		},
	}
}

func newTestPicker(t *testing.T) (*picker, *fakeSource) {
	t.Helper()
	rows := pickerRows()
	f := &fakeSource{listed: map[string]pickRow{}, rows: map[string]pickRow{}}
	for _, r := range rows {
		f.listed[r.ID] = r
	}
	p := newPicker(rows, f.source(), func() time.Time { return pickerNow })
	p.Update(tea.WindowSizeMsg{Width: 110, Height: 30})
	return p, f
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
	for _, i := range p.shown {
		ids = append(ids, p.rows[i].ID)
	}
	return ids
}

func TestPickerListsNewestActivityFirst(t *testing.T) {
	p, _ := newTestPicker(t)
	want := []string{"s-live-0002", "s-broken-0004", "s-noresume-0003", "s-old-resumable-0001"}
	if got := listed(p); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("order = %v, want %v", got, want)
	}
	assertInOrder(t, screen(p), []string{"write docs", "live", "interrupted", "demo-tty", "s-live-0002",
		"flaky test", "s-broken-0004", "fix login bug", "not resumable", "s-noresume-0003", "fix login bug", "resumable", "completed", "s-old-resumable-0001"})
}

func TestPickerFiltersByTitleOrSessionID(t *testing.T) {
	cases := []struct {
		typed string
		want  []string
	}{
		{"login", []string{"s-noresume-0003", "s-old-resumable-0001"}},
		{"LOGIN", []string{"s-noresume-0003", "s-old-resumable-0001"}},
		{"0004", []string{"s-broken-0004"}},
		{"s-live", []string{"s-live-0002"}},
		{"nothing like it", nil},
	}
	for _, tc := range cases {
		t.Run(tc.typed, func(t *testing.T) {
			p, _ := newTestPicker(t)
			typeText(p, tc.typed)
			if got := listed(p); strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("after typing %q: %v, want %v", tc.typed, got, tc.want)
			}
			if !strings.Contains(screen(p), "Filter: "+tc.typed) {
				t.Errorf("the filter line does not show %q:\n%s", tc.typed, screen(p))
			}
			if tc.want == nil && !strings.Contains(screen(p), "No session matches") {
				t.Errorf("an empty result does not say so:\n%s", screen(p))
			}
		})
	}
}

func TestPickerKeysMoveTheHighlight(t *testing.T) {
	p, _ := newTestPicker(t)
	steps := []struct {
		key  tea.KeyPressMsg
		want string
	}{
		{key(tea.KeyDown), "s-broken-0004"},
		{ctrl('n'), "s-noresume-0003"},
		{key(tea.KeyDown), "s-old-resumable-0001"},
		{key(tea.KeyDown), "s-old-resumable-0001"}, // stays on the last row
		{key(tea.KeyUp), "s-noresume-0003"},
		{ctrl('p'), "s-broken-0004"},
		{ctrl('p'), "s-live-0002"},
		{key(tea.KeyUp), "s-live-0002"}, // stays on the first row
	}
	for i, s := range steps {
		press(p, s.key)
		if got := p.current().ID; got != s.want {
			t.Fatalf("step %d (%s): highlighted %s, want %s", i, s.key, got, s.want)
		}
		if !strings.Contains(screen(p), "> "+p.current().Title) {
			t.Fatalf("step %d: the marker is not on %q:\n%s", i, p.current().Title, screen(p))
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
	press(p, key(tea.KeyDown)) // s-broken-0004: failed to load
	out := screen(p)
	if !strings.Contains(out, "Error: could not load its status: connection refused") {
		t.Errorf("the failing row's error is not shown:\n%s", out)
	}
	if press(p, key(tea.KeyEnter)) || len(f.checks) != 0 {
		t.Errorf("enter on a row that failed to load acted: checks %v", f.checks)
	}
	press(p, key(tea.KeyDown)) // s-noresume-0003
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
	if strings.Join(f.checks, ",") != "s-live-0002" || len(f.resumes) != 0 {
		t.Errorf("checks %v, resumes %v: want one check and no resume of a live session", f.checks, f.resumes)
	}
	if p.chosen == nil || p.chosen.ID != "s-live-0002" || p.cancelled {
		t.Errorf("chosen %+v", p.chosen)
	}
}

func TestPickerResumesAStoppedSessionBeforeChoosingIt(t *testing.T) {
	p, f := newTestPicker(t)
	typeText(p, "0001")
	if !press(p, key(tea.KeyEnter)) {
		t.Fatal("the picker did not quit after the resume")
	}
	if strings.Join(f.checks, ",") != "s-old-resumable-0001" || strings.Join(f.resumes, ",") != "s-old-resumable-0001" {
		t.Errorf("checks %v, resumes %v", f.checks, f.resumes)
	}
	if p.chosen == nil || p.chosen.ID != "s-old-resumable-0001" || !p.chosen.Running {
		t.Errorf("chosen %+v", p.chosen)
	}
}

func TestPickerShowsASpinnerWhileResuming(t *testing.T) {
	p, _ := newTestPicker(t)
	typeText(p, "0001")
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
	f.resumeErr = errors.New("session s-old-resumable-0001 failed to resume: workspace is gone")
	typeText(p, "0001")
	if press(p, key(tea.KeyEnter)) {
		t.Fatal("the picker quit after a failed resume")
	}
	out := screen(p)
	if !strings.Contains(out, "Error: resume failed: session s-old-resumable-0001 failed to resume: workspace is gone") {
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
	now := f.listed["s-old-resumable-0001"]
	now.Disabled = "its agent terminal is controlled by another client (laptop, pid 42, since 11:59:00)"
	f.rows["s-old-resumable-0001"] = now
	typeText(p, "0001")
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
	if !strings.Contains(p.View().Content, pickDimStyle.Render("s-live-0002")) {
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
		{"a browser controls it", sess("a", "tty", api.SessionWaitingForInput), &api.Status{State: api.SessionWaitingForInput, IsAgentRunning: true, Controller: &api.Controller{}}, "", nil, wordLive, "controlled by another client (a client that did not say who it is", false},
		{"its controller here has exited", sess("a", "tty", api.SessionWaitingForInput), &api.Status{State: api.SessionWaitingForInput, IsAgentRunning: true, Controller: &api.Controller{Host: self().Host, PID: deadPID, Nonce: "n"}}, "", nil, wordLive, "", true},
		{"this pid under another nonce", sess("a", "tty", api.SessionWaitingForInput), &api.Status{State: api.SessionWaitingForInput, IsAgentRunning: true, Controller: &api.Controller{Host: self().Host, PID: os.Getpid(), Nonce: "an older process"}}, "", nil, wordLive, "", true},
		{"agent not configured", sess("a", "gone", api.SessionStopped), &api.Status{State: api.SessionStopped, IsResumable: true, NeedsResume: true}, "", nil, wordResumable, "agent not configured", false},
		{"failed to load", sess("a", "demo", api.SessionStopped), nil, "", errors.New("boom"), wordUnknown, "", false},
		{"starting", sess("a", "demo", api.SessionStarting), &api.Status{State: api.SessionStarting, IsResumable: true}, "", nil, wordStarting, "still starting", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := classify(tc.s, "title", tc.st, agents, tc.self, tc.loadErr)
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
	rows := append(pickerRows(), classify(s, "approve me", st, map[string]api.Agent{"demo": {Name: "demo", Protocol: "acp"}}, "", nil))
	p := newPicker(rows, (&fakeSource{}).source(), func() time.Time { return pickerNow })
	p.Update(tea.WindowSizeMsg{Width: 110, Height: 30})
	assertInOrder(t, screen(p), []string{"approve me", "needs approval", "s-asks-0005",
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
