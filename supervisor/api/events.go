package api

import (
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/websocket"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/supervisor/state"
)

// WebSocket close codes of the events stream.
const (
	closeUnauthorized = 4401
	closeLagged       = 4408
)

// maxCloseReason is the most a close frame's reason may hold (125 bytes of
// payload, less the code).
const maxCloseReason = 123

const (
	// eventsReadLimit bounds a frame read from an events client.
	eventsReadLimit = 4 << 10
	// defaultSocketAuthTimeout is how long a WebSocket without a token
	// header has to send its first frame or hello (Options.SocketAuthTimeout).
	// Browsers send it as soon as the socket opens; until then the socket is
	// not counted against limits.max_websockets, so its wait is kept short.
	defaultSocketAuthTimeout = 2 * time.Second
	writeTimeout             = 10 * time.Second
	pingInterval             = 30 * time.Second
)

// checkOrigin allows requests with no Origin (CLIs), the API's own origin, and
// the configured api.allowed_origins. Comparing with the Host is sound
// because checkHost has already refused Hosts that are not this node's.
func (s *Server) checkOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	if err == nil && strings.EqualFold(u.Host, r.Host) {
		return true
	}
	for _, allowed := range s.cfg.API.AllowedOrigins {
		if allowed == "*" || strings.EqualFold(strings.TrimSuffix(allowed, "/"), origin) {
			return true
		}
	}
	return false
}

// checkHost refuses requests addressed to a name this node does not answer
// to. A web page whose own name resolves to this machine (DNS rebinding)
// talks to the API as its own origin; its Host header still carries the
// page's name. Accepted: IP addresses, localhost, the node name and the
// machine's hostname, and the hosts of api.allowed_origins ("*" there turns
// the check off).
func (s *Server) checkHost(r *http.Request) error {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if host == "" || net.ParseIP(host) != nil || strings.EqualFold(host, "localhost") ||
		strings.HasSuffix(strings.ToLower(host), ".localhost") || strings.EqualFold(host, s.cfg.NodeName) {
		return nil
	}
	if name, err := os.Hostname(); err == nil && strings.EqualFold(host, name) {
		return nil
	}
	for _, allowed := range s.cfg.API.AllowedOrigins {
		if allowed == "*" {
			return nil
		}
		if u, err := url.Parse(allowed); err == nil && strings.EqualFold(u.Hostname(), host) {
			return nil
		}
	}
	return errorf(http.StatusForbidden, CodeForbidden,
		"this node does not answer to the name %q; to reach it by that name, add its origin (such as \"http://%s:%s\") to api.allowed_origins",
		host, host, portOf(r.Host))
}

func portOf(hostport string) string {
	if _, p, err := net.SplitHostPort(hostport); err == nil {
		return p
	}
	return "80"
}

// upgrade checks the Origin (403 before any upgrade) and upgrades.
func (s *Server) upgrade(w http.ResponseWriter, r *http.Request) (*websocket.Conn, error) {
	if !s.checkOrigin(r) {
		return nil, errorf(http.StatusForbidden, CodeForbidden, "origin %q is not in api.allowed_origins", r.Header.Get("Origin"))
	}
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }, ReadBufferSize: 4096, WriteBufferSize: 16384}
	conn, err := up.Upgrade(w, r, nil)
	if err != nil {
		return nil, errUpgradeWritten
	}
	return conn, nil
}

// errUpgradeWritten means the upgrader has already answered the request.
var errUpgradeWritten = &apiError{status: http.StatusBadRequest, code: CodeBadRequest, msg: "websocket upgrade failed"}

// firstFrameAuth reads {"type":"auth","token":…} when the request carried no
// token header and a token is configured; acl.token and acl.read_token both
// pass.
func (s *Server) firstFrameAuth(conn *websocket.Conn, r *http.Request) bool {
	if s.cfg.ACL.Token == "" {
		return true
	}
	if _, present := requestToken(r); present {
		return true // checked before the upgrade
	}
	_ = conn.SetReadDeadline(time.Now().Add(s.socketAuthTimeout))
	var frame struct {
		Type  string `json:"type"`
		Token string `json:"token"`
	}
	typ, data, err := conn.ReadMessage()
	_ = conn.SetReadDeadline(time.Time{})
	if err == nil && typ == websocket.TextMessage && json.Unmarshal(data, &frame) == nil && frame.Type == "auth" {
		if _, ok := s.tokenAccess(frame.Token); ok {
			return true // either token may stream events
		}
	}
	closeWith(conn, closeUnauthorized, "unauthorized: first frame must be {\"type\":\"auth\",\"token\":…}")
	return false
}

func closeWith(conn *websocket.Conn, code int, reason string) {
	if len(reason) > maxCloseReason {
		reason = strings.ToValidUTF8(reason[:maxCloseReason], "") // drop a rune cut in two
	}
	msg := websocket.FormatCloseMessage(code, reason)
	_ = conn.WriteControl(websocket.CloseMessage, msg, time.Now().Add(time.Second))
	_ = conn.Close()
}

// events streams session events as JSON text frames. ?since=INDEX replays
// retained events after INDEX first. The stream is served by any node: every
// node applies the same log and keeps the same recent events.
func (s *Server) events(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	var since uint64
	if v := q.Get("since"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return badRequest("since must be a raft index (an unsigned integer), got %q", v)
		}
		since = n
	}
	deltas := false
	if v := q.Get("deltas"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return badRequest("deltas must be true or false, got %q", v)
		}
		deltas = b
	}
	f := state.EventFilter{SessionID: q.Get("session_id"), TaskID: q.Get("task_id")}
	conn, err := s.upgrade(w, r)
	if err != nil {
		if err == errUpgradeWritten {
			return nil
		}
		return err
	}
	defer conn.Close()
	// A client sends nothing but its auth frame: bound every read, the
	// first one (not yet authenticated) included.
	conn.SetReadLimit(eventsReadLimit)
	if !s.firstFrameAuth(conn, r) {
		return nil
	}
	if !socketSlotOf(r).admit() {
		closeWith(conn, websocket.CloseTryAgainLater, s.errTooManySockets().Error())
		return nil
	}
	// Events come encoded once for every subscriber of this node.
	sub := s.store.SubscribeEncoded(f, since)
	defer sub.Close()

	// The reader only watches for the client going away.
	gone := make(chan struct{})
	go func() {
		defer close(gone)
		for {
			if _, _, err := conn.ReadMessage(); err != nil {
				return
			}
		}
	}()
	ping := time.NewTicker(pingInterval)
	defer ping.Stop()
	var frames state.EventEncoder
	held := heldMessages{}
	for {
		select {
		case <-gone:
			return nil
		case <-ping.C:
			if err := conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(writeTimeout)); err != nil {
				return nil
			}
		case e, ok := <-sub.Encoded:
			if !ok {
				closeWith(conn, closeLagged, "subscriber fell behind; reconnect with ?since=<last index>")
				return nil
			}
			frame, err := held.frame(&frames, e, deltas)
			if err != nil {
				s.log.Error("encode an event", "type", e.Type, "index", e.Index, "error", err)
				return nil
			}
			_ = conn.SetWriteDeadline(time.Now().Add(writeTimeout))
			if err := conn.WriteMessage(websocket.TextMessage, frame); err != nil {
				return nil
			}
		}
	}
}

// heldMessages are the messages a subscription that takes deltas holds
// whole: each was sent whole (added, or updated) earlier in the
// subscription, and every event of it since, so an update that added text
// can be sent as what it added. Keyed by session and message id; a
// message leaves when it is complete, and the set is emptied when it grows
// past maxHeldMessages (its messages are then sent whole once more).
type heldMessages map[string]struct{}

const maxHeldMessages = 4096

// frame encodes e for the subscription: as a delta when it asked for
// deltas and holds e's message, whole otherwise.
func (h heldMessages) frame(frames *state.EventEncoder, e *state.EncodedEvent, deltas bool) ([]byte, error) {
	if !deltas || (e.Type != api.EventMessageAdded && e.Type != api.EventMessageUpdated) {
		return frames.JSON(e)
	}
	msg, _ := e.Data["message"].(api.Message)
	key := e.SessionID + "/" + msg.ID
	_, holds := h[key]
	if msg.Complete {
		delete(h, key)
	} else if !holds {
		if len(h) >= maxHeldMessages {
			clear(h)
		}
		h[key] = struct{}{}
	}
	if holds {
		if frame, ok, err := e.DeltaJSON(); ok {
			return frame, err
		}
	}
	return frames.JSON(e)
}
