package state

import (
	"encoding/json"
	"time"

	"github.com/paddockhq/paddock/api"
)

// A hand-written codec for the hottest command bodies and for the envelope.
// encoding/json reads every byte through its scanner twice (a validity pass,
// then the decode) and reaches fields by reflection: a task's creation spent
// more CPU in DecodeCommand, on every node, than in anything else of its
// own. The codec changes no byte of the log:
//   - encoding writes exactly the bytes encoding/json writes, and falls back
//     to encoding/json for any string it would have to escape;
//   - decoding accepts only that exact form (no whitespace, fields in order,
//     strings without escapes) and hands anything else to encoding/json, so
//     every input decodes to what encoding/json makes of it (FuzzCanonicalDecodeMatchesEncodingJSON).

// canonicalBody is a command body with a hand-written codec.
type canonicalBody interface {
	// appendCanonical appends the bytes json.Marshal writes for the body,
	// or reports false when it cannot (json.Marshal is used then).
	appendCanonical(dst []byte) ([]byte, bool)
	// decodeCanonical sets the body from data when data is exactly what
	// appendCanonical writes, and reports whether it did; the body is
	// unchanged when it reports false.
	decodeCanonical(data []byte) bool
}

// encodeBody is json.Marshal(body), written by hand for a canonicalBody.
func encodeBody(body any) ([]byte, error) {
	if c, ok := body.(canonicalBody); ok {
		if out, ok := c.appendCanonical(make([]byte, 0, 256)); ok {
			return out, nil
		}
	}
	return json.Marshal(body)
}

// decodeBody decodes a body without its envelope; false means it was not
// decoded (the caller then decodes the whole entry with encoding/json).
// Every body is a JSON object, so anything else (null among them, which
// encoding/json would take as "leave the body alone") is left to the caller.
func decodeBody(data []byte, body any) bool {
	if len(data) == 0 || data[0] != '{' {
		return false
	}
	if c, ok := body.(canonicalBody); ok && c.decodeCanonical(data) {
		return true
	}
	return json.Unmarshal(data, body) == nil
}

// splitEnvelope reads the envelope Encode writes,
// {"key":"K","now":"T","body":B}, with a key that needs no escapes; ok is
// false for any other form.
func splitEnvelope(data []byte) (key string, now time.Time, body []byte, ok bool) {
	c := cursor{b: data, ok: true}
	c.lit(`{"key":`)
	key = c.str()
	c.lit(`,"now":`)
	now = c.time()
	c.lit(`,"body":`)
	if !c.ok || len(c.b) < 2 || c.b[len(c.b)-1] != '}' {
		return "", time.Time{}, nil, false
	}
	return key, now, c.b[:len(c.b)-1], true
}

// plainByte reports whether a byte may stand for itself inside a JSON
// string that encoding/json writes and reads unchanged: printable ASCII
// except the quote and the backslash.
func plainByte(c byte) bool { return c >= 0x20 && c < 0x7f && c != '"' && c != '\\' }

// appendString appends s as a JSON string the way encoding/json writes it,
// or reports false when encoding/json would escape something in it (it
// also escapes <, > and &, and rewrites non-ASCII text it finds invalid).
func appendString(dst []byte, s string) ([]byte, bool) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !plainByte(c) || c == '<' || c == '>' || c == '&' {
			return dst, false
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"'), true
}

// appendTime appends t as encoding/json writes it (Time.MarshalJSON: the
// text AppendText writes, quoted), without allocating.
func appendTime(dst []byte, t time.Time) ([]byte, bool) {
	b, err := t.AppendText(append(dst, '"'))
	if err != nil {
		return dst, false
	}
	return append(b, '"'), true
}

// cursor reads the canonical form; the first mismatch clears ok, and every
// later read is then a no-op.
type cursor struct {
	b  []byte
	ok bool
}

// lit consumes the literal s.
func (c *cursor) lit(s string) {
	if c.ok && len(c.b) >= len(s) && string(c.b[:len(s)]) == s {
		c.b = c.b[len(s):]
		return
	}
	c.ok = false
}

// quoted consumes a JSON string made of plain bytes and returns it with its
// quotes.
func (c *cursor) quoted() []byte {
	if !c.ok || len(c.b) == 0 || c.b[0] != '"' {
		c.ok = false
		return nil
	}
	for i := 1; i < len(c.b); i++ {
		switch ch := c.b[i]; {
		case ch == '"':
			q := c.b[:i+1]
			c.b = c.b[i+1:]
			return q
		case !plainByte(ch):
			c.ok = false
			return nil
		}
	}
	c.ok = false
	return nil
}

// str consumes a JSON string made of plain bytes.
func (c *cursor) str() string {
	q := c.quoted()
	if !c.ok {
		return ""
	}
	return string(q[1 : len(q)-1])
}

// time consumes a JSON string holding a time, read as encoding/json reads
// one (Time.UnmarshalJSON).
func (c *cursor) time() time.Time {
	q := c.quoted()
	var t time.Time
	if c.ok && t.UnmarshalJSON(q) != nil {
		c.ok = false
	}
	return t
}

// taskLayout is the text around a task's fields in one JSON layout.
type taskLayout struct {
	open, id, title, path, branch, state, created, updated, close string
}

var (
	// compactTask is json.Marshal's layout.
	compactTask = taskLayout{`{`, `"id":`, `,"title":`, `,"workspace":{"path":`, `,"branch":`, `},"state":`,
		`,"created_at":`, `,"updated_at":`, `}`}
	// indentedTask is an Encoder's with SetIndent("", "  "), its newline included.
	indentedTask = taskLayout{"{\n", `  "id": `, ",\n  \"title\": ", ",\n  \"workspace\": {\n    \"path\": ",
		",\n    \"branch\": ", "\n  },\n  \"state\": ", ",\n  \"created_at\": ", ",\n  \"updated_at\": ", "\n}\n"}
)

// appendTask appends t in layout l, or reports false when encoding/json
// would escape one of its strings.
func appendTask(dst []byte, t *api.Task, l *taskLayout) ([]byte, bool) {
	ok := true
	str := func(lit, s string) {
		dst = append(dst, lit...)
		if ok {
			dst, ok = appendString(dst, s)
		}
	}
	tm := func(lit string, v time.Time) {
		dst = append(dst, lit...)
		if ok {
			dst, ok = appendTime(dst, v)
		}
	}
	dst = append(dst, l.open...)
	str(l.id, t.ID)
	str(l.title, t.Title)
	str(l.path, t.Workspace.Path)
	str(l.branch, t.Workspace.Branch)
	str(l.state, string(t.State))
	tm(l.created, t.CreatedAt)
	tm(l.updated, t.UpdatedAt)
	return append(dst, l.close...), ok
}

// AppendIndentedTask appends the JSON an encoding/json Encoder with
// SetIndent("", "  ") writes for t, its final newline included, as the API
// answers a task; ok is false when one of its strings is not printable
// ASCII free of quotes, backslashes, <, > and & (the caller then uses
// encoding/json).
func AppendIndentedTask(dst []byte, t api.Task) ([]byte, bool) {
	return appendTask(dst, &t, &indentedTask)
}

// appendCanonical implements canonicalBody: {"task":{...}}.
func (b *CreateTaskBody) appendCanonical(dst []byte) ([]byte, bool) {
	dst, ok := appendTask(append(dst, `{"task":`...), &b.Task, &compactTask)
	return append(dst, '}'), ok
}

// decodeCanonical implements canonicalBody.
func (b *CreateTaskBody) decodeCanonical(data []byte) bool {
	c := cursor{b: data, ok: true}
	c.lit(`{"task":`)
	t := c.task(&compactTask)
	c.lit(`}`)
	if !c.ok || len(c.b) != 0 {
		return false
	}
	b.Task = t
	return true
}

// task consumes a task in layout l.
func (c *cursor) task(l *taskLayout) api.Task {
	var t api.Task
	c.lit(l.open)
	c.lit(l.id)
	t.ID = c.str()
	c.lit(l.title)
	t.Title = c.str()
	c.lit(l.path)
	t.Workspace.Path = c.str()
	c.lit(l.branch)
	t.Workspace.Branch = c.str()
	c.lit(l.state)
	t.State = api.TaskState(c.str())
	c.lit(l.created)
	t.CreatedAt = c.time()
	c.lit(l.updated)
	t.UpdatedAt = c.time()
	c.lit(l.close)
	return t
}

var _ canonicalBody = (*CreateTaskBody)(nil)
