package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// DefaultAddress is the supervisor HTTP address used when none is given.
const DefaultAddress = "http://127.0.0.1:7700"

// DefaultTimeout bounds every request whose context carries no deadline.
const DefaultTimeout = 30 * time.Second

// maxErrorBody caps how much of a non-JSON error body is read into a message.
const maxErrorBody = 4 << 10

// Client talks to one supervisor node's HTTP API. It is safe for concurrent use.
type Client struct {
	base    *url.URL
	token   string
	http    *http.Client
	timeout time.Duration
	stale   bool
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient makes the Client send requests with hc instead of a default
// http.Client.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) {
		if hc != nil {
			c.http = hc
		}
	}
}

// WithTimeout sets the timeout applied to a call whose context has no deadline
// (DefaultTimeout if unset; zero or negative disables it). Event streams are
// never subject to it.
func WithTimeout(d time.Duration) Option {
	return func(c *Client) { c.timeout = d }
}

// WithStaleReads makes every read ask for the local node's state (?stale=true)
// instead of a consistent read from the leader.
func WithStaleReads(stale bool) Option {
	return func(c *Client) { c.stale = stale }
}

// New returns a Client for the supervisor at address ("http://host:port"; a bare
// "host:port" means http). An empty address means DefaultAddress; an empty token
// sends no Authorization header.
func New(address, token string, opts ...Option) (*Client, error) {
	base, err := ParseAddress(address)
	if err != nil {
		return nil, err
	}
	c := &Client{
		base:    base,
		token:   token,
		http:    &http.Client{},
		timeout: DefaultTimeout,
	}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// ParseAddress validates a supervisor address and returns it as a base URL.
// A missing scheme means http; only http and https are accepted.
func ParseAddress(address string) (*url.URL, error) {
	address = strings.TrimSpace(address)
	if address == "" {
		address = DefaultAddress
	}
	if !strings.Contains(address, "://") {
		address = "http://" + address
	}
	u, err := url.Parse(address)
	if err != nil {
		return nil, fmt.Errorf("invalid address %q: %w", address, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("invalid address %q: scheme must be http or https", address)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("invalid address %q: no host", address)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawQuery, u.Fragment = "", ""
	return u, nil
}

// Address returns the base URL the Client talks to.
func (c *Client) Address() string { return c.base.String() }

// CallOption adjusts one call.
type CallOption func(*callConfig)

type callConfig struct {
	stale   bool
	force   bool
	capture *[]byte
}

// Stale makes a read serve the local node's state (?stale=true) rather than a
// consistent read from the leader. Writes ignore it.
func Stale() CallOption {
	return func(cc *callConfig) { cc.stale = true }
}

// Force makes a delete go through while the session's node does not answer
// (?force=true): the session is COMPLETED at once and its executor and
// workspace are removed when the node answers again. Other calls ignore it.
func Force() CallOption {
	return func(cc *callConfig) { cc.force = true }
}

// CaptureBody stores the raw body of a successful JSON response in *dst, for
// callers (like the CLI's -json) that want the server's exact JSON.
func CaptureBody(dst *[]byte) CallOption {
	return func(cc *callConfig) { cc.capture = dst }
}

func (c *Client) callConfig(opts []CallOption) callConfig {
	cc := callConfig{stale: c.stale}
	for _, o := range opts {
		o(&cc)
	}
	return cc
}

// endpoint builds the URL of an API path (segments are escaped by the caller
// with url.PathEscape).
func (c *Client) endpoint(path string, query url.Values) *url.URL {
	u := *c.base
	raw := c.base.EscapedPath() + path
	unescaped, err := url.PathUnescape(raw)
	if err != nil {
		unescaped = raw // only reachable with a caller bug; the server will refuse it
	}
	u.Path, u.RawPath = unescaped, raw
	if len(query) > 0 {
		u.RawQuery = query.Encode()
	}
	return &u
}

// request is one HTTP call to the API.
type request struct {
	method      string
	path        string // already escaped
	query       url.Values
	read        bool // a read: honours stale
	body        io.Reader
	contentType string
	accept      string
}

// send performs req and returns the response for a 2xx status; any other status
// becomes an *APIError. The caller closes the body and calls cancel.
func (c *Client) send(ctx context.Context, req request, cc callConfig) (*http.Response, context.CancelFunc, error) {
	cancel := context.CancelFunc(func() {})
	if _, ok := ctx.Deadline(); !ok && c.timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
	}
	q := req.query
	if req.read && cc.stale {
		if q == nil {
			q = url.Values{}
		}
		q.Set("stale", "true")
	}
	u := c.endpoint(req.path, q)
	hreq, err := http.NewRequestWithContext(ctx, req.method, u.String(), req.body)
	if err != nil {
		cancel()
		return nil, nil, fmt.Errorf("%s %s: %w", req.method, req.path, err)
	}
	if req.body != nil {
		ct := req.contentType
		if ct == "" {
			ct = "application/json"
		}
		hreq.Header.Set("Content-Type", ct)
	}
	accept := req.accept
	if accept == "" {
		accept = "application/json"
	}
	hreq.Header.Set("Accept", accept)
	c.authorize(hreq.Header)
	resp, err := c.http.Do(hreq)
	if err != nil {
		cancel()
		return nil, nil, c.transportError(req, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer cancel()
		defer resp.Body.Close()
		return nil, nil, decodeAPIError(resp)
	}
	return resp, cancel, nil
}

func (c *Client) authorize(h http.Header) {
	if c.token != "" {
		h.Set("Authorization", "Bearer "+c.token)
	}
}

// transportError turns a failed round trip into one readable line that names
// the server, without repeating the full URL.
func (c *Client) transportError(req request, err error) error {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s %s on %s: timed out: %w", req.method, req.path, c.base, err)
	}
	return fmt.Errorf("cannot reach paddock at %s: %w", c.base, err)
}

// do performs a JSON call: in (if non-nil) is the request body, out (if non-nil)
// receives the decoded response.
// withParam is query (left as it is) with key set to value.
func withParam(query url.Values, key, value string) url.Values {
	out := url.Values{}
	for k, v := range query {
		out[k] = v
	}
	out.Set(key, value)
	return out
}

func (c *Client) do(ctx context.Context, method, path string, query url.Values, in, out any, opts []CallOption) error {
	cc := c.callConfig(opts)
	if cc.force && method == http.MethodDelete {
		query = withParam(query, "force", "true")
	}
	req := request{method: method, path: path, query: query, read: method == http.MethodGet}
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("%s %s: encode request: %w", method, path, err)
		}
		req.body = bytes.NewReader(b)
	}
	resp, cancel, err := c.send(ctx, req, cc)
	if err != nil {
		return err
	}
	defer cancel()
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("%s %s: read response: %w", method, path, err)
	}
	if cc.capture != nil {
		*cc.capture = body
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("%s %s: malformed response from server: %w", method, path, err)
	}
	return nil
}

// APIError is an error answered by the API: the HTTP status and the body's
// {"error":{"code","message"}}. Codes include bad_request, unauthorized,
// forbidden, not_found, conflict and unavailable.
type APIError struct {
	Status  int
	Code    string
	Message string
}

// Error renders the message and code on one line, e.g.
// `session "x" not found (not_found)`.
func (e *APIError) Error() string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	if e.Code == "" {
		return msg
	}
	return fmt.Sprintf("%s (%s)", msg, e.Code)
}

// IsCode reports whether err is an *APIError with the given code.
func IsCode(err error, code string) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Code == code
}

// codeForStatus names the error code the API would use for a status, for
// error bodies that carry none (a proxy's HTML page, an empty body).
func codeForStatus(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "bad_request"
	case http.StatusUnauthorized:
		return "unauthorized"
	case http.StatusForbidden:
		return "forbidden"
	case http.StatusNotFound:
		return "not_found"
	case http.StatusConflict:
		return "conflict"
	case http.StatusServiceUnavailable:
		return "unavailable"
	default:
		return fmt.Sprintf("http_%d", status)
	}
}

// decodeAPIError reads a non-2xx response into an *APIError. It never fails:
// a body that is not the API's error shape yields the status's default code and
// the body's first line (or the status text) as the message.
func decodeAPIError(resp *http.Response) *APIError {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	return parseAPIError(resp.StatusCode, body)
}

func parseAPIError(status int, body []byte) *APIError {
	var env struct {
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	ae := &APIError{Status: status}
	if err := json.Unmarshal(body, &env); err == nil && env.Error != nil && (env.Error.Code != "" || env.Error.Message != "") {
		ae.Code = oneLine(env.Error.Code)
		ae.Message = oneLine(env.Error.Message)
		if ae.Code == "" {
			ae.Code = codeForStatus(status)
		}
		return ae
	}
	ae.Code = codeForStatus(status)
	msg := oneLine(string(body))
	if msg == "" || strings.HasPrefix(msg, "<") || strings.HasPrefix(msg, "{") {
		msg = fmt.Sprintf("server answered %d %s", status, http.StatusText(status))
	}
	ae.Message = msg
	return ae
}

// oneLine trims s to its first line, at most 200 characters of valid UTF-8.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	if r := []rune(s); len(r) > 200 {
		s = string(r[:200]) + "…"
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
