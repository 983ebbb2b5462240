package state

import (
	"encoding/base64"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/paddockhq/paddock/api"
)

// searchFixture: task t1 "Fix the login page" with s1 (agent demo) and s2
// (agent claude, named "Release notes"), task t2 "Refactor storage" with
// s3 whose transcript mentions a PostgreSQL migration. Activity: s3 newest.
func searchFixture(t *testing.T) *harness {
	h := newHarness(t)
	h.mustApply(CmdCreateTask, &CreateTaskBody{Task: api.Task{ID: "t1", Title: "Fix the login page"}})
	h.mustApply(CmdCreateTask, &CreateTaskBody{Task: api.Task{ID: "t2", Title: "Refactor storage"}})
	h.mustApply(CmdCreateSession, &CreateSessionBody{Session: api.Session{ID: "s1", TaskID: "t1", Agent: "demo"}})
	h.mustApply(CmdCreateSession, &CreateSessionBody{Session: api.Session{ID: "s2", TaskID: "t1", Agent: "claude"}})
	h.mustApply(CmdCreateSession, &CreateSessionBody{Session: api.Session{ID: "s3", TaskID: "t2", Agent: "demo"}})
	h.mustApply(CmdSetSessionMeta, &SetSessionMetaBody{SessionID: "s2", Name: ptrTo("Release notes")})
	for i, m := range []api.Message{
		{Role: api.RoleUser, Text: "\n  Move the schema to PostgreSQL\nand keep the data"},
		{Role: api.RoleThought, Text: "thinking about Zanzibar"},
		{Role: api.RoleAgent, Text: "Done: the MIGRATION runs on boot.\nDetails follow."},
		{Role: api.RoleTool, Text: "ran make"},
	} {
		m.ID = fmt.Sprintf("m%d", i+1)
		h.mustApply(CmdPutMessage, &PutMessageBody{SessionID: "s3", Message: m})
	}
	return h
}

func ids(items []SessionItem) string {
	var out []string
	for _, it := range items {
		out = append(out, it.ID)
	}
	return strings.Join(out, ",")
}

func TestSearchSessionsMatches(t *testing.T) {
	h := searchFixture(t)
	cases := []struct {
		q, want, field, match string
	}{
		{"", "s3,s2,s1", "", ""},
		{"LOGIN", "s2,s1", api.MatchTitle, "Fix the login page"},
		{"release", "s2", api.MatchName, "Release notes"},
		{"claude", "s2", api.MatchAgent, "claude"},
		{"s", "s3,s2,s1", api.MatchTitle, "Refactor storage"}, // s2 by its name, s1 by its id
		{"s3", "s3", api.MatchID, "s3"},
		{"t2", "s3", api.MatchID, "t2"},
		{"postgres", "s3", api.MatchTranscript, "Move the schema to PostgreSQL and keep the data"},
		{"migration runs", "s3", api.MatchTranscript, "Done: the MIGRATION runs on boot. Details follow."},
		{"zanzibar", "", "", ""}, // thoughts are not searched
		{"ran make", "", "", ""}, // nor tool calls
		{"nothing like it", "", "", ""},
	}
	for _, c := range cases {
		res := h.store.SearchSessions(SearchQuery{Text: c.q})
		if got := ids(res.Items); got != c.want || res.Next != nil {
			t.Errorf("q %q: %s (next %v), want %s", c.q, got, res.Next, c.want)
			continue
		}
		if c.field != "" && (res.Items[0].MatchField != c.field || c.match != "" && res.Items[0].Match != c.match) {
			t.Errorf("q %q: matched %s %q, want %s %q", c.q, res.Items[0].MatchField, res.Items[0].Match, c.field, c.match)
		}
	}
	if res := h.store.SearchSessions(SearchQuery{Text: "postgres"}); res.Items[0].MatchMessageID != "m1" {
		t.Errorf("transcript match in message %q, want m1", res.Items[0].MatchMessageID)
	}
	if got := ids(h.store.SearchSessions(SearchQuery{Text: "demo", TaskID: "t1"}).Items); got != "s1" {
		t.Errorf("task filter: %s", got)
	}
	if got := ids(h.store.SearchSessions(SearchQuery{State: api.SessionStopped}).Items); got != "" {
		t.Errorf("state filter: %s", got)
	}
}

func TestSessionItemSummaries(t *testing.T) {
	h := searchFixture(t)
	long := strings.Repeat("ü", 300)
	h.mustApply(CmdPutMessage, &PutMessageBody{SessionID: "s1", Message: api.Message{ID: "m1", Role: api.RoleUser, Text: long}})
	h.mustApply(CmdPutMessage, &PutMessageBody{SessionID: "s1", Message: api.Message{ID: "m2", Role: api.RoleAgent, Text: "  "}}) // a reply just begun
	items := h.store.SessionItems(SessionFilter{})
	if ids(items) != "s1,s2,s3" {
		t.Fatalf("items %s, want oldest first", ids(items))
	}
	s3 := items[2]
	if s3.FirstPrompt != "Move the schema to PostgreSQL" || s3.LastReply != "Done: the MIGRATION runs on boot." || s3.MessageCount != 4 {
		t.Errorf("s3 summary: %q %q %d", s3.FirstPrompt, s3.LastReply, s3.MessageCount)
	}
	s1 := items[0]
	if utf8.RuneCountInString(s1.FirstPrompt) != summaryLineLen || !strings.HasSuffix(s1.FirstPrompt, "…") || s1.LastReply != "" || s1.MessageCount != 2 {
		t.Errorf("s1 summary: %q (%d characters) %q %d", s1.FirstPrompt, utf8.RuneCountInString(s1.FirstPrompt), s1.LastReply, s1.MessageCount)
	}
	if s2 := items[1]; s2.FirstPrompt != "" || s2.LastReply != "" || s2.MessageCount != 0 || s2.Name != "Release notes" {
		t.Errorf("s2 item: %+v", s2)
	}
}

// Pinned sessions first, then the most recent activity, then the id.
func TestSearchOrder(t *testing.T) {
	h := searchFixture(t)
	h.mustApply(CmdSetSessionMeta, &SetSessionMetaBody{SessionID: "s1", Pinned: ptrTo(true)})
	if got := ids(h.store.SearchSessions(SearchQuery{}).Items); got != "s1,s3,s2" {
		t.Errorf("order %s, want s1 (pinned), s3, s2", got)
	}
	h.mustApply(CmdPutMessage, &PutMessageBody{SessionID: "s2", Message: api.Message{ID: "m1", Role: api.RoleUser, Text: "hi"}})
	if got := ids(h.store.SearchSessions(SearchQuery{}).Items); got != "s1,s2,s3" {
		t.Errorf("order %s after s2's activity, want s1,s2,s3", got)
	}
}

// Paging with limit 2 lists every session exactly once while other
// sessions are written between pages: a pinned one's activity (it stays
// first), renames (not activity: nothing moves), new sessions (newer than
// the cursor: they sort before it).
func TestSearchPagingListsEachSessionOnce(t *testing.T) {
	h := newHarness(t)
	h.mustApply(CmdCreateTask, &CreateTaskBody{Task: api.Task{ID: "t1", Title: "x"}})
	for i := 1; i <= 5; i++ {
		h.mustApply(CmdCreateSession, &CreateSessionBody{Session: api.Session{ID: fmt.Sprintf("s%d", i), TaskID: "t1"}})
	}
	h.mustApply(CmdCreateSession, &CreateSessionBody{Session: api.Session{ID: "other", TaskID: "t1"}})
	h.mustApply(CmdSetSessionMeta, &SetSessionMetaBody{SessionID: "other", Pinned: ptrTo(true)})
	seen := map[string]int{}
	var after *SearchKey
	pages := 0
	for {
		res := h.store.SearchSessions(SearchQuery{TaskID: "t1", After: after, Limit: 2})
		for _, it := range res.Items {
			seen[it.ID]++
		}
		// Unrelated writes between pages: the pinned session's activity
		// (it stays first), renames of listed and unlisted sessions, a
		// new session (newer than every listed one: it sorts before the
		// cursor).
		h.mustApply(CmdPutMessage, &PutMessageBody{SessionID: "other", Message: api.Message{ID: fmt.Sprintf("m%d", pages), Role: api.RoleUser, Text: "x"}})
		h.mustApply(CmdSetSessionMeta, &SetSessionMetaBody{SessionID: "s3", Name: ptrTo(fmt.Sprint("name ", pages))})
		h.mustApply(CmdCreateSession, &CreateSessionBody{Session: api.Session{ID: fmt.Sprintf("new%d", pages), TaskID: "t1"}})
		pages++
		if res.Next == nil {
			break
		}
		if len(res.Items) != 2 {
			t.Fatalf("page %d holds %d items with a next cursor", pages, len(res.Items))
		}
		k, err := ParseCursor(res.Next.Cursor())
		if err != nil || k != *res.Next {
			t.Fatalf("cursor round trip: %+v %v, want %+v", k, err, *res.Next)
		}
		after = &k
	}
	want := map[string]int{"other": 1, "s1": 1, "s2": 1, "s3": 1, "s4": 1, "s5": 1}
	if fmt.Sprint(seen) != fmt.Sprint(want) || pages != 3 {
		t.Errorf("listed %v in %d pages, want each of %v once in 3", seen, pages, want)
	}
}

// A search bounded in the transcript bytes it compares answers short
// pages with a cursor, and going on finds every match.
func TestSearchWorkIsBounded(t *testing.T) {
	h := newHarness(t)
	h.mustApply(CmdCreateTask, &CreateTaskBody{Task: api.Task{ID: "t1", Title: "x"}})
	for i := 0; i < 20; i++ {
		id := fmt.Sprintf("s%02d", i)
		h.mustApply(CmdCreateSession, &CreateSessionBody{Session: api.Session{ID: id, TaskID: "t1"}})
		text := strings.Repeat("filler ", 200)
		if i%5 == 0 {
			text += "needle"
		}
		h.mustApply(CmdPutMessage, &PutMessageBody{SessionID: id, Message: api.Message{ID: "m1", Role: api.RoleAgent, Text: text}})
	}
	var found []string
	var after *SearchKey
	short := false
	for n := 0; ; n++ {
		if n > 40 {
			t.Fatal("the search does not end")
		}
		res := h.store.SearchSessions(SearchQuery{Text: "needle", After: after, Limit: 10, MaxScan: 3000})
		found = append(found, ids(res.Items))
		if res.Next == nil {
			break
		}
		short = short || len(res.Items) < 10
		after = res.Next
	}
	if got := strings.Join(strings.Fields(strings.Join(found, " ")), " "); strings.Count(got, "s") != 4 || !short {
		t.Errorf("pages %q (a short page: %v), want s15, s10, s05, s00 over short pages", found, short)
	}
	if got := ids(h.store.SearchSessions(SearchQuery{Text: "needle"}).Items); got != "s15,s10,s05,s00" {
		t.Errorf("unbounded: %s", got)
	}
}

func TestParseCursorRefusesGarbage(t *testing.T) {
	for _, c := range []string{"", "x", "c1.", "c1.!!", "c2." + SearchKey{ID: "a"}.Cursor()[3:],
		"c1." + b64("2.5.a"), "c1." + b64("1.x.a"), "c1." + b64("1.5."), "c1." + b64("1.5")} {
		if _, err := ParseCursor(c); err == nil {
			t.Errorf("ParseCursor(%q) accepted", c)
		}
	}
	k := SearchKey{Pinned: true, Activity: -5, ID: "a.b/c"}
	if got, err := ParseCursor(k.Cursor()); err != nil || got != k {
		t.Errorf("round trip: %+v %v", got, err)
	}
}

func b64(s string) string { return encodeRaw(s) }

// The case-insensitive finder agrees with strings.Index of lowered texts
// (on texts where lowering keeps byte offsets: ASCII and two-byte letters).
func TestFolderMatchesLoweredIndex(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	alphabet := []rune("aAbBzZ é É.ß")
	gen := func(n int) string {
		var b strings.Builder
		for range n {
			b.WriteRune(alphabet[rng.Intn(len(alphabet))])
		}
		return b.String()
	}
	for range 20000 {
		s, q := gen(rng.Intn(20)), gen(1+rng.Intn(3))
		want := strings.Index(strings.ToLower(s), strings.ToLower(q))
		if got := newFolder(q).index(s); got != want {
			t.Fatalf("index(%q, %q) = %d, want %d", s, q, got, want)
		}
	}
}

func TestSnippet(t *testing.T) {
	text := strings.Repeat("a", 100) + "NEEDLE" + strings.Repeat("b\n", 300)
	s := snippet(text, 100)
	if n := utf8.RuneCountInString(s); n != snippetLen || !strings.HasPrefix(s, "…") || !strings.HasSuffix(s, "…") ||
		!strings.Contains(s, "NEEDLEb b b") || strings.Contains(s, "\n") {
		t.Errorf("snippet %q (%d characters)", s, n)
	}
	if s := snippet("short NEEDLE", 6); s != "short NEEDLE" {
		t.Errorf("snippet %q", s)
	}
}

func encodeRaw(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

// A search that lets the read lock go between chunks of its work runs
// beside applies (go test -race): sessions written meanwhile are passed
// over or listed as they are, never torn, and pages still list each
// session that does not move once.
func TestSearchBesideApplies(t *testing.T) {
	defer func(n int) { searchChunk = n }(searchChunk)
	searchChunk = 1 // let go after every session
	h := newHarness(t)
	h.mustApply(CmdCreateTask, &CreateTaskBody{Task: api.Task{ID: "t1", Title: "x"}})
	h.mustApply(CmdCreateTask, &CreateTaskBody{Task: api.Task{ID: "t2", Title: "busy"}})
	for i := range 40 {
		id := fmt.Sprintf("s%02d", i)
		h.mustApply(CmdCreateSession, &CreateSessionBody{Session: api.Session{ID: id, TaskID: "t1"}})
		h.mustApply(CmdPutMessage, &PutMessageBody{SessionID: id, Message: api.Message{ID: "m1", Role: api.RoleUser, Text: "find the needle " + id}})
		h.mustApply(CmdCreateSession, &CreateSessionBody{Session: api.Session{ID: "busy" + id, TaskID: "t2"}})
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			default:
			}
			id := fmt.Sprintf("busys%02d", n%40)
			h.mustApply(CmdPutMessage, &PutMessageBody{SessionID: id, Message: api.Message{ID: "m1", Role: api.RoleAgent, Text: fmt.Sprint("needle ", n)}})
			h.mustApply(CmdSetSessionMeta, &SetSessionMetaBody{SessionID: fmt.Sprintf("s%02d", n%40), Name: ptrTo(fmt.Sprint("n", n))})
		}
	}()
	for range 5 {
		seen := map[string]int{}
		var after *SearchKey
		for {
			res := h.store.SearchSessions(SearchQuery{Text: "needle", After: after, Limit: 7})
			for _, it := range res.Items {
				if !strings.Contains(it.Match, "needle") {
					t.Errorf("%s matched %q", it.ID, it.Match)
				}
				seen[it.ID]++
			}
			if res.Next == nil {
				break
			}
			after = res.Next
		}
		for i := range 40 {
			if id := fmt.Sprintf("s%02d", i); seen[id] != 1 {
				t.Errorf("%s listed %d times", id, seen[id])
			}
		}
	}
	close(stop)
	<-done
}

// BenchmarkSearchTranscripts searches 1,000 sessions of 50 messages (20 MB
// of text) for a word none holds: every transcript is compared.
func BenchmarkSearchTranscripts(b *testing.B) {
	h := &harness{t: b, store: NewStore()}
	h.fsm = NewFSM(h.store)
	h.mustApply(CmdCreateTask, &CreateTaskBody{Task: api.Task{ID: "t1", Title: "x"}})
	text := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 9)
	for i := range 1000 {
		id := fmt.Sprintf("s%04d", i)
		h.mustApply(CmdCreateSession, &CreateSessionBody{Session: api.Session{ID: id, TaskID: "t1", Agent: "demo"}})
		for j := range 50 {
			h.mustApply(CmdPutMessage, &PutMessageBody{SessionID: id, Message: api.Message{ID: fmt.Sprintf("m%d", j+1), Role: api.RoleAgent, Text: text}})
		}
	}
	b.ResetTimer()
	for range b.N {
		if res := h.store.SearchSessions(SearchQuery{Text: "Zebra"}); len(res.Items) != 0 || res.Next != nil {
			b.Fatal(res)
		}
	}
}
