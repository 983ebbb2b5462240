package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/api"
)

// Permission requests of session s1: one answered by a person, one by the
// policy, then two pending (oldest first, as the API lists them).
var permissionsS1 = `{"permissions":[` +
	`{"id":"p0000000-answered","session_id":"s1","tool_call_id":"work-1-run","title":"Run: wc -l a.txt","kind":"execute","options":[{"option_id":"allow_once","name":"Allow once","kind":"allow_once"},{"option_id":"reject_once","name":"Reject","kind":"reject_once"}],"state":"answered","option_id":"allow_once","answered_by":"user","created_at":"2025-01-02T03:04:05Z","answered_at":"2025-01-02T03:04:09Z"},` +
	`{"id":"p1111111-policy","session_id":"s1","tool_call_id":"read-1","title":"Read a.txt","kind":"read","options":[{"option_id":"ok","name":"OK","kind":"allow_once"}],"state":"answered","option_id":"ok","answered_by":"policy","created_at":"2025-01-02T03:04:06Z","answered_at":"2025-01-02T03:04:06Z"},` +
	`{"id":"p2222222-pending","session_id":"s1","tool_call_id":"work-2-run","title":"Run: wc -l notes.txt","kind":"execute","options":[{"option_id":"allow-1","name":"Allow once","kind":"allow_once"},{"option_id":"always-1","name":"Always allow","kind":"allow_always"},{"option_id":"reject-1","name":"Reject","kind":"reject_once"}],"state":"pending","option_id":"","answered_by":"","created_at":"2025-01-02T03:05:00Z","answered_at":null},` +
	`{"id":"p3333333-pending","session_id":"s1","tool_call_id":"edit-3","title":"Edit b.txt","kind":"edit","options":[{"option_id":"yes","name":"Yes","kind":"allow_once"},{"option_id":"never","name":"Never","kind":"reject_always"}],"state":"pending","option_id":"","answered_by":"","created_at":"2025-01-02T03:05:01Z","answered_at":null}]}`

// answered is the API's answer to a POST of a permission request.
const answeredP2 = `{"id":"p2222222-pending","session_id":"s1","tool_call_id":"work-2-run","title":"Run: wc -l notes.txt","kind":"execute","options":[],"state":"answered","option_id":"allow-1","answered_by":"user","created_at":"2025-01-02T03:05:00Z","answered_at":"2025-01-02T03:05:03Z"}`

const answeredP3 = `{"id":"p3333333-pending","session_id":"s1","title":"Edit b.txt","kind":"edit","options":[],"state":"answered","option_id":"never","answered_by":"user","created_at":"2025-01-02T03:05:01Z"}`

// messagesWithWork is a transcript with a thought, a plan, tool calls (an
// edit with its diff and a location, a command in a terminal) and a reply.
const messagesWithWork = `{"messages":[` +
	`{"id":"m1","role":"user","text":"work notes.txt","complete":true},` +
	`{"id":"m2","role":"thought","text":"the file is short;\nappend a line","complete":true},` +
	`{"id":"m3","role":"plan","text":"","complete":true,"plan":{"entries":[{"content":"Read notes.txt","priority":"high","status":"completed"},{"content":"Edit notes.txt","priority":"medium","status":"in_progress"},{"content":"Run wc -l","priority":"low","status":"pending"}]}},` +
	`{"id":"m4","role":"tool","text":"","complete":true,"tool_call":{"id":"work-1-edit","title":"Edit notes.txt","kind":"edit","status":"completed","locations":[{"path":"/w/notes.txt","line":3}],"content":[{"type":"diff","path":"/w/notes.txt","old_text":"a\nb\n","new_text":"a\nB\nb\nc\n"}]}},` +
	`{"id":"m5","role":"tool","text":"","complete":true,"tool_call":{"id":"work-1-run","title":"Run: wc -l notes.txt","kind":"execute","status":"in_progress","locations":[],"content":[{"type":"terminal","terminal":"cmd-1"}]}},` +
	`{"id":"m6","role":"agent","text":"work done","complete":true}]}`

func permissionsFake(t *testing.T) (*fakeAPI, string) {
	t.Helper()
	f, addr := startFake(t)
	f.routes["GET /v1/sessions/s1/permissions"] = route{200, permissionsS1}
	f.routes["POST /v1/sessions/s1/permissions/p2222222-pending"] = route{200, answeredP2}
	f.routes["POST /v1/sessions/s1/permissions/p3333333-pending"] = route{200, answeredP3}
	f.routes["GET /v1/sessions/s2/permissions"] = route{200, `{"permissions":[]}`}
	f.routes["GET /v1/sessions/s1/messages"] = route{200, messagesWithWork}
	return f, addr
}

// The permission commands list requests, answer the oldest pending one
// (or the one named by its id or a prefix) with the option of the kind
// asked for, and print what was chosen.
func TestPermissionCommands(t *testing.T) {
	cases := []struct {
		name     string
		args     []string
		wantOut  []string
		wantReq  string
		wantBody string
	}{
		{"permissions", []string{"session", "permissions", "s1"},
			[]string{"ID", "TITLE", "KIND", "STATE", "OPTION", "ANSWERED BY", "AGE",
				"p0000000", "Run: wc -l a.txt", "execute", "answered", "Allow once (allow_once)", "user",
				"p1111111", "Read a.txt", "read", "answered", "OK (ok)", "policy",
				"p2222222", "Run: wc -l notes.txt", "execute", "pending", "-", "-",
				"p3333333", "Edit b.txt", "edit", "pending"},
			"GET /v1/sessions/s1/permissions", ""},
		{"no permissions", []string{"session", "permissions", "s2"},
			[]string{"No permission requests in session s2"}, "GET /v1/sessions/s2/permissions", ""},
		{"approve the oldest pending", []string{"session", "approve", "s1"},
			[]string{`Approved permission request p2222222 ("Run: wc -l notes.txt"): Allow once (allow_once)`},
			"POST /v1/sessions/s1/permissions/p2222222-pending", `{"option_id":"allow-1"}`},
		{"approve always", []string{"session", "approve", "s1", "-option", "allow_always"},
			[]string{`Approved permission request p2222222 ("Run: wc -l notes.txt"): Always allow (allow_always)`},
			"POST /v1/sessions/s1/permissions/p2222222-pending", `{"option_id":"always-1"}`},
		{"approve by id prefix", []string{"session", "approve", "s1", "p3333"},
			[]string{`Approved permission request p3333333 ("Edit b.txt"): Yes (allow_once)`},
			"POST /v1/sessions/s1/permissions/p3333333-pending", `{"option_id":"yes"}`},
		{"approve by whole id", []string{"session", "approve", "-option", "allow_once", "s1", "p3333333-pending"},
			[]string{`Approved permission request p3333333`},
			"POST /v1/sessions/s1/permissions/p3333333-pending", `{"option_id":"yes"}`},
		{"deny with reject_once", []string{"session", "deny", "s1"},
			[]string{`Denied permission request p2222222 ("Run: wc -l notes.txt"): Reject (reject_once)`},
			"POST /v1/sessions/s1/permissions/p2222222-pending", `{"option_id":"reject-1"}`},
		{"deny with reject_always when it has no reject_once", []string{"session", "deny", "s1", "p3333333"},
			[]string{`Denied permission request p3333333 ("Edit b.txt"): Never (reject_always)`},
			"POST /v1/sessions/s1/permissions/p3333333-pending", `{"option_id":"never"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, addr := permissionsFake(t)
			code, out, errOut := runCLI(addr, tc.args...)
			if code != 0 || errOut != "" {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			assertInOrder(t, out, tc.wantOut)
			reqs := f.requests()
			last := reqs[len(reqs)-1]
			if got := last.method + " " + last.path; got != tc.wantReq {
				t.Errorf("last request %q, want %q", got, tc.wantReq)
			}
			if tc.wantBody != "" && !jsonEqual(last.body, tc.wantBody) {
				t.Errorf("body %s, want %s", last.body, tc.wantBody)
			}
			posts := 0
			for _, r := range reqs {
				if r.method == "POST" {
					posts++
				}
			}
			if want := map[bool]int{true: 1, false: 0}[tc.wantBody != ""]; posts != want {
				t.Errorf("%d answers sent, want %d", posts, want)
			}
		})
	}
}

// The permissions table's ids are 8 characters and its ages relative.
func TestPermissionsTableColumns(t *testing.T) {
	f, addr := permissionsFake(t)
	created := time.Now().Add(-90 * time.Second).UTC().Format(time.RFC3339)
	f.routes["GET /v1/sessions/s1/permissions"] = route{200, `{"permissions":[{"id":"0123456789abcdef","title":"Run: ls","kind":"execute","options":[],"state":"pending","created_at":"` + created + `"}]}`}
	_, out, _ := runCLI(addr, "session", "permissions", "s1")
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[1], "01234567 ") || strings.Contains(out, "89abcdef") || !strings.Contains(lines[1], "1m ago") {
		t.Fatalf("table:\n%s", out)
	}
}

// Nothing is sent when there is nothing to answer or the option asked for
// is not offered; each refusal is one line that says why.
func TestPermissionCommandErrors(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"nothing pending", []string{"session", "approve", "s2"}, "session s2 has no pending permission request"},
		{"deny nothing pending", []string{"session", "deny", "s2"}, "session s2 has no pending permission request"},
		{"kind not offered", []string{"session", "approve", "s1", "p3333333", "-option", "allow_always"},
			`permission request p3333333 ("Edit b.txt") offers no allow_always option; it offers Yes (allow_once), Never (reject_always)`},
		{"deny one the policy answered", []string{"session", "deny", "s1", "p1111111-policy"}, "no longer pending: answered with ok by policy"},
		{"already answered", []string{"session", "approve", "s1", "p0000000"}, "permission request p0000000 of session s1 is no longer pending: answered with allow_once by user"},
		{"unknown permission", []string{"session", "approve", "s1", "zzzz"}, `session s1 has no permission request "zzzz"`},
		{"ambiguous prefix", []string{"session", "approve", "s1", "p"}, `permission id prefix "p" is ambiguous`},
		{"unknown kind", []string{"session", "approve", "s1", "-option", "sometimes"}, `unknown -option "sometimes": want one of allow_once, allow_always, reject_once, reject_always. Usage: paddock session approve ID [PERMISSION_ID] [-option KIND]`},
		{"missing session", []string{"session", "approve"}, "missing session ID. Usage: paddock session approve"},
		{"extra argument", []string{"session", "deny", "s1", "p2", "p3"}, `unexpected argument "p3"`},
		{"answered meanwhile", []string{"session", "approve", "s1"}, `answer permission request p2222222 ("Run: wc -l notes.txt") with allow-1: permission request p2222222-pending is answered (conflict)`},
		{"permissions of an unknown session", []string{"session", "permissions", "nope"}, "(not_found)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, addr := permissionsFake(t)
			f.routes["POST /v1/sessions/s1/permissions/p2222222-pending"] = route{409, `{"error":{"code":"conflict","message":"permission request p2222222-pending is answered"}}`}
			code, out, errOut := runCLI(addr, tc.args...)
			if code != 1 || out != "" {
				t.Errorf("exit %d, stdout %q", code, out)
			}
			assertOneErrorLine(t, errOut, tc.wantErr)
			if tc.name != "answered meanwhile" {
				for _, r := range f.requests() {
					if r.method == "POST" {
						t.Errorf("an answer was sent: %s %s %s", r.method, r.path, r.body)
					}
				}
			}
		})
	}
}

// -json prints the server's JSON: the list, and the answered request.
func TestPermissionCommandsJSON(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		served string
	}{
		{[]string{"session", "permissions", "s1", "-json"}, permissionsS1},
		{[]string{"session", "approve", "s1", "-json"}, answeredP2},
		{[]string{"-json", "session", "deny", "s1", "p3333333"}, answeredP3},
		{[]string{"session", "messages", "s1", "-json"}, messagesWithWork},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, addr := permissionsFake(t)
			code, out, errOut := runCLI(addr, tc.args...)
			if code != 0 || errOut != "" {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			if !jsonEqual(out, tc.served) {
				t.Errorf("stdout is not the server's JSON:\n%s\nserved:\n%s", out, tc.served)
			}
		})
	}
}

// session messages prints the agent's work: a thought indented under its
// prefix, a plan as a checklist, a tool call on one line with its status,
// the size of its diff and the files and terminals it touches.
func TestSessionMessagesShowTheAgentsWork(t *testing.T) {
	_, addr := permissionsFake(t)
	code, out, errOut := runCLI(addr, "session", "messages", "s1")
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	want := "[user] work notes.txt\n" +
		"  thought: the file is short;\n" +
		"           append a line\n" +
		"[plan] [x] Read notes.txt\n" +
		"       [~] Edit notes.txt\n" +
		"       [ ] Run wc -l\n" +
		"[tool] edit Edit notes.txt — completed (+2 −0 lines) · /w/notes.txt:3\n" +
		"[tool] execute Run: wc -l notes.txt — in_progress · terminal cmd-1\n" +
		"[agent] work done\n"
	if out != want {
		t.Errorf("messages:\n%s\nwant:\n%s", out, want)
	}
	if strings.Contains(out, "\x1b") {
		t.Errorf("escape sequences in output that is not a terminal: %q", out)
	}
}

// session prompt's line for a request names it and the commands that
// answer it.
func TestPermissionHint(t *testing.T) {
	p := api.Permission{ID: "p1", Title: "Run: wc -l notes.txt", Kind: api.ToolExecute, Options: []api.PermissionOption{
		{OptionID: "allow_once", Name: "Allow once", Kind: api.OptionAllowOnce}, {OptionID: "reject_once", Name: "Reject", Kind: api.OptionRejectOnce}}}
	want := `[permission] the agent asks: Run: wc -l notes.txt (execute; offers Allow once (allow_once), Reject (reject_once)) — answer with "paddock session approve s1" or "paddock session deny s1"`
	if got := permissionHint(p, "s1"); got != want {
		t.Errorf("hint %q\nwant %q", got, want)
	}
}
