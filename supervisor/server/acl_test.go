package server

import (
	"bytes"
	"net/http"
	"testing"
	"time"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/api/termproto"
	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/shared/term/termtest"
	"github.com/paddockhq/paddock/shared/testkit"
	"github.com/paddockhq/paddock/supervisor/config"
	"github.com/paddockhq/paddock/supervisor/terminal"
)

const testReadToken = "l00k-but-d0nt-t0uch"

func withReadToken(_ int, cfg *config.Config) { cfg.ACL.ReadToken = testReadToken }

// TestReadTokenReadsAndStreamsButNeverWrites: acl.read_token lists, reads and
// streams events (header or first frame), and gets 403 on every write, on
// terminals (header or hello) and on snapshots; nothing it sends changes state.
func TestReadTokenReadsAndStreamsButNeverWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	c := newTestClusterWith(t, 3, testToken, withReadToken)
	admin := c.client(0)
	task, err := admin.CreateTask(ctx(t), api.CreateTaskRequest{Title: "watched"})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := admin.CreateSession(ctx(t), task.ID, api.CreateSessionRequest{Agent: "demo", Runtime: "standalone"})
	if err != nil {
		t.Fatal(err)
	}
	// The agent outlives the servers: delete it before the workspace goes.
	t.Cleanup(func() { _, _ = admin.DeleteSession(ctx(t), sess.ID) })
	testkit.WaitFor(t, 60*time.Second, "the session to wait for input", testkit.Cond(func() bool {
		s, err := admin.GetSession(ctx(t), sess.ID)
		return err == nil && s.State == api.SessionWaitingForInput
	}))

	// A follower serves the reader too: reads are forwarded with its token.
	f := c.follower()
	reader, err := client.New("http://"+c.servers[f].HTTPAddr(), testReadToken)
	if err != nil {
		t.Fatal(err)
	}
	if tasks, err := reader.ListTasks(ctx(t)); err != nil || len(tasks) != 1 {
		t.Fatalf("list tasks with the read token: %v (%v)", tasks, err)
	}
	if s, err := reader.GetSession(ctx(t), sess.ID); err != nil || s.ID != sess.ID {
		t.Fatalf("get session with the read token: %v (%v)", s, err)
	}
	if _, err := reader.Messages(ctx(t), sess.ID); err != nil {
		t.Fatalf("messages with the read token: %v", err)
	}
	stream, err := reader.Events(ctx(t), client.EventFilter{SessionID: sess.ID}, 0)
	if err != nil {
		t.Fatalf("events with the read token: %v", err)
	}
	defer stream.Close()
	// The browser way: no header, the read token in the first frame.
	conn := dialEvents(t, c.servers[f].HTTPAddr(), "session_id="+sess.ID, nil)
	if err := conn.WriteJSON(map[string]string{"type": "auth", "token": testReadToken}); err != nil {
		t.Fatal(err)
	}

	base := "http://" + c.servers[f].HTTPAddr()
	refused := []struct{ method, path, body string }{
		{"POST", "/v1/tasks", `{"title":"planted"}`},
		{"POST", "/v1/tasks/" + task.ID + "/close", ""},
		{"DELETE", "/v1/tasks/" + task.ID, ""},
		{"POST", "/v1/tasks/" + task.ID + "/sessions", `{"agent":"demo","runtime":"standalone"}`},
		{"POST", "/v1/sessions/" + sess.ID + "/prompt", `{"text":"remember planted"}`},
		{"POST", "/v1/sessions/" + sess.ID + "/stop", ""},
		{"DELETE", "/v1/sessions/" + sess.ID, ""},
		{"PUT", "/v1/sessions/" + sess.ID + "/files/content?path=planted.txt", `planted`},
		{"POST", "/v1/operator/raft/transfer-leadership", `{}`},
		{"DELETE", "/v1/operator/raft/peers/n1", ""},
		{"GET", "/v1/operator/snapshot", ""},
		{"GET", "/v1/sessions/" + sess.ID + "/terminal", ""},
	}
	for _, rt := range refused {
		t.Run(rt.method+" "+rt.path, func(t *testing.T) {
			var hdr map[string]string
			if rt.path == "/v1/sessions/"+sess.ID+"/terminal" {
				hdr = merge(upgradeHeaders, map[string]string{"Sec-WebSocket-Protocol": termproto.Subprotocol})
			}
			status, code, body := rawCall(t, rt.method, base+rt.path, testReadToken, rt.body, hdr)
			if status != http.StatusForbidden || code != "forbidden" || !bytes.Contains(body, []byte("read-only token")) {
				t.Fatalf("got %d %q (%s), want 403 naming the read-only token", status, code, truncate(body))
			}
		})
	}

	// A terminal hello carrying the read token is refused, not relayed.
	url := "ws://" + c.servers[f].HTTPAddr() + "/v1/sessions/" + sess.ID + "/terminal"
	tc, resp, err := termtest.Dial(t, url, nil, termtest.Hello(t, termproto.Hello{Token: testReadToken}))
	if err != nil {
		t.Fatalf("dial terminal: %v (%v)", err, resp)
	}
	if code := tc.WaitClosed(); code != terminal.CloseForbidden {
		t.Fatalf("terminal with the read token in its hello closed with %d, want %d", code, terminal.CloseForbidden)
	}

	// The streams saw the session's events; nothing the reader sent took effect.
	if err := admin.Prompt(ctx(t), sess.ID, "remember cats"); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Next(); err != nil {
		t.Fatalf("read an event with the read token: %v", err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, _, err := conn.ReadMessage(); err != nil {
		t.Fatalf("read an event after first-frame auth with the read token: %v", err)
	}
	if tasks, err := admin.ListTasks(ctx(t)); err != nil || len(tasks) != 1 || tasks[0].ID != task.ID || tasks[0].State == api.TaskDone {
		t.Fatalf("tasks after the refused writes: %v (%v)", tasks, err)
	}
	if s, err := admin.GetSession(ctx(t), sess.ID); err != nil || s.State == api.SessionStopped || s.State == api.SessionCompleted {
		t.Fatalf("session after the refused writes: %v (%v)", s, err)
	}
	if peers, err := admin.RaftPeers(ctx(t)); err != nil || len(peers) != 3 {
		t.Fatalf("peers after the refused writes: %v (%v)", peers, err)
	}
}
