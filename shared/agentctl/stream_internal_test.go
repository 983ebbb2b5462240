package agentctl

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// A stream that sends no frame for the heartbeat and the client's timeout
// ends with an error naming the silence (an agentctl that stopped
// answering), and a quiet stream gets its heartbeat frames in time.
func TestASilentEventStreamEnds(t *testing.T) {
	defer func(h time.Duration) { streamHeartbeat = h }(streamHeartbeat)
	streamHeartbeat = 200 * time.Millisecond

	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		http.NewResponseController(w).Flush()
		<-r.Context().Done()
	}))
	defer hung.Close()
	started := time.Now()
	err := NewClient(hung.URL, "x", 100*time.Millisecond).Stream(context.Background(), EventsQuery{}, func(EventsResponse) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "no frame from agentctl's event stream in 300ms") {
		t.Fatalf("a silent stream ended with %v, want it to name the 300ms without a frame", err)
	}
	if took := time.Since(started); took > 5*time.Second {
		t.Fatalf("the silent stream ended after %s", took)
	}

	// A real agentctl, quiet: heartbeats keep the stream open.
	srv, err := NewServer(Options{SessionID: "s1", Workspace: t.TempDir(), Secret: "x"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	frames := 0
	err = NewClient(hs.URL, "x", 100*time.Millisecond).Stream(ctx, EventsQuery{Since: 1}, func(f EventsResponse) error {
		if len(f.Events) != 0 || f.Nonce != srv.Nonce() {
			t.Errorf("a quiet agentctl's frame: %+v", f)
		}
		if frames++; frames == 5 {
			return context.Canceled
		}
		return nil
	})
	if err != context.Canceled {
		t.Fatalf("the quiet stream ended with %v after %d heartbeat frames, want 5 of them", err, frames)
	}
}
