package api

import (
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
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
