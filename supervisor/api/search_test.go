package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/supervisor/config"
	"github.com/paddockhq/paddock/supervisor/state"
)

// fsmCluster is a one-node cluster whose Apply commits at once into a
// real store through its FSM. Methods a test does not reach are the nil
// interface's (they panic).
type fsmCluster struct {
	Cluster
	mu    sync.Mutex
	store *state.Store
	fsm   *state.FSM
	idx   uint64
	now   time.Time
}

func newFSMCluster() *fsmCluster {
	st := state.NewStore()
	return &fsmCluster{store: st, fsm: state.NewFSM(st), now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *fsmCluster) ID() string                                { return "n1" }
func (c *fsmCluster) IsLeader() bool                            { return true }
func (c *fsmCluster) Store() *state.Store                       { return c.store }
func (c *fsmCluster) WaitApplied(context.Context, uint64) error { return nil }
func (c *fsmCluster) ConfirmRead(context.Context) error         { return nil }
func (c *fsmCluster) CatchUp(context.Context) error             { return nil }

func (c *fsmCluster) Apply(_ context.Context, typ state.CommandType, body any) (*state.Result, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.idx++
	c.now = c.now.Add(time.Second)
	buf, err := state.Command{Type: typ, Now: c.now, Body: body}.Encode()
	if err != nil {
		return nil, err
	}
	return c.fsm.Apply(&raft.Log{Index: c.idx, Type: raft.LogCommand, Data: buf}).(*state.Result), nil
}

func (c *fsmCluster) must(t *testing.T, typ state.CommandType, body any) {
	t.Helper()
	res, err := c.Apply(context.Background(), typ, body)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		t.Fatalf("apply %d: %v", typ, err)
	}
}

// startSearchAPI serves an API over a store with tasks t1 "Fix the login
// page" and t2 "Refactor storage" and five sessions, s1..s5 in order of
// activity (s5 newest): s2 runs agent claude, s3 is named "Release notes",
// s4's transcript mentions PostgreSQL.
func startSearchAPI(t *testing.T) (*fsmCluster, string) {
	t.Helper()
	c := newFSMCluster()
	c.must(t, state.CmdCreateTask, &state.CreateTaskBody{Task: api.Task{ID: "t1", Title: "Fix the login page"}})
	c.must(t, state.CmdCreateTask, &state.CreateTaskBody{Task: api.Task{ID: "t2", Title: "Refactor storage"}})
	for i := 1; i <= 5; i++ {
		agent, task := "demo", "t1"
		if i == 2 {
			agent = "claude"
		}
		if i > 3 {
			task = "t2"
		}
		c.must(t, state.CmdCreateSession, &state.CreateSessionBody{Session: api.Session{ID: fmt.Sprintf("s%d", i), TaskID: task, Agent: agent, Runtime: "standalone"}})
	}
	c.must(t, state.CmdSetSessionMeta, &state.SetSessionMetaBody{SessionID: "s3", Name: ptr("Release notes")})
	c.must(t, state.CmdPutMessage, &state.PutMessageBody{SessionID: "s4", Message: api.Message{ID: "m1", Role: api.RoleUser, Text: "Move the schema to PostgreSQL\nplease"}})
	c.must(t, state.CmdPutMessage, &state.PutMessageBody{SessionID: "s4", Message: api.Message{ID: "m2", Role: api.RoleAgent, Text: "Done."}})
	c.must(t, state.CmdPutMessage, &state.PutMessageBody{SessionID: "s5", Message: api.Message{ID: "m1", Role: api.RoleUser, Text: "hello"}})
	srv := httptest.NewServer(New(Options{Cluster: c, Config: config.Default()}))
	t.Cleanup(srv.Close)
	return c, srv.URL
}

func ptr[T any](v T) *T { return &v }

func call(t *testing.T, method, url, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func getPage(t *testing.T, url string) api.SessionPage {
	t.Helper()
	code, b := call(t, "GET", url, "")
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, code, b)
	}
	var p api.SessionPage
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("GET %s: %v: %s", url, err, b)
	}
	return p
}

func pageIDs(p api.SessionPage) string {
	var out []string
	for _, it := range p.Sessions {
		out = append(out, it.ID)
	}
	return strings.Join(out, ",")
}

func TestSearchSessionsRoute(t *testing.T) {
	_, base := startSearchAPI(t)
	cases := []struct{ q, want, field, match string }{
		{"LOGIN", "s3,s2,s1", api.MatchTitle, "Fix the login page"},
		{"release", "s3", api.MatchName, "Release notes"},
		{"Claude", "s2", api.MatchAgent, "claude"},
		{"s1", "s1", api.MatchID, "s1"},
		{"postgresql", "s4", api.MatchTranscript, "Move the schema to PostgreSQL please"},
		{"no+such+thing", "", "", ""},
	}
	for _, c := range cases {
		p := getPage(t, base+"/v1/sessions?q="+c.q)
		if got := pageIDs(p); got != c.want || p.NextCursor != "" {
			t.Errorf("q=%s: %s (next %q), want %s", c.q, got, p.NextCursor, c.want)
			continue
		}
		if c.field != "" && (p.Sessions[0].MatchField != c.field || p.Sessions[0].Match != c.match) {
			t.Errorf("q=%s: matched %s %q, want %s %q", c.q, p.Sessions[0].MatchField, p.Sessions[0].Match, c.field, c.match)
		}
	}
	p := getPage(t, base+"/v1/sessions?q=postgresql")
	if it := p.Sessions[0]; it.FirstPrompt != "Move the schema to PostgreSQL" || it.LastReply != "Done." || it.MessageCount != 2 || it.MatchMessageID != "m1" {
		t.Errorf("s4 item: %+v", it)
	}
	if got := pageIDs(getPage(t, base+"/v1/sessions?q=demo&task_id=t2")); got != "s5,s4" {
		t.Errorf("q with task_id: %s", got)
	}
	// The JSON has every field the picker reads, empty ones included.
	_, b := call(t, "GET", base+"/v1/sessions?q=s1", "")
	for _, key := range []string{`"name": ""`, `"pinned": false`, `"first_prompt": ""`, `"last_reply": ""`, `"message_count": 0`, `"match": "s1"`, `"match_field": "id"`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("answer lacks %s: %s", key, b)
		}
	}
	if strings.Contains(string(b), "next_cursor") {
		t.Errorf("the last page has a next_cursor: %s", b)
	}
}

// limit=2 over five sessions lists each once, in order, in three pages,
// while other sessions are created between pages (newer than the cursor:
// they sort before it).
func TestSearchSessionsPaging(t *testing.T) {
	c, base := startSearchAPI(t)
	c.must(t, state.CmdCreateTask, &state.CreateTaskBody{Task: api.Task{ID: "t3", Title: "elsewhere"}})
	var got []string
	cursor, pages := "", 0
	for {
		url := base + "/v1/sessions?limit=2"
		if pages%2 == 1 {
			url += "&q=" // an empty q selects every session too
		}
		if cursor != "" {
			url += "&cursor=" + cursor
		}
		p := getPage(t, url)
		got = append(got, pageIDs(p))
		c.must(t, state.CmdCreateSession, &state.CreateSessionBody{Session: api.Session{ID: fmt.Sprintf("x%d", pages), TaskID: "t3"}})
		pages++
		if p.NextCursor == "" {
			break
		}
		cursor = p.NextCursor
	}
	if strings.Join(got, "|") != "s5,s4|s3,s2|s1" {
		t.Errorf("pages %q, want s5,s4|s3,s2|s1", got)
	}
}

func TestSearchSessionsRefusals(t *testing.T) {
	_, base := startSearchAPI(t)
	for _, q := range []string{"cursor=garbage", "cursor=c1.AAAA", "limit=501", "limit=0", "limit=-1", "limit=x", "limit=",
		"q=" + strings.Repeat("a", 201), "summary=maybe", "state=nope&q=x"} {
		if code, b := call(t, "GET", base+"/v1/sessions?"+q, ""); code != http.StatusBadRequest || !strings.Contains(string(b), "bad_request") {
			t.Errorf("?%s: %d %s, want 400", q, code, b)
		}
	}
	if code, _ := call(t, "GET", base+"/v1/sessions?limit=500&task_id=nope", ""); code != http.StatusNotFound {
		t.Errorf("an unknown task_id: %d, want 404", code)
	}
	p := getPage(t, base+"/v1/sessions?limit=500")
	if pageIDs(p) != "s5,s4,s3,s2,s1" {
		t.Errorf("limit=500: %s", pageIDs(p))
	}
}

// Without q, cursor or limit the list answers as it always did; with
// summary=true its sessions carry their summaries.
func TestListSessionsKeepsItsShape(t *testing.T) {
	_, base := startSearchAPI(t)
	code, b := call(t, "GET", base+"/v1/sessions?task_id=t2", "")
	var plain map[string][]map[string]any
	if err := json.Unmarshal(b, &plain); code != 200 || err != nil || len(plain) != 1 || len(plain["sessions"]) != 2 {
		t.Fatalf("%d %v %s", code, err, b)
	}
	if s := plain["sessions"][0]; s["id"] != "s4" || s["first_prompt"] != nil || s["match"] != nil {
		t.Errorf("plain list, oldest first, no summaries: %v", s)
	}
	_, b = call(t, "GET", base+"/v1/sessions?task_id=t2&summary=true", "")
	var sum struct{ Sessions []api.SessionItem }
	if err := json.Unmarshal(b, &sum); err != nil || len(sum.Sessions) != 2 || sum.Sessions[0].ID != "s4" || sum.Sessions[0].FirstPrompt != "Move the schema to PostgreSQL" ||
		sum.Sessions[1].FirstPrompt != "hello" || strings.Contains(string(b), "next_cursor") {
		t.Errorf("summary list: %v %s", err, b)
	}
}

func TestRenameAndPin(t *testing.T) {
	c, base := startSearchAPI(t)
	before, _ := c.store.Session("s1")
	code, b := call(t, "POST", base+"/v1/sessions/s1/rename", `{"name":"  Flaky login test  "}`)
	var s api.Session
	if err := json.Unmarshal(b, &s); code != 200 || err != nil || s.Name != "Flaky login test" {
		t.Fatalf("rename: %d %v %s", code, err, b)
	}
	code, b = call(t, "POST", base+"/v1/sessions/s1/pin", `{"pinned":true}`)
	if err := json.Unmarshal(b, &s); code != 200 || err != nil || !s.Pinned || s.Name != "Flaky login test" {
		t.Fatalf("pin: %d %v %s", code, err, b)
	}
	if !s.LastActivityAt.Equal(before.LastActivityAt) {
		t.Errorf("last_activity_at moved from %v to %v", before.LastActivityAt, s.LastActivityAt)
	}
	if got := pageIDs(getPage(t, base+"/v1/sessions?limit=10")); got != "s1,s5,s4,s3,s2" {
		t.Errorf("order after pinning s1: %s", got)
	}
	if p := getPage(t, base+"/v1/sessions?q=flaky"); pageIDs(p) != "s1" || p.Sessions[0].MatchField != api.MatchName {
		t.Errorf("search by the new name: %+v", p)
	}
	// An empty name clears it.
	if code, b := call(t, "POST", base+"/v1/sessions/s1/rename", `{"name":""}`); code != 200 || !strings.Contains(string(b), `"name": ""`) {
		t.Errorf("clearing: %d %s", code, b)
	}
	for _, c := range []struct{ path, body string }{
		{"rename", `{}`},
		{"rename", `{"name":"two\nlines"}`},
		{"rename", `{"name":"` + strings.Repeat("x", 201) + `"}`},
		{"rename", `{"name":7}`},
		{"rename", `{"name":"a","extra":1}`},
		{"pin", `{}`},
		{"pin", `{"pinned":"yes"}`},
	} {
		if code, b := call(t, "POST", base+"/v1/sessions/s1/"+c.path, c.body); code != http.StatusBadRequest {
			t.Errorf("%s %s: %d %s, want 400", c.path, c.body, code, b)
		}
	}
	if code, _ := call(t, "POST", base+"/v1/sessions/nope/pin", `{"pinned":true}`); code != http.StatusNotFound {
		t.Errorf("pin of an unknown session: %d, want 404", code)
	}
	if code, _ := call(t, "POST", base+"/v1/sessions/s2/rename", `{"name":"`+strings.Repeat("é", 200)+`"}`); code != 200 {
		t.Errorf("a 200-character name: %d", code)
	}
}
