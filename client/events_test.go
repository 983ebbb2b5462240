package client

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/paddockhq/paddock/api"
)

// eventServer upgrades /v1/events, checks the token, reports the query and
// writes frames; after them it either closes normally or holds the socket open.
func eventServer(t *testing.T, frames []string, hold bool, gotQuery chan<- string) *httptest.Server {
	t.Helper()
	up := websocket.Upgrader{}
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error":{"code":"unauthorized","message":"invalid token"}}`)
			return
		}
		if r.URL.Path != "/v1/events" {
			http.NotFound(w, r)
			return
		}
		gotQuery <- r.URL.RawQuery
		conn, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer conn.Close()
		for _, f := range frames {
			if err := conn.WriteMessage(websocket.TextMessage, []byte(f)); err != nil {
				return
			}
		}
		if hold {
			// Wait for the client to go away (a read fails) or the test to end.
			go func() {
				<-done
				conn.Close()
			}()
			for {
				if _, _, err := conn.ReadMessage(); err != nil {
					return
				}
			}
		}
		_ = conn.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "bye"))
	}))
	t.Cleanup(func() { close(done); srv.Close() })
	return srv
}

func TestEventsStream(t *testing.T) {
	frames := []string{
		`{"type":"session.state_changed","session_id":"s1","task_id":"t1","index":7,"data":{"state":"RUNNING"}}`,
		`{"type":"session.message.added","session_id":"s1","task_id":"t1","index":8,"data":{"id":"m1"}}`,
	}
	q := make(chan string, 1)
	srv := eventServer(t, frames, false, q)
	c, _ := New(srv.URL, "tok")
	s, err := c.Events(context.Background(), EventFilter{SessionID: "s1", TaskID: "t1"}, 6)
	if err != nil {
		t.Fatalf("Events: %v", err)
	}
	defer s.Close()
	if got := <-q; got != "session_id=s1&since=6&task_id=t1" {
		t.Errorf("query = %q", got)
	}
	want := []api.Event{
		{Type: api.EventStateChanged, SessionID: "s1", TaskID: "t1", Index: 7, Data: map[string]any{"state": "RUNNING"}},
		{Type: api.EventMessageAdded, SessionID: "s1", TaskID: "t1", Index: 8, Data: map[string]any{"id": "m1"}},
	}
	for i, w := range want {
		ev, err := s.Next()
		if err != nil {
			t.Fatalf("Next %d: %v", i, err)
		}
		if ev.Type != w.Type || ev.Index != w.Index || ev.SessionID != w.SessionID || ev.Data["state"] != w.Data["state"] {
			t.Errorf("event %d = %+v, want %+v", i, ev, w)
		}
	}
	if _, err := s.Next(); !errors.Is(err, io.EOF) {
		t.Errorf("after a normal close Next = %v, want io.EOF", err)
	}
}

func TestEventsMalformedFrame(t *testing.T) {
	for _, frame := range []string{`{"type":`, `{"index":"x"}`, `{"index":1}`, `[]`} {
		q := make(chan string, 1)
		srv := eventServer(t, []string{frame}, true, q)
		c, _ := New(srv.URL, "tok")
		s, err := c.Events(context.Background(), EventFilter{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := <-q; got != "" {
			t.Errorf("query = %q, want none", got)
		}
		_, err = s.Next()
		if err == nil || !strings.Contains(err.Error(), "malformed event frame") {
			t.Errorf("frame %q: Next = %v, want a malformed-frame error", frame, err)
		}
		s.Close()
	}
}

func TestEventsContextCancelEndsStream(t *testing.T) {
	q := make(chan string, 1)
	srv := eventServer(t, nil, true, q)
	c, _ := New(srv.URL, "tok")
	ctx, cancel := context.WithCancel(context.Background())
	s, err := c.Events(ctx, EventFilter{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := s.Next()
		errc <- err
	}()
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, ErrStreamClosed) {
			t.Errorf("Next after cancel = %v, want ErrStreamClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Next did not return after the context was cancelled")
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
}

func TestEventsRefused(t *testing.T) {
	q := make(chan string, 1)
	srv := eventServer(t, nil, false, q)
	c, _ := New(srv.URL, "wrong")
	_, err := c.Events(context.Background(), EventFilter{}, 0)
	if !IsCode(err, "unauthorized") {
		t.Fatalf("Events with a wrong token = %v, want unauthorized", err)
	}
	srv.Close()
	c, _ = New(srv.URL, "tok")
	if _, err := c.Events(context.Background(), EventFilter{}, 0); err == nil || !strings.Contains(err.Error(), "cannot reach paddock") {
		t.Errorf("Events on a closed server = %v", err)
	}
}

func TestEventsLaggedCloseIsErrLagged(t *testing.T) {
	up := websocket.Upgrader{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer conn.Close()
		_ = conn.WriteMessage(websocket.TextMessage, []byte(`{"type":"session.state_changed","session_id":"s1","index":9}`))
		_ = conn.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(4408, "subscriber fell behind"))
		_, _, _ = conn.ReadMessage() // until the client closes
	}))
	defer srv.Close()
	c, _ := New(srv.URL, "")
	s, err := c.Events(context.Background(), EventFilter{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if ev, err := s.Next(); err != nil || ev.Index != 9 {
		t.Fatalf("first event = %+v, %v", ev, err)
	}
	if _, err := s.Next(); !errors.Is(err, ErrLagged) {
		t.Fatalf("after close 4408 Next = %v, want ErrLagged", err)
	}
}
