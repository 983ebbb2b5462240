package server

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/shared/testkit"
)

// monitorLines streams node i's GET /v1/monitor?query into a channel until
// the test ends.
func (c *testCluster) monitorLines(i int, query string) <-chan string {
	c.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c.t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+c.servers[i].HTTPAddr()+"/v1/monitor?"+query, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+c.cfgs[i].ACL.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		c.t.Fatalf("GET /v1/monitor?%s: %s", query, resp.Status)
	}
	ch := make(chan string, 1024)
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			select {
			case ch <- sc.Text():
			default: // the test reads what it needs; never block the stream
			}
		}
		close(ch)
	}()
	return ch
}

// awaitLine waits for a line holding every one of want.
func awaitLine(t *testing.T, ch <-chan string, timeout time.Duration, want ...string) string {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case l, ok := <-ch:
			if !ok {
				t.Fatalf("the stream ended before a line with %q", want)
			}
			found := true
			for _, w := range want {
				found = found && strings.Contains(l, w)
			}
			if found {
				return l
			}
		case <-deadline:
			t.Fatalf("no line with %q within %s", want, timeout)
		}
	}
}

// TestMonitorStreamsSessionLifecycle attaches a log stream to a real server
// whose own log level is warn, then drives a session through its lifecycle:
// each step appears on the stream as an info line, and a debug stream gets
// debug lines the server's own output never shows.
func TestMonitorStreamsSessionLifecycle(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	c := newTestCluster(t, 1, testToken)
	info := c.monitorLines(0, "")
	debug := c.monitorLines(0, "log_level=debug")
	cl := c.client(0)
	task, err := cl.CreateTask(ctx(t), api.CreateTaskRequest{Title: "monitor"})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := cl.CreateSession(ctx(t), task.ID, api.CreateSessionRequest{Agent: "demo", Runtime: "standalone"})
	if err != nil {
		t.Fatal(err)
	}
	awaitLine(t, info, 10*time.Second, "[INFO]", "session created", "session="+sess.ID, "agent=demo", "runtime=standalone")
	awaitLine(t, info, 30*time.Second, "[INFO]", "session started", "session="+sess.ID)
	testkit.WaitFor(t, 30*time.Second, "session to wait for input", testkit.Cond(func() bool {
		s, err := cl.GetSession(ctx(t), sess.ID)
		return err == nil && s.State == api.SessionWaitingForInput
	}))
	if _, err := cl.Stop(ctx(t), sess.ID); err != nil {
		t.Fatal(err)
	}
	awaitLine(t, info, 30*time.Second, "[INFO]", "session stopped", "session="+sess.ID)
	if _, err := cl.Resume(ctx(t), sess.ID); err != nil {
		t.Fatal(err)
	}
	awaitLine(t, info, 30*time.Second, "[INFO]", "session resuming", "session="+sess.ID)
	testkit.WaitFor(t, 30*time.Second, "resumed session to wait for input", testkit.Cond(func() bool {
		s, err := cl.GetSession(ctx(t), sess.ID)
		return err == nil && s.State == api.SessionWaitingForInput
	}))
	if _, err := cl.Stop(ctx(t), sess.ID); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 30*time.Second, "session to stop", testkit.Cond(func() bool {
		s, err := cl.GetSession(ctx(t), sess.ID)
		return err == nil && s.State == api.SessionStopped
	}))
	if _, err := cl.DeleteSession(ctx(t), sess.ID); err != nil {
		t.Fatal(err)
	}
	awaitLine(t, info, 30*time.Second, "[INFO]", "session deleted", "session="+sess.ID)
	awaitLine(t, debug, 10*time.Second, "[DEBUG]")
}

// TestMonitorBadInput: the stream needs the token and a known level.
func TestMonitorBadInput(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	c := newTestCluster(t, 1, testToken)
	base := "http://" + c.servers[0].HTTPAddr() + "/v1/monitor"
	for _, tc := range []struct {
		name, query, token string
		status             int
		code               string
	}{
		{"no token", "", "", 401, "unauthorized"},
		{"unknown level", "log_level=loud", testToken, 400, "bad_request"},
		{"level off", "log_level=off", testToken, 400, "bad_request"},
		{"bad json flag", "log_json=maybe", testToken, 400, "bad_request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, code, body := rawCall(t, "GET", base+"?"+tc.query, tc.token, "", nil)
			if status != tc.status || code != tc.code {
				t.Errorf("GET /v1/monitor?%s: %d %s %s, want %d %s", tc.query, status, code, body, tc.status, tc.code)
			}
		})
	}
}
