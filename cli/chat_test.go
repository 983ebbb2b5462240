package cli

import (
	"bytes"
	"context"
	"reflect"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/client"
)

// A prompt is a line, or a bracketed paste with the rest of the line it
// ends on; blank lines send nothing; the last line needs no newline.
func TestReadPrompts(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want []string
	}{
		{"lines", "one\ntwo\n", []string{"one", "two"}},
		{"blank lines", "\n  \none\n\n", []string{"one"}},
		{"no final newline", "one\ntwo", []string{"one", "two"}},
		{"crlf", "one\r\n", []string{"one"}},
		{"paste", pasteStart + "line one\nline two" + pasteEnd + "\n", []string{"line one\nline two"}},
		{"paste ending in a newline", pasteStart + "a\nb\n" + pasteEnd + "\n", []string{"a\nb"}},
		{"typed after a paste", pasteStart + "a\nb" + pasteEnd + " and c\nnext\n", []string{"a\nb and c", "next"}},
		{"paste cut by EOF", pasteStart + "a\nb", []string{"a\nb"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ch := make(chan string)
			go readPrompts(strings.NewReader(tc.in), ch)
			var got []string
			for p := range ch {
				got = append(got, p)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("prompts %q, want %q", got, tc.want)
			}
		})
	}
}

// newTestChat is a chat of session s1 against the fake API, printing into
// out as a piped (not terminal) chat does.
func newTestChat(t *testing.T, addr string, out *bytes.Buffer) *chat {
	t.Helper()
	c, err := client.New(addr, "tok")
	if err != nil {
		t.Fatal(err)
	}
	return &chat{c: c, id: "s1", out: out,
		printed: map[string]int{}, echo: map[string]int{}, shown: map[string]string{}, answered: map[string]bool{}}
}

func posts(f *fakeAPI) []recorded {
	var out []recorded
	for _, r := range f.requests() {
		if r.method == "POST" {
			out = append(out, r)
		}
	}
	return out
}

// A pending permission request is asked with its options numbered; a line
// that names no option sends nothing and asks again; a number answers it
// and the next request is asked; one answered elsewhere or cancelled stops
// being asked, and the chat says how it ended.
func TestChatAsksPendingPermissionsInline(t *testing.T) {
	f, addr := permissionsFake(t)
	var out bytes.Buffer
	ch := newTestChat(t, addr, &out)
	ctx := context.Background()
	ch.loadPermissions(ctx)
	if len(ch.pending) != 2 || ch.pending[0].ID != "p2222222-pending" {
		t.Fatalf("pending %+v, want the two pending requests oldest first", ch.pending)
	}
	ch.ask(ch.pending[0])
	assertInOrder(t, out.String(), []string{"[permission] the agent asks: Run: wc -l notes.txt (execute)\n",
		"  1) Allow once  2) Always allow  3) Reject\n"})

	out.Reset()
	ch.answer(ctx, "maybe")
	if len(posts(f)) != 0 || !strings.Contains(out.String(), "type a number from 1 to 3 or an option's name") || ch.asked != "" {
		t.Fatalf("an answer naming no option: posts %v, asked %q, output %q", posts(f), ch.asked, out.String())
	}

	out.Reset()
	ch.answer(ctx, "1")
	if p := posts(f); len(p) != 1 || p[0].path != "/v1/sessions/s1/permissions/p2222222-pending" || !jsonEqual(p[0].body, `{"option_id":"allow-1"}`) {
		t.Fatalf("answer sent: %+v", p)
	}
	if !strings.Contains(out.String(), "[paddock] answered: Allow once (allow_once)") || len(ch.pending) != 1 {
		t.Fatalf("after answering: pending %d, output %q", len(ch.pending), out.String())
	}

	// Its answered event, and a reload, change nothing.
	out.Reset()
	ch.permission(api.Permission{ID: "p2222222-pending", State: api.PermissionAnswered, OptionID: "allow-1", AnsweredBy: "user"})
	ch.loadPermissions(ctx)
	if out.Len() != 0 || len(ch.pending) != 1 {
		t.Fatalf("an answer given here was reported again: %q (pending %d)", out.String(), len(ch.pending))
	}

	// The next one is answered by name; then one ends elsewhere.
	ch.answer(ctx, "never")
	if p := posts(f); len(p) != 2 || !jsonEqual(p[1].body, `{"option_id":"never"}`) {
		t.Fatalf("answer by name: %+v", p)
	}
	out.Reset()
	ch.permission(api.Permission{ID: "p9", Title: "Run: make", State: api.PermissionPending, Options: []api.PermissionOption{{OptionID: "a", Name: "Allow", Kind: api.OptionAllowOnce}}})
	ch.permission(api.Permission{ID: "p9", Title: "Run: make", State: api.PermissionAnswered, OptionID: "a", AnsweredBy: "user",
		Options: []api.PermissionOption{{OptionID: "a", Name: "Allow", Kind: api.OptionAllowOnce}}})
	ch.permission(api.Permission{ID: "p10", Title: "Run: rm", State: api.PermissionPending})
	ch.permission(api.Permission{ID: "p10", Title: "Run: rm", State: api.PermissionCancelled})
	assertInOrder(t, out.String(), []string{`permission request "Run: make" was answered by user: Allow (allow_once)`, `permission request "Run: rm" was cancelled`})
	if len(ch.pending) != 0 {
		t.Fatalf("pending %+v, want none", ch.pending)
	}
}

// A typed answer is an option's number, name, id or kind.
func TestChooseOption(t *testing.T) {
	p := api.Permission{Options: []api.PermissionOption{
		{OptionID: "allow-1", Name: "Allow once", Kind: api.OptionAllowOnce},
		{OptionID: "reject-1", Name: "Reject", Kind: api.OptionRejectOnce},
	}}
	for answer, want := range map[string]string{"1": "allow-1", " 2 ": "reject-1", "reject": "reject-1", "Allow Once": "allow-1",
		"allow-1": "allow-1", "reject_once": "reject-1", "0": "", "3": "", "": "", "yes": ""} {
		o, ok := chooseOption(p, answer)
		if ok != (want != "") || o.OptionID != want {
			t.Errorf("answer %q: %q %v, want %q", answer, o.OptionID, ok, want)
		}
	}
}

// A tool call is one line, printed again (a new line, never redrawn) when
// its status or diff changes; a plan is a checklist; a thought streams
// under its prefix.
func TestChatShowsTheAgentsWork(t *testing.T) {
	var out bytes.Buffer
	ch := newTestChat(t, "http://127.0.0.1:1", &out)
	old := "one\n"
	tool := func(status api.ToolCallStatus, newText string) api.Message {
		return api.Message{ID: "m-tool", Role: api.RoleTool, Complete: true, ToolCall: &api.ToolCall{ID: "work-1-edit", Title: "Edit notes.txt",
			Kind: api.ToolEdit, Status: status, Content: []api.ToolContent{{Type: api.ContentDiff, Path: "notes.txt", OldText: &old, NewText: newText}}}}
	}
	ch.show(api.Message{ID: "m-th", Role: api.RoleThought, Text: "reading the", Complete: false})
	ch.show(api.Message{ID: "m-th", Role: api.RoleThought, Text: "reading the file\nfirst", Complete: true})
	ch.show(api.Message{ID: "m-plan", Role: api.RolePlan, Complete: true, Plan: &api.Plan{Entries: []api.PlanEntry{{Content: "Read", Status: "completed"}, {Content: "Edit", Status: "in_progress"}}}})
	ch.show(tool(api.ToolPending, "one\n"))
	ch.show(tool(api.ToolPending, "one\n"))
	ch.show(tool(api.ToolInProgress, "one\n"))
	ch.show(tool(api.ToolCompleted, "one\ntwo\n"))
	want := "  thought: reading the file\n" +
		"           first\n" +
		"[plan] [x] Read\n" +
		"       [~] Edit\n" +
		"[tool] edit Edit notes.txt — pending (+0 −0 lines)\n" +
		"[tool] edit Edit notes.txt — in_progress (+0 −0 lines)\n" +
		"[tool] edit Edit notes.txt — completed (+1 −0 lines)\n"
	if out.String() != want {
		t.Errorf("chat printed:\n%s\nwant:\n%s", out.String(), want)
	}
}

// /help lists the agent's commands and the chat's own; "/NAME INPUT" of an
// agent command is a prompt, of an unknown one is refused; /mode lists the
// modes or switches to one named by its id or name.
func TestChatSlashCommands(t *testing.T) {
	f, addr := startFake(t)
	f.routes["GET /v1/sessions/s1/status"] = route{200, strings.Replace(resumableStatus, `"worktree_branch":null}`,
		`"worktree_branch":null,"pending_permissions":0,"commands":[{"name":"recall","description":"Say what you asked me to remember"},{"name":"work","description":"Read FILE and edit it","input_hint":"FILE"}],`+
			`"modes":{"current_mode_id":"default","available":[{"id":"default","name":"Default"},{"id":"plan","name":"Plan","description":"only reads"}]}}`, 1)}
	f.routes["POST /v1/sessions/s1/mode"] = route{200, `{"current_mode_id":"plan","available":[{"id":"default","name":"Default"},{"id":"plan","name":"Plan"}]}`}
	var out bytes.Buffer
	ch := newTestChat(t, addr, &out)
	ctx := context.Background()

	if _, ok := ch.slash(ctx, "/help"); ok {
		t.Fatal("/help was sent as a prompt")
	}
	assertInOrder(t, out.String(), []string{"the agent's commands", "/recall", "Say what you asked me to remember", "/work FILE", "Read FILE and edit it", "/help", "/mode"})

	if text, ok := ch.slash(ctx, "/work notes.txt"); !ok || text != "/work notes.txt" {
		t.Fatalf("/work notes.txt: %q %v, want it sent as typed", text, ok)
	}
	if text, ok := ch.slash(ctx, "plain words"); !ok || text != "plain words" {
		t.Fatalf("a plain line: %q %v", text, ok)
	}
	out.Reset()
	if _, ok := ch.slash(ctx, "/nope x"); ok || !strings.Contains(out.String(), "the agent has no command /nope") {
		t.Fatalf("/nope: sent %v, output %q", ok, out.String())
	}

	out.Reset()
	ch.slash(ctx, "/mode")
	assertInOrder(t, out.String(), []string{"* default", "Default", "  plan", "Plan", "only reads"})
	if len(posts(f)) != 0 {
		t.Fatalf("/mode alone changed something: %+v", posts(f))
	}
	out.Reset()
	ch.slash(ctx, "/mode Plan")
	if p := posts(f); len(p) != 1 || p[0].path != "/v1/sessions/s1/mode" || !jsonEqual(p[0].body, `{"mode_id":"plan"}`) {
		t.Fatalf("/mode Plan sent %+v", p)
	}
	if !strings.Contains(out.String(), "[paddock] mode: Plan (plan)") {
		t.Fatalf("/mode Plan said %q", out.String())
	}
}

// The chat's line editor: Enter hands over the line with the prompt it was
// typed at; ↑ brings back the prompts typed before (the draft is kept for
// ↓), and the line can be edited; a paste with newlines is one line whose
// newlines come back; ctrl-c interrupts, ctrl-d on an empty line closes.
// editorKeys drives an editor model as a terminal's keys would.
type editorKeys struct {
	t     *testing.T
	m     *editorModel
	lines chan typedLine
	intr  chan struct{}
}

func newEditorKeys(t *testing.T) *editorKeys {
	k := &editorKeys{t: t, lines: make(chan typedLine, 16), intr: make(chan struct{}, 1)}
	k.m = newEditorModel(k.lines, k.intr)
	return k
}

// typeIn types s a key at a time.
func (k *editorKeys) typeIn(s string) {
	for _, r := range s {
		k.m.Update(tea.KeyPressMsg{Code: r, Text: string(r)})
	}
}

// press presses one key, with modifiers.
func (k *editorKeys) press(code rune, mod ...tea.KeyMod) {
	msg := tea.KeyPressMsg{Code: code}
	for _, md := range mod {
		msg.Mod |= md
	}
	k.m.Update(msg)
}

// next is the line the editor handed over (failing when there is none).
func (k *editorKeys) next() typedLine {
	k.t.Helper()
	select {
	case l := <-k.lines:
		return l
	default:
		k.t.Fatal("no line handed over")
		return typedLine{}
	}
}

func TestChatEditorHistoryAndPaste(t *testing.T) {
	k := newEditorKeys(t)
	m, typeIn, press, next, lines, intr := k.m, k.typeIn, k.press, k.next, k.lines, k.intr
	typeIn("remember apple")
	press(tea.KeyEnter)
	if l := next(); l.text != "remember apple" || l.label != "> " {
		t.Fatalf("first line %+v", l)
	}
	typeIn("recall")
	press(tea.KeyEnter)
	next()
	typeIn("draft")
	press(tea.KeyUp)
	if v := m.in.Value(); v != "recall" {
		t.Fatalf("↑ shows %q, want recall", v)
	}
	press(tea.KeyUp)
	press(tea.KeyUp) // past the oldest: stays
	if v := m.in.Value(); v != "remember apple" {
		t.Fatalf("↑↑ shows %q", v)
	}
	press(tea.KeyDown)
	press(tea.KeyDown)
	if v := m.in.Value(); v != "draft" {
		t.Fatalf("↓↓ shows %q, want the draft", v)
	}
	press(tea.KeyUp)
	press(tea.KeyUp)
	// Edit it: home, then a word in front; backspace at the end.
	press(tea.KeyHome)
	typeIn("please ")
	press(tea.KeyEnd)
	press(tea.KeyBackspace)
	typeIn("e pie")
	press(tea.KeyEnter)
	if l := next(); l.text != "please remember apple pie" {
		t.Fatalf("edited line %q", l.text)
	}

	m.Update(tea.PasteMsg{Content: "line one\rline two\n"})
	if v := m.in.Value(); v != "line one"+newlineMark+"line two" {
		t.Fatalf("after a paste: %q", v)
	}
	press(tea.KeyEnter)
	if l := next(); l.text != "line one\nline two" {
		t.Fatalf("pasted line %q", l.text)
	}

	// An answer is handed over with its prompt and stays out of the history;
	// an empty line answers too (no), but is no prompt.
	m.Update(labelMsg("send it again? [y/N] "))
	press(tea.KeyEnter)
	if l := next(); l.text != "" || l.label != "send it again? [y/N] " {
		t.Fatalf("empty answer %+v", l)
	}
	m.Update(labelMsg(promptLabel))
	press(tea.KeyEnter)
	select {
	case l := <-lines:
		t.Fatalf("an empty prompt was handed over: %+v", l)
	default:
	}
	press(tea.KeyUp)
	if v := m.in.Value(); v != "line one"+newlineMark+"line two" {
		t.Fatalf("↑ after an answer shows %q", v)
	}
	m.in.SetValue("")

	press('c', tea.ModCtrl)
	select {
	case <-intr:
	default:
		t.Fatal("ctrl-c did not interrupt")
	}
	press('d', tea.ModCtrl)
	if _, ok := <-lines; ok {
		t.Fatal("ctrl-d on an empty line did not close")
	}
	if v := ansi.Strip(m.View().Content); !strings.HasPrefix(v, "\n> ") {
		t.Errorf("view %q", v)
	}
}

// TestChatEditorReverseSearch: ctrl-r finds the newest prompt holding what
// is typed, ctrl-r again an older one, Enter sends it; esc puts back the
// line from before the search; a cursor key takes the entry into the editor.
func TestChatEditorReverseSearch(t *testing.T) {
	k := newEditorKeys(t)
	m, typeIn, press := k.m, k.typeIn, k.press
	sent := func() string { t.Helper(); return k.next().text }
	view := func() string { return m.View().Content }
	for _, p := range []string{"remember apple", "recall", "remember pear", "stream 3"} {
		typeIn(p)
		press(tea.KeyEnter)
		sent()
	}

	typeIn("draft")
	press('r', tea.ModCtrl)
	typeIn("rem")
	if !strings.Contains(view(), "(reverse-i-search)`rem': remember pear") {
		t.Fatalf("after ctrl-r rem the view is %q", view())
	}
	press('r', tea.ModCtrl)
	if !strings.Contains(view(), "`rem': remember apple") {
		t.Fatalf("a second ctrl-r shows %q, want the older match", view())
	}
	press(tea.KeyEnter)
	if got := sent(); got != "remember apple" {
		t.Fatalf("Enter during the search sent %q", got)
	}

	typeIn("draft")
	press('r', tea.ModCtrl)
	typeIn("zzz")
	if !strings.Contains(view(), "(failing reverse-i-search)`zzz'") {
		t.Fatalf("a search for nothing shows %q", view())
	}
	press(tea.KeyEscape)
	if v := m.in.Value(); v != "draft" || strings.Contains(view(), "reverse-i-search") {
		t.Fatalf("esc left %q (view %q), want the draft back", v, view())
	}

	m.in.SetValue("")
	press('r', tea.ModCtrl)
	typeIn("rec")
	press(tea.KeyEnd)
	typeIn(" all")
	press(tea.KeyEnter)
	if got := sent(); got != "recall all" {
		t.Fatalf("the entry taken into the editor and changed sent %q", got)
	}
}
