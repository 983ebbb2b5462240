package server

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/shared/testkit"
	"github.com/paddockhq/paddock/supervisor/config"
)

// getStatus sends GET path with the test token and returns the status, the
// error code, the body and the Retry-After header.
func getStatus(t *testing.T, base, path string) (int, string, string, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var e struct {
		Error struct{ Code string }
	}
	_ = json.Unmarshal(body, &e)
	return resp.StatusCode, e.Error.Code, string(body), resp.Header.Get("Retry-After")
}

// TestRequestRateLimit: past limits.max_request_rate a client gets 429 with
// Retry-After and the reason; health checks are not counted; a request a
// follower forwards is not counted again by the leader; the client is served
// again once its bucket refills.
func TestRequestRateLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	const rate = 5
	c := newTestClusterWith(t, 3, testToken, func(_ int, cfg *config.Config) { cfg.Limits.MaxRequestRate = rate })
	leader := c.waitLeader(-1)
	f := c.follower()
	fbase, lbase := "http://"+c.servers[f].HTTPAddr(), "http://"+c.servers[leader].HTTPAddr()

	// rate requests through the follower (forwarded reads), then requests to
	// the leader itself until one is refused: at least rate pass first, as
	// the leader did not count the forwarded ones against this address.
	for i := 0; i < rate; i++ {
		if st, code, body, _ := getStatus(t, fbase, "/v1/tasks"); st != http.StatusOK {
			t.Fatalf("forwarded request %d: %d %s %s", i, st, code, body)
		}
	}
	passed := 0
	var st int
	var code, body, retry string
	for ; passed < 100; passed++ {
		if st, code, body, retry = getStatus(t, lbase, "/v1/tasks"); st != http.StatusOK {
			break
		}
	}
	if passed < rate {
		t.Fatalf("only %d requests to the leader passed after %d forwarded ones, want %d", passed, rate, rate)
	}
	if st != http.StatusTooManyRequests || code != "too_many_requests" || !strings.Contains(body, "limits.max_request_rate") {
		t.Fatalf("request past the rate: %d %q %s, want 429 naming limits.max_request_rate", st, code, body)
	}
	if n, err := strconv.Atoi(retry); err != nil || n < 1 {
		t.Fatalf("Retry-After %q, want whole seconds", retry)
	}
	// Health checks pass however many there are.
	for i := 0; i < 3*rate; i++ {
		resp, err := http.Get(lbase + "/v1/health")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("health check %d past the rate: %d", i, resp.StatusCode)
		}
	}
	// Nothing else is disturbed: the cluster still commits (the nodes' own
	// calls are not counted), and the client is served again after a wait.
	testkit.WaitFor(t, 5*time.Second, "the client's bucket to refill", testkit.Cond(func() bool {
		st, _, _, _ := getStatus(t, lbase, "/v1/tasks")
		return st == http.StatusOK
	}))
	if _, err := c.client(f).CreateTask(ctx(t), api.CreateTaskRequest{Title: "after the limit"}); err != nil {
		t.Fatalf("a write through the follower after the limit: %v", err)
	}
}

// TestWebsocketLimit: past limits.max_websockets a new WebSocket gets 503
// with the reason before any upgrade; the open ones keep streaming, other
// requests are served, and a closed socket frees its slot.
func TestWebsocketLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	c := newTestClusterWith(t, 1, testToken, func(_ int, cfg *config.Config) { cfg.Limits.MaxWebsockets = 2 })
	addr := c.servers[0].HTTPAddr()
	hdr := http.Header{"Authorization": []string{"Bearer " + testToken}}
	first := dialEvents(t, addr, "", hdr)
	second := dialEvents(t, addr, "", hdr)

	_, resp, err := websocket.DefaultDialer.Dial("ws://"+addr+"/v1/events", hdr)
	if err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("third WebSocket: %v (%v), want 503", err, resp)
	}
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), "limits.max_websockets") {
		t.Fatalf("third WebSocket refused with %q, want the reason", body)
	}

	// The open streams still stream, and plain requests are served.
	cl := c.client(0)
	task, err := cl.CreateTask(ctx(t), api.CreateTaskRequest{Title: "t"})
	if err != nil {
		t.Fatalf("create a task at the WebSocket limit: %v", err)
	}
	if _, err := cl.CreateSession(ctx(t), task.ID, api.CreateSessionRequest{Agent: "demo", Runtime: "standalone"}); err != nil {
		t.Fatalf("create a session at the WebSocket limit: %v", err)
	}
	readEvent(t, first)
	readEvent(t, second)

	// Closing one frees its slot.
	first.Close()
	testkit.WaitFor(t, 10*time.Second, "a WebSocket slot to free", testkit.Cond(func() bool {
		conn, _, err := websocket.DefaultDialer.Dial("ws://"+addr+"/v1/events", hdr)
		if err != nil {
			return false
		}
		conn.Close()
		return true
	}))
}
