package agentctl

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/paddockhq/paddock/api"
)

// DefaultTimeout bounds every Client call (long polls add their wait).
const DefaultTimeout = 15 * time.Second

// transport is the connection pool every Client of a process shares. A
// supervisor talks to thousands of agentctls at once (a long poll, lease
// renewals and calls to each): http.DefaultTransport keeps only 100 idle
// connections in all, so most calls dialled afresh (a quarter of a leader's
// CPU while recovering 1,000 sessions). Proxies never apply: agentctl is
// reached directly.
var transport = &http.Transport{
	Proxy:               nil,
	DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
	MaxIdleConns:        0, // no total bound; per host below
	MaxIdleConnsPerHost: 4,
	IdleConnTimeout:     90 * time.Second,
}

// Client talks to one agentctl serve instance. Safe for concurrent use.
type Client struct {
	base    string
	secret  string
	hc      *http.Client
	timeout time.Duration
	fencing atomic.Uint64
}

// NewClient returns a client for baseURL (e.g. http://127.0.0.1:7800) using secret.
// timeout <= 0 means DefaultTimeout.
func NewClient(baseURL, secret string, timeout time.Duration) *Client {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &Client{base: strings.TrimRight(baseURL, "/"), secret: secret, hc: &http.Client{Transport: transport}, timeout: timeout}
}

// SetFencingToken sets the token sent with every mutating request.
func (c *Client) SetFencingToken(tok uint64) { c.fencing.Store(tok) }

// FencingToken returns the token sent with mutating requests.
func (c *Client) FencingToken() uint64 { return c.fencing.Load() }

func (c *Client) do(ctx context.Context, method, path string, body io.Reader, contentType string, extra time.Duration, out any) error {
	return c.send(ctx, method, path, body, contentType, extra, method != http.MethodGet, out)
}

// send is do with the choice of sending the fencing token (every mutating
// request, and a poll that renews the lease).
func (c *Client) send(ctx context.Context, method, path string, body io.Reader, contentType string, extra time.Duration, fenced bool, out any) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout+extra)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return fmt.Errorf("agentctl %s %s: %w", method, path, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.secret)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if fenced {
		req.Header.Set(FencingHeader, strconv.FormatUint(c.fencing.Load(), 10))
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("agentctl %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	return decodeResponse(resp, out)
}

func decodeResponse(resp *http.Response, out any) error {
	if resp.StatusCode >= 300 {
		var eb ErrorBody
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if json.Unmarshal(b, &eb) != nil || eb.Error.Code == "" {
			return &APIError{Status: resp.StatusCode, Code: "unknown", Message: strings.TrimSpace(string(b))}
		}
		return &APIError{Status: resp.StatusCode, Code: eb.Error.Code, Message: eb.Error.Message}
	}
	switch o := out.(type) {
	case nil:
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	case *[]byte:
		b, err := io.ReadAll(resp.Body)
		*o = b
		return err
	default:
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			return fmt.Errorf("decode agentctl response: %w", err)
		}
		return nil
	}
}

func (c *Client) doJSON(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	ct := ""
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body, ct = bytes.NewReader(b), "application/json"
	}
	return c.do(ctx, method, path, body, ct, 0, out)
}

// Health calls GET /v1/health.
func (c *Client) Health(ctx context.Context) (Health, error) {
	var h Health
	return h, c.doJSON(ctx, "GET", "/v1/health", nil, &h)
}

// Capabilities calls GET /v1/capabilities (what is known without starting anything).
func (c *Client) Capabilities(ctx context.Context) (Capabilities, error) {
	var v Capabilities
	return v, c.doJSON(ctx, "GET", "/v1/capabilities", nil, &v)
}

// Probe calls POST /v1/probe: runs an ACP agent's initialize (or reads a pty
// profile's declaration) and reports its capabilities.
func (c *Client) Probe(ctx context.Context, p Profile) (Capabilities, error) {
	var v Capabilities
	return v, c.doJSON(ctx, "POST", "/v1/probe", ProbeRequest{Profile: p}, &v)
}

// StartAgent calls POST /v1/agent/start; a non-empty resumeToken resumes.
func (c *Client) StartAgent(ctx context.Context, p Profile, resumeToken string) (AgentState, error) {
	var v AgentState
	return v, c.doJSON(ctx, "POST", "/v1/agent/start", StartRequest{Profile: p, ResumeToken: resumeToken}, &v)
}

// Prompt calls POST /v1/agent/prompt (202: the turn runs in the background).
func (c *Client) Prompt(ctx context.Context, text string) (PromptResponse, error) {
	var v PromptResponse
	return v, c.doJSON(ctx, "POST", "/v1/agent/prompt", PromptRequest{Text: text}, &v)
}

// Cancel calls POST /v1/agent/cancel.
func (c *Client) Cancel(ctx context.Context) error {
	return c.doJSON(ctx, "POST", "/v1/agent/cancel", nil, nil)
}

// StopAgent calls POST /v1/agent/stop and returns the agent's exit code.
func (c *Client) StopAgent(ctx context.Context) (int, error) {
	var v AgentStoppedData
	return v.ExitCode, c.doJSON(ctx, "POST", "/v1/agent/stop", nil, &v)
}

// AgentState calls GET /v1/agent.
func (c *Client) AgentState(ctx context.Context) (AgentState, error) {
	var v AgentState
	return v, c.doJSON(ctx, "GET", "/v1/agent", nil, &v)
}

// Messages calls GET /v1/messages.
func (c *Client) Messages(ctx context.Context) ([]Message, error) {
	var v MessagesResponse
	return v.Messages, c.doJSON(ctx, "GET", "/v1/messages", nil, &v)
}

// Events long-polls GET /v1/events?since=&wait=: events with Seq >= since,
// waiting up to wait for the first one.
func (c *Client) Events(ctx context.Context, since uint64, wait time.Duration) (EventsResponse, error) {
	return c.Poll(ctx, EventsQuery{Since: since, Wait: wait})
}

// CompactEvents is Events with compact=true: a message update that a later
// update of the same message in the answer supersedes is left out (each
// carries the message's whole text), so a poll that finds a streamed
// reply's many updates carries the latest only.
func (c *Client) CompactEvents(ctx context.Context, since uint64, wait time.Duration) (EventsResponse, error) {
	return c.Poll(ctx, EventsQuery{Since: since, Wait: wait, Compact: true})
}

// CatchUp reads every retained event, compacted, with the agent's
// permission requests listed after them (EventsResponse.Permissions; nil
// from an agentctl older than that): what a supervisor that attaches
// mirrors before it follows the events.
func (c *Client) CatchUp(ctx context.Context) (EventsResponse, error) {
	return c.Poll(ctx, EventsQuery{Compact: true, Permissions: true})
}

// Poll long-polls GET /v1/events with every parameter of q.
func (c *Client) Poll(ctx context.Context, q EventsQuery) (EventsResponse, error) {
	var v EventsResponse
	params := url.Values{"since": {strconv.FormatUint(q.Since, 10)}, "wait": {q.Wait.String()}}
	if q.Compact {
		params.Set("compact", "true")
	}
	if q.Gather > 0 {
		params.Set("gather", q.Gather.String())
	}
	if q.Lease > 0 {
		params.Set("lease", q.Lease.String())
	}
	if q.Permissions {
		params.Set("permissions", "true")
	}
	return v, c.send(ctx, "GET", "/v1/events?"+params.Encode(), nil, "", q.Wait+q.Gather, q.Lease > 0, &v)
}

// ListFiles calls GET /v1/files?path=.
func (c *Client) ListFiles(ctx context.Context, path string) ([]api.FileEntry, error) {
	var v struct {
		Entries []api.FileEntry `json:"entries"`
	}
	return v.Entries, c.doJSON(ctx, "GET", "/v1/files?"+url.Values{"path": {path}}.Encode(), nil, &v)
}

// ReadFile calls GET /v1/files/content?path=.
func (c *Client) ReadFile(ctx context.Context, path string) ([]byte, error) {
	var b []byte
	return b, c.do(ctx, "GET", "/v1/files/content?"+url.Values{"path": {path}}.Encode(), nil, "", 0, &b)
}

// WriteFile calls PUT /v1/files/content?path= with the raw bytes.
func (c *Client) WriteFile(ctx context.Context, path string, data []byte) error {
	return c.do(ctx, "PUT", "/v1/files/content?"+url.Values{"path": {path}}.Encode(), bytes.NewReader(data), "application/octet-stream", 0, nil)
}

// GitStatus calls GET /v1/git/status.
func (c *Client) GitStatus(ctx context.Context) (GitStatus, error) {
	var v GitStatus
	return v, c.doJSON(ctx, "GET", "/v1/git/status", nil, &v)
}

// GitDiff calls GET /v1/git/diff (staged: --cached).
func (c *Client) GitDiff(ctx context.Context, staged bool) (string, error) {
	var v struct {
		Diff string `json:"diff"`
	}
	return v.Diff, c.doJSON(ctx, "GET", "/v1/git/diff?staged="+strconv.FormatBool(staged), nil, &v)
}

// Fence calls POST /v1/fencing: presents the client's token (persisted when
// higher) and returns the highest token agentctl has seen.
func (c *Client) Fence(ctx context.Context) (uint64, error) {
	var v struct {
		Token uint64 `json:"fencing_token"`
	}
	return v.Token, c.doJSON(ctx, "POST", "/v1/fencing", nil, &v)
}

// Permissions calls GET /v1/agent/permissions: every permission request of
// the current agent run, oldest first.
func (c *Client) Permissions(ctx context.Context) (api.Permissions, error) {
	var v api.Permissions
	return v, c.doJSON(ctx, "GET", "/v1/agent/permissions", nil, &v)
}

// AnswerPermission calls POST /v1/agent/permissions/{id} (fenced): answers a
// pending request with one of its options. An *APIError tells 400 (option
// not offered), 404 (unknown request) and 409 (not pending) apart.
func (c *Client) AnswerPermission(ctx context.Context, id, optionID, answeredBy string) (api.Permission, error) {
	var v api.Permission
	return v, c.doJSON(ctx, "POST", "/v1/agent/permissions/"+url.PathEscape(id), AnswerPermissionRequest{OptionID: optionID, AnsweredBy: answeredBy}, &v)
}

// SetMode calls POST /v1/agent/mode (fenced): session/set_mode. 400 when
// the agent offers no such mode, 409 when no agent runs.
func (c *Client) SetMode(ctx context.Context, modeID string) (AgentState, error) {
	var v AgentState
	return v, c.doJSON(ctx, "POST", "/v1/agent/mode", SetModeRequest{ModeID: modeID}, &v)
}

// Terminals calls GET /v1/terminals: the agent's command terminals and
// people's shells.
func (c *Client) Terminals(ctx context.Context) (TerminalList, error) {
	var v TerminalList
	return v, c.doJSON(ctx, "GET", "/v1/terminals", nil, &v)
}
