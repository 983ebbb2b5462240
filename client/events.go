package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"

	"github.com/gorilla/websocket"
	"github.com/paddockhq/paddock/api"
)

// maxEventFrame bounds one event frame read from the server.
const maxEventFrame = 4 << 20

// ErrStreamClosed is returned by EventStream.Next after Close.
var ErrStreamClosed = errors.New("event stream closed")

// ErrLagged is returned (wrapped) by EventStream.Next when the server closed
// the stream because this subscriber fell behind (close code 4408). Nothing
// is lost: open a new stream with since = the Index of the last event read.
var ErrLagged = errors.New("event stream: subscriber fell behind")

// closeLagged is the server's close code for a subscriber that fell behind.
const closeLagged = 4408

// EventStream is a live stream of session events from GET /v1/events. Next must
// be called from one goroutine; Close may be called from any.
type EventStream struct {
	conn      *websocket.Conn
	stopWatch func() bool
	closeOnce sync.Once
	mu        sync.Mutex
	closed    bool
}

// Events opens the event stream selected by filter. With since > 0 the server
// first replays the events after raft index since. The stream ends when ctx is
// cancelled or Close is called; the per-call timeout does not apply to it, only
// to the WebSocket handshake.
func (c *Client) Events(ctx context.Context, filter EventFilter, since uint64) (*EventStream, error) {
	q := url.Values{}
	if filter.SessionID != "" {
		q.Set("session_id", filter.SessionID)
	}
	if filter.TaskID != "" {
		q.Set("task_id", filter.TaskID)
	}
	if since > 0 {
		q.Set("since", strconv.FormatUint(since, 10))
	}
	u := c.endpoint("/v1/events", q)
	if u.Scheme == "https" {
		u.Scheme = "wss"
	} else {
		u.Scheme = "ws"
	}
	h := http.Header{}
	c.authorize(h)
	dialer := *websocket.DefaultDialer
	if c.timeout > 0 {
		dialer.HandshakeTimeout = c.timeout
	}
	if tc := c.TLS(); tc != nil {
		dialer.TLSClientConfig = tc
	}
	conn, resp, err := dialer.DialContext(ctx, u.String(), h)
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			defer resp.Body.Close()
			return nil, decodeAPIError(resp)
		}
		return nil, c.transportError(request{method: http.MethodGet, path: "/v1/events"}, err)
	}
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	conn.SetReadLimit(maxEventFrame)
	s := &EventStream{conn: conn}
	// Closing the connection unblocks a pending Next when ctx ends; AfterFunc
	// runs no goroutine until then and is stopped by Close.
	stop := context.AfterFunc(ctx, func() { s.Close() })
	s.mu.Lock()
	s.stopWatch = stop
	s.mu.Unlock()
	return s, nil
}

// Next blocks for the next event. It returns ErrStreamClosed after Close (or
// when the context given to Events ends), io.EOF when the server closed the
// stream normally, an error wrapping ErrLagged when the server dropped this
// subscriber for falling behind, and a descriptive error for a malformed
// frame.
func (s *EventStream) Next() (api.Event, error) {
	for {
		mt, data, err := s.conn.ReadMessage()
		if err != nil {
			if s.isClosed() {
				return api.Event{}, ErrStreamClosed
			}
			if websocket.IsCloseError(err, websocket.CloseNormalClosure, websocket.CloseGoingAway) {
				return api.Event{}, io.EOF
			}
			if websocket.IsCloseError(err, closeLagged) {
				return api.Event{}, fmt.Errorf("%w (%v); reopen with since=<last index>", ErrLagged, err)
			}
			return api.Event{}, fmt.Errorf("read event: %w", err)
		}
		if mt != websocket.TextMessage {
			continue // events are text frames; ignore anything else
		}
		var ev api.Event
		if err := json.Unmarshal(data, &ev); err != nil {
			return api.Event{}, fmt.Errorf("malformed event frame: %w", err)
		}
		if ev.Type == "" {
			return api.Event{}, fmt.Errorf("malformed event frame: no type")
		}
		return ev, nil
	}
}

func (s *EventStream) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Close ends the stream and releases its connection. It is safe to call more
// than once and concurrently with Next.
func (s *EventStream) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		stop := s.stopWatch
		s.mu.Unlock()
		if stop != nil {
			stop()
		}
		err = s.conn.Close()
	})
	return err
}
