package agentctl_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/api/termproto"
	"github.com/paddockhq/paddock/shared/agentctl"
	"github.com/paddockhq/paddock/shared/term/termtest"
	"github.com/paddockhq/paddock/shared/testkit"
)

// workProfile runs the test binary as the ACP test agent (workagent_test.go).
func workProfile(t testing.TB) agentctl.Profile {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return agentctl.Profile{Protocol: "acp", Command: []string{exe}, Env: map[string]string{workAgentEnv: "1"}}
}

// startWork starts the test agent with p on c.
func startWork(t *testing.T, c *agentctl.Client, p agentctl.Profile) {
	t.Helper()
	c.SetFencingToken(1)
	if _, err := c.StartAgent(ctx(t), p, ""); err != nil {
		t.Fatal(err)
	}
}

// turn prompts, waits for the turn's end and returns the last agent reply.
func turn(t *testing.T, c *agentctl.Client, w *eventWatcher, text string) string {
	t.Helper()
	if _, err := c.Prompt(ctx(t), text); err != nil {
		t.Fatal(err)
	}
	w.waitEvent(t, agentctl.EventTurnFinished, nil, 20*time.Second)
	return lastAgentMessage(t, c).Text
}

func messageOf(t testing.TB, ev agentctl.Event) agentctl.Message {
	t.Helper()
	var d agentctl.MessageData
	if err := json.Unmarshal(ev.Data, &d); err != nil {
		t.Fatal(err)
	}
	return d.Message
}

func permissionOf(t testing.TB, ev agentctl.Event) api.Permission {
	t.Helper()
	var d agentctl.PermissionData
	if err := json.Unmarshal(ev.Data, &d); err != nil {
		t.Fatal(err)
	}
	return d.Permission
}

// The agent's thoughts, plan and tool calls become transcript entries: a
// thought streams into its own entry, every update of a tool call merges
// into the call's one entry (a tool_call sent again too), a malformed one
// is kept as far as it parses, and the plan's update replaces the turn's
// plan entry. Commands and modes come with the agent state.
func TestAgentWorkTranscript(t *testing.T) {
	ws := t.TempDir()
	_, _, c := inProcess(t, agentctl.Options{Workspace: ws})
	file := filepath.Join(ws, "notes.txt")
	if err := os.WriteFile(file, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	w := newWatcher(c)
	startWork(t, c, workProfile(t))
	if reply := turn(t, c, w, "work "+file); reply != "done" {
		t.Fatalf("reply %q", reply)
	}
	msgs, err := c.Messages(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	var roles []string
	for _, m := range msgs {
		roles = append(roles, m.Role)
	}
	if got := strings.Join(roles, ","); got != "user,thought,plan,tool,tool,agent" {
		t.Fatalf("roles %s: %+v", got, msgs)
	}
	if th := msgs[1]; th.Text != "let me look at the file" || !th.Complete {
		t.Errorf("thought %+v", th)
	}
	if p := msgs[2].Plan; p == nil || len(p.Entries) != 2 || p.Entries[0].Status != "completed" || p.Entries[0].Content != "read the file" || p.Entries[1].Priority != "low" {
		t.Errorf("plan %+v", msgs[2].Plan)
	}
	tc := msgs[3].ToolCall
	if tc == nil || tc.ID != "t1" || tc.Kind != api.ToolRead || tc.Status != api.ToolCompleted || tc.Title != "Read "+file {
		t.Fatalf("tool call %+v", tc)
	}
	if len(tc.Locations) != 1 || tc.Locations[0].Path != file || tc.Locations[0].Line == nil || *tc.Locations[0].Line != 1 {
		t.Errorf("locations %+v", tc.Locations)
	}
	if len(tc.Content) != 2 || tc.Content[0].Type != api.ContentText || tc.Content[0].Text != "read "+file ||
		tc.Content[1].Type != api.ContentDiff || tc.Content[1].OldText == nil || *tc.Content[1].OldText != "old\n" || tc.Content[1].NewText != "new\n" {
		t.Errorf("content %+v", tc.Content)
	}
	if string(tc.RawInput) != `{"path":"`+file+`"}` {
		t.Errorf("raw input %s", tc.RawInput)
	}
	bad := msgs[4].ToolCall
	if bad == nil || bad.ID != "t-bad" || bad.Kind != api.ToolOther || bad.Status != api.ToolPending || bad.Title != "" ||
		len(bad.Content) != 1 || bad.Content[0].Text != "kept" || bad.Locations == nil || len(bad.Locations) != 0 {
		t.Errorf("malformed tool call %+v", bad)
	}
	// Each update of t1 was published whole.
	var statuses []api.ToolCallStatus
	for _, ev := range w.all(t) {
		if ev.Type == agentctl.EventMessageUpdated || ev.Type == agentctl.EventMessageAdded {
			if m := messageOf(t, ev); m.ToolCall != nil && m.ToolCall.ID == "t1" {
				if m.ID != msgs[3].ID || m.ToolCall.Title == "" {
					t.Errorf("t1 event %+v", m)
				}
				statuses = append(statuses, m.ToolCall.Status)
			}
		}
	}
	if len(statuses) < 3 || statuses[0] != api.ToolPending || statuses[1] != api.ToolInProgress {
		t.Errorf("t1 statuses %v", statuses)
	}

	st, err := c.AgentState(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Commands) != 2 || st.Commands[1].Name != "work" || st.Commands[1].InputHint != "FILE" {
		t.Errorf("commands %+v", st.Commands)
	}
	if st.Modes == nil || st.Modes.CurrentModeID != "default" || len(st.Modes.Available) != 2 || st.Modes.Available[1].Description != "think first" {
		t.Fatalf("modes %+v", st.Modes)
	}
	st, err = c.SetMode(ctx(t), "plan")
	if err != nil || st.Modes.CurrentModeID != "plan" {
		t.Fatalf("set mode: %+v %v", st.Modes, err)
	}
	w.waitEvent(t, agentctl.EventModeUpdated, nil, 5*time.Second)
	if _, err := c.SetMode(ctx(t), "warp"); apiErr(t, err).Status != 400 {
		t.Fatalf("unknown mode: %v", err)
	}
	if _, err := c.StopAgent(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetMode(ctx(t), "plan"); apiErr(t, err).Status != 409 {
		t.Fatalf("mode without an agent: %v", err)
	}
}

// waitPending waits for the permission_requested of a turn's request.
func waitPending(t *testing.T, w *eventWatcher) api.Permission {
	t.Helper()
	p := permissionOf(t, w.waitEvent(t, agentctl.EventPermissionRequested, nil, 10*time.Second))
	if p.State != api.PermissionPending || p.ToolCallID != "t2" || p.Title != "Run make" || p.Kind != api.ToolExecute || len(p.Options) != 2 || p.SessionID != "" {
		t.Fatalf("requested %+v", p)
	}
	return p
}

// A person answers a pending request; wrong answers are 400, 404 and 409.
func TestPermissionAnsweredByAPerson(t *testing.T) {
	_, hs, c := inProcess(t, agentctl.Options{})
	w := newWatcher(c)
	startWork(t, c, workProfile(t))
	if _, err := c.Prompt(ctx(t), "ask execute"); err != nil {
		t.Fatal(err)
	}
	p := waitPending(t, w)
	list, err := c.Permissions(ctx(t))
	if err != nil || len(list.Permissions) != 1 || list.Permissions[0].ID != p.ID {
		t.Fatalf("list %+v %v", list, err)
	}
	// A catch-up's read of the events carries the same list; a poll that
	// does not ask carries none.
	caught, err := c.CatchUp(ctx(t))
	if err != nil || caught.Permissions == nil || len(caught.Permissions.Permissions) != 1 || caught.Permissions.Permissions[0].ID != p.ID || len(caught.Events) == 0 {
		t.Fatalf("catch-up %+v %v", caught, err)
	}
	if polled, err := c.CompactEvents(ctx(t), 0, 0); err != nil || polled.Permissions != nil {
		t.Fatalf("a poll that did not ask listed %+v (%v)", polled.Permissions, err)
	}
	if st, _ := c.AgentState(ctx(t)); st.PendingPermissions != 1 || st.Status != agentctl.StatusRunning {
		t.Fatalf("state %+v", st)
	}
	if _, err := c.AnswerPermission(ctx(t), p.ID, "maybe", "alice"); apiErr(t, err).Status != 400 {
		t.Fatalf("option not offered: %v", err)
	}
	if _, err := c.AnswerPermission(ctx(t), "perm-nope", "allow", "alice"); apiErr(t, err).Status != 404 {
		t.Fatalf("unknown: %v", err)
	}
	// Unfenced: 400, as every mutating route.
	req, _ := http.NewRequest("POST", hs.URL+"/v1/agent/permissions/"+p.ID, strings.NewReader(`{"option_id":"allow"}`))
	req.Header.Set("Authorization", "Bearer x")
	if code, _ := errorAnswer(t, req); code != 400 {
		t.Fatalf("unfenced answer: %d", code)
	}
	got, err := c.AnswerPermission(ctx(t), p.ID, "allow", "alice")
	if err != nil || got.State != api.PermissionAnswered || got.OptionID != "allow" || got.AnsweredBy != "alice" || got.AnsweredAt == nil {
		t.Fatalf("answer %+v %v", got, err)
	}
	if _, err := c.AnswerPermission(ctx(t), p.ID, "reject", "bob"); apiErr(t, err).Status != 409 || !strings.Contains(apiErr(t, err).Message, "answered") {
		t.Fatalf("second answer: %v", err)
	}
	w.waitEvent(t, agentctl.EventTurnFinished, nil, 10*time.Second)
	if reply := lastAgentMessage(t, c).Text; reply != "chose allow" {
		t.Fatalf("reply %q", reply)
	}
	if a := permissionOf(t, w.waitEventAny(t, agentctl.EventPermissionAnswered)); a.ID != p.ID || a.AnsweredBy != "alice" {
		t.Fatalf("answered %+v", a)
	}
	if st, _ := c.AgentState(ctx(t)); st.PendingPermissions != 0 {
		t.Fatalf("state %+v", st)
	}
}

// waitEventAny finds an event of typ among all published so far.
func (w *eventWatcher) waitEventAny(t testing.TB, typ string) agentctl.Event {
	t.Helper()
	for _, ev := range w.all(t) {
		if ev.Type == typ {
			return ev
		}
	}
	t.Fatalf("no %s event", typ)
	return agentctl.Event{}
}

// A request nobody answers within permission_timeout gets its reject
// option, recorded timed_out.
func TestPermissionTimesOut(t *testing.T) {
	_, _, c := inProcess(t, agentctl.Options{})
	w := newWatcher(c)
	p := workProfile(t)
	p.Permission, p.PermissionTimeout = "ask", 200*time.Millisecond
	startWork(t, c, p)
	if reply := turn(t, c, w, "ask execute"); reply != "chose reject" {
		t.Fatalf("reply %q", reply)
	}
	list, _ := c.Permissions(ctx(t))
	if len(list.Permissions) != 1 || list.Permissions[0].State != api.PermissionTimedOut || list.Permissions[0].OptionID != "reject" {
		t.Fatalf("%+v", list)
	}
}

// The policy answers at once: one permission_answered by "policy", no
// permission_requested.
func TestPermissionPolicy(t *testing.T) {
	for _, tc := range []struct {
		name, permission string
		autoAllow        []string
		kind, want       string
	}{
		{"deny", "deny", nil, "execute", "chose reject"},
		{"allow", "allow", nil, "execute", "chose allow"},
		{"auto_allow", "ask", []string{"read", "execute"}, "execute", "chose allow"},
		{"auto_allow_unknown_kind_is_other", "deny", []string{"other"}, "teleport", "chose allow"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, c := inProcess(t, agentctl.Options{})
			w := newWatcher(c)
			p := workProfile(t)
			p.Permission, p.AutoAllow = tc.permission, tc.autoAllow
			startWork(t, c, p)
			if reply := turn(t, c, w, "ask "+tc.kind); reply != tc.want {
				t.Fatalf("reply %q", reply)
			}
			n := 0
			for _, ev := range w.all(t) {
				switch ev.Type {
				case agentctl.EventPermissionRequested:
					t.Fatalf("requested event under policy %s", tc.permission)
				case agentctl.EventPermissionAnswered:
					n++
					if p := permissionOf(t, ev); p.State != api.PermissionAnswered || p.AnsweredBy != api.AnsweredByPolicy {
						t.Fatalf("%+v", p)
					}
				}
			}
			if n != 1 {
				t.Fatalf("%d answered events", n)
			}
		})
	}
	if err := (agentctl.Profile{Protocol: "acp", Command: []string{"x"}, AutoAllow: []string{"teleport"}}).Validate(); err == nil {
		t.Fatal("auto_allow of an unknown kind accepted")
	}
}

// A cancelled turn and an agent that dies end pending requests cancelled;
// the agent still waiting is answered cancelled.
func TestPermissionCancelled(t *testing.T) {
	t.Run("turn_cancelled", func(t *testing.T) {
		_, _, c := inProcess(t, agentctl.Options{})
		w := newWatcher(c)
		startWork(t, c, workProfile(t))
		if _, err := c.Prompt(ctx(t), "ask execute"); err != nil {
			t.Fatal(err)
		}
		p := waitPending(t, w)
		if err := c.Cancel(ctx(t)); err != nil {
			t.Fatal(err)
		}
		if a := permissionOf(t, w.waitEvent(t, agentctl.EventPermissionAnswered, nil, 5*time.Second)); a.ID != p.ID || a.State != api.PermissionCancelled {
			t.Fatalf("%+v", a)
		}
		w.waitEvent(t, agentctl.EventTurnFinished, nil, 10*time.Second)
		if reply := lastAgentMessage(t, c).Text; reply != "cancelled" {
			t.Fatalf("reply %q", reply)
		}
		if _, err := c.AnswerPermission(ctx(t), p.ID, "allow", ""); apiErr(t, err).Status != 409 {
			t.Fatalf("answer after cancel: %v", err)
		}
	})
	t.Run("agent_exit", func(t *testing.T) {
		_, _, c := inProcess(t, agentctl.Options{})
		w := newWatcher(c)
		startWork(t, c, workProfile(t))
		if _, err := c.Prompt(ctx(t), "ask execute"); err != nil {
			t.Fatal(err)
		}
		p := waitPending(t, w)
		st, _ := c.AgentState(ctx(t))
		if err := syscall.Kill(st.PID, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		if a := permissionOf(t, w.waitEvent(t, agentctl.EventPermissionAnswered, nil, 10*time.Second)); a.ID != p.ID || a.State != api.PermissionCancelled {
			t.Fatalf("%+v", a)
		}
		w.waitEvent(t, agentctl.EventAgentStopped, nil, 10*time.Second)
		if st, _ := c.AgentState(ctx(t)); st.PendingPermissions != 0 {
			t.Fatalf("%+v", st)
		}
	})
	t.Run("stop", func(t *testing.T) {
		_, _, c := inProcess(t, agentctl.Options{})
		w := newWatcher(c)
		startWork(t, c, workProfile(t))
		if _, err := c.Prompt(ctx(t), "ask execute"); err != nil {
			t.Fatal(err)
		}
		waitPending(t, w)
		if _, err := c.StopAgent(ctx(t)); err != nil {
			t.Fatal(err)
		}
		list, _ := c.Permissions(ctx(t))
		if len(list.Permissions) != 1 || list.Permissions[0].State != api.PermissionCancelled {
			t.Fatalf("%+v", list)
		}
	})
}

// fs/* serve the workspace with the file API's confinement.
func TestAgentFileSystem(t *testing.T) {
	ws := t.TempDir()
	outside := t.TempDir()
	_, _, c := inProcess(t, agentctl.Options{Workspace: ws})
	w := newWatcher(c)
	startWork(t, c, workProfile(t))
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(ws, "a.txt"), []byte("one\ntwo\nthree\nfour\n"), 0o600))
	must(os.WriteFile(filepath.Join(outside, "secret"), []byte("s3cret\n"), 0o644))
	must(os.Symlink(outside, filepath.Join(ws, "out")))
	must(os.Mkdir(filepath.Join(ws, "sub"), 0o755))
	must(os.Symlink("../a.txt", filepath.Join(ws, "sub", "in")))
	for _, tc := range []struct{ prompt, want string }{
		{"read " + filepath.Join(ws, "a.txt"), "one\ntwo\nthree\nfour\n"},
		{"read " + filepath.Join(ws, "a.txt") + " 2 2", "two\nthree\n"},
		{"read " + filepath.Join(ws, "sub", "in"), "one\ntwo\nthree\nfour\n"},
		{"read " + filepath.Join(outside, "secret"), "error:"},
		{"read " + filepath.Join(ws, "out", "secret"), "error:"},
		{"read " + filepath.Join(ws, "..", filepath.Base(outside), "secret"), "error:"},
		{"read " + filepath.Join(ws, "missing"), `error:{"code":-32002`}, // ACP's resource not found
		{"write " + filepath.Join(ws, "a.txt") + " replaced", "ok"},
		{"write " + filepath.Join(ws, "new", "b.txt") + " fresh", "ok"},
		{"write " + filepath.Join(ws, "out", "secret") + " pwned", "error:"},
		{"write " + filepath.Join(outside, "x") + " pwned", "error:"},
		{"write " + filepath.Join(ws, ".paddock", "x") + " pwned", "error:"},
	} {
		reply := turn(t, c, w, tc.prompt)
		isErr := strings.HasPrefix(tc.want, "error:")
		if isErr && !strings.HasPrefix(strings.ReplaceAll(reply, " ", ""), tc.want) || !isErr && reply != tc.want {
			t.Errorf("%s: %q, want %q", tc.prompt, reply, tc.want)
		}
	}
	b, _ := os.ReadFile(filepath.Join(ws, "a.txt"))
	st, _ := os.Stat(filepath.Join(ws, "a.txt"))
	if string(b) != "replaced" || st.Mode().Perm() != 0o600 {
		t.Errorf("a.txt %q %v", b, st.Mode())
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "new", "b.txt")); string(b) != "fresh" {
		t.Errorf("b.txt %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "secret")); string(b) != "s3cret\n" {
		t.Errorf("outside written: %q", b)
	}
	if _, err := os.Stat(filepath.Join(outside, "x")); err == nil {
		t.Error("a file was written outside the workspace")
	}
}

// terminal/* run commands as named terminals cmd-N of the session, served
// read-only through the terminal machinery and listed with the shells.
func TestAgentTerminals(t *testing.T) {
	ws := t.TempDir()
	if err := os.Mkdir(filepath.Join(ws, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := startServe(t, ws)
	c := p.c
	w := newWatcher(c)
	startWork(t, c, workProfile(t))
	real, _ := filepath.EvalSymlinks(ws)

	// The agent's env reaches the command; the cwd defaults to the workspace.
	reply := turn(t, c, w, `term - sh -c printenv${IFS}GREETING;pwd`)
	if !strings.HasPrefix(reply, "id=cmd-1 exit=0 out=") || !strings.Contains(reply, `hello\n`+real+`\n`) {
		t.Fatalf("term: %q", reply)
	}
	if reply := turn(t, c, w, "term "+t.TempDir()+" pwd"); !strings.HasPrefix(reply, "error:") {
		t.Fatalf("cwd outside: %q", reply)
	}
	if reply := turn(t, c, w, "term sub pwd"); !strings.HasPrefix(reply, "id=cmd-2 exit=0") || !strings.Contains(reply, filepath.Join(real, "sub")) {
		t.Fatalf("cwd sub: %q", reply)
	}
	reply = turn(t, c, w, "long 101")
	for _, want := range []string{"id=cmd-3 ", "running=true", "truncated=true", "valid=true", "signal=SIGTERM", "released_output_error=true", `READY\n`} {
		if !strings.Contains(reply, want) {
			t.Fatalf("long: %q lacks %q", reply, want)
		}
	}

	// People watch a command (replayed) but cannot type into it.
	wsURL := "ws" + strings.TrimPrefix(p.info.URL, "http") + "/v1/terminals/"
	hdr := http.Header{"Authorization": {"Bearer " + testSecret}}
	tc, _, err := termtest.Dial(t, wsURL+"cmd-1", hdr, termtest.Hello(t, termproto.Hello{}))
	if err != nil {
		t.Fatal(err)
	}
	tc.WaitOutput("hello")
	if id := turn(t, c, w, "bg sh -c echo${IFS}BG;exec${IFS}sleep${IFS}60"); id != "cmd-4" {
		t.Fatalf("bg: %q", id)
	}
	bg, _, err := termtest.Dial(t, wsURL+"cmd-4", hdr, termtest.Hello(t, termproto.Hello{}))
	if err != nil {
		t.Fatal(err)
	}
	bg.WaitOutput("BG")
	bg.Input("x")
	if e, ok := bg.WaitMsg("error").(termproto.Error); !ok || !strings.Contains(e.Message, "read-only") {
		t.Fatalf("input to cmd-4: %+v", e)
	}
	// A cmd-N name the agent did not create starts no shell.
	bad, _, err := termtest.Dial(t, wsURL+"cmd-99", hdr, termtest.Hello(t, termproto.Hello{}))
	if err != nil {
		t.Fatal(err)
	}
	bad.WaitMsg("error")
	// A shell beside them.
	sh, _, err := termtest.Dial(t, wsURL+"main", hdr, termtest.Hello(t, termproto.Hello{}))
	if err != nil {
		t.Fatal(err)
	}
	sh.Marker()
	list, err := c.Terminals(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]api.Terminal{}
	for _, ti := range list.Terminals {
		byName[ti.Name] = ti
	}
	if ti := byName["cmd-1"]; ti.Owner != agentctl.OwnerAgent || !ti.ReadOnly || ti.Running || ti.ExitCode == nil || *ti.ExitCode != 0 || ti.Command[0] != "sh" {
		t.Errorf("cmd-1 %+v", ti)
	}
	if ti, ok := byName["cmd-3"]; !ok || ti.Running {
		t.Errorf("released cmd-3 %+v", ti)
	}
	if ti := byName["main"]; ti.Owner != agentctl.OwnerUser || ti.ReadOnly || !ti.Running {
		t.Errorf("main %+v", ti)
	}
	if ti := byName["cmd-4"]; !ti.Running || ti.ExitCode != nil {
		t.Errorf("cmd-4 %+v", ti)
	}
	if _, ok := byName["cmd-99"]; ok || len(list.Terminals) != 5 {
		t.Errorf("list %+v", list.Terminals)
	}
	// The agent's exit ends its commands; they stay listed.
	if _, err := c.StopAgent(ctx(t)); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "cmd-4 to end", testkit.Cond(func() bool {
		list, err := c.Terminals(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		for _, ti := range list.Terminals {
			if ti.Name == "cmd-4" {
				return !ti.Running
			}
		}
		t.Fatal("cmd-4 is no longer listed")
		return false
	}))
}
