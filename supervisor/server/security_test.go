package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/supervisor/cluster"
	"github.com/paddockhq/paddock/supervisor/config"
	"github.com/paddockhq/paddock/supervisor/state"
)

// Regression tests for what probing a node as an attacker would found: each
// request here was answered (or did harm) before its fix.

// upgradeHeaders make a request look like a WebSocket handshake.
var upgradeHeaders = map[string]string{
	"Connection": "Upgrade", "Upgrade": "websocket",
	"Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
}

func encodedCommand(t *testing.T, typ state.CommandType, body any) string {
	t.Helper()
	data, err := state.Command{Type: typ, Key: cluster.NewKey(), Now: time.Now(), Body: body}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestUpgradeHeaderNeverSkipsTheToken: a request that claims to be a
// WebSocket, with no token, was served by every route (the snapshot, with
// agentctl secrets, among them). Only the two socket routes may take the
// token in a first frame, and only for a real upgrade.
func TestUpgradeHeaderNeverSkipsTheToken(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	c := newTestCluster(t, 1, testToken)
	base := "http://" + c.servers[0].HTTPAddr()
	routes := []struct{ method, path, body string }{
		{"GET", "/v1/operator/snapshot", ""},
		{"GET", "/v1/tasks", ""},
		{"POST", "/v1/tasks", `{"title":"planted"}`},
		{"POST", "/v1/internal/apply", encodedCommand(t, state.CmdCreateTask, &state.CreateTaskBody{Task: state.Task{ID: "planted", Title: "planted"}})},
		{"POST", "/v1/internal/join", `{"id":"evil","raft_addr":"127.0.0.1:1","http_addr":"127.0.0.1:2"}`},
		{"GET", "/v1/internal/node", ""},
		{"GET", "/v1/internal/read-index", ""},
		{"GET", "/v1/sessions/x/terminal", ""}, // not a real upgrade: no subprotocol, no key
	}
	for _, rt := range routes {
		for name, hdr := range map[string]map[string]string{"upgrade only": {"Upgrade": "websocket"}, "full handshake": upgradeHeaders} {
			if rt.path == "/v1/sessions/x/terminal" && name == "full handshake" {
				continue // a real upgrade there authenticates in its hello
			}
			t.Run(rt.method+" "+rt.path+" "+name, func(t *testing.T) {
				status, code, body := rawCall(t, rt.method, base+rt.path, "", rt.body, hdr)
				if status != http.StatusUnauthorized || code != "unauthorized" {
					t.Fatalf("got %d %q (%s), want 401", status, code, truncate(body))
				}
			})
		}
	}
	tasks, err := c.client(0).ListTasks(ctx(t))
	if err != nil || len(tasks) != 0 {
		t.Fatalf("tasks after the probes: %v (%v), want none", tasks, err)
	}
	peers, err := c.client(0).RaftPeers(ctx(t))
	if err != nil || len(peers) != 1 {
		t.Fatalf("peers after the probes: %v (%v), want the one node", peers, err)
	}

	// A real upgrade with no token still reaches the events stream, whose
	// first frame must then carry the token.
	conn := dialEvents(t, c.servers[0].HTTPAddr(), "", nil)
	if err := conn.WriteJSON(map[string]string{"type": "auth", "token": "wrong"}); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, _, err = conn.ReadMessage()
	if !websocket.IsCloseError(err, 4401) {
		t.Fatalf("events with a wrong first frame: %v, want close 4401", err)
	}
}

// TestNodeRoutesTakeOnlyTheNodeSecret: the internal routes accepted the user
// token (and, through the upgrade hole, nothing at all), so a user could
// commit raw raft commands or add voters.
func TestNodeRoutesTakeOnlyTheNodeSecret(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	const secret = "a-cluster-secret-of-some-length"
	c := newTestClusterWith(t, 3, testToken, func(_ int, cfg *config.Config) { cfg.Server.ClusterSecret = secret })
	leader := c.waitLeader(-1)
	base := "http://" + c.servers[leader].HTTPAddr()
	planted := encodedCommand(t, state.CmdCreateTask, &state.CreateTaskBody{Task: state.Task{ID: "planted", Title: "planted"}})
	for _, tc := range []struct {
		name   string
		header map[string]string
		token  string
	}{
		{"user token", nil, testToken},
		{"user token as node secret", map[string]string{cluster.NodeSecretHeader: testToken}, ""},
		{"wrong secret", map[string]string{cluster.NodeSecretHeader: "another-cluster-secret"}, testToken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, rt := range []struct{ method, path, body string }{
				{"POST", "/v1/internal/apply", planted},
				{"POST", "/v1/internal/join", `{"id":"evil","raft_addr":"127.0.0.1:1","http_addr":"127.0.0.1:2"}`},
				{"GET", "/v1/internal/node", ""},
				{"GET", "/v1/internal/read-index", ""},
			} {
				if status, code, body := rawCall(t, rt.method, base+rt.path, tc.token, rt.body, tc.header); status != http.StatusUnauthorized {
					t.Errorf("%s %s: got %d %q (%s), want 401", rt.method, rt.path, status, code, truncate(body))
				}
			}
		})
	}
	if _, ok := c.servers[leader].Node.Store().Task("planted"); ok {
		t.Fatal("a raw command was committed without the node secret")
	}

	// Nodes use the secret themselves: a write through a follower is
	// forwarded and committed.
	f := c.follower()
	task, err := c.client(f).CreateTask(ctx(t), client.CreateTaskRequest{Title: "through a follower"})
	if err != nil {
		t.Fatalf("write through follower n%d: %v", f+1, err)
	}

	// Even with the secret, a voter that does not answer at its address is
	// refused: it would cost the cluster its quorum, for good.
	status, _, body := rawCall(t, "POST", base+"/v1/internal/join", "",
		`{"id":"ghost","raft_addr":"127.0.0.1:1","http_addr":"127.0.0.1:2"}`, map[string]string{cluster.NodeSecretHeader: secret})
	if status == http.StatusOK || !strings.Contains(string(body), "does not answer") {
		t.Fatalf("join of an unreachable server: %d %s", status, body)
	}
	if _, err := c.client(leader).AddPeer(ctx(t), "127.0.0.1:2"); err == nil || !strings.Contains(err.Error(), "does not answer") {
		t.Fatalf("operator add-peer of an unreachable server: %v", err)
	}
	peers, err := c.client(leader).RaftPeers(ctx(t))
	if err != nil || len(peers) != 3 {
		t.Fatalf("peers: %v (%v), want the three servers", peers, err)
	}
	if _, err := c.client(leader).GetTask(ctx(t), task.ID); err != nil {
		t.Fatal(err)
	}
}

// TestForwardingOnlyToTheLeadersHost: a registration that points the
// leader's HTTP address elsewhere (forged through the old internal route)
// sent every follower's forwarded request, the client's token included, to
// that listener. Followers now forward only to the leader's raft host.
func TestForwardingOnlyToTheLeadersHost(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	c := newTestCluster(t, 3, testToken)
	leader := c.waitLeader(-1)
	var stolen atomic.Int32
	ln, err := net.Listen("tcp", "127.0.0.2:0") // another host than the leader's 127.0.0.1
	if err != nil {
		t.Skipf("no 127.0.0.2 on this machine: %v", err)
	}
	trap := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			stolen.Add(1)
		}
		w.WriteHeader(http.StatusTeapot)
	})}
	go func() { _ = trap.Serve(ln) }()
	t.Cleanup(func() { _ = trap.Close() })

	ld := c.servers[leader]
	res, err := ld.Node.Apply(ctx(t), state.CmdRegisterNode, &state.RegisterNodeBody{Node: state.NodeInfo{
		ID: c.cfgs[leader].NodeName, RaftAddr: c.cfgs[leader].RaftAddr(), HTTPAddr: ln.Addr().String()}})
	if err != nil || res.Err != nil {
		t.Fatalf("register: %v %v", err, res)
	}
	f := c.follower()
	waitFor(t, 5*time.Second, "the forged record on the follower", func() bool {
		return c.servers[f].Node.Store().Nodes()[c.cfgs[leader].NodeName].HTTPAddr == ln.Addr().String()
	})
	if _, addr := c.servers[f].Node.Leader(); addr != "" {
		t.Fatalf("follower would forward to %q", addr)
	}
	cl := c.client(f, client.WithTimeout(2*time.Second))
	_, _ = cl.CreateTask(ctx(t), client.CreateTaskRequest{Title: "secret work"})
	if n := stolen.Load(); n != 0 {
		t.Fatalf("%d requests with the client's token reached the forged address", n)
	}
}

// TestEventsBoundsTheFirstFrame: a 200 MiB first frame grew the server by
// hundreds of MB before it was refused. Frames are now bounded before
// authentication: the server closes with 1009 (message too big).
func TestEventsBoundsTheFirstFrame(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	c := newTestCluster(t, 1, testToken)
	conn := dialEvents(t, c.servers[0].HTTPAddr(), "", nil)
	big := bytes.Repeat([]byte("x"), 1<<20)
	_ = conn.WriteMessage(websocket.TextMessage, big)
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, _, err := conn.ReadMessage()
	if !websocket.IsCloseError(err, websocket.CloseMessageTooBig) {
		t.Fatalf("1 MiB first frame: %v, want close 1009", err)
	}
}

// TestBrowsersCannotDriveAnOpenAPI: without an acl block, a web page could
// reach the API through DNS rebinding (its own name resolving to this
// machine) and through cross-site text/plain POSTs.
func TestBrowsersCannotDriveAnOpenAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	c := newTestCluster(t, 1, "")
	addr := c.servers[0].HTTPAddr()
	_, port, _ := net.SplitHostPort(addr)
	base := "http://" + addr
	cases := []struct {
		name, method, path, body string
		header                   map[string]string
		status                   int
	}{
		{"rebound name", "GET", "/v1/tasks", "", map[string]string{"Host": "evil.example:" + port}, 403},
		{"rebound name on a websocket", "GET", "/v1/events", "", merge(upgradeHeaders, map[string]string{"Host": "evil.example:" + port, "Origin": "http://evil.example:" + port}), 403},
		{"rebound name writes", "POST", "/v1/tasks", `{"title":"planted"}`, map[string]string{"Host": "evil.example:" + port, "Content-Type": "application/json"}, 403},
		{"text/plain body", "POST", "/v1/tasks", `{"title":"planted"}`, map[string]string{"Content-Type": "text/plain"}, 415},
		{"form body", "POST", "/v1/tasks", `{"title":"planted"}`, map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 415},
		{"foreign origin write", "POST", "/v1/tasks", `{"title":"planted"}`, map[string]string{"Origin": "http://evil.example", "Content-Type": "application/json"}, 403},
		{"foreign origin internal", "POST", "/v1/internal/join", `{"id":"evil","raft_addr":"127.0.0.1:1","http_addr":"127.0.0.1:2"}`, map[string]string{"Origin": "http://evil.example"}, 403},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, _, body := rawCall(t, tc.method, base+tc.path, "", tc.body, tc.header)
			if status != tc.status {
				t.Fatalf("got %d (%s), want %d", status, truncate(body), tc.status)
			}
		})
	}
	if tasks, _ := c.client(0).ListTasks(ctx(t)); len(tasks) != 0 {
		t.Fatalf("a browser-shaped request created %d tasks", len(tasks))
	}
	// What people and the node's own pages do still works.
	for _, tc := range []struct {
		name   string
		header map[string]string
	}{
		{"localhost", map[string]string{"Host": "localhost:" + port}},
		{"IP address", nil},
		{"same origin", map[string]string{"Origin": "http://" + addr}},
		{"json", map[string]string{"Content-Type": "application/json; charset=utf-8"}},
	} {
		t.Run("allowed "+tc.name, func(t *testing.T) {
			status, _, body := rawCall(t, "POST", base+"/v1/tasks", "", fmt.Sprintf(`{"title":%q}`, tc.name), tc.header)
			if status != http.StatusCreated {
				t.Fatalf("got %d (%s), want 201", status, truncate(body))
			}
		})
	}
}

func merge(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// TestSessionCapPerNode: 50 creates started 100 processes with nothing to
// stop them. limits.max_sessions_per_node refuses the next one with 503.
func TestSessionCapPerNode(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	c := newTestClusterWith(t, 1, testToken, func(_ int, cfg *config.Config) { cfg.Limits.MaxSessionsPerNode = 1 })
	cl := c.client(0)
	task, err := cl.CreateTask(ctx(t), client.CreateTaskRequest{Title: "capped"})
	if err != nil {
		t.Fatal(err)
	}
	first, err := cl.CreateSession(ctx(t), task.ID, client.CreateSessionRequest{Agent: "demo", Runtime: "standalone"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = cl.DeleteSession(ctx(t), first.ID) })
	waitFor(t, 20*time.Second, "the first session's executor", func() bool {
		ex, _ := cl.Executors(ctx(t), first.ID)
		return len(ex) == 1
	})
	_, err = cl.CreateSession(ctx(t), task.ID, client.CreateSessionRequest{Agent: "demo", Runtime: "standalone"})
	if err == nil || !strings.Contains(err.Error(), "max_sessions_per_node") {
		t.Fatalf("second session past the cap: %v", err)
	}
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusServiceUnavailable {
		t.Fatalf("second session: %v, want 503", err)
	}
	// The refusal disturbed nothing: the first session still answers.
	if _, err := cl.SessionStatus(ctx(t), first.ID); err != nil {
		t.Fatal(err)
	}
}

// TestEachNodeKeepsItsOwnSessionLimit: in a cluster, every node's
// limits.max_sessions_per_node caps the executors on that node. The leader
// learns each node's cap from its probe, places new sessions on nodes with
// room, and refuses with 503 only when every node is at its cap (before,
// the leader counted its own executors for every create, so a full leader
// refused sessions the other nodes had room for).
func TestEachNodeKeepsItsOwnSessionLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	c := newTestClusterWith(t, 3, testToken, func(_ int, cfg *config.Config) { cfg.Limits.MaxSessionsPerNode = 1 })
	cl := c.client(c.waitLeader(-1))
	waitFor(t, 20*time.Second, "every node's cap in the leader's view", func() bool {
		ns, err := cl.Nodes(ctx(t))
		if err != nil || len(ns) != 3 {
			return false
		}
		for _, n := range ns {
			if n.MaxSessions != 1 {
				return false
			}
		}
		return true
	})
	task, err := cl.CreateTask(ctx(t), client.CreateTaskRequest{Title: "capped per node"})
	if err != nil {
		t.Fatal(err)
	}
	nodes := map[string]bool{}
	for i := 0; i < 3; i++ {
		sess, err := cl.CreateSession(ctx(t), task.ID, client.CreateSessionRequest{Agent: "demo", Runtime: "standalone"})
		if err != nil {
			t.Fatalf("session %d of 3, one per node: %v", i+1, err)
		}
		t.Cleanup(func() { _, _ = cl.DeleteSession(ctx(t), sess.ID) })
		var node string
		waitFor(t, 20*time.Second, "the session's executor", func() bool {
			ex, _ := cl.Executors(ctx(t), sess.ID)
			if len(ex) == 1 {
				node = ex[0].Node
			}
			return node != ""
		})
		nodes[node] = true
	}
	if len(nodes) != 3 {
		t.Fatalf("executors on %v; want one on each of the 3 nodes", nodes)
	}
	_, err = cl.CreateSession(ctx(t), task.ID, client.CreateSessionRequest{Agent: "demo", Runtime: "standalone"})
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusServiceUnavailable || !strings.Contains(err.Error(), "every node") {
		t.Fatalf("a fourth session: %v; want 503 saying every node is at its max_sessions_per_node", err)
	}
	if all, err := cl.ListSessions(ctx(t), task.ID, ""); err != nil || len(all) != 3 {
		t.Fatalf("sessions %d, %v; the refused create must record nothing", len(all), err)
	}
}

// TestARefusedBodyIsNotDrained: 200 connections that sent POST /v1/tasks
// without a token, a 200 KB Content-Length and a byte every 5 s stayed open
// for over a minute: net/http reads up to 256 KiB of a body the handler left
// unread before it answers the next request, and it did so after a 401 too.
// A request refused before its body is read now gets Connection: close, and
// its connection ends within about a second of the answer.
func TestARefusedBodyIsNotDrained(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	c := newTestCluster(t, 1, testToken)
	addr := c.servers[0].HTTPAddr()
	for _, tc := range []struct {
		name, path, header string
		status             int
	}{
		{"no token", "/v1/tasks", "", http.StatusUnauthorized},
		{"wrong token", "/v1/tasks", "Authorization: Bearer nope\r\n", http.StatusUnauthorized},
		{"no route", "/v1/nothing", "Authorization: Bearer " + testToken + "\r\n", http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 200000\r\n%s\r\n{", tc.path, addr, tc.header); err != nil {
				t.Fatal(err)
			}
			stop := make(chan struct{})
			defer close(stop)
			go func() { // a byte every 100 ms while the connection lasts
				tick := time.NewTicker(100 * time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-stop:
						return
					case <-tick.C:
						if _, err := conn.Write([]byte(" ")); err != nil {
							return
						}
					}
				}
			}()
			_ = conn.SetReadDeadline(time.Now().Add(15 * time.Second))
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			answered := time.Now()
			if resp.StatusCode != tc.status || !resp.Close {
				t.Fatalf("got %d (Connection: close %v), want %d and Connection: close", resp.StatusCode, resp.Close, tc.status)
			}
			_, err = br.ReadByte()
			var ne net.Error
			if took := time.Since(answered); err == nil || (errors.As(err, &ne) && ne.Timeout()) || took > 3*time.Second {
				t.Fatalf("after the answer: %v %s later, want the connection closed within about a second", err, took.Round(time.Millisecond))
			}
		})
	}
}

// TestStrictJSONRefusesDuplicateAndMiscasedKeys: {"title":"a","title":"b"}
// created a task titled "b" and {"Title":"x"} one titled "x"; both are now a
// 400 naming the key, and nothing is created.
func TestStrictJSONRefusesDuplicateAndMiscasedKeys(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	c := newTestCluster(t, 1, testToken)
	base := "http://" + c.servers[0].HTTPAddr()
	for _, tc := range []struct{ body, key string }{
		{`{"title":"a","title":"b"}`, `"title"`},
		{`{"Title":"x"}`, `"Title"`},
		{`{"title":"x","workspace":{"path":"/tmp","Path":"/etc"}}`, `"workspace.Path"`},
	} {
		status, code, body := rawCall(t, "POST", base+"/v1/tasks", testToken, tc.body, nil)
		var e struct{ Error struct{ Message string } }
		_ = json.Unmarshal(body, &e)
		if status != http.StatusBadRequest || code != "bad_request" || !strings.Contains(e.Error.Message, tc.key) {
			t.Errorf("%s: %d %q (%s), want 400 bad_request naming %s", tc.body, status, code, truncate(body), tc.key)
		}
	}
	if tasks, err := c.client(0).ListTasks(ctx(t)); err != nil || len(tasks) != 0 {
		t.Fatalf("tasks after the refused bodies: %v (%v), want none", tasks, err)
	}
}
