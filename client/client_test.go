package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/paddockhq/paddock/api"
)

// seen is what the fake API server observed of one request.
type seen struct {
	Method, Path, RawQuery, Auth, ContentType string
	Body                                      string
}

// fakeAPI answers every request with status/body and records it.
type fakeAPI struct {
	status      int
	body        string
	contentType string
	got         chan seen
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	f.got <- seen{
		Method: r.Method, Path: r.URL.EscapedPath(), RawQuery: r.URL.RawQuery,
		Auth: r.Header.Get("Authorization"), ContentType: r.Header.Get("Content-Type"), Body: string(b),
	}
	ct := f.contentType
	if ct == "" {
		ct = "application/json"
	}
	w.Header().Set("Content-Type", ct)
	w.WriteHeader(f.status)
	_, _ = io.WriteString(w, f.body)
}

func newFake(t *testing.T, status int, body string) (*fakeAPI, *Client) {
	t.Helper()
	f := &fakeAPI{status: status, body: body, got: make(chan seen, 1)}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	c, err := New(srv.URL, "s3cr3t")
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return f, c
}

func (f *fakeAPI) request(t *testing.T) seen {
	t.Helper()
	select {
	case s := <-f.got:
		return s
	default:
		t.Fatal("the server saw no request")
		return seen{}
	}
}

const sessionJSON = `{"id":"s1","task_id":"t1","state":"RUNNING","agent":"demo","runtime":"standalone","executor_id":"e1","has_resume_token":true,"error_message":"","created_at":"2025-01-02T03:04:05Z","updated_at":"2025-01-02T03:04:05Z","last_activity_at":"2025-01-02T03:04:05Z"}`

const permissionJSON = `{"id":"p 1","session_id":"s1","tool_call_id":"c1","title":"Run make","kind":"execute","options":[{"option_id":"allow","name":"Allow","kind":"allow_once"}],"state":"answered","option_id":"allow","answered_by":"user","created_at":"2025-01-02T03:04:05Z","answered_at":"2025-01-02T03:04:05Z"}`

func TestEndpoints(t *testing.T) {
	ctx := context.Background()
	ts := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	wantSession := &api.Session{ID: "s1", TaskID: "t1", State: api.SessionRunning, Agent: "demo", Runtime: "standalone",
		ExecutorID: "e1", HasResumeToken: true, CreatedAt: ts, UpdatedAt: ts, LastActivityAt: ts}
	tru := true
	wantPermission := api.Permission{ID: "p 1", SessionID: "s1", ToolCallID: "c1", Title: "Run make", Kind: api.ToolExecute,
		Options: []api.PermissionOption{{OptionID: "allow", Name: "Allow", Kind: api.OptionAllowOnce}}, State: api.PermissionAnswered,
		OptionID: "allow", AnsweredBy: "user", CreatedAt: ts, AnsweredAt: &ts}
	cases := []struct {
		name     string
		status   int
		respBody string
		call     func(c *Client) (any, error)
		want     any
		method   string
		path     string
		query    string
		reqBody  string // JSON compared semantically; "" means no body
	}{
		{"health", 200, `{"status":"ok","node":"n1","leader":true}`,
			func(c *Client) (any, error) { return c.Health(ctx) },
			&api.Health{Status: "ok", Node: "n1", Leader: true}, "GET", "/v1/health", "", ""},
		{"status", 200, `{"leader_id":"n1","leader_address":"127.0.0.1:7701","leader_http":"http://127.0.0.1:7700","term":3,"commit_index":42,"applied_index":41,"nodes":[{"id":"n1","address":"127.0.0.1:7701","suffrage":"Voter","leader":true}]}`,
			func(c *Client) (any, error) { return c.Status(ctx) },
			&api.ClusterStatus{LeaderID: "n1", LeaderAddress: "127.0.0.1:7701", LeaderHTTP: "http://127.0.0.1:7700", Term: 3, CommitIndex: 42, AppliedIndex: 41,
				Nodes: []api.Peer{{ID: "n1", Address: "127.0.0.1:7701", Suffrage: "Voter", Leader: true}}}, "GET", "/v1/status", "", ""},
		{"status stale", 200, `{"leader_id":"n1"}`,
			func(c *Client) (any, error) { return c.Status(ctx, Stale()) },
			&api.ClusterStatus{LeaderID: "n1"}, "GET", "/v1/status", "stale=true", ""},
		{"raft peers", 200, `{"peers":[{"id":"n2","address":"a:1","suffrage":"Voter","leader":false}]}`,
			func(c *Client) (any, error) { return c.RaftPeers(ctx) },
			[]api.Peer{{ID: "n2", Address: "a:1", Suffrage: "Voter"}}, "GET", "/v1/operator/raft/peers", "", ""},
		{"remove peer", 200, `{"removed":"n 2"}`,
			func(c *Client) (any, error) { return nil, c.RemovePeer(ctx, "n 2") },
			nil, "DELETE", "/v1/operator/raft/peers/n%202", "", ""},
		{"transfer leadership", 200, `{"leader_id":"n2"}`,
			func(c *Client) (any, error) { return c.TransferLeadership(ctx, "") },
			"n2", "POST", "/v1/operator/raft/transfer-leadership", "", ""},
		{"transfer leadership to", 200, `{"leader_id":"n3"}`,
			func(c *Client) (any, error) { return c.TransferLeadership(ctx, "n3") },
			"n3", "POST", "/v1/operator/raft/transfer-leadership", "", `{"id":"n3"}`},
		{"create task", 201, `{"id":"t1","title":"fix","workspace":{"path":"/w","branch":"main"},"state":"OPEN"}`,
			func(c *Client) (any, error) {
				return c.CreateTask(ctx, api.CreateTaskRequest{Title: "fix", Workspace: api.Workspace{Path: "/w", Branch: "main"}})
			},
			&api.Task{ID: "t1", Title: "fix", Workspace: api.Workspace{Path: "/w", Branch: "main"}, State: api.TaskOpen},
			"POST", "/v1/tasks", "", `{"title":"fix","workspace":{"path":"/w","branch":"main"}}`},
		{"list tasks", 200, `{"tasks":[{"id":"t1","title":"a","state":"OPEN"},{"id":"t2","title":"b","state":"DONE"}]}`,
			func(c *Client) (any, error) { return c.ListTasks(ctx) },
			[]api.Task{{ID: "t1", Title: "a", State: api.TaskOpen}, {ID: "t2", Title: "b", State: api.TaskDone}}, "GET", "/v1/tasks", "", ""},
		{"get task", 200, `{"id":"t1","title":"a","state":"OPEN"}`,
			func(c *Client) (any, error) { return c.GetTask(ctx, "t1") },
			&api.Task{ID: "t1", Title: "a", State: api.TaskOpen}, "GET", "/v1/tasks/t1", "", ""},
		{"create session", 201, sessionJSON,
			func(c *Client) (any, error) {
				return c.CreateSession(ctx, "t1", api.CreateSessionRequest{Agent: "demo", Runtime: "standalone"})
			},
			wantSession, "POST", "/v1/tasks/t1/sessions", "", `{"agent":"demo","runtime":"standalone"}`},
		{"list sessions filtered", 200, `{"sessions":[` + sessionJSON + `]}`,
			func(c *Client) (any, error) { return c.ListSessions(ctx, "t1", "RUNNING") },
			[]api.Session{*wantSession}, "GET", "/v1/sessions", "state=RUNNING&task_id=t1", ""},
		{"list sessions all", 200, `{"sessions":[]}`,
			func(c *Client) (any, error) { return c.ListSessions(ctx, "", "") },
			[]api.Session{}, "GET", "/v1/sessions", "", ""},
		{"get session", 200, sessionJSON,
			func(c *Client) (any, error) { return c.GetSession(ctx, "s1") },
			wantSession, "GET", "/v1/sessions/s1", "", ""},
		{"session status", 200, `{"session_id":"s1","task_id":"t1","state":"STOPPED","agent_profile_id":"demo","executor_status":null,"agent_execution_id":null,"runtime":"standalone","is_agent_running":false,"is_resumable":false,"needs_resume":false,"resume_reason":"not_resumable","resume_message":"This agent cannot resume previous sessions. Create a new session.","worktree_path":null,"worktree_branch":null}`,
			func(c *Client) (any, error) { return c.SessionStatus(ctx, "s1") },
			&api.Status{SessionID: "s1", TaskID: "t1", State: api.SessionStopped, AgentProfileID: ptr("demo"), Runtime: ptr("standalone"),
				ResumeReason: ptr("not_resumable"), ResumeMessage: ptr("This agent cannot resume previous sessions. Create a new session.")},
			"GET", "/v1/sessions/s1/status", "", ""},
		{"prompt", 202, `{"accepted":true}`,
			func(c *Client) (any, error) { return nil, c.Prompt(ctx, "s1", "remember blue") },
			nil, "POST", "/v1/sessions/s1/prompt", "", `{"text":"remember blue"}`},
		{"cancel", 202, ``,
			func(c *Client) (any, error) { return nil, c.Cancel(ctx, "s1") },
			nil, "POST", "/v1/sessions/s1/cancel", "", ""},
		{"messages", 200, `{"messages":[{"id":"m1","role":"user","text":"hi","complete":true}]}`,
			func(c *Client) (any, error) { return c.Messages(ctx, "s1") },
			[]api.Message{{ID: "m1", Role: api.RoleUser, Text: "hi", Complete: true}}, "GET", "/v1/sessions/s1/messages", "", ""},
		{"resume", 202, sessionJSON,
			func(c *Client) (any, error) { return c.Resume(ctx, "s1") },
			wantSession, "POST", "/v1/sessions/s1/resume", "", ""},
		{"stop", 202, sessionJSON,
			func(c *Client) (any, error) { return c.Stop(ctx, "s1") },
			wantSession, "POST", "/v1/sessions/s1/stop", "", ""},
		{"delete session", 200, sessionJSON,
			func(c *Client) (any, error) { return c.DeleteSession(ctx, "s1") },
			wantSession, "DELETE", "/v1/sessions/s1", "", ""},
		{"delete session with force", 200, sessionJSON,
			func(c *Client) (any, error) { return c.DeleteSession(ctx, "s1", Force()) },
			wantSession, "DELETE", "/v1/sessions/s1", "force=true", ""},
		{"stop ignores force", 202, sessionJSON,
			func(c *Client) (any, error) { return c.Stop(ctx, "s1", Force()) },
			wantSession, "POST", "/v1/sessions/s1/stop", "", ""},
		{"permissions", 200, `{"permissions":[` + permissionJSON + `]}`,
			func(c *Client) (any, error) { return c.Permissions(ctx, "s1") },
			[]api.Permission{wantPermission}, "GET", "/v1/sessions/s1/permissions", "", ""},
		{"answer permission", 200, permissionJSON,
			func(c *Client) (any, error) { return c.AnswerPermission(ctx, "s1", "p 1", "allow") },
			&wantPermission, "POST", "/v1/sessions/s1/permissions/p%201", "", `{"option_id":"allow"}`},
		{"set mode", 200, `{"current_mode_id":"plan","available":[{"id":"default","name":"Default"},{"id":"plan","name":"Plan"}]}`,
			func(c *Client) (any, error) { return c.SetMode(ctx, "s1", "plan") },
			&api.AgentModes{CurrentModeID: "plan", Available: []api.AgentMode{{ID: "default", Name: "Default"}, {ID: "plan", Name: "Plan"}}},
			"POST", "/v1/sessions/s1/mode", "", `{"mode_id":"plan"}`},
		{"terminals", 200, `{"terminals":[{"name":"cmd-1","command":["make","test"],"owner":"agent","running":false,"exit_code":0,"read_only":true}]}`,
			func(c *Client) (any, error) { return c.Terminals(ctx, "s1") },
			[]api.Terminal{{Name: "cmd-1", Command: []string{"make", "test"}, Owner: "agent", ExitCode: ptr(0), ReadOnly: true}},
			"GET", "/v1/sessions/s1/terminals", "", ""},
		{"lease", 200, `{"session_id":"s1","holder_executor_id":"e1","holder_nonce":"n","fencing_token":7,"state":"held","expires_at":"2025-01-02T03:04:05Z"}`,
			func(c *Client) (any, error) { return c.Lease(ctx, "s1") },
			&api.Lease{SessionID: "s1", HolderExecutorID: "e1", HolderNonce: "n", FencingToken: 7, State: api.LeaseHeld, ExpiresAt: ts},
			"GET", "/v1/sessions/s1/lease", "", ""},
		{"files", 200, `{"files":[{"name":"a.go","path":"src/a.go","type":"file","size":12}]}`,
			func(c *Client) (any, error) { return c.Files(ctx, "s1", "src") },
			[]api.FileEntry{{Name: "a.go", Path: "src/a.go", Type: "file", Size: 12}}, "GET", "/v1/sessions/s1/files", "path=src", ""},
		{"files entries", 200, `{"entries":[{"name":"src","path":"src","type":"dir"}]}`,
			func(c *Client) (any, error) { return c.Files(ctx, "s1", "") },
			[]api.FileEntry{{Name: "src", Path: "src", Type: "dir"}}, "GET", "/v1/sessions/s1/files", "", ""},
		{"git status", 200, `{"branch":"main"}`,
			func(c *Client) (any, error) { return c.GitStatus(ctx, "s1") },
			json.RawMessage(`{"branch":"main"}`), "GET", "/v1/sessions/s1/git/status", "", ""},
		{"executors", 200, `{"executors":[{"id":"e1","session_id":"s1","status":"ready","pid":42}]}`,
			func(c *Client) (any, error) { return c.Executors(ctx, "s1") },
			[]api.Executor{{ID: "e1", SessionID: "s1", Status: api.ExecutorReady, PID: 42}}, "GET", "/v1/executors", "session_id=s1", ""},
		{"executor", 200, `{"id":"e1","status":"error","error_message":"boom"}`,
			func(c *Client) (any, error) { return c.Executor(ctx, "e1") },
			&api.Executor{ID: "e1", Status: api.ExecutorError, ErrorMessage: "boom"}, "GET", "/v1/executors/e1", "", ""},
		{"plugins", 200, `{"plugins":[{"name":"standalone","version":"0.1.0","api_version":"1","capabilities":{"supports_workspace_only":true},"healthy":true,"error":"","pid":42}]}`,
			func(c *Client) (any, error) { return c.Plugins(ctx) },
			[]api.Plugin{{Name: "standalone", Version: "0.1.0", APIVersion: "1", Capabilities: map[string]bool{"supports_workspace_only": true}, Healthy: true, PID: 42}},
			"GET", "/v1/plugins", "", ""},
		{"agents", 200, `{"agents":[{"name":"demo","protocol":"acp","command":["paddock-demo-agent"],"supports_session_resume":true,"resume_support":"probed"},{"name":"x","protocol":"pty","command":["x"],"supports_session_resume":null,"resume_support":"unknown"}]}`,
			func(c *Client) (any, error) { return c.Agents(ctx) },
			[]api.Agent{{Name: "demo", Protocol: "acp", Command: []string{"paddock-demo-agent"}, SupportsSessionResume: &tru, ResumeSupport: "probed"},
				{Name: "x", Protocol: "pty", Command: []string{"x"}, ResumeSupport: "unknown"}},
			"GET", "/v1/agents", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, c := newFake(t, tc.status, tc.respBody)
			got, err := tc.call(c)
			if err != nil {
				t.Fatalf("call: %v", err)
			}
			req := f.request(t)
			if req.Method != tc.method || req.Path != tc.path || req.RawQuery != tc.query {
				t.Errorf("request = %s %s?%s, want %s %s?%s", req.Method, req.Path, req.RawQuery, tc.method, tc.path, tc.query)
			}
			if req.Auth != "Bearer s3cr3t" {
				t.Errorf("Authorization = %q", req.Auth)
			}
			if tc.reqBody == "" {
				if req.Body != "" {
					t.Errorf("request body = %q, want none", req.Body)
				}
			} else {
				if !jsonEqual(t, req.Body, tc.reqBody) {
					t.Errorf("request body = %s, want %s", req.Body, tc.reqBody)
				}
				if req.ContentType != "application/json" {
					t.Errorf("Content-Type = %q", req.ContentType)
				}
			}
			if tc.want != nil && !reflect.DeepEqual(got, tc.want) {
				t.Errorf("result = %#v\nwant %#v", got, tc.want)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func jsonEqual(t *testing.T, a, b string) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal([]byte(a), &x); err != nil {
		t.Fatalf("not JSON: %q: %v", a, err)
	}
	if err := json.Unmarshal([]byte(b), &y); err != nil {
		t.Fatalf("not JSON: %q: %v", b, err)
	}
	return reflect.DeepEqual(x, y)
}

func TestNoTokenSendsNoAuthorization(t *testing.T) {
	f := &fakeAPI{status: 200, body: `{"status":"ok"}`, got: make(chan seen, 1)}
	srv := httptest.NewServer(f)
	defer srv.Close()
	c, err := New(srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Health(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := f.request(t).Auth; got != "" {
		t.Errorf("Authorization = %q, want none", got)
	}
}

func TestStaleReads(t *testing.T) {
	f := &fakeAPI{status: 200, body: `{"tasks":[]}`, got: make(chan seen, 1)}
	srv := httptest.NewServer(f)
	defer srv.Close()
	c, err := New(srv.URL, "", WithStaleReads(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListTasks(context.Background()); err != nil {
		t.Fatal(err)
	}
	if q := f.request(t).RawQuery; q != "stale=true" {
		t.Errorf("read query = %q, want stale=true", q)
	}
	f.body = `{"id":"t1"}`
	if _, err := c.CreateTask(context.Background(), api.CreateTaskRequest{Title: "x"}); err != nil {
		t.Fatal(err)
	}
	if q := f.request(t).RawQuery; q != "" {
		t.Errorf("write query = %q, want none", q)
	}
}

func TestErrors(t *testing.T) {
	cases := []struct {
		name        string
		status      int
		body        string
		contentType string
		wantStatus  int // 0: not an APIError
		wantCode    string
		wantMsg     string // substring of err.Error()
	}{
		{"not found", 404, `{"error":{"code":"not_found","message":"session \"x\" not found"}}`, "", 404, "not_found", `session "x" not found (not_found)`},
		{"conflict", 409, `{"error":{"code":"conflict","message":"a turn is running"}}`, "", 409, "conflict", "a turn is running (conflict)"},
		{"unauthorized", 401, `{"error":{"code":"unauthorized","message":"bad token"}}`, "", 401, "unauthorized", "bad token (unauthorized)"},
		{"no code in body", 503, `{"error":{"message":"no leader"}}`, "", 503, "unavailable", "no leader (unavailable)"},
		{"html error page", 502, "<html><body>Bad Gateway</body></html>", "text/html", 502, "http_502", "server answered 502 Bad Gateway"},
		{"plain text error", 400, "bad thing\nmore lines", "text/plain", 400, "bad_request", "bad thing (bad_request)"},
		{"empty error body", 500, "", "", 500, "http_500", "server answered 500 Internal Server Error"},
		{"wrong error shape", 404, `{"message":"nope"}`, "", 404, "not_found", "server answered 404 Not Found"},
		{"malformed success body", 200, `{"id":`, "", 0, "", "GET /v1/sessions/s1: malformed response from server"},
		{"wrong type in success body", 200, `{"id":42}`, "", 0, "", "malformed response from server"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, c := newFake(t, tc.status, tc.body)
			f.contentType = tc.contentType
			_, err := c.GetSession(context.Background(), "s1")
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("error %q does not contain %q", err, tc.wantMsg)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans lines: %q", err)
			}
			var ae *APIError
			if tc.wantStatus == 0 {
				if errors.As(err, &ae) {
					t.Errorf("got APIError %v for a decode failure", ae)
				}
				return
			}
			if !errors.As(err, &ae) {
				t.Fatalf("error %T is not an *APIError", err)
			}
			if ae.Status != tc.wantStatus || ae.Code != tc.wantCode {
				t.Errorf("APIError = %d %q, want %d %q", ae.Status, ae.Code, tc.wantStatus, tc.wantCode)
			}
			if !IsCode(err, tc.wantCode) {
				t.Errorf("IsCode(%q) false", tc.wantCode)
			}
		})
	}
}

func TestInputValidatedBeforeSending(t *testing.T) {
	f, c := newFake(t, 200, `{}`)
	ctx := context.Background()
	checks := map[string]error{
		"empty session id":    func() error { _, err := c.GetSession(ctx, ""); return err }(),
		"empty task title":    func() error { _, err := c.CreateTask(ctx, api.CreateTaskRequest{}); return err }(),
		"empty prompt":        c.Prompt(ctx, "s1", "  "),
		"empty peer id":       c.RemovePeer(ctx, ""),
		"empty file path":     c.WriteFile(ctx, "s1", "", strings.NewReader("x")),
		"empty permission id": func() error { _, err := c.AnswerPermission(ctx, "s1", "", "allow"); return err }(),
		"empty option id":     func() error { _, err := c.AnswerPermission(ctx, "s1", "p1", " "); return err }(),
		"empty mode id":       func() error { _, err := c.SetMode(ctx, "s1", ""); return err }(),
		"empty terminals id":  func() error { _, err := c.Terminals(ctx, ""); return err }(),
	}
	for name, err := range checks {
		if err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	select {
	case r := <-f.got:
		t.Errorf("a request was sent: %+v", r)
	default:
	}
}

func TestServerDown(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.URL
	srv.Close()
	c, err := New(addr, "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Status(context.Background())
	if err == nil {
		t.Fatal("no error from a closed server")
	}
	if !strings.HasPrefix(err.Error(), "cannot reach paddock at "+addr+": ") || !strings.Contains(err.Error(), "refused") {
		t.Errorf("error = %q", err)
	}
}

func TestDefaultTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	c, err := New(srv.URL, "", WithTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = c.Health(context.Background())
	if err == nil || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("error = %v, want a timeout", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("timeout took %v", d)
	}
}

func TestSnapshot(t *testing.T) {
	snap := bytes.Repeat([]byte{0, 1, 2, 0xff}, 10000)
	var gotPut []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/operator/snapshot" || r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, `{"error":{"code":"bad_request","message":"unexpected"}}`, 400)
			return
		}
		switch r.Method {
		case http.MethodGet:
			w.Header().Set("Content-Type", "application/octet-stream")
			_, _ = w.Write(snap)
		case http.MethodPut:
			if r.Header.Get("Content-Type") != "application/octet-stream" {
				http.Error(w, `{"error":{"code":"bad_request","message":"content type"}}`, 400)
				return
			}
			gotPut, _ = io.ReadAll(r.Body)
			_, _ = io.WriteString(w, `{"restored":true,"index":42}`)
		}
	}))
	defer srv.Close()
	c, err := New(srv.URL, "tok")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	n, err := c.SnapshotSave(context.Background(), &buf)
	if err != nil || n != int64(len(snap)) || !bytes.Equal(buf.Bytes(), snap) {
		t.Fatalf("SnapshotSave = %d, %v (bytes equal %v)", n, err, bytes.Equal(buf.Bytes(), snap))
	}
	res, err := c.SnapshotRestore(context.Background(), bytes.NewReader(snap))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Restored || res.Index != 42 || !bytes.Equal(gotPut, snap) {
		t.Errorf("restore = %+v, server got %d bytes", res, len(gotPut))
	}
}

func TestFileContent(t *testing.T) {
	var put []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/sessions/s1/files/content" || r.URL.Query().Get("path") != "dir/a b.txt" {
			http.Error(w, `{"error":{"code":"not_found","message":"no such file"}}`, 404)
			return
		}
		switch r.Method {
		case http.MethodGet:
			_, _ = io.WriteString(w, "hello\n")
		case http.MethodPut:
			put, _ = io.ReadAll(r.Body)
			w.WriteHeader(http.StatusNoContent)
		}
	}))
	defer srv.Close()
	c, _ := New(srv.URL, "")
	ctx := context.Background()
	b, err := c.ReadFile(ctx, "s1", "dir/a b.txt")
	if err != nil || string(b) != "hello\n" {
		t.Fatalf("ReadFile = %q, %v", b, err)
	}
	if err := c.WriteFile(ctx, "s1", "dir/a b.txt", strings.NewReader("new")); err != nil || string(put) != "new" {
		t.Fatalf("WriteFile: %v, server got %q", err, put)
	}
	if _, err := c.ReadFile(ctx, "s1", "../etc/passwd"); !IsCode(err, "not_found") {
		t.Errorf("ReadFile outside = %v, want not_found", err)
	}
}

func TestGitDiff(t *testing.T) {
	cases := []struct{ ct, body, want string }{
		{"text/plain", "diff --git a/x b/x\n", "diff --git a/x b/x\n"},
		{"application/json", `{"diff":"diff --git a/y b/y\n"}`, "diff --git a/y b/y\n"},
	}
	for _, tc := range cases {
		f, c := newFake(t, 200, tc.body)
		f.contentType = tc.ct
		got, err := c.GitDiff(context.Background(), "s1")
		if err != nil || got != tc.want {
			t.Errorf("GitDiff(%s) = %q, %v; want %q", tc.ct, got, err, tc.want)
		}
		if p := f.request(t).Path; p != "/v1/sessions/s1/git/diff" {
			t.Errorf("path = %s", p)
		}
	}
}

func TestCaptureBody(t *testing.T) {
	body := `{"tasks":[{"id":"t1","extra_field":1}]}`
	_, c := newFake(t, 200, body)
	var raw []byte
	tasks, err := c.ListTasks(context.Background(), CaptureBody(&raw))
	if err != nil || len(tasks) != 1 {
		t.Fatalf("ListTasks = %v, %v", tasks, err)
	}
	if string(raw) != body {
		t.Errorf("captured %q, want %q", raw, body)
	}
}

func TestParseAddress(t *testing.T) {
	cases := []struct{ in, want, err string }{
		{"", DefaultAddress, ""},
		{"127.0.0.1:7700", "http://127.0.0.1:7700", ""},
		{"https://paddock.example:443/", "https://paddock.example:443", ""},
		{"http://h:1/prefix/", "http://h:1/prefix", ""},
		{"ftp://h:1", "", "scheme must be http or https"},
		{"http://", "", "no host"},
		{"http://h:1:2:%zz", "", "invalid address"},
	}
	for _, tc := range cases {
		u, err := ParseAddress(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseAddress(%q) err = %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || u.String() != tc.want {
			t.Errorf("ParseAddress(%q) = %v, %v; want %s", tc.in, u, err, tc.want)
		}
	}
}

func TestPathPrefix(t *testing.T) {
	f := &fakeAPI{status: 200, body: `{"status":"ok"}`, got: make(chan seen, 1)}
	srv := httptest.NewServer(f)
	defer srv.Close()
	c, _ := New(srv.URL+"/paddock/", "")
	if _, err := c.Health(context.Background()); err != nil {
		t.Fatal(err)
	}
	if p := f.request(t).Path; p != "/paddock/v1/health" {
		t.Errorf("path = %s", p)
	}
}

func FuzzParseAPIError(f *testing.F) {
	f.Add(404, []byte(`{"error":{"code":"not_found","message":"x"}}`))
	f.Add(500, []byte("<html>"))
	f.Add(400, []byte(`{"error":null}`))
	f.Add(409, []byte("line1\nline2"))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		ae := parseAPIError(status, body)
		if ae == nil || ae.Code == "" || ae.Status != status {
			t.Fatalf("parseAPIError(%d, %q) = %+v", status, body, ae)
		}
		if !utf8.ValidString(ae.Error()) {
			t.Fatalf("invalid UTF-8 in %q", ae.Error())
		}
		if strings.ContainsAny(ae.Error(), "\r\n") {
			t.Fatalf("multi-line error %q", ae.Error())
		}
	})
}
