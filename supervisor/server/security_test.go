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

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/api/termproto"
	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/shared/term/termtest"
	"github.com/paddockhq/paddock/shared/testkit"
	"github.com/paddockhq/paddock/supervisor/cluster"
	"github.com/paddockhq/paddock/supervisor/config"
	"github.com/paddockhq/paddock/supervisor/state"
	"github.com/paddockhq/paddock/supervisor/terminal"
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
		{"POST", "/v1/internal/apply", encodedCommand(t, state.CmdCreateTask, &state.CreateTaskBody{Task: api.Task{ID: "planted", Title: "planted"}})},
		{"POST", "/v1/internal/join", `{"id":"evil","raft_addr":"127.0.0.1:1","http_addr":"127.0.0.1:2"}`},
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
	planted := encodedCommand(t, state.CmdCreateTask, &state.CreateTaskBody{Task: api.Task{ID: "planted", Title: "planted"}})
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
	task, err := c.client(f).CreateTask(ctx(t), api.CreateTaskRequest{Title: "through a follower"})
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
	testkit.WaitFor(t, 5*time.Second, "the forged record on the follower", testkit.Cond(func() bool {
		return c.servers[f].Node.Store().Nodes()[c.cfgs[leader].NodeName].HTTPAddr == ln.Addr().String()
	}))
	if _, addr := c.servers[f].Node.Leader(); addr != "" {
		t.Fatalf("follower would forward to %q", addr)
	}
	cl := c.client(f, client.WithTimeout(2*time.Second))
	_, _ = cl.CreateTask(ctx(t), api.CreateTaskRequest{Title: "secret work"})
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
	task, err := cl.CreateTask(ctx(t), api.CreateTaskRequest{Title: "capped"})
	if err != nil {
		t.Fatal(err)
	}
	first, err := cl.CreateSession(ctx(t), task.ID, api.CreateSessionRequest{Agent: "demo", Runtime: "standalone"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = cl.DeleteSession(ctx(t), first.ID) })
	testkit.WaitFor(t, 20*time.Second, "the first session's executor", testkit.Cond(func() bool {
		ex, _ := cl.Executors(ctx(t), first.ID)
		return len(ex) == 1
	}))
	_, err = cl.CreateSession(ctx(t), task.ID, api.CreateSessionRequest{Agent: "demo", Runtime: "standalone"})
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
	testkit.WaitFor(t, 20*time.Second, "every node's cap in the leader's view", testkit.Cond(func() bool {
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
	}))
	task, err := cl.CreateTask(ctx(t), api.CreateTaskRequest{Title: "capped per node"})
	if err != nil {
		t.Fatal(err)
	}
	nodes := map[string]bool{}
	for i := 0; i < 3; i++ {
		sess, err := cl.CreateSession(ctx(t), task.ID, api.CreateSessionRequest{Agent: "demo", Runtime: "standalone"})
		if err != nil {
			t.Fatalf("session %d of 3, one per node: %v", i+1, err)
		}
		t.Cleanup(func() { _, _ = cl.DeleteSession(ctx(t), sess.ID) })
		var node string
		testkit.WaitFor(t, 20*time.Second, "the session's executor", testkit.Cond(func() bool {
			ex, _ := cl.Executors(ctx(t), sess.ID)
			if len(ex) == 1 {
				node = ex[0].Node
			}
			return node != ""
		}))
		nodes[node] = true
	}
	if len(nodes) != 3 {
		t.Fatalf("executors on %v; want one on each of the 3 nodes", nodes)
	}
	_, err = cl.CreateSession(ctx(t), task.ID, api.CreateSessionRequest{Agent: "demo", Runtime: "standalone"})
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusServiceUnavailable || !strings.Contains(err.Error(), "every node") {
		t.Fatalf("a fourth session: %v; want 503 saying every node is at its max_sessions_per_node", err)
	}
	if all, err := cl.ListSessions(ctx(t), task.ID, ""); err != nil || len(all) != 3 {
		t.Fatalf("sessions %d, %v; the refused create must record nothing", len(all), err)
	}
}

// TestUnauthenticatedSocketsDoNotFillTheLimit: four upgrades of /v1/events
// that never sent their auth frame held every slot of limits.max_websockets
// = 4 for 10 s, and an authenticated client got 503 meanwhile. A socket now
// counts against the limit only once it has authenticated; until then it has
// 2 s to do so, and one client address may hold at most 8 such sockets.
func TestUnauthenticatedSocketsDoNotFillTheLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	c := newTestClusterWith(t, 1, testToken, func(_ int, cfg *config.Config) { cfg.Limits.MaxWebsockets = 4 })
	addr := c.servers[0].HTTPAddr()
	url := "ws://" + addr + "/v1/events"
	hdr := http.Header{"Authorization": []string{"Bearer " + testToken}}
	auth := map[string]string{"type": "auth", "token": testToken}

	// Eight sockets that never authenticate are all upgraded.
	var silent []*websocket.Conn
	var opened []time.Time
	for i := 0; i < 8; i++ {
		conn, resp, err := websocket.DefaultDialer.Dial(url, nil)
		if err != nil {
			t.Fatalf("unauthenticated socket %d of 8: %v (%s)", i+1, err, statusOf(resp))
		}
		t.Cleanup(func() { conn.Close() })
		silent, opened = append(silent, conn), append(opened, time.Now())
	}
	// A ninth from the same address is refused, saying why.
	_, resp, err := websocket.DefaultDialer.Dial(url, nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("a ninth unauthenticated socket: %v (%s), want 429", err, statusOf(resp))
	}
	if body, _ := io.ReadAll(resp.Body); !strings.Contains(string(body), "waiting to authenticate") {
		t.Fatalf("a ninth unauthenticated socket refused with %s, want the reason", body)
	}

	// Meanwhile authenticated clients connect, by header, and by first
	// frame from another address.
	dialEvents(t, addr, "", hdr)
	other := websocket.Dialer{NetDial: func(network, addr string) (net.Conn, error) {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
		return d.Dial(network, addr)
	}}
	byFrame, resp, err := other.Dial(url, nil)
	if err != nil {
		t.Fatalf("a socket from another address that authenticates in its first frame: %v (%s)", err, statusOf(resp))
	}
	t.Cleanup(func() { byFrame.Close() })
	if err := byFrame.WriteJSON(auth); err != nil {
		t.Fatal(err)
	}

	// The silent ones are closed with 4401 about 2 s after they opened.
	for i, conn := range silent {
		_ = conn.SetReadDeadline(time.Now().Add(15 * time.Second))
		_, _, err := conn.ReadMessage()
		if took := time.Since(opened[i]); !websocket.IsCloseError(err, 4401) || took > 3500*time.Millisecond {
			t.Fatalf("silent socket %d: %v after %s, want close 4401 within about 2s", i+1, err, took.Round(time.Millisecond))
		}
	}

	// A socket that authenticated in its first frame counts: with two more
	// by header the node is at its limit of four.
	dialEvents(t, addr, "", hdr)
	dialEvents(t, addr, "", hdr)
	testkit.WaitFor(t, 10*time.Second, "the node to be at limits.max_websockets", testkit.Cond(func() bool {
		conn, resp, err := websocket.DefaultDialer.Dial(url, hdr)
		if err == nil {
			conn.Close() // the first-frame socket was not counted yet
			return false
		}
		return resp != nil && resp.StatusCode == http.StatusServiceUnavailable
	}))
	// At the limit, a socket that authenticates in its first frame is closed
	// once it has, with 1013 (try again later) and the reason.
	var late *websocket.Conn
	testkit.WaitFor(t, 10*time.Second, "the silent sockets' places to be released", testkit.Cond(func() bool {
		conn, _, err := websocket.DefaultDialer.Dial(url, nil)
		late = conn
		return err == nil
	}))
	t.Cleanup(func() { late.Close() })
	if err := late.WriteJSON(auth); err != nil {
		t.Fatal(err)
	}
	_ = late.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, _, err = late.ReadMessage()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.CloseTryAgainLater || !strings.Contains(ce.Text, "limits.max_websockets") {
		t.Fatalf("a first-frame socket past the limit: %v, want close 1013 naming limits.max_websockets", err)
	}
}

func statusOf(resp *http.Response) string {
	if resp == nil {
		return "no response"
	}
	return resp.Status
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

// TestTerminalAnswersTheSameUntilTheHelloAuthenticates: a terminal request
// without a token header (the token to come in its hello) was answered 101
// for a live session, 409 for one without an executor and 404 for an unknown
// id, so anyone could learn which sessions exist. Until its hello has
// authenticated every such request is now upgraded and refused alike; the
// session is looked up only after that.
func TestTerminalAnswersTheSameUntilTheHelloAuthenticates(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	c := newTestCluster(t, 1, testToken)
	cl, sess := newDemoSession(t, c, "hidden")
	t.Cleanup(func() { _, _ = cl.DeleteSession(ctx(t), sess.ID) })
	waitSessionState(t, cl, sess.ID, api.SessionWaitingForInput)
	base := "ws://" + c.servers[0].HTTPAddr() + "/v1/sessions/"

	// probe dials a terminal without a token header, sends hello (none when
	// nil) and describes the answer and how long after the upgrade it came.
	type answer struct {
		status   int    // the HTTP status when not upgraded
		attached bool   // the terminal attached
		error    string // the error frame's code
		close    int    // the close code
	}
	probe := func(id string, hello []byte) (answer, time.Duration) {
		t.Helper()
		d := websocket.Dialer{Subprotocols: []string{termproto.Subprotocol}, HandshakeTimeout: 10 * time.Second}
		conn, resp, err := d.Dial(base+id+"/terminal", nil)
		if err != nil {
			if resp == nil {
				t.Fatalf("terminal of %q: %v", id, err)
			}
			return answer{status: resp.StatusCode}, 0
		}
		defer conn.Close()
		if hello != nil {
			if err := conn.WriteMessage(websocket.TextMessage, hello); err != nil {
				t.Fatal(err)
			}
		}
		var a answer
		start := time.Now()
		_ = conn.SetReadDeadline(start.Add(15 * time.Second))
		for {
			_, data, err := conn.ReadMessage()
			if err != nil {
				var ce *websocket.CloseError
				if errors.As(err, &ce) {
					a.close = ce.Code
				}
				return a, time.Since(start)
			}
			m, err := termproto.DecodeServerMessage(data)
			switch {
			case err != nil:
			case m.MessageType() == "attached":
				a.attached = true
				return a, time.Since(start)
			case m.MessageType() == "error":
				a.error = m.(termproto.Error).Code
			}
		}
	}
	refusedAlike := func(what string, ids ...string) {
		t.Helper()
		for name, hello := range map[string][]byte{
			"a hello without a token":    termtest.Hello(t, termproto.Hello{}),
			"a hello with a wrong token": termtest.Hello(t, termproto.Hello{Token: "wrong"}),
			"no hello":                   nil,
		} {
			want := answer{error: termproto.CodeUnauth, close: terminal.CloseUnauthorized}
			for _, id := range ids {
				got, took := probe(id, hello)
				if got != want || took > 3500*time.Millisecond {
					t.Errorf("%s, %s: %+v after %s, want %+v within about 2s, as for any other id", what, name, got, took.Round(time.Millisecond), want)
				}
			}
		}
	}
	refusedAlike("a live session and an unknown id", sess.ID, "no-such-session")

	// An authenticated hello learns the rest: the live session attaches, the
	// unknown one is not found.
	good := termtest.Hello(t, termproto.Hello{Token: testToken})
	if got, _ := probe(sess.ID, good); !got.attached {
		t.Fatalf("live session with the token in the hello: %+v, want attached", got)
	}
	if got, _ := probe("no-such-session", good); got != (answer{error: "not_found", close: 4404}) {
		t.Fatalf("unknown session with the token in the hello: %+v, want not_found and 4404", got)
	}
	// A request with a token header has authenticated: it keeps its answer
	// before the upgrade.
	if _, resp, err := termtest.Dial(t, base+"no-such-session/terminal", http.Header{"Authorization": []string{"Bearer " + testToken}}, good); err == nil || resp == nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown session with a token header: %v (%s), want 404", err, statusOf(resp))
	}

	// A session without a running executor (deleted: its executor is
	// destroyed, its record kept) looks the same as the others until the
	// hello authenticates, then gets conflict and 4409.
	if _, err := cl.DeleteSession(ctx(t), sess.ID); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 30*time.Second, "the deleted session's terminal to be refused as having no executor", testkit.Cond(func() bool {
		got, _ := probe(sess.ID, good)
		return got == answer{error: "conflict", close: 4409}
	}))
	refusedAlike("a session without an executor and an unknown id", sess.ID, "no-such-session")
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
