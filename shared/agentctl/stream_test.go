package agentctl_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/shared/agentctl"
)

// A streamed reply followed through GET /v1/events/stream arrives as the
// agent said it: the message the stream's deltas build is GET
// /v1/messages' message, in a few frames, and updates after the first come
// as deltas (no data).
func TestTheEventStreamCarriesAStreamedReply(t *testing.T) {
	_, _, c := inProcess(t, agentctl.Options{})
	if _, err := c.StartAgent(ctx(t), acpProfile, ""); err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx(t))
	defer cancel()
	type seen struct {
		frames, deltas int
		last           map[string]agentctl.Message
	}
	done := make(chan seen, 1)
	errs := make(chan error, 1)
	go func() {
		s := seen{last: map[string]agentctl.Message{}}
		errs <- c.Stream(sctx, agentctl.EventsQuery{Since: 1, Gather: 100 * time.Millisecond}, func(f agentctl.EventsResponse) error {
			s.frames++
			for _, ev := range f.Events {
				if ev.Delta != nil {
					s.deltas++
					if len(ev.Data) != 0 {
						return fmt.Errorf("event %d has both a delta and data", ev.Seq)
					}
				}
				if ev.Message != nil {
					s.last[ev.Message.ID] = *ev.Message
				}
				if ev.Type == agentctl.EventTurnFinished {
					done <- s
				}
			}
			return nil
		})
	}()
	const n = 300
	if _, err := c.Prompt(ctx(t), fmt.Sprintf("stream %d", n)); err != nil {
		t.Fatal(err)
	}
	var s seen
	select {
	case s = <-done:
	case err := <-errs:
		t.Fatalf("the stream ended before the turn did: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("no turn_finished on the stream")
	}
	msgs, err := c.Messages(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	reply := msgs[len(msgs)-1]
	got := s.last[reply.ID]
	if got.Text != reply.Text || !got.Complete || got.Role != reply.Role || !got.CreatedAt.Equal(reply.CreatedAt) || !got.UpdatedAt.Equal(reply.UpdatedAt) {
		t.Fatalf("the stream built %+v\nthe agent's reply is %+v", got, reply)
	}
	if lines := strings.Count(reply.Text, "\n"); lines < n-1 {
		t.Fatalf("the reply has %d lines, want %d", lines, n)
	}
	if s.deltas == 0 {
		t.Fatalf("no update came as a delta in %d frames", s.frames)
	}
	t.Logf("%d chunks in %d frames, %d deltas", n, s.frames, s.deltas)
}

// The stream takes since and gather only: a lease or a wait is refused
// (the stream renews nothing, and paces its own heartbeats).
func TestTheEventStreamRefusesPollParameters(t *testing.T) {
	_, hs, _ := inProcess(t, agentctl.Options{})
	for _, q := range []string{"lease=10s", "wait=5s", "since=x", "gather=soon", "permissions=true"} {
		req, _ := http.NewRequestWithContext(ctx(t), "GET", hs.URL+"/v1/events/stream?"+q, nil)
		req.Header.Set("Authorization", "Bearer x")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || !strings.Contains(string(b), "bad_request") {
			t.Errorf("%s: %d %s, want 400", q, resp.StatusCode, b)
		}
	}
	req, _ := http.NewRequestWithContext(ctx(t), "GET", hs.URL+"/v1/events/stream", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Errorf("a stream without the secret: %d, want 401", resp.StatusCode)
	}
}

// A delta that does not follow what the stream carried of its message
// (another offset, or a message it never carried) ends the stream with an
// error naming it, before the frame reaches the reader: the reader opens
// it again from its last frame, and gets whole messages.
func TestAnEventStreamDeltaThatDoesNotFollowIsRefused(t *testing.T) {
	added := `{"nonce":"n","next":2,"events":[{"seq":1,"type":"message_added","time":"2026-01-01T00:00:00Z","data":{"message":{"id":"m1","role":"agent","text":"ab","complete":false}}}]}`
	for _, c := range []struct{ name, frames, want string }{
		{"wrong offset", added + "\n" + `{"nonce":"n","next":3,"events":[{"seq":2,"type":"message_updated","time":"2026-01-01T00:00:00Z","delta":{"id":"m1","from":5,"text":"c"}}]}`,
			`adds to message "m1" from byte 5, but the stream carried 2 bytes`},
		{"unknown message", `{"nonce":"n","next":2,"events":[{"seq":1,"type":"message_updated","time":"2026-01-01T00:00:00Z","delta":{"id":"m9","from":0,"text":"c"}}]}`,
			`adds to message "m9" from byte 0, but the stream carried -1 bytes`},
		{"malformed message", `{"nonce":"n","next":2,"events":[{"seq":1,"type":"message_added","time":"2026-01-01T00:00:00Z","data":{"message":7}}]}`,
			"event 1: malformed message data"},
		{"not JSON", "{nonce", "invalid character"},
	} {
		t.Run(c.name, func(t *testing.T) {
			fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.WriteString(w, c.frames+"\n")
			}))
			defer fake.Close()
			var delivered []uint64
			err := agentctl.NewClient(fake.URL, "x", time.Second).Stream(ctx(t), agentctl.EventsQuery{}, func(f agentctl.EventsResponse) error {
				for _, ev := range f.Events {
					delivered = append(delivered, ev.Seq)
				}
				return nil
			})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("the stream ended with %v, want %q", err, c.want)
			}
			for _, seq := range delivered {
				if seq != 1 || c.name != "wrong offset" {
					t.Fatalf("events %v reached the reader", delivered)
				}
			}
		})
	}
	// An agentctl older than the stream: 404 as an *APIError.
	old := httptest.NewServer(http.NotFoundHandler())
	defer old.Close()
	var apiErr *agentctl.APIError
	if err := agentctl.NewClient(old.URL, "x", time.Second).Stream(ctx(t), agentctl.EventsQuery{}, func(agentctl.EventsResponse) error { return nil }); !errors.As(err, &apiErr) || apiErr.Status != 404 {
		t.Fatalf("an agentctl without the stream: %v, want a 404 APIError", err)
	}
}
