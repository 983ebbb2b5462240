package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// route is one canned answer of the fake API.
type route struct {
	status int
	body   string
}

// fakeAPI answers "METHOD /path" from routes and records every request.
type fakeAPI struct {
	mu     sync.Mutex
	routes map[string]route
	reqs   []recorded
}

type recorded struct {
	method, path, query, auth, body string
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.reqs = append(f.reqs, recorded{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Authorization"), string(b)})
	rt, ok := f.routes[r.Method+" "+r.URL.Path]
	f.mu.Unlock()
	if !ok {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(404)
		_, _ = io.WriteString(w, `{"error":{"code":"not_found","message":"no route `+r.Method+" "+r.URL.Path+`"}}`)
		return
	}
	if strings.HasPrefix(rt.body, "{") || strings.HasPrefix(rt.body, "[") {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(rt.status)
	_, _ = io.WriteString(w, rt.body)
}

func (f *fakeAPI) requests() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.reqs...)
}

const (
	sessionS1       = `{"id":"s1","task_id":"t1","state":"STARTING","agent":"demo","runtime":"standalone","executor_id":"e1","has_resume_token":false,"error_message":"","created_at":"2025-01-02T03:04:05Z","updated_at":"2025-01-02T03:04:05Z","last_activity_at":"2025-01-02T03:04:05Z"}`
	notResumable    = `{"session_id":"s2","task_id":"t1","state":"STOPPED","agent_profile_id":"noresume","executor_status":"stopped","agent_execution_id":null,"runtime":"standalone","is_agent_running":false,"is_resumable":false,"needs_resume":false,"resume_reason":"not_resumable","resume_message":"This agent cannot resume previous sessions. Create a new session.","worktree_path":"/w/s2","worktree_branch":"paddock/s2"}`
	resumableStatus = `{"session_id":"s1","task_id":"t1","state":"RUNNING","agent_profile_id":"demo","executor_status":"ready","agent_execution_id":"x1","runtime":"standalone","is_agent_running":true,"is_resumable":true,"needs_resume":false,"resume_reason":null,"resume_message":null,"worktree_path":null,"worktree_branch":null}`
)

func defaultRoutes() map[string]route {
	return map[string]route{
		"GET /v1/status":                             {200, `{"leader_id":"n1","leader_address":"127.0.0.1:7701","leader_http":"http://127.0.0.1:7700","term":3,"commit_index":42,"applied_index":41,"nodes":[{"id":"n1","address":"127.0.0.1:7701","suffrage":"Voter","leader":true},{"id":"n2","address":"127.0.0.2:7701","suffrage":"Voter","leader":false}]}`},
		"GET /v1/operator/raft/peers":                {200, `{"peers":[{"id":"n1","address":"127.0.0.1:7701","suffrage":"Voter","leader":true}]}`},
		"DELETE /v1/operator/raft/peers/n2":          {200, `{"removed":"n2"}`},
		"POST /v1/operator/raft/peers":               {200, `{"added":"n4","raft_addr":"127.0.0.4:7701","http_addr":"127.0.0.4:7700"}`},
		"POST /v1/operator/raft/transfer-leadership": {200, `{"leader_id":"n2"}`},
		"GET /v1/operator/snapshot":                  {200, "SNAPSHOT-BYTES\x00\x01"},
		"PUT /v1/operator/snapshot":                  {200, `{"restored":true,"index":99}`},
		"POST /v1/tasks":                             {201, `{"id":"t1","title":"fix bug","workspace":{"path":"/src/app","branch":"main"},"state":"OPEN"}`},
		"GET /v1/tasks":                              {200, `{"tasks":[{"id":"t1","title":"fix bug","workspace":{"path":"/src/app","branch":"main"},"state":"OPEN"},{"id":"t2","title":"docs","workspace":{"path":"/src/doc","branch":""},"state":"REVIEW"}]}`},
		"POST /v1/tasks/t1/sessions":                 {201, sessionS1},
		"GET /v1/sessions":                           {200, `{"sessions":[` + sessionS1 + `]}`},
		"GET /v1/sessions/s1/status":                 {200, resumableStatus},
		"GET /v1/sessions/s2/status":                 {200, notResumable},
		"POST /v1/sessions/s1/prompt":                {202, `{"accepted":true}`},
		"POST /v1/sessions/busy/prompt":              {409, `{"error":{"code":"conflict","message":"a turn is already running"}}`},
		"GET /v1/sessions/s1/messages":               {200, `{"messages":[{"id":"m1","role":"user","text":"remember blue","complete":true},{"id":"m2","role":"agent","text":"ok, remembering\nblue","complete":false}]}`},
		"POST /v1/sessions/s1/resume":                {202, sessionS1},
		"POST /v1/sessions/s2/resume":                {409, `{"error":{"code":"conflict","message":"session s2 is not resumable"}}`},
		"POST /v1/sessions/s1/stop":                  {202, strings.Replace(sessionS1, "STARTING", "RUNNING", 1)},
		"POST /v1/sessions/s2/stop":                  {202, `{"id":"s2","state":"RUNNING"}`},
		"DELETE /v1/sessions/s1":                     {200, strings.Replace(sessionS1, "STARTING", "COMPLETED", 1)},
		"GET /v1/plugins":                            {200, `{"plugins":[{"name":"standalone","version":"0.1.0","api_version":"1","capabilities":{"supports_workspace_only":true,"node_local":true,"survives_supervisor_restart":false},"healthy":true,"error":""}]}`},
		"GET /v1/executors":                          {200, `{"executors":[{"id":"e1","session_id":"s1","task_id":"t1","runtime":"standalone","node":"n1","status":"ready","pid":4242}]}`},
		"GET /v1/agents":                             {200, `{"agents":[{"name":"demo","protocol":"acp","command":["paddock-demo-agent"],"supports_session_resume":true,"resume_support":"probed"},{"name":"claude-cli","protocol":"pty","command":["claude"],"supports_session_resume":null,"resume_support":"unknown"}]}`},
	}
}

func startFake(t *testing.T) (*fakeAPI, string) {
	t.Helper()
	f := &fakeAPI{routes: defaultRoutes()}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv.URL
}

// runCLI runs the CLI against addr with token "tok" from the environment.
func runCLI(addr string, args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	env := map[string]string{EnvAddress: addr, EnvToken: "tok"}
	code = run(args, &out, &errb, func(k string) string { return env[k] })
	return code, out.String(), errb.String()
}

func TestCommands(t *testing.T) {
	cases := []struct {
		name     string
		args     []string
		wantOut  []string // substrings of stdout, in order
		wantReq  string   // "METHOD /path?query" of the last request
		wantBody string   // JSON body of the last request, if any
	}{
		{"status", []string{"status"},
			[]string{"Leader", "n1 (raft 127.0.0.1:7701, http http://127.0.0.1:7700)", "Term", "3", "Commit index", "42", "ID", "ADDRESS", "n2", "127.0.0.2:7701"},
			"GET /v1/status", ""},
		{"list peers", []string{"operator", "raft", "list-peers"},
			[]string{"ID", "SUFFRAGE", "n1", "Voter", "true"}, "GET /v1/operator/raft/peers", ""},
		{"add peer", []string{"operator", "raft", "add-peer", "127.0.0.4:7700"},
			[]string{"Added peer n4 at 127.0.0.4:7700"}, "POST /v1/operator/raft/peers", `{"address":"127.0.0.4:7700"}`},
		{"remove peer", []string{"operator", "raft", "remove-peer", "n2"},
			[]string{"Removed peer n2"}, "DELETE /v1/operator/raft/peers/n2", ""},
		{"transfer leadership", []string{"operator", "raft", "transfer-leadership"},
			[]string{"Leadership transferred to n2"}, "POST /v1/operator/raft/transfer-leadership", ""},
		{"transfer leadership to", []string{"operator", "raft", "transfer-leadership", "-id", "n2"},
			[]string{"n2"}, "POST /v1/operator/raft/transfer-leadership", `{"id":"n2"}`},
		{"task create", []string{"task", "create", "-title", "fix bug", "-workspace", "/src/app", "-branch", "main"},
			[]string{"Created task t1 (OPEN)"}, "POST /v1/tasks", `{"title":"fix bug","workspace":{"path":"/src/app","branch":"main"}}`},
		{"task list", []string{"task", "list"},
			[]string{"ID", "TITLE", "STATE", "WORKSPACE", "t1", "fix bug", "OPEN", "/src/app", "main", "t2", "docs", "REVIEW"}, "GET /v1/tasks", ""},
		{"session create", []string{"session", "create", "-task", "t1", "-agent", "demo", "-runtime", "standalone", "-detach"},
			[]string{"Created session s1", "STARTING"}, "POST /v1/tasks/t1/sessions", `{"agent":"demo","runtime":"standalone"}`},
		{"session create with options", []string{"session", "create", "-task", "t1", "-agent", "demo", "-runtime", "docker", "-option", "image=x:1", "-detach"},
			[]string{"Created session s1"}, "POST /v1/tasks/t1/sessions", `{"agent":"demo","runtime":"docker","runtime_options":{"image":"x:1"}}`},
		{"session list", []string{"session", "list"},
			[]string{"ID", "TASK", "TITLE", "STATE", "NODE", "RESUME TOKEN", "s1", "t1", "fix bug", "STARTING", "demo", "standalone", "n1", "no"}, "GET /v1/sessions", ""},
		{"session list filtered", []string{"session", "list", "-task", "t1", "-state", "running"},
			[]string{"s1"}, "GET /v1/sessions?state=RUNNING&task_id=t1", ""},
		{"session status", []string{"session", "status", "s1"},
			[]string{"Session", "s1", "State", "RUNNING", "Agent running", "true", "Resumable", "true", "Resume reason", "-"}, "GET /v1/sessions/s1/status", ""},
		{"session status with resume message", []string{"session", "status", "s2"},
			[]string{"Resume reason", "not_resumable", "Worktree", "/w/s2 (paddock/s2)", "This agent cannot resume previous sessions. Create a new session."},
			"GET /v1/sessions/s2/status", ""},
		{"session prompt", []string{"session", "prompt", "s1", "remember", "-json=false", "-detach", "blue", "--", "-and", "green"},
			[]string{"Prompt sent to session s1"}, "POST /v1/sessions/s1/prompt", `{"text":"remember blue -and green"}`},
		{"session messages", []string{"session", "messages", "s1"},
			[]string{"[user] remember blue", "[agent] ok, remembering", "        blue …"}, "GET /v1/sessions/s1/messages", ""},
		{"session resume", []string{"session", "resume", "s1", "-detach"},
			[]string{"Resuming session s1 (state STARTING)"}, "POST /v1/sessions/s1/resume", ""},
		{"session stop", []string{"session", "stop", "s1", "-detach"},
			[]string{"Stopping session s1"}, "GET /v1/sessions/s1/status", ""},
		{"session stop not resumable", []string{"session", "stop", "s2", "-detach"},
			[]string{"Stopping session s2", "This agent cannot resume previous sessions."}, "GET /v1/sessions/s2/status", ""},
		{"session delete", []string{"session", "delete", "s1"},
			[]string{"Deleted session s1 (state COMPLETED)"}, "DELETE /v1/sessions/s1", ""},
		{"plugin list", []string{"plugin", "list"},
			[]string{"NAME", "HEALTHY", "CAPABILITIES", "standalone", "0.1.0", "1", "true", "node_local,supports_workspace_only"}, "GET /v1/plugins", ""},
		{"executor list", []string{"executor", "list", "-session", "s1"},
			[]string{"ID", "SESSION", "STATUS", "PID", "e1", "s1", "ready", "4242"}, "GET /v1/executors?session_id=s1", ""},
		{"agent list", []string{"agent", "list"},
			[]string{"NAME", "PROTOCOL", "RESUME", "demo", "acp", "yes", "probed", "paddock-demo-agent", "claude-cli", "pty", "unknown"}, "GET /v1/agents", ""},
		{"flags before command", []string{"-stale", "session", "list"},
			[]string{"s1"}, "GET /v1/sessions?stale=true", ""},
		{"global flag after command", []string{"task", "list", "-stale"},
			[]string{"t1"}, "GET /v1/tasks?stale=true", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, addr := startFake(t)
			code, out, errOut := runCLI(addr, tc.args...)
			if code != 0 || errOut != "" {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			assertInOrder(t, out, tc.wantOut)
			reqs := f.requests()
			if len(reqs) == 0 {
				t.Fatal("no request")
			}
			last := reqs[len(reqs)-1]
			got := last.method + " " + last.path
			if last.query != "" {
				got += "?" + last.query
			}
			if got != tc.wantReq {
				t.Errorf("last request %q, want %q", got, tc.wantReq)
			}
			for _, r := range reqs {
				if r.auth != "Bearer tok" {
					t.Errorf("%s %s: Authorization %q", r.method, r.path, r.auth)
				}
			}
			if tc.wantBody != "" && !jsonEqual(last.body, tc.wantBody) {
				t.Errorf("body %s, want %s", last.body, tc.wantBody)
			}
		})
	}
}

func assertInOrder(t *testing.T, out string, want []string) {
	t.Helper()
	rest := out
	for _, w := range want {
		i := strings.Index(rest, w)
		if i < 0 {
			t.Fatalf("output lacks %q (in order) in:\n%s", w, out)
		}
		rest = rest[i+len(w):]
	}
}

func jsonEqual(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return string(xb) == string(yb)
}

func TestTableColumnsAligned(t *testing.T) {
	_, addr := startFake(t)
	_, out, _ := runCLI(addr, "task", "list")
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("want header + 2 rows, got:\n%s", out)
	}
	col := strings.Index(lines[0], "STATE")
	for _, l := range lines[1:] {
		if len(l) <= col || l[col-1] != ' ' || l[col] == ' ' {
			t.Errorf("STATE column not aligned at %d in %q", col, l)
		}
	}
}

func TestJSONOutputIsServerJSON(t *testing.T) {
	cases := [][]string{
		{"status"}, {"task", "list"}, {"session", "list"}, {"session", "status", "s2"},
		{"session", "messages", "s1"}, {"plugin", "list"}, {"executor", "list"}, {"agent", "list"},
		{"operator", "raft", "list-peers"}, {"session", "stop", "s1", "-detach"}, {"session", "resume", "s1", "-detach"},
		{"session", "prompt", "s1", "hi"},
	}
	for _, args := range cases {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			f, addr := startFake(t)
			code, out, errOut := runCLI(addr, append(args, "-json")...)
			if code != 0 || errOut != "" {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			reqs := f.requests()
			first := reqs[0]
			served := f.routes[first.method+" "+first.path].body
			if !jsonEqual(out, served) {
				t.Errorf("stdout is not the server's JSON:\n%s\nserved:\n%s", out, served)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		wantErr string // substring of the single stderr line
	}{
		{"unknown command", []string{"frobnicate"}, `unknown command "frobnicate"`},
		{"unknown subcommand", []string{"session", "frob"}, `unknown subcommand "session frob". Usage: paddock session create|list|status|prompt|messages|resume|stop|delete`},
		{"group without subcommand", []string{"operator"}, `"operator" needs a subcommand. Usage: paddock operator raft|snapshot`},
		{"nested group", []string{"operator", "raft"}, `"operator raft" needs a subcommand. Usage: paddock operator raft list-peers|add-peer|remove-peer|transfer-leadership`},
		{"unknown flag", []string{"task", "list", "-bogus"}, "flag provided but not defined: -bogus. Usage: paddock task list"},
		{"missing session id", []string{"session", "status"}, "missing session ID. Usage: paddock session status ID"},
		{"extra argument", []string{"session", "status", "s1", "s2"}, `unexpected argument "s2"`},
		{"missing prompt text", []string{"session", "prompt", "s1"}, "missing prompt text"},
		{"missing prompt everything", []string{"session", "prompt"}, "missing session ID and prompt text"},
		{"task create without title", []string{"task", "create"}, "missing -title. Usage: paddock task create -title T"},
		{"session create missing flags", []string{"session", "create", "-task", "t1"}, "missing -agent, -runtime"},
		{"bad option", []string{"session", "create", "-option", "novalue"}, `want KEY=VALUE, got "novalue"`},
		{"remove peer without id", []string{"operator", "raft", "remove-peer"}, "missing peer ID"},
		{"snapshot restore without file", []string{"operator", "snapshot", "restore"}, "missing FILE"},
		{"snapshot restore missing file", []string{"operator", "snapshot", "restore", "/nonexistent/snap"}, "restore snapshot: open /nonexistent/snap: no such file or directory"},
		{"api not found", []string{"session", "status", "nope"}, "no route GET /v1/sessions/nope/status (not_found)"},
		{"api conflict", []string{"session", "prompt", "busy", "hello"}, "a turn is already running (conflict)"},
		{"resume not resumable", []string{"session", "resume", "s2"}, "cannot resume session s2: This agent cannot resume previous sessions. Create a new session. (conflict)"},
		{"attach without session", []string{"attach"}, "missing SESSION. Usage: paddock attach SESSION [-name shell]"},
		{"attach unknown session", []string{"attach", "nope"}, "attach refused: 404 Not Found"},
		{"bad address", []string{"-address", "ftp://x", "status"}, "scheme must be http or https"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, addr := startFake(t)
			f.routes["GET /v1/sessions/nope/status"] = route{404, `{"error":{"code":"not_found","message":"no route GET /v1/sessions/nope/status"}}`}
			code, out, errOut := runCLI(addr, tc.args...)
			if code != 1 {
				t.Errorf("exit %d, want 1", code)
			}
			if out != "" {
				t.Errorf("stdout %q, want none", out)
			}
			assertOneErrorLine(t, errOut, tc.wantErr)
		})
	}
}

func assertOneErrorLine(t *testing.T, stderr, want string) {
	t.Helper()
	if !strings.HasPrefix(stderr, "Error: ") || !strings.HasSuffix(stderr, "\n") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("stderr is not one Error line: %q", stderr)
	}
	if !strings.Contains(stderr, want) {
		t.Errorf("stderr %q lacks %q", stderr, want)
	}
}

func TestServerDown(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.URL
	srv.Close()
	for _, args := range [][]string{{"status"}, {"session", "list", "-json"}, {"session", "resume", "s1"}, {"operator", "snapshot", "save", filepath.Join(t.TempDir(), "s")}} {
		code, out, errOut := runCLI(addr, args...)
		if code != 1 || out != "" {
			t.Errorf("%v: exit %d stdout %q", args, code, out)
		}
		assertOneErrorLine(t, errOut, "cannot reach paddock at "+addr)
	}
}

func TestMalformedServerJSON(t *testing.T) {
	f, addr := startFake(t)
	f.routes["GET /v1/tasks"] = route{200, `{"tasks":[{"id":`}
	code, _, errOut := runCLI(addr, "task", "list")
	if code != 1 {
		t.Errorf("exit %d", code)
	}
	assertOneErrorLine(t, errOut, "GET /v1/tasks: malformed response from server")
}

func TestAddressAndTokenFlagsOverrideEnv(t *testing.T) {
	f, addr := startFake(t)
	var out, errb bytes.Buffer
	env := map[string]string{EnvAddress: "http://127.0.0.1:1", EnvToken: "from-env"}
	code := run([]string{"-address", addr, "task", "list", "-token", "from-flag"}, &out, &errb, func(k string) string { return env[k] })
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if got := f.requests()[0].auth; got != "Bearer from-flag" {
		t.Errorf("Authorization %q", got)
	}
}

func TestDefaultAddress(t *testing.T) {
	var out, errb bytes.Buffer
	// No env: the default address is used; whatever answers there (usually
	// nothing), the error must name it.
	code := run([]string{"status", "-token", "x"}, &out, &errb, func(string) string { return "" })
	if code == 0 {
		t.Skip("a server answers on the default address")
	}
	if !strings.Contains(errb.String(), "http://127.0.0.1:7700") {
		t.Errorf("stderr %q does not name the default address", errb.String())
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}} {
		code, out, errOut := runCLI("http://127.0.0.1:1", args...)
		if code != 0 || errOut != "" {
			t.Errorf("%v: exit %d stderr %q", args, code, errOut)
		}
		assertInOrder(t, out, []string{"Usage: paddock", "paddock status", "paddock session create -task ID -agent NAME -runtime NAME", "paddock agent list", "-address", "PADDOCK_ADDR"})
	}
	code, out, _ := runCLI("http://127.0.0.1:1", "session", "list", "-h")
	if code != 0 || !strings.Contains(out, "Usage: paddock session list [-task ID] [-state S]") || !strings.Contains(out, "-state") {
		t.Errorf("session list -h: exit %d, out %q", code, out)
	}
	code, out, errOut := runCLI("http://127.0.0.1:1")
	if code != 1 || out != "" || !strings.Contains(errOut, "Usage: paddock") {
		t.Errorf("no args: exit %d, out %q, err %q", code, out, errOut)
	}
}

func TestSnapshotSaveRestore(t *testing.T) {
	f, addr := startFake(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "backup.snap")
	code, out, errOut := runCLI(addr, "operator", "snapshot", "save", path)
	if code != 0 {
		t.Fatalf("save: exit %d: %s", code, errOut)
	}
	b, err := os.ReadFile(path)
	if err != nil || string(b) != "SNAPSHOT-BYTES\x00\x01" {
		t.Fatalf("saved %q, %v", b, err)
	}
	assertInOrder(t, out, []string{"Saved snapshot to " + path, "16 bytes"})
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("temp files left behind: %v", entries)
	}

	code, out, errOut = runCLI(addr, "operator", "snapshot", "restore", path)
	if code != 0 {
		t.Fatalf("restore: exit %d: %s", code, errOut)
	}
	assertInOrder(t, out, []string{"Restored snapshot", "index 99"})
	reqs := f.requests()
	if last := reqs[len(reqs)-1]; last.method != "PUT" || last.body != "SNAPSHOT-BYTES\x00\x01" {
		t.Errorf("restore sent %s %q", last.method, last.body)
	}

	// A failed save leaves neither the file nor a temp file.
	f.routes["GET /v1/operator/snapshot"] = route{503, `{"error":{"code":"unavailable","message":"no leader"}}`}
	failed := filepath.Join(dir, "failed.snap")
	code, _, errOut = runCLI(addr, "operator", "snapshot", "save", failed)
	if code != 1 {
		t.Errorf("failed save exit %d", code)
	}
	assertOneErrorLine(t, errOut, "no leader (unavailable)")
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("failed save left files: %v", entries)
	}
}

func TestRelativeWorkspaceMadeAbsolute(t *testing.T) {
	f, addr := startFake(t)
	code, _, errOut := runCLI(addr, "task", "create", "-title", "x", "-workspace", "rel/dir")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var body struct {
		Workspace struct{ Path string } `json:"workspace"`
	}
	if err := json.Unmarshal([]byte(f.requests()[0].body), &body); err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	if body.Workspace.Path != filepath.Join(wd, "rel/dir") {
		t.Errorf("workspace %q", body.Workspace.Path)
	}
}

func TestEmptyListings(t *testing.T) {
	f, addr := startFake(t)
	f.routes["GET /v1/sessions"] = route{200, `{"sessions":[]}`}
	code, out, _ := runCLI(addr, "session", "list")
	if code != 0 || out != "No sessions\n" {
		t.Errorf("exit %d, out %q", code, out)
	}
}

func TestCellSanitizesServerData(t *testing.T) {
	f, addr := startFake(t)
	f.routes["GET /v1/tasks"] = route{200, `{"tasks":[{"id":"t1","title":"evil\ttitle\nsecond line\u001b[31m","state":"OPEN"}]}`}
	_, out, _ := runCLI(addr, "task", "list")
	if strings.Count(out, "\n") != 2 || strings.Contains(out, "\x1b") {
		t.Errorf("server data broke the table: %q", out)
	}
}

// TestSessionMessagesPrintNoTerminalControls: message text from the agent or
// a user cannot retitle the terminal, clear the screen or colour it (7-bit
// or 8-bit sequences); its newlines and tabs still print.
func TestSessionMessagesPrintNoTerminalControls(t *testing.T) {
	f, addr := startFake(t)
	f.routes["GET /v1/sessions/s1/messages"] = route{200, `{"messages":[` +
		`{"id":"m1","role":"user\u001b[2J","text":"look\u009b31m here","complete":true},` +
		`{"id":"m2","role":"agent","text":"\u001b]0;owned\u0007title\u001b[2J\u001b[Hcleared\r\n\tindented\u0008x\u007f","complete":true}]}`}
	code, out, errOut := runCLI(addr, "session", "messages", "s1")
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	if i := strings.IndexAny(out, "\x1b\x07\x08\r\x7f\u009b"); i >= 0 {
		t.Fatalf("output holds control character %q at %d: %q", out[i:i+1], i, out)
	}
	assertInOrder(t, out, []string{"[user [2J] look 31m here\n", "[agent]  ]0;owned title [2J [Hcleared \n", "\tindented x \n"})
}

// TestErrorPrintsNoTerminalControls: an error message from the server reaches
// stderr without its escape sequences.
func TestErrorPrintsNoTerminalControls(t *testing.T) {
	f, addr := startFake(t)
	f.routes["GET /v1/sessions/s1/messages"] = route{409, `{"error":{"code":"conflict","message":"agent said \u001b]0;owned\u0007\u001b[2Jbye"}}`}
	code, _, errOut := runCLI(addr, "session", "messages", "s1")
	if code != 1 || strings.ContainsAny(errOut, "\x1b\x07") || !strings.Contains(errOut, "agent said ]0;owned [2Jbye") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

func FuzzParseInterspersed(f *testing.F) {
	f.Add("session\x00-json\x00s1\x00--\x00-x")
	f.Add("-task\x00t1\x00-state")
	f.Fuzz(func(t *testing.T, joined string) {
		args := strings.Split(joined, "\x00")
		var g globals
		fs := newTestFlagSet(&g)
		pos, err := parseInterspersed(fs, args)
		if err == nil && len(pos) > len(args) {
			t.Fatalf("more positionals than args: %v from %v", pos, args)
		}
	})
}

// -t formats a read's JSON answer with a Go template, as Nomad's -t does;
// a template that does not parse is a usage error.
func TestTemplateOutput(t *testing.T) {
	_, addr := startFake(t)
	code, out, errOut := runCLI(addr, "session", "status", "s1", "-t", "{{.state}} {{.is_resumable}}")
	if code != 0 || out != "RUNNING true\n" {
		t.Fatalf("-t on session status: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, _ = runCLI(addr, "task", "list", "-t", "{{range .tasks}}{{.id}} {{end}}")
	if code != 0 || strings.TrimSpace(out) != "t1 t2" {
		t.Fatalf("-t on task list: exit %d, stdout %q", code, out)
	}
	if code, _, errOut := runCLI(addr, "task", "list", "-t", "{{.tasks"); code == 0 || !strings.Contains(errOut, "-t:") {
		t.Fatalf("a broken template: exit %d, stderr %q", code, errOut)
	}
}
