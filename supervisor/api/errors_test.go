package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/shared/agentctl"
	"github.com/paddockhq/paddock/supervisor/sessions"
)

// TestWriteJSONAnswersAnUnencodableValueAs500 checks that a value JSON
// cannot encode is answered as a clear internal error with its own length,
// not as the handler's status with a truncated body.
func TestWriteJSONAnswersAnUnencodableValueAs500(t *testing.T) {
	rec := httptest.NewRecorder()
	writeJSON(rec, http.StatusOK, map[string]float64{"x": math.NaN()})
	if rec.Code != http.StatusInternalServerError {
		t.Fatalf("status %d, want 500", rec.Code)
	}
	var body errorBody
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("body %q: %v", rec.Body, err)
	}
	if body.Error.Code != CodeInternal || !strings.Contains(body.Error.Message, "encode the response") {
		t.Errorf("error body %+v", body)
	}
	if got := rec.Header().Get("Content-Length"); got != strconv.Itoa(rec.Body.Len()) {
		t.Errorf("Content-Length %q for %d bytes", got, rec.Body.Len())
	}
}

// TestANodeThatDoesNotAnswerIs503: a call that needed a node which does not
// answer (its runtime, for a drain or a destroy) is "unavailable", not an
// internal error.
func TestANodeThatDoesNotAnswerIs503(t *testing.T) {
	err := fmt.Errorf("stop executor ex-1: runtime %q: %w", "standalone", errors.Join(sessions.ErrNodeUnavailable, errors.New("dial tcp 10.0.0.2:7700: connection refused")))
	if status, code := classify(err); status != http.StatusServiceUnavailable || code != CodeUnavailable {
		t.Fatalf("classify = %d %s; want 503 %s", status, code, CodeUnavailable)
	}
}

// TestAnAgentctlThatDoesNotAnswerIsABadGateway: a workspace call whose
// agentctl is gone (a real client's dial refused) is 502, and one that
// timed out 504, both "unavailable": the server relayed it, it did not
// fail itself (it was 500 internal).
func TestAnAgentctlThatDoesNotAnswerIsABadGateway(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	_, err = agentctl.NewClient("http://"+addr, "secret", 2*time.Second).ListFiles(context.Background(), "")
	if err == nil {
		t.Fatal("a call to a closed port succeeded")
	}
	if status, code := classify(err); status != http.StatusBadGateway || code != CodeUnavailable {
		t.Errorf("refused: classify(%v) = %d %s; want 502 %s", err, status, code, CodeUnavailable)
	}

	stall, err := net.Listen("tcp", "127.0.0.1:0") // accepts, never answers
	if err != nil {
		t.Fatal(err)
	}
	defer stall.Close()
	_, err = agentctl.NewClient("http://"+stall.Addr().String(), "secret", 200*time.Millisecond).ListFiles(context.Background(), "")
	if status, code := classify(err); status != http.StatusGatewayTimeout || code != CodeUnavailable {
		t.Errorf("timed out: classify(%v) = %d %s; want 504 %s", err, status, code, CodeUnavailable)
	}
}
