package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/shared/agentctl"
	"github.com/paddockhq/paddock/shared/runtime"
	"github.com/paddockhq/paddock/supervisor/cluster"
	"github.com/paddockhq/paddock/supervisor/plugins"
	"github.com/paddockhq/paddock/supervisor/sessions"
	"github.com/paddockhq/paddock/supervisor/state"
)

// Error codes of the JSON error body.
const (
	CodeBadRequest   = "bad_request"
	CodeUnauthorized = "unauthorized"
	CodeForbidden    = "forbidden"
	CodeNotFound     = "not_found"
	CodeConflict     = "conflict"
	CodeTooLarge     = "too_large"
	CodeUnavailable  = "unavailable"
	CodeInternal     = "internal"
)

// apiError is an error with its HTTP status and code.
type apiError struct {
	status int
	code   string
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func errorf(status int, code, format string, args ...any) error {
	return &apiError{status: status, code: code, msg: fmt.Sprintf(format, args...)}
}

func badRequest(format string, args ...any) error {
	return errorf(http.StatusBadRequest, CodeBadRequest, format, args...)
}

// classify maps an error to its status and code.
func classify(err error) (int, string) {
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		return ae.status, ae.code
	case errors.Is(err, state.ErrNotFound):
		return http.StatusNotFound, CodeNotFound
	case errors.Is(err, state.ErrConflict):
		return http.StatusConflict, CodeConflict
	case errors.Is(err, state.ErrInvalid):
		return http.StatusBadRequest, CodeBadRequest
	case errors.Is(err, cluster.ErrNoLeader), errors.Is(err, cluster.ErrNotLeader), errors.Is(err, sessions.ErrNotLeader), errors.Is(err, sessions.ErrUnavailable),
		errors.Is(err, plugins.ErrUnhealthy), errors.Is(err, runtime.ErrUnavailable), errors.Is(err, sessions.ErrNodeUnavailable):
		return http.StatusServiceUnavailable, CodeUnavailable
	case errors.Is(err, sessions.ErrNotRunning), errors.Is(err, sessions.ErrNotResumable):
		return http.StatusConflict, CodeConflict
	case errors.Is(err, plugins.ErrUnknownRuntime):
		return http.StatusBadRequest, CodeBadRequest
	}
	var agentErr *agentctl.APIError
	if errors.As(err, &agentErr) {
		switch agentErr.Status {
		case http.StatusBadRequest, http.StatusForbidden:
			return http.StatusBadRequest, CodeBadRequest
		case http.StatusNotFound:
			return http.StatusNotFound, CodeNotFound
		case http.StatusConflict:
			return http.StatusConflict, CodeConflict
		}
		return http.StatusBadGateway, CodeUnavailable
	}
	// A request this server made on the caller's behalf (to a session's
	// agentctl, say) that got no answer: the upstream failed, not this
	// server.
	var ue *url.Error
	if errors.As(err, &ue) {
		if ue.Timeout() {
			return http.StatusGatewayTimeout, CodeUnavailable
		}
		return http.StatusBadGateway, CodeUnavailable
	}
	return http.StatusInternalServerError, CodeInternal
}

type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func writeError(w http.ResponseWriter, err error) {
	status, code := classify(err)
	var body errorBody
	body.Error.Code, body.Error.Message = code, err.Error()
	writeJSON(w, status, body)
}

// bodyBuffers holds the buffers requests are read into and answers encoded
// into.
var bodyBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledBody is the largest buffer put back in bodyBuffers: a rare
// large body is not kept alive by the pool.
const maxPooledBody = 64 << 10

func bodyBuffer() *bytes.Buffer {
	buf := bodyBuffers.Get().(*bytes.Buffer)
	buf.Reset()
	return buf
}

func releaseBodyBuffer(buf *bytes.Buffer) {
	if buf.Cap() <= maxPooledBody {
		bodyBuffers.Put(buf)
	}
}

// writeJSON answers v as indented JSON. The body is encoded before anything
// is sent, so the response carries its Content-Length and goes out in one
// write (never chunked), and a value that cannot be encoded is answered as
// a clear 500 instead of a truncated body.
func writeJSON(w http.ResponseWriter, status int, v any) {
	buf := bodyBuffer()
	defer releaseBodyBuffer(buf)
	enc := json.NewEncoder(buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		buf.Reset()
		status = http.StatusInternalServerError
		var body errorBody
		body.Error.Code, body.Error.Message = CodeInternal, fmt.Sprintf("encode the response: %v", err)
		_ = enc.Encode(body)
	}
	writeEncoded(w, status, buf.Bytes())
}

// writeTask answers a task as writeJSON does, its JSON written by hand
// (state.AppendIndentedTask: the same bytes) unless a string in it needs
// escapes.
func writeTask(w http.ResponseWriter, status int, t api.Task) {
	buf := bodyBuffer()
	defer releaseBodyBuffer(buf)
	body, ok := state.AppendIndentedTask(buf.AvailableBuffer(), t)
	if !ok {
		writeJSON(w, status, t)
		return
	}
	writeEncoded(w, status, body)
}

// writeEncoded sends an encoded JSON body with its length.
func writeEncoded(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
