package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/paddockhq/paddock/api"
)

// RenameSession names the session (at most 200 characters, no control
// characters; surrounding spaces are trimmed); "" clears its name. A
// rename is not activity: the session keeps its place in lists.
func (c *Client) RenameSession(ctx context.Context, id, name string, opts ...CallOption) (*api.Session, error) {
	return c.sessionMeta(ctx, id, "/rename", map[string]string{"name": name}, opts)
}

// PinSession pins (or unpins) the session: pinned sessions come first in
// SearchSessions' pages.
func (c *Client) PinSession(ctx context.Context, id string, pinned bool, opts ...CallOption) (*api.Session, error) {
	return c.sessionMeta(ctx, id, "/pin", map[string]bool{"pinned": pinned}, opts)
}

func (c *Client) sessionMeta(ctx context.Context, id, suffix string, body any, opts []CallOption) (*api.Session, error) {
	if err := requireID("session", id); err != nil {
		return nil, err
	}
	var out api.Session
	if err := c.do(ctx, http.MethodPost, "/v1/sessions/"+seg(id)+suffix, nil, body, &out, opts); err != nil {
		return nil, err
	}
	return &out, nil
}

// SessionSearch selects a page of sessions (GET /v1/sessions?q=&cursor=&limit=).
type SessionSearch struct {
	// Query, when not empty, keeps the sessions whose name, task title,
	// agent or user and agent messages hold it (ignoring case), or whose
	// id or task id starts with it.
	Query string
	// Cursor is the previous page's next cursor ("" for the first page).
	Cursor string
	// Limit bounds the page, 1 to 500 (0: the server's default, 50).
	Limit int
	// TaskID and State, when not empty, keep only those sessions.
	TaskID string
	State  string
}

// SearchSessions returns a page of the sessions matching q (every session
// when q is empty), pinned first, then the most recently active, and the
// cursor of the next page ("" after the last one). A page may be shorter
// than limit, even empty, while the cursor is not "": keep paging until
// it is.
func (c *Client) SearchSessions(ctx context.Context, q, cursor string, limit int, opts ...CallOption) ([]api.SessionItem, string, error) {
	p, err := c.SearchSessionsPage(ctx, SessionSearch{Query: q, Cursor: cursor, Limit: limit}, opts...)
	if err != nil {
		return nil, "", err
	}
	return p.Sessions, p.NextCursor, nil
}

// SearchSessionsPage is SearchSessions with every selection GET
// /v1/sessions takes.
func (c *Client) SearchSessionsPage(ctx context.Context, s SessionSearch, opts ...CallOption) (*api.SessionPage, error) {
	q := url.Values{}
	q.Set("q", s.Query) // even empty: it asks for a page
	if s.Cursor != "" {
		q.Set("cursor", s.Cursor)
	}
	if s.Limit != 0 {
		q.Set("limit", strconv.Itoa(s.Limit))
	}
	if s.TaskID != "" {
		q.Set("task_id", s.TaskID)
	}
	if s.State != "" {
		q.Set("state", s.State)
	}
	var out api.SessionPage
	if err := c.do(ctx, http.MethodGet, "/v1/sessions", q, nil, &out, opts); err != nil {
		return nil, err
	}
	return &out, nil
}

// SessionSummaries lists sessions as ListSessions does (oldest first,
// unpaged), each with its transcript's summary: first prompt, last reply
// and message count.
func (c *Client) SessionSummaries(ctx context.Context, taskID, sessionState string, opts ...CallOption) ([]api.SessionItem, error) {
	q := url.Values{"summary": {"true"}}
	if taskID != "" {
		q.Set("task_id", taskID)
	}
	if sessionState != "" {
		q.Set("state", sessionState)
	}
	var out struct {
		Sessions []api.SessionItem `json:"sessions"`
	}
	if err := c.do(ctx, http.MethodGet, "/v1/sessions", q, nil, &out, opts); err != nil {
		return nil, err
	}
	return out.Sessions, nil
}
