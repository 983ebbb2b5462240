// Package terminal is the supervisor's side of terminal WebSockets: it accepts a
// client's paddock.terminal.v1 connection for GET /v1/sessions/{id}/terminal, checks
// a browser's hello token when asked to, dials the session's agentctl terminal with the
// executor's secret and relays frames both ways without buffering beyond one message
// (so agentctl's credit-based flow control reaches the client), propagating close codes
// (4001 taken_over, …).
//
// The API checks the Origin and the header token before calling Serve or Accept. This
// package may import shared/term (the codec) but nothing else of the supervisor.
package terminal

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/hashicorp/go-hclog"

	"github.com/paddockhq/paddock/api/termproto"
	"github.com/paddockhq/paddock/shared/agentctl/pin"
	"github.com/paddockhq/paddock/shared/term"
)

// Close codes sent by the relay itself (agentctl's own codes pass through unchanged).
const (
	// CloseUnauthorized ends a connection whose hello token was refused.
	CloseUnauthorized = termproto.CloseUnauthorized
	// CloseForbidden ends a connection whose hello carried the read-only token.
	CloseForbidden = 4403
	// CloseUnavailable ends a connection when agentctl cannot be reached; clients retry.
	CloseUnavailable = websocket.CloseTryAgainLater
)

// Timeouts of the relay.
const (
	helloTimeout     = 10 * time.Second
	handshakeTimeout = 10 * time.Second
	closeGrace       = time.Second
)

// Target says where to relay one client connection.
type Target struct {
	// URL is agentctl's base URL (http://host:port), state.Executor.AgentctlURL.
	URL string
	// Fingerprint, when set, is agentctl's certificate fingerprint
	// (state.Executor.AgentctlFingerprint): the https/wss connection accepts
	// only that certificate.
	Fingerprint string
	// Secret is the executor's agentctl secret (sent as Authorization: Bearer).
	Secret string
	// Name is the terminal name (the request's ?name=, "shell" if empty).
	Name string
	// HelloToken, when not empty, is the acl.token the client's hello must carry: set it
	// when the request came without a token header (browsers). Compared in constant time;
	// never forwarded.
	HelloToken string
	// ReadOnlyToken, when not empty, is acl.read_token: a hello carrying it is refused
	// with CloseForbidden (that token opens no terminal), not as a wrong token.
	ReadOnlyToken string
	// HelloTimeout bounds the wait for the client's hello (10s if zero). A client
	// that has not sent it in time is closed: with CloseUnauthorized when
	// HelloToken is set, else CloseBadHello.
	HelloTimeout time.Duration
	// Logger receives diagnostics (a null logger if nil). Secrets are never logged.
	Logger hclog.Logger
}

// writeBuffers lends the clients' sockets a write buffer only while a message is being
// sent, so the many idle terminal connections hold none (a pool is a cache, safe for
// concurrent use; its contents may be dropped at any GC).
var writeBuffers sync.Pool

// inputBuffers does the same for the sockets to agentctl (input, small buffers):
// a pool holds buffers of one size.
var inputBuffers sync.Pool

var upgrader = websocket.Upgrader{
	ReadBufferSize: 16 << 10,
	// A whole live output frame (header included) fits, so each is one write.
	WriteBufferSize: term.MaxLiveChunk + 64,
	WriteBufferPool: &writeBuffers,
	Subprotocols:    []string{termproto.Subprotocol},
	// The API has checked the Origin before calling Serve.
	CheckOrigin: func(*http.Request) bool { return true },
}

// Serve accepts a client (Accept) and relays it to agentctl (Client.Relay). It
// returns when both directions have ended.
func Serve(w http.ResponseWriter, r *http.Request, t Target) {
	c := Accept(w, r, t)
	if c == nil {
		return
	}
	defer c.Close()
	c.Relay(r.Context(), t)
}

// Client is a client's terminal connection whose hello has been read and
// accepted. Relay connects it to agentctl; Fail refuses it instead.
type Client struct {
	conn  *websocket.Conn
	hello []byte // the hello without its token, as agentctl gets it
	log   hclog.Logger
}

// Accept upgrades r (which must ask for subprotocol paddock.terminal.v1), reads
// the client's hello within t.HelloTimeout and checks its token if t.HelloToken
// is set. Query parameters cols and rows fill a hello that omits its size.
// Refusals before the upgrade are JSON errors (400); after it, an error frame and
// a close code: 4000 bad hello, 4003 unauthorized (a wrong token, or no hello in
// time when one is expected), 4403 the read-only token. It returns nil when it
// has refused the client.
func Accept(w http.ResponseWriter, r *http.Request, t Target) *Client {
	t = t.withDefaults()
	log := t.Logger.With("terminal", t.Name)
	if !websocket.IsWebSocketUpgrade(r) {
		httpError(w, http.StatusBadRequest, "this endpoint is a WebSocket (subprotocol "+termproto.Subprotocol+")")
		return nil
	}
	hasProto := false
	for _, p := range websocket.Subprotocols(r) {
		hasProto = hasProto || p == termproto.Subprotocol
	}
	if !hasProto {
		httpError(w, http.StatusBadRequest, "WebSocket subprotocol "+termproto.Subprotocol+" required")
		return nil
	}
	conn, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		log.Debug("terminal upgrade failed", "error", err)
		return nil // the upgrader has answered
	}
	conn.SetReadLimit(termproto.MaxFrameBytes)
	hello, ok := readHello(conn, r, t)
	if !ok {
		_ = conn.Close()
		return nil
	}
	return &Client{conn: conn, hello: hello, log: log}
}

// Fail refuses an accepted client: an error frame with code and msg, then
// closeCode.
func (c *Client) Fail(code, msg string, closeCode int) {
	failClient(c.conn, code, msg, closeCode)
}

// Close closes the client's connection.
func (c *Client) Close() error { return c.conn.Close() }

// Relay dials agentctl's /v1/terminals/{name} at t.URL with t.Secret, forwards
// the hello and relays until either side closes, propagating close codes. When
// agentctl cannot be reached the client gets an error frame and 1013. It returns
// when both directions have ended.
func (c *Client) Relay(ctx context.Context, t Target) {
	t = t.withDefaults()
	target, err := terminalURL(t.URL, t.Name)
	if err != nil {
		c.Fail("unavailable", err.Error(), CloseUnavailable)
		return
	}
	d := websocket.Dialer{
		Proxy:            nil,
		HandshakeTimeout: handshakeTimeout,
		Subprotocols:     []string{termproto.Subprotocol},
		ReadBufferSize:   term.MaxLiveChunk + 64,
		WriteBufferSize:  16 << 10,
		WriteBufferPool:  &inputBuffers,
	}
	if t.Fingerprint != "" {
		d.TLSClientConfig = pin.ClientConfig(t.Fingerprint)
	}
	hdr := http.Header{"Authorization": []string{"Bearer " + t.Secret}}
	upstream, resp, err := d.DialContext(ctx, target, hdr)
	if err != nil {
		msg := fmt.Sprintf("cannot reach the session's terminal %q: %v", t.Name, err)
		if resp != nil {
			msg = fmt.Sprintf("the session's agentctl refused terminal %q: %s", t.Name, upstreamError(resp, c.log))
		}
		c.log.Warn("dial agentctl terminal", "status", statusOf(resp), "error", err)
		c.Fail("unavailable", msg, CloseUnavailable)
		return
	}
	defer upstream.Close()
	upstream.SetReadLimit(termproto.MaxFrameBytes + 64)
	if err := upstream.WriteMessage(websocket.TextMessage, c.hello); err != nil {
		c.Fail("unavailable", "forward hello to agentctl: "+err.Error(), CloseUnavailable)
		return
	}
	relay(c.conn, upstream, c.log)
}

// withDefaults fills the fields left empty: the terminal name, the logger and
// the hello timeout.
func (t Target) withDefaults() Target {
	if t.Name == "" {
		t.Name = "shell"
	}
	if t.Logger == nil {
		t.Logger = hclog.NewNullLogger()
	}
	if t.HelloTimeout <= 0 {
		t.HelloTimeout = helloTimeout
	}
	return t
}

// readHello reads and checks the client's first message and returns it re-encoded
// without the token.
func readHello(c *websocket.Conn, r *http.Request, t Target) ([]byte, bool) {
	_ = c.SetReadDeadline(time.Now().Add(t.HelloTimeout))
	typ, b, err := c.ReadMessage()
	_ = c.SetReadDeadline(time.Time{})
	if err != nil {
		var ne net.Error
		switch {
		case !errors.As(err, &ne) || !ne.Timeout():
			// The client went away.
		case t.HelloToken != "":
			failClient(c, termproto.CodeUnauth, fmt.Sprintf("unauthorized: no hello with the token within %s", t.HelloTimeout), CloseUnauthorized)
		default:
			failClient(c, termproto.CodeBadRequest, fmt.Sprintf("no hello within %s", t.HelloTimeout), termproto.CloseBadHello)
		}
		return nil, false
	}
	if typ != websocket.TextMessage {
		failClient(c, termproto.CodeBadRequest, "the first message must be a JSON hello", termproto.CloseBadHello)
		return nil, false
	}
	// A hello without a size takes it from the query (?cols=&rows=).
	fillSize(&b, r.URL.Query())
	msg, err := termproto.DecodeClientMessage(b)
	if err != nil {
		failClient(c, termproto.CodeBadRequest, "hello: "+err.Error(), termproto.CloseBadHello)
		return nil, false
	}
	h, ok := msg.(termproto.Hello)
	if !ok {
		failClient(c, termproto.CodeBadRequest, "the first message must be a hello, got "+msg.MessageType(), termproto.CloseBadHello)
		return nil, false
	}
	if t.HelloToken != "" && subtle.ConstantTimeCompare([]byte(h.Token), []byte(t.HelloToken)) != 1 {
		if t.ReadOnlyToken != "" && subtle.ConstantTimeCompare([]byte(h.Token), []byte(t.ReadOnlyToken)) == 1 {
			failClient(c, "forbidden", "forbidden: the read-only token (acl.read_token) cannot open terminals; use acl.token", CloseForbidden)
			return nil, false
		}
		failClient(c, termproto.CodeUnauth, "unauthorized: send the token in the hello or a header", CloseUnauthorized)
		return nil, false
	}
	h.Token = ""
	out, err := termproto.EncodeMessage(h)
	if err != nil {
		failClient(c, termproto.CodeInternal, err.Error(), websocket.CloseInternalServerErr)
		return nil, false
	}
	return out, true
}

// fillSize adds cols and rows from the query to a hello object that lacks them.
func fillSize(b *[]byte, q url.Values) {
	cols, errC := strconv.Atoi(q.Get("cols"))
	rows, errR := strconv.Atoi(q.Get("rows"))
	if errC != nil || errR != nil || len(*b) > termproto.MaxControlBytes {
		return
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(*b, &obj) != nil {
		return // the decoder reports it
	}
	if _, ok := obj["cols"]; ok {
		return
	}
	if _, ok := obj["rows"]; ok {
		return
	}
	obj["cols"], _ = json.Marshal(cols)
	obj["rows"], _ = json.Marshal(rows)
	if out, err := json.Marshal(obj); err == nil {
		*b = out
	}
}

// relay copies messages both ways, one goroutine per direction, each the only writer
// of its destination socket, until one side ends; then it closes the other with the
// same close code.
func relay(client, upstream *websocket.Conn, log hclog.Logger) {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		err := pump(upstream, client)
		log.Trace("client → agentctl ended", "error", err)
		forwardClose(upstream, err)
		// Let agentctl answer the close, then end the other direction's read.
		_ = upstream.SetReadDeadline(time.Now().Add(closeGrace))
	}()
	go func() {
		defer wg.Done()
		err := pump(client, upstream)
		log.Trace("agentctl → client ended", "error", err)
		forwardClose(client, err)
		_ = client.SetReadDeadline(time.Now().Add(closeGrace))
	}()
	wg.Wait()
}

// pump copies whole messages from src to dst (streaming each, type untouched) until
// reading or writing fails, and returns that error. Each message is read straight into
// dst's write buffer (the writer's ReadFrom) and sent when it ends: one copy, no
// allocation per message, and a live output frame fits the buffer whole.
func pump(dst, src *websocket.Conn) error {
	for {
		typ, r, err := src.NextReader()
		if err != nil {
			return err
		}
		w, err := dst.NextWriter(typ)
		if err != nil {
			return err
		}
		if _, err := io.Copy(w, r); err != nil {
			_ = w.Close()
			return err
		}
		if err := w.Close(); err != nil {
			return err
		}
	}
}

// forwardClose sends dst the close code that ended the other side (1001 going away
// when it just dropped).
func forwardClose(dst *websocket.Conn, cause error) {
	code, text := websocket.CloseGoingAway, "the other side went away"
	var ce *websocket.CloseError
	if errors.As(cause, &ce) {
		code, text = ce.Code, ce.Text
		if code == websocket.CloseNoStatusReceived || code == websocket.CloseAbnormalClosure {
			code, text = websocket.CloseGoingAway, "the other side went away"
		}
	}
	msg := websocket.FormatCloseMessage(code, text)
	_ = dst.WriteControl(websocket.CloseMessage, msg, time.Now().Add(closeGrace))
}

func failClient(c *websocket.Conn, code, msg string, closeCode int) {
	if b, err := termproto.EncodeMessage(termproto.Error{Code: code, Message: msg}); err == nil {
		_ = c.SetWriteDeadline(time.Now().Add(closeGrace))
		_ = c.WriteMessage(websocket.TextMessage, b)
	}
	_ = c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(closeCode, truncate(msg, 120)), time.Now().Add(closeGrace))
}

// truncate keeps a close reason within the 123 bytes a close frame allows.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// terminalURL turns agentctl's http(s) base URL into the terminal's ws(s) URL.
func terminalURL(base, name string) (string, error) {
	u, err := url.Parse(base)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("invalid agentctl URL %q", base)
	}
	switch u.Scheme {
	case "http":
		u.Scheme = "ws"
	case "https":
		u.Scheme = "wss"
	case "ws", "wss":
	default:
		return "", fmt.Errorf("invalid agentctl URL scheme %q", u.Scheme)
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/terminals/" + url.PathEscape(name)
	u.RawQuery = ""
	return u.String(), nil
}

// upstreamError describes agentctl's refusal: its status, and the message of
// an error in agentctl's own JSON shape. Anything else the address answers
// is logged, never relayed: the executor's address is replicated state, and
// echoing what any server there says would let a forged address read it.
func upstreamError(resp *http.Response, log hclog.Logger) string {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	_ = resp.Body.Close()
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &e) == nil && e.Error.Code != "" && e.Error.Message != "" && len(e.Error.Message) <= 512 {
		return resp.Status + ": " + e.Error.Message
	}
	log.Debug("a terminal's upstream refused with a body that is not agentctl's", "status", resp.Status, "body", strings.TrimSpace(string(b)))
	return resp.Status
}

func statusOf(resp *http.Response) int {
	if resp == nil {
		return 0
	}
	return resp.StatusCode
}

func httpError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": termproto.CodeBadRequest, "message": msg}})
}
