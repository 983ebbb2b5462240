package api

import (
	"errors"
	"io"
	"net"
	"net/http"
	"time"
)

// Read deadlines of request bodies. net/http bounds the headers
// (ReadHeaderTimeout) and idle connections (IdleTimeout); a body is read by
// the handler, at whatever pace the client sends it, so the API bounds it.
const (
	// defaultBodyTimeout bounds reading a body once the request has
	// authenticated (Options.BodyTimeout).
	defaultBodyTimeout = 30 * time.Second
	// defaultBigBodyTimeout is the same for the bigBody routes (snapshot
	// restores of up to 1 GiB; Options.BigBodyTimeout).
	defaultBigBodyTimeout = 10 * time.Minute
	// refusedBodyGrace is how long a refused request's unread body is still
	// read: a client that sends its body at once has it drained and reads
	// the answer; one that trickles is cut off.
	refusedBodyGrace = time.Second
)

// requestBody is a request's body as the API reads it. It records whether
// the body has been read to its end, so that a refusal ends the connection
// rather than draining the rest. Its read deadline is the connection's;
// net/http clears it when the body has been read to its end (and it starts
// watching for the client going away), so a handler that works on after
// reading its body is not cut off.
type requestBody struct {
	io.ReadCloser
	rc    *http.ResponseController
	http1 bool      // net/http drains (or closes) an HTTP/1 connection's unread body
	until time.Time // the body's read deadline; zero: none
	eof   bool      // the body has been read to its end
}

// trackBody returns r with its body wrapped, and the wrapper (nil when r has
// no body). The wrapper goes on a copy of r: net/http ends a connection by
// what the Body of its own request records (a body closed early gets a
// graceful close rather than a reset that can lose the answer), so that Body
// must stay its own.
func trackBody(w http.ResponseWriter, r *http.Request) (*http.Request, *requestBody) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return r, nil
	}
	b := &requestBody{ReadCloser: r.Body, rc: http.NewResponseController(w), http1: r.ProtoMajor == 1}
	r = r.WithContext(r.Context())
	r.Body = b
	return r, b
}

// bodyOf is the requestBody trackBody put on r, or nil.
func bodyOf(r *http.Request) *requestBody {
	b, _ := r.Body.(*requestBody)
	return b
}

func (b *requestBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

// setDeadline bounds reading the rest of the body to d from now.
func (b *requestBody) setDeadline(d time.Duration) {
	if b == nil || b.eof {
		return
	}
	until := time.Now().Add(d)
	if b.rc.SetReadDeadline(until) == nil {
		b.until = until
	}
}

// refused is called before a refusal is written. A body that was not read to
// its end is not drained: on a connection it means to keep, net/http reads up
// to 256 KiB of an unread body before it sends the answer, a 401 too, at the
// pace of a client that may hold no token. Connection: close makes net/http
// skip that and end the connection after the answer, and a read deadline
// (refusedBodyGrace, or the body's own when sooner) bounds what it still
// reads when it closes the body.
func (b *requestBody) refused(w http.ResponseWriter) {
	if b == nil || b.eof || !b.http1 {
		return
	}
	w.Header().Set("Connection", "close")
	if grace := time.Now().Add(refusedBodyGrace); b.until.IsZero() || grace.Before(b.until) {
		_ = b.rc.SetReadDeadline(grace)
	}
}

// bodyError answers a failed read of a request's body (what names it):
// 413 past its size limit, 408 past its read deadline, else 400.
func bodyError(what string, err error) error {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return errorf(http.StatusRequestEntityTooLarge, CodeTooLarge, "%s exceeds api.max_body (%d bytes)", what, tooBig.Limit)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return errorf(http.StatusRequestTimeout, CodeBadRequest, "%s did not arrive in time: send it whole, at once", what)
	}
	return badRequest("read %s: %v", what, err)
}
