package api

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/supervisor/config"
	"github.com/paddockhq/paddock/supervisor/state"
)

const bodyTestToken = "body-test-token"

// leadingCluster is the raft node of an API under test: it leads, and
// Apply commits after commitDelay unless the request ends first. Methods a
// test does not reach are the nil interface's (they panic).
type leadingCluster struct {
	Cluster
	store       *state.Store
	commitDelay time.Duration
}

func (c *leadingCluster) ID() string          { return "n1" }
func (c *leadingCluster) IsLeader() bool      { return true }
func (c *leadingCluster) Store() *state.Store { return c.store }
func (c *leadingCluster) WaitApplied(context.Context, uint64) error {
	return nil
}

func (c *leadingCluster) Apply(ctx context.Context, _ state.CommandType, _ any) (*state.Result, error) {
	select {
	case <-ctx.Done():
		return nil, fmt.Errorf("apply: %w", ctx.Err())
	case <-time.After(c.commitDelay):
		return &state.Result{Index: 1}, nil
	}
}

// startBodyTestAPI serves an API with a token and the given body timeout.
func startBodyTestAPI(t *testing.T, bodyTimeout, commitDelay time.Duration) string {
	t.Helper()
	cfg := config.Default()
	cfg.ACL.Token = bodyTestToken
	srv := httptest.NewServer(New(Options{Cluster: &leadingCluster{store: state.NewStore(), commitDelay: commitDelay}, Config: cfg, BodyTimeout: bodyTimeout}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// trickle sends a request's headers with a Content-Length of size, then its
// body a byte every interval until the connection fails or the test ends.
func trickle(t *testing.T, addr, headers string, size int, interval time.Duration) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := fmt.Fprintf(conn, "POST /v1/tasks HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n{", addr, size, headers); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	go func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				if _, err := conn.Write([]byte(" ")); err != nil {
					return
				}
			}
		}
	}()
	return conn
}

// TestAnAuthenticatedBodyIsReadUnderADeadline: a body sent a byte at a time
// held its connection and handler for as long as the client liked. Once a
// request has authenticated its body must arrive within the body timeout:
// past it the request gets 408 and its connection is closed. A body that
// arrives in time lifts the deadline: a handler that then works longer than
// the timeout is not cut off.
func TestAnAuthenticatedBodyIsReadUnderADeadline(t *testing.T) {
	const timeout = 300 * time.Millisecond
	addr := startBodyTestAPI(t, timeout, 3*timeout)

	conn := trickle(t, addr, "Authorization: Bearer "+bodyTestToken+"\r\n", 10_000, 50*time.Millisecond)
	start := time.Now()
	_ = conn.SetReadDeadline(start.Add(10 * time.Second))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer to a trickled body: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	took := time.Since(start)
	if resp.StatusCode != http.StatusRequestTimeout || !resp.Close || took > 5*time.Second {
		t.Fatalf("trickled body: %d %s (Connection: close %v) after %s, want 408 and a close soon after %s", resp.StatusCode, body, resp.Close, took, timeout)
	}
	if _, err := br.ReadByte(); err == nil {
		t.Fatal("the connection stayed open after the 408")
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("connection closed %s after the request, want soon after its %s deadline", took, timeout)
	}

	// A whole body lifts the deadline: the commit, three timeouts later, is
	// answered on a connection that then serves another request.
	cl := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(cl.CloseIdleConnections)
	for i := 0; i < 2; i++ {
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/tasks", strings.NewReader(`{"title":"slow commit"}`))
		req.Header.Set("Authorization", "Bearer "+bodyTestToken)
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("request %d with a whole body and a slow commit: %d %s, want 201", i, resp.StatusCode, body)
		}
	}
}
