package state

import (
	"encoding/base64"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/paddockhq/paddock/api"
)

// Searching and paging sessions: GET /v1/sessions?q=&cursor=&limit=. The
// search runs in the store, under its read lock, over every session: it
// sorts the sessions' keys (cheap: no transcript is read), then walks them
// in order, reading a transcript only while it looks for a match in it and
// copying only what a page shows. The transcript text compared per request
// is bounded (SearchQuery.MaxScan), and the read lock is let go between
// chunks of that work so the FSM's applies are not held up.

// SessionItem is a session as a picker lists it (api.SessionItem).
type SessionItem = api.SessionItem

// Search bounds.
const (
	// DefaultSearchLimit and MaxSearchLimit bound a page.
	DefaultSearchLimit = 50
	MaxSearchLimit     = 500
	// MaxSearchQueryLen bounds a query, in characters.
	MaxSearchQueryLen = 200
	// DefaultSearchScan bounds the transcript bytes one search compares.
	DefaultSearchScan = 32 << 20
	// summaryLineLen and snippetLen bound first_prompt/last_reply and
	// match, in characters.
	summaryLineLen = 120
	snippetLen     = 160
)

// searchChunk is how many transcript bytes are compared under one hold
// of the read lock (a variable for tests).
var searchChunk = 1 << 20

// SearchKey is where a session sorts in a paged list: pinned sessions
// first, then the most recent last_activity_at, then the id.
type SearchKey struct {
	Pinned bool
	// Activity is last_activity_at in Unix nanoseconds.
	Activity int64
	ID       string
}

// minNanoTime is the earliest time whose Unix nanoseconds fit an int64.
var minNanoTime = time.Unix(0, math.MinInt64)

func unixNanos(t time.Time) int64 {
	if t.Before(minNanoTime) {
		return math.MinInt64
	}
	return t.UnixNano()
}

func keyOf(s *api.Session) SearchKey {
	return SearchKey{Pinned: s.Pinned, Activity: unixNanos(s.LastActivityAt), ID: s.ID}
}

// compareKeys orders keys as a page lists them.
func compareKeys(a, b SearchKey) int {
	switch {
	case a.Pinned != b.Pinned:
		if a.Pinned {
			return -1
		}
		return 1
	case a.Activity != b.Activity:
		if a.Activity > b.Activity {
			return -1
		}
		return 1
	}
	return strings.Compare(a.ID, b.ID)
}

// cursorPrefix versions the cursor's encoding.
const cursorPrefix = "c1."

// ErrBadCursor is a cursor that this build did not write.
var ErrBadCursor = errors.New("not a cursor of GET /v1/sessions")

// Cursor is the key's opaque text form (a next_cursor).
func (k SearchKey) Cursor() string {
	p := "0"
	if k.Pinned {
		p = "1"
	}
	raw := p + "." + strconv.FormatInt(k.Activity, 10) + "." + k.ID
	return cursorPrefix + base64.RawURLEncoding.EncodeToString([]byte(raw))
}

// ParseCursor reads a key written by Cursor.
func ParseCursor(c string) (SearchKey, error) {
	rest, ok := strings.CutPrefix(c, cursorPrefix)
	if !ok || len(c) > 512 {
		return SearchKey{}, ErrBadCursor
	}
	raw, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil {
		return SearchKey{}, ErrBadCursor
	}
	parts := strings.SplitN(string(raw), ".", 3)
	if len(parts) != 3 || (parts[0] != "0" && parts[0] != "1") || parts[2] == "" {
		return SearchKey{}, ErrBadCursor
	}
	n, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil {
		return SearchKey{}, ErrBadCursor
	}
	return SearchKey{Pinned: parts[0] == "1", Activity: n, ID: parts[2]}, nil
}

// SearchQuery selects a page of sessions.
type SearchQuery struct {
	// Text, when not empty, keeps the sessions whose name, task title,
	// agent or user and agent messages hold it (ignoring case), or whose
	// id or task id starts with it.
	Text string
	// TaskID and State, when not empty, keep only those sessions.
	TaskID string
	State  api.SessionState
	// After, when set, starts the page after that key (a cursor).
	After *SearchKey
	// Limit bounds the page (0: DefaultSearchLimit).
	Limit int
	// MaxScan bounds the transcript bytes compared (0: DefaultSearchScan).
	MaxScan int
}

// SearchResult is a page: its items in order and, when more may follow,
// the key to continue after (nil at the end).
type SearchResult struct {
	Items []SessionItem
	Next  *SearchKey
}

// candidate is a session that may be on the page, as it sorted.
type candidate struct {
	key SearchKey
	s   *api.Session
}

// SearchSessions returns a page of the sessions q selects, ordered by
// SearchKey. A page holds Limit items unless the sessions ran out (Next is
// then nil) or the work bound was reached first (Next is set and the page
// may be short, even empty). Sessions whose key does not change are listed
// once across pages, whatever else is written meanwhile.
func (st *Store) SearchSessions(q SearchQuery) SearchResult {
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultSearchLimit
	}
	budget := q.MaxScan
	if budget <= 0 {
		budget = DefaultSearchScan
	}
	var f *folder
	if q.Text != "" {
		f = newFolder(q.Text)
	}

	st.mu.RLock()
	defer st.mu.RUnlock()
	d := st.d
	cands := make([]candidate, 0, len(d.Sessions))
	for _, s := range d.Sessions {
		if q.TaskID != "" && s.TaskID != q.TaskID || q.State != "" && s.State != q.State {
			continue
		}
		k := keyOf(s)
		if q.After != nil && compareKeys(k, *q.After) <= 0 {
			continue
		}
		cands = append(cands, candidate{k, s})
	}
	slices.SortFunc(cands, func(a, b candidate) int { return compareKeys(a.key, b.key) })

	var res SearchResult
	var last SearchKey // the last item's
	spent, chunk := 0, 0
	for i, c := range cands {
		if spent >= budget {
			res.Next = &cands[i-1].key // examined up to there
			break
		}
		if chunk >= searchChunk {
			// Let writers in; a session that changed meanwhile is passed
			// over (it moved, or went).
			st.mu.RUnlock()
			st.mu.RLock()
			d, chunk = st.d, 0
		}
		if d.Sessions[c.key.ID] != c.s || keyOf(c.s) != c.key {
			continue
		}
		m, scanned := d.match(c.s, f)
		spent, chunk = spent+scanned, chunk+scanned+64
		if !m.ok {
			continue
		}
		if len(res.Items) == limit {
			res.Next = &last // another match follows
			break
		}
		res.Items, last = append(res.Items, d.item(c.s, m)), c.key
	}
	return res
}

// SessionItems returns the sessions matching f as items (summaries, no
// match), oldest first as Sessions lists them.
func (st *Store) SessionItems(f SessionFilter) []SessionItem {
	st.mu.RLock()
	defer st.mu.RUnlock()
	out := make([]SessionItem, 0, len(st.d.Sessions))
	for _, s := range st.d.Sessions {
		if f.TaskID != "" && s.TaskID != f.TaskID || f.State != "" && s.State != f.State {
			continue
		}
		out = append(out, st.d.item(s, match{}))
	}
	slices.SortFunc(out, func(a, b SessionItem) int {
		if lessByTime(a.CreatedAt, b.CreatedAt, a.ID, b.ID) {
			return -1
		}
		return 1
	})
	return out
}

// match is where a session matched a query.
type match struct {
	ok                   bool
	field, text, message string
}

// match tests a session against a query (nil: everything matches) and
// returns how many transcript bytes it compared.
func (d *data) match(s *api.Session, f *folder) (match, int) {
	if f == nil {
		return match{ok: true}, 0
	}
	if i := f.index(s.Name); i >= 0 {
		return match{true, api.MatchName, snippet(s.Name, i), ""}, 0
	}
	if t := d.Tasks[s.TaskID]; t != nil {
		if i := f.index(t.Title); i >= 0 {
			return match{true, api.MatchTitle, snippet(t.Title, i), ""}, 0
		}
	}
	if f.prefixOf(s.ID) {
		return match{true, api.MatchID, s.ID, ""}, 0
	}
	if f.prefixOf(s.TaskID) {
		return match{true, api.MatchID, s.TaskID, ""}, 0
	}
	if i := f.index(s.Agent); i >= 0 {
		return match{true, api.MatchAgent, snippet(s.Agent, i), ""}, 0
	}
	// The transcript, newest message first: the latest mention is the
	// likeliest one sought.
	msgs := d.Messages[s.ID]
	scanned := 0
	for j := len(msgs) - 1; j >= 0; j-- {
		m := msgs[j]
		if m.Role != api.RoleUser && m.Role != api.RoleAgent {
			continue
		}
		i := f.index(m.Text)
		if i >= 0 {
			return match{true, api.MatchTranscript, snippet(m.Text, i), m.ID}, scanned + i + len(f.q)
		}
		scanned += len(m.Text)
	}
	return match{}, scanned
}

// item is a session's page entry (the store's lock held): the session,
// its transcript summary, and m.
func (d *data) item(s *api.Session, m match) SessionItem {
	out := SessionItem{Session: *s, Match: m.text, MatchField: m.field, MatchMessageID: m.message}
	out.ResumeToken = d.SessionTokens[s.ID]
	msgs := d.Messages[s.ID]
	out.MessageCount = len(msgs)
	for _, m := range msgs {
		if m.Role == api.RoleUser {
			if out.FirstPrompt = firstLine(m.Text); out.FirstPrompt != "" {
				break
			}
		}
	}
	for j := len(msgs) - 1; j >= 0; j-- {
		if msgs[j].Role == api.RoleAgent {
			if out.LastReply = firstLine(msgs[j].Text); out.LastReply != "" {
				break
			}
		}
	}
	return out
}

// firstLine is text's first non-blank line, trimmed, cut to summaryLineLen
// characters (an ellipsis marking the cut), as a copy.
func firstLine(text string) string {
	text = strings.TrimLeftFunc(text, unicode.IsSpace)
	if i := strings.IndexAny(text, "\r\n"); i >= 0 {
		text = text[:i]
	}
	return strings.Clone(clip(strings.TrimSpace(text), summaryLineLen))
}

// clip cuts s to at most n characters, the last of them an ellipsis when
// it was cut.
func clip(s string, n int) string {
	if len(s) <= n { // fewer bytes than n: fewer characters too
		return s
	}
	count := 0
	for i := range s {
		if count == n-1 {
			if utf8.RuneCountInString(s[i:]) > 1 {
				return s[:i] + "…"
			}
			return s
		}
		count++
	}
	return s
}

// snippet is the text around byte i of text, on one line, at most
// snippetLen characters, ellipses marking the cuts.
func snippet(text string, i int) string {
	const before = 40 // characters kept before the match
	start := i
	for n := 0; n < before && start > 0; n++ {
		_, size := utf8.DecodeLastRuneInString(text[:start])
		start -= size
	}
	var b strings.Builder
	if start > 0 {
		b.WriteString("…")
	}
	n := utf8.RuneCountInString(b.String())
	rest := strings.TrimLeftFunc(text[start:], unicode.IsSpace)
	space := false // a run of spaces and control characters is one space
	for j, r := range rest {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			space = true
			continue
		}
		if space {
			space = false
			if n >= snippetLen-1 {
				b.WriteString("…")
				break
			}
			b.WriteByte(' ')
			n++
		}
		if n == snippetLen-1 && utf8.RuneCountInString(rest[j:]) > 1 {
			b.WriteString("…")
			break
		}
		b.WriteRune(r)
		n++
	}
	return b.String()
}

// folder finds a query in texts ignoring case (Unicode simple folding;
// an ASCII query, the common case, is compared a byte at a time).
type folder struct {
	q      string
	ascii  bool
	lower  string // an ASCII query in lower case
	c0, c1 byte   // an ASCII query's first byte in both cases
}

func newFolder(q string) *folder {
	f := &folder{q: q, ascii: true}
	for i := 0; i < len(q); i++ {
		if q[i] >= utf8.RuneSelf {
			f.ascii = false
			break
		}
	}
	if f.ascii {
		f.lower = strings.ToLower(q)
		f.c0, f.c1 = f.lower[0], toUpper(f.lower[0])
	}
	return f
}

func toLower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func toUpper(c byte) byte {
	if 'a' <= c && c <= 'z' {
		return c - ('a' - 'A')
	}
	return c
}

// prefixOf reports whether s starts with the query.
func (f *folder) prefixOf(s string) bool {
	if f.ascii {
		return len(s) >= len(f.lower) && f.asciiAt(s, 0)
	}
	_, ok := foldPrefix(s, f.q)
	return ok
}

// index is the byte offset of the query's first occurrence in s, or -1.
func (f *folder) index(s string) int {
	if !f.ascii {
		for i := range s {
			if _, ok := foldPrefix(s[i:], f.q); ok {
				return i
			}
		}
		return -1
	}
	n := len(f.lower)
	if n > len(s) {
		return -1
	}
	// Candidates: the next occurrence of the first byte in either case,
	// each found with IndexByte and kept until passed (linear overall).
	next := func(c byte, from int) int {
		if j := strings.IndexByte(s[from:], c); j >= 0 {
			return from + j
		}
		return len(s)
	}
	a, b := next(f.c0, 0), len(s)
	if f.c1 != f.c0 {
		b = next(f.c1, 0)
	}
	for {
		i := min(a, b)
		if i > len(s)-n {
			return -1
		}
		if f.asciiAt(s, i) {
			return i
		}
		if i == a {
			a = next(f.c0, i+1)
		}
		if i == b {
			b = next(f.c1, i+1)
		}
	}
}

// asciiAt reports whether s holds the ASCII query at byte i (i+len fits).
func (f *folder) asciiAt(s string, i int) bool {
	for j := 0; j < len(f.lower); j++ {
		if toLower(s[i+j]) != f.lower[j] {
			return false
		}
	}
	return true
}

// foldPrefix reports whether s starts with q under simple case folding,
// and how many bytes of s that prefix is.
func foldPrefix(s, q string) (int, bool) {
	n := 0
	for _, qr := range q {
		if n >= len(s) {
			return 0, false
		}
		sr, size := utf8.DecodeRuneInString(s[n:])
		if !equalFold(sr, qr) {
			return 0, false
		}
		n += size
	}
	return n, true
}

func equalFold(a, b rune) bool {
	if a == b {
		return true
	}
	for r := unicode.SimpleFold(a); r != a; r = unicode.SimpleFold(r) {
		if r == b {
			return true
		}
	}
	return false
}
