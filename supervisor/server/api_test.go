package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/shared/testkit"
	"github.com/paddockhq/paddock/supervisor/cluster"
)

const testToken = "s3cr3t-token"

// rawCall sends a request and returns status, error code and body.
func rawCall(t *testing.T, method, url, token, body string, header map[string]string) (int, string, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range header {
		if k == "Host" {
			req.Host = v // Go sends req.Host, not a Host header
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var e struct {
		Error struct{ Code, Message string }
	}
	_ = json.Unmarshal(data, &e)
	if resp.StatusCode >= 400 && (e.Error.Code == "" || e.Error.Message == "") {
		t.Errorf("%s %s: error response without code and message: %s", method, url, data)
	}
	return resp.StatusCode, e.Error.Code, data
}

func TestAPIBadInput(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	c := newTestCluster(t, 1, testToken)
	base := "http://" + c.servers[0].HTTPAddr()
	task, err := c.client(0).CreateTask(ctx(t), api.CreateTaskRequest{Title: "t"})
	if err != nil {
		t.Fatal(err)
	}
	big := `{"title":"` + strings.Repeat("x", 2<<20) + `"}`
	cases := []struct {
		name, method, path, token, body string
		header                          map[string]string
		status                          int
		code                            string
	}{
		{"no token", "GET", "/v1/tasks", "", "", nil, 401, "unauthorized"},
		{"wrong token", "GET", "/v1/tasks", "nope", "", nil, 401, "unauthorized"},
		{"wrong X-Paddock-Token", "GET", "/v1/tasks", "", "", map[string]string{"X-Paddock-Token": "nope"}, 401, "unauthorized"},
		{"malformed json", "POST", "/v1/tasks", testToken, `{"title":`, nil, 400, "bad_request"},
		{"not an object", "POST", "/v1/tasks", testToken, `[1,2]`, nil, 400, "bad_request"},
		{"trailing data", "POST", "/v1/tasks", testToken, `{"title":"a"} {}`, nil, 400, "bad_request"},
		{"empty body", "POST", "/v1/tasks", testToken, ``, nil, 400, "bad_request"},
		{"unknown field", "POST", "/v1/tasks", testToken, `{"title":"a","colour":"red"}`, nil, 400, "bad_request"},
		{"missing title", "POST", "/v1/tasks", testToken, `{"title":"  "}`, nil, 400, "bad_request"},
		{"relative workspace", "POST", "/v1/tasks", testToken, `{"title":"a","workspace":{"path":"rel/dir"}}`, nil, 400, "bad_request"},
		{"option-like branch", "POST", "/v1/tasks", testToken, `{"title":"a","workspace":{"path":"/tmp","branch":"--force"}}`, nil, 400, "bad_request"},
		{"oversized body", "POST", "/v1/tasks", testToken, big, nil, 413, "too_large"},
		{"unknown task", "GET", "/v1/tasks/nope", testToken, "", nil, 404, "not_found"},
		{"unknown session", "GET", "/v1/sessions/nope/status", testToken, "", nil, 404, "not_found"},
		{"unknown executor", "GET", "/v1/executors/nope", testToken, "", nil, 404, "not_found"},
		{"session on unknown task", "POST", "/v1/tasks/nope/sessions", testToken, `{"agent":"demo","runtime":"standalone"}`, nil, 404, "not_found"},
		{"unknown agent", "POST", "/v1/tasks/" + task.ID + "/sessions", testToken, `{"agent":"nope","runtime":"standalone"}`, nil, 400, "bad_request"},
		{"unknown runtime", "POST", "/v1/tasks/" + task.ID + "/sessions", testToken, `{"agent":"demo","runtime":"nope"}`, nil, 400, "bad_request"},
		{"bad state filter", "GET", "/v1/sessions?state=SLEEPING", testToken, "", nil, 400, "bad_request"},
		{"bad since", "GET", "/v1/events?since=abc", testToken, "", nil, 400, "bad_request"},
		{"unknown route", "GET", "/v1/nothing", testToken, "", nil, 404, "not_found"},
		{"delete with a force that is not a boolean", "DELETE", "/v1/tasks/" + task.ID + "?force=maybe", testToken, "", nil, 400, "bad_request"},
		{"remove unknown peer", "DELETE", "/v1/operator/raft/peers/ghost", testToken, "", nil, 404, "not_found"},
		{"foreign origin websocket", "GET", "/v1/events", testToken, "", map[string]string{"Origin": "http://evil.example", "Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}, 403, "forbidden"},
		{"websocket with wrong token", "GET", "/v1/events", "nope", "", map[string]string{"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}, 401, "unauthorized"},
		{"internal apply of garbage", "POST", "/v1/internal/apply", "", "\x33\x01{}", map[string]string{cluster.NodeSecretHeader: c.cfgs[0].NodeSecret()}, 400, "bad_request"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, code, body := rawCall(t, tc.method, base+tc.path, tc.token, tc.body, tc.header)
			if status != tc.status || code != tc.code {
				t.Fatalf("got %d %q (%s), want %d %q", status, code, truncate(body), tc.status, tc.code)
			}
		})
	}
	// Nothing above changed state: still exactly one task, and the node is healthy.
	tasks, err := c.client(0).ListTasks(ctx(t))
	if err != nil || len(tasks) != 1 {
		t.Fatalf("tasks after bad input: %v (%v), want the one task", tasks, err)
	}
	if status, _, _ := rawCall(t, "GET", base+"/v1/health", "", "", nil); status != 200 {
		t.Fatalf("health (no token needed) = %d", status)
	}
}

func truncate(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}

func TestSessionStatusHasEveryField(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	c := newTestCluster(t, 1, "")
	cl := c.client(0)
	task, err := cl.CreateTask(ctx(t), api.CreateTaskRequest{Title: "t"})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := cl.CreateSession(ctx(t), task.ID, api.CreateSessionRequest{Agent: "demo", Runtime: "standalone"})
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 30*time.Second, "session to wait for input", testkit.Cond(func() bool {
		s, err := cl.GetSession(ctx(t), sess.ID)
		return err == nil && s.State == api.SessionWaitingForInput
	}))
	// The status object has every field, null when unknown.
	status, _, body := rawCall(t, "GET", "http://"+c.servers[0].HTTPAddr()+"/v1/sessions/"+sess.ID+"/status", "", "", nil)
	if status != 200 {
		t.Fatalf("status: %d %s", status, body)
	}
	var fields map[string]any
	if err := json.Unmarshal(body, &fields); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"session_id", "task_id", "state", "agent_profile_id", "executor_status", "agent_execution_id", "runtime", "is_agent_running", "is_resumable", "needs_resume", "resume_reason", "resume_message", "worktree_path", "worktree_branch"} {
		if _, ok := fields[k]; !ok {
			t.Errorf("status lacks field %q", k)
		}
	}
	if fields["executor_status"] != "ready" || fields["agent_profile_id"] != "demo" || fields["is_agent_running"] != true || fields["resume_reason"] != nil {
		t.Errorf("status fields: %v", fields)
	}
	if _, err := cl.Stop(ctx(t), sess.ID); err != nil {
		t.Fatalf("stop: %v", err)
	}
	testkit.WaitFor(t, 30*time.Second, "session to stop", testkit.Cond(func() bool {
		s, err := cl.GetSession(ctx(t), sess.ID)
		return err == nil && s.State == api.SessionStopped
	}))
	if _, err := cl.Stop(ctx(t), sess.ID); !client.IsCode(err, "conflict") {
		t.Fatalf("second stop: %v, want conflict", err)
	}
	if del, err := cl.DeleteSession(ctx(t), sess.ID); err != nil || del.State != api.SessionCompleted {
		t.Fatalf("delete: %v %v", del, err)
	}
}

func dialEvents(t *testing.T, addr, query string, header http.Header) *websocket.Conn {
	t.Helper()
	conn, resp, err := websocket.DefaultDialer.Dial("ws://"+addr+"/v1/events?"+query, header)
	if err != nil {
		t.Fatalf("dial events: %v (%v)", err, resp)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func readEvent(t *testing.T, conn *websocket.Conn) api.Event {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	var e api.Event
	if err := conn.ReadJSON(&e); err != nil {
		t.Fatalf("read event: %v", err)
	}
	return e
}

func TestEventsPerSessionWithReplayAndFirstFrameAuth(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	c := newTestCluster(t, 3, testToken)
	cl := c.client(0)
	task, err := cl.CreateTask(ctx(t), api.CreateTaskRequest{Title: "t"})
	if err != nil {
		t.Fatal(err)
	}
	a, err := cl.CreateSession(ctx(t), task.ID, api.CreateSessionRequest{Agent: "demo", Runtime: "standalone"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := cl.CreateSession(ctx(t), task.ID, api.CreateSessionRequest{Agent: "demo", Runtime: "standalone"})
	if err != nil {
		t.Fatal(err)
	}
	// A browser-style subscriber on a follower authenticates in its first frame
	// and replays from index 1: it sees only session a's events.
	f := c.follower()
	conn := dialEvents(t, c.servers[f].HTTPAddr(), "session_id="+a.ID+"&since=1", nil)
	if err := conn.WriteJSON(map[string]string{"type": "auth", "token": testToken}); err != nil {
		t.Fatal(err)
	}
	first := readEvent(t, conn)
	if first.SessionID != a.ID || first.TaskID != task.ID || first.Type != api.EventStateChanged || first.Index == 0 {
		t.Fatalf("replayed event %+v", first)
	}
	if _, err := cl.Stop(ctx(t), b.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Stop(ctx(t), a.ID); err != nil {
		t.Fatal(err)
	}
	// Every later event is session a's, up to its STOPPED.
	for {
		live := readEvent(t, conn)
		if live.SessionID != a.ID || live.Index <= first.Index {
			t.Fatalf("live event %+v (session b's events must not appear)", live)
		}
		if live.Type == api.EventStateChanged && live.Data["to"] == string(api.SessionStopped) {
			break
		}
	}
	// A wrong first-frame token closes the stream with 4401.
	bad := dialEvents(t, c.servers[0].HTTPAddr(), "", nil)
	_ = bad.WriteJSON(map[string]string{"type": "auth", "token": "wrong"})
	_ = bad.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, _, err = bad.ReadMessage()
	if ce, ok := err.(*websocket.CloseError); !ok || ce.Code != 4401 {
		t.Fatalf("wrong first-frame token: %v, want close 4401", err)
	}
}

// The profiler is served only with enable_debug, and only with the token.
func TestDebugProfilerNeedsEnableDebugAndToken(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	c := newTestCluster(t, 1, testToken)
	base := "http://" + c.servers[0].HTTPAddr()
	if st, _, _ := rawCall(t, "GET", base+"/debug/pprof/cmdline", testToken, "", nil); st != 404 {
		t.Fatalf("profiler without enable_debug: status %d, want 404", st)
	}
	c.stop(0)
	c.cfgs[0].EnableDebug = true
	c.start(0)
	c.waitLeader(-1)
	if st, _, _ := rawCall(t, "GET", base+"/debug/pprof/cmdline", "", "", nil); st != 401 {
		t.Fatalf("profiler without a token: status %d, want 401", st)
	}
	st, _, body := rawCall(t, "GET", base+"/debug/pprof/goroutine?debug=1", testToken, "", nil)
	if st != 200 || !strings.Contains(string(body), "goroutine profile") {
		t.Fatalf("goroutine profile: status %d, body %q", st, truncate(body))
	}
}

// A subscriber that asks for deltas (?deltas=true) gets a streamed
// message whole once, then what each update added; applying the deltas
// gives the transcript's text. A subscriber that does not ask gets every
// update whole, with no delta in it. A bad value is refused before the
// upgrade.
func TestEventsCarryDeltasToASubscriberThatAsks(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	c := newTestCluster(t, 3, testToken)
	cl := c.client(0)
	task, err := cl.CreateTask(ctx(t), api.CreateTaskRequest{Title: "t"})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := cl.CreateSession(ctx(t), task.ID, api.CreateSessionRequest{Agent: "demo", Runtime: "standalone"})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, cl, sess.ID, api.SessionWaitingForInput)
	addr := c.servers[c.follower()].HTTPAddr()
	auth := http.Header{"Authorization": {"Bearer " + testToken}}
	if st, _, body := rawCall(t, "GET", "http://"+addr+"/v1/events?deltas=maybe", testToken, "", nil); st != 400 || !strings.Contains(string(body), "deltas") {
		t.Fatalf("deltas=maybe: %d %s, want 400 naming the parameter", st, truncate(body))
	}
	withDeltas := dialEvents(t, addr, "session_id="+sess.ID+"&deltas=true", auth)
	whole := dialEvents(t, addr, "session_id="+sess.ID, auth)
	const n = 300
	if err := cl.Prompt(ctx(t), sess.ID, fmt.Sprintf("stream %d", n)); err != nil {
		t.Fatal(err)
	}
	// follow reads one subscription until the turn ends and returns the
	// agent message's text as its frames give it, and how many frames
	// were deltas.
	follow := func(conn *websocket.Conn) (text string, deltas, frames int) {
		var msgID string
		for {
			_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
			_, raw, err := conn.ReadMessage()
			if err != nil {
				t.Fatalf("read event: %v", err)
			}
			var e api.Event
			if err := json.Unmarshal(raw, &e); err != nil {
				t.Fatalf("frame %s: %v", raw, err)
			}
			switch {
			case e.Type == api.EventStateChanged && e.Data["from"] == string(api.SessionRunning) && e.Data["to"] == string(api.SessionWaitingForInput):
				return text, deltas, frames
			case e.Delta != nil:
				if e.Type != api.EventMessageUpdated || len(e.Data) != 0 || e.Delta.ID != msgID || e.Delta.From > len(text) {
					t.Fatalf("delta frame %s while holding %d bytes of %s", truncate(raw), len(text), msgID)
				}
				text = text[:e.Delta.From] + e.Delta.Text
				deltas++
				frames++
			case e.Type == api.EventMessageAdded || e.Type == api.EventMessageUpdated:
				if bytes.Contains(raw, []byte(`"delta"`)) {
					t.Fatalf("a whole frame carries a delta: %s", truncate(raw))
				}
				m, _ := e.Data["message"].(map[string]any)
				if m["role"] == string(api.RoleAgent) {
					msgID, _ = m["id"].(string)
					text, _ = m["text"].(string)
					frames++
				}
			}
		}
	}
	got, deltas, frames := follow(withDeltas)
	plain, plainDeltas, plainFrames := follow(whole)
	msgs, err := cl.Messages(ctx(t), sess.ID)
	if err != nil || len(msgs) == 0 {
		t.Fatalf("messages: %v %v", msgs, err)
	}
	final := msgs[len(msgs)-1].Text
	t.Logf("%d bytes in %d frames, %d of them deltas (the whole subscriber: %d frames)", len(final), frames, deltas, plainFrames)
	if got != final || plain != final {
		t.Fatalf("the delta subscriber rebuilt %d bytes, the whole one got %d, the transcript holds %d", len(got), len(plain), len(final))
	}
	if deltas == 0 || deltas < frames/2 || plainDeltas != 0 {
		t.Fatalf("%d delta frames of %d (want most after the first), %d deltas to the subscriber that did not ask", deltas, frames, plainDeltas)
	}
}
