package client

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/paddockhq/paddock/api"
)

const itemJSON = `{"id":"s1","task_id":"t1","state":"WAITING_FOR_INPUT","agent":"demo","runtime":"standalone","executor_id":"","has_resume_token":false,"error_message":"","name":"Flaky login","pinned":true,"created_at":"2025-01-02T03:04:05Z","updated_at":"2025-01-02T03:04:05Z","last_activity_at":"2025-01-02T03:04:05Z","first_prompt":"Fix the login","last_reply":"Done.","message_count":4,"match":"…the login page","match_field":"transcript","match_message_id":"m3"}`

func TestSearchEndpoints(t *testing.T) {
	ctx := context.Background()
	ts := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	named := &api.Session{ID: "s1", TaskID: "t1", State: api.SessionWaitingForInput, Agent: "demo", Runtime: "standalone",
		Name: "Flaky login", Pinned: true, CreatedAt: ts, UpdatedAt: ts, LastActivityAt: ts}
	item := api.SessionItem{Session: *named, FirstPrompt: "Fix the login", LastReply: "Done.", MessageCount: 4,
		Match: "…the login page", MatchField: api.MatchTranscript, MatchMessageID: "m3"}
	type page struct {
		Items []api.SessionItem
		Next  string
	}
	cases := []struct {
		name     string
		respBody string
		call     func(c *Client) (any, error)
		want     any
		method   string
		path     string
		query    string
		reqBody  string
	}{
		{"rename", sessionJSON,
			func(c *Client) (any, error) { return c.RenameSession(ctx, "s 1", "Flaky login") },
			nil, "POST", "/v1/sessions/s%201/rename", "", `{"name":"Flaky login"}`},
		{"clear name", sessionJSON,
			func(c *Client) (any, error) { return c.RenameSession(ctx, "s1", "") },
			nil, "POST", "/v1/sessions/s1/rename", "", `{"name":""}`},
		{"pin", itemJSON,
			func(c *Client) (any, error) { return c.PinSession(ctx, "s1", true) },
			named, "POST", "/v1/sessions/s1/pin", "", `{"pinned":true}`},
		{"unpin", sessionJSON,
			func(c *Client) (any, error) { return c.PinSession(ctx, "s1", false) },
			nil, "POST", "/v1/sessions/s1/pin", "", `{"pinned":false}`},
		{"search", `{"sessions":[` + itemJSON + `],"next_cursor":"c1.abc"}`,
			func(c *Client) (any, error) {
				items, next, err := c.SearchSessions(ctx, "login page", "", 0)
				return page{items, next}, err
			},
			page{[]api.SessionItem{item}, "c1.abc"}, "GET", "/v1/sessions", "q=login+page", ""},
		{"search next page", `{"sessions":[]}`,
			func(c *Client) (any, error) {
				items, next, err := c.SearchSessions(ctx, "", "c1.abc", 2)
				return page{items, next}, err
			},
			page{[]api.SessionItem{}, ""}, "GET", "/v1/sessions", "cursor=c1.abc&limit=2&q=", ""},
		{"search page filtered", `{"sessions":[` + itemJSON + `]}`,
			func(c *Client) (any, error) {
				return c.SearchSessionsPage(ctx, SessionSearch{Query: "x", Limit: 500, TaskID: "t1", State: "RUNNING"})
			},
			&api.SessionPage{Sessions: []api.SessionItem{item}}, "GET", "/v1/sessions", "limit=500&q=x&state=RUNNING&task_id=t1", ""},
		{"summaries", `{"sessions":[` + itemJSON + `]}`,
			func(c *Client) (any, error) { return c.SessionSummaries(ctx, "t1", "") },
			[]api.SessionItem{item}, "GET", "/v1/sessions", "summary=true&task_id=t1", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, c := newFake(t, 200, tc.respBody)
			got, err := tc.call(c)
			if err != nil {
				t.Fatalf("call: %v", err)
			}
			req := f.request(t)
			if req.Method != tc.method || req.Path != tc.path || req.RawQuery != tc.query {
				t.Errorf("request = %s %s?%s, want %s %s?%s", req.Method, req.Path, req.RawQuery, tc.method, tc.path, tc.query)
			}
			if tc.reqBody == "" && req.Body != "" || tc.reqBody != "" && !jsonEqual(t, req.Body, tc.reqBody) {
				t.Errorf("request body = %q, want %q", req.Body, tc.reqBody)
			}
			if tc.want != nil && !reflect.DeepEqual(got, tc.want) {
				t.Errorf("result = %#v\nwant %#v", got, tc.want)
			}
		})
	}
}

func TestSearchErrorsAndValidation(t *testing.T) {
	f, c := newFake(t, 400, `{"error":{"code":"bad_request","message":"cursor \"x\" is not a next_cursor of GET /v1/sessions; start again without one"}}`)
	ctx := context.Background()
	if _, _, err := c.SearchSessions(ctx, "", "x", 0); !IsCode(err, "bad_request") {
		t.Errorf("a refused cursor: %v", err)
	}
	f.request(t)
	for name, err := range map[string]error{
		"rename without id": func() error { _, err := c.RenameSession(ctx, " ", "x"); return err }(),
		"pin without id":    func() error { _, err := c.PinSession(ctx, "", true); return err }(),
	} {
		if err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	select {
	case r := <-f.got:
		t.Errorf("a request was sent: %+v", r)
	default:
	}
}
