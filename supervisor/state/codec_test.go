package state

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/api"
)

// decodeWithEncodingJSON is DecodeCommand as it was before the hand-written
// codec: the oracle the codec must agree with on every input.
func decodeWithEncodingJSON(data []byte) (Command, bool, error) {
	if len(data) < 2 {
		return Command{}, false, fmt.Errorf("command too short (%d bytes)", len(data))
	}
	t := CommandType(data[0])
	if data[1] != bodyVersion {
		return Command{}, false, fmt.Errorf("command %d: unsupported body version %d", t, data[1])
	}
	body := bodyFor(t)
	if body == nil {
		if t&IgnoreUnknownFlag != 0 {
			return Command{Type: t}, false, nil
		}
		return Command{}, false, fmt.Errorf("unknown command type %d", t)
	}
	env := envelope{Body: body}
	if err := json.Unmarshal(data[2:], &env); err != nil {
		return Command{}, false, fmt.Errorf("command %d: decode: %w", t, err)
	}
	if env.Body != body {
		return Command{}, false, fmt.Errorf("command %d: no body", t)
	}
	return Command{Type: t, Key: env.Key, Now: env.Now, Body: body}, true, nil
}

// encodeWithEncodingJSON is Command.Encode as encoding/json writes it.
func encodeWithEncodingJSON(t *testing.T, c Command) []byte {
	t.Helper()
	body, err := json.Marshal(c.Body)
	if err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(struct {
		Key  string          `json:"key"`
		Now  time.Time       `json:"now"`
		Body json.RawMessage `json:"body"`
	}{Key: c.Key, Now: c.Now.UTC(), Body: body})
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte{byte(c.Type), bodyVersion}, out...)
}

// sameDecoding checks that DecodeCommand and encoding/json agree on data.
func sameDecoding(t *testing.T, data []byte) {
	t.Helper()
	got, gotOK, gotErr := DecodeCommand(data)
	want, wantOK, wantErr := decodeWithEncodingJSON(data)
	if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || gotOK != wantOK || !reflect.DeepEqual(got, want) {
		t.Fatalf("%q:\ndecoded   %+v ok=%v err=%v\nencoding/json %+v ok=%v err=%v", data, got, gotOK, gotErr, want, wantOK, wantErr)
	}
}

var codecTasks = []api.Task{
	{ID: "38f5fe02-7b96-464c-942d-75af82dc9e63", Title: "bench-1234"},
	{ID: "t", Title: "x", Workspace: api.Workspace{Path: "/srv/repo", Branch: "feature/a.b-c"}, State: api.TaskDone,
		CreatedAt: t0, UpdatedAt: t0.Add(1500 * time.Millisecond)},
	{ID: "t", Title: `quote " and backslash \ inside`},
	{ID: "t", Title: "<tag> & more"},
	{ID: "t", Title: "é and 日本 and \u2028"},
	{ID: "t", Title: "tab\tand newline\n and \x00"},
	{ID: "t", Title: "invalid \xff utf-8"},
	{ID: "t", Title: "far future", CreatedAt: time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)},
	{ID: "t", Title: "zone", CreatedAt: t0.In(time.FixedZone("x", -7*3600))},
	{},
}

// The hand-written codec writes a task's creation byte for byte as
// encoding/json does, and reads it (and every other command's envelope)
// back to what encoding/json reads.
func TestCanonicalCodecMatchesEncodingJSON(t *testing.T) {
	keys := []string{"0123456789abcdef0123456789abcdef", `k"1`, "", "k\u00e9"}
	for i, task := range codecTasks {
		cmd := Command{Type: CmdCreateTask, Key: keys[i%len(keys)], Now: t0.Add(time.Duration(i) * time.Nanosecond), Body: &CreateTaskBody{Task: task}}
		got, err := cmd.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if want := encodeWithEncodingJSON(t, cmd); string(got) != string(want) {
			t.Fatalf("task %d encodes as\n%s\nencoding/json writes\n%s", i, got[2:], want[2:])
		}
		sameDecoding(t, got)
	}
	others := []Command{
		{Type: CmdSetTaskState, Key: "k", Now: t0, Body: &SetTaskStateBody{TaskID: "t", State: api.TaskDone}},
		{Type: CmdPutMessage, Key: "k", Now: t0, Body: &PutMessageBody{SessionID: "s", Message: api.Message{ID: "m3", Role: api.RoleAgent, Text: "hello \"world\""}, Source: "boot"}},
		{Type: CmdClaimLease, Key: "k", Now: t0, Body: &ClaimLeaseBody{SessionID: "s", ExecutorID: "e", Nonce: "n", TTL: 15 * time.Second}},
		{Type: CmdPublishEvent, Key: "k", Now: t0, Body: &PublishEventBody{SessionID: "s", Type: "agentctl_ready", Data: map[string]any{"n": 1.5, "s": "x"}}},
	}
	for _, cmd := range others {
		got, err := cmd.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if want := encodeWithEncodingJSON(t, cmd); string(got) != string(want) {
			t.Fatalf("command %d encodes as\n%s\nencoding/json writes\n%s", cmd.Type, got[2:], want[2:])
		}
		sameDecoding(t, got)
	}
}

// Entries that are not in the codec's exact form still decode as
// encoding/json decodes them: whitespace, other field orders, escapes,
// missing or unknown fields, a null body, trailing data.
func TestCanonicalCodecLeavesOtherFormsToEncodingJSON(t *testing.T) {
	task := `{"task":{"id":"t","title":"x","workspace":{"path":"","branch":""},"state":"","created_at":"0001-01-01T00:00:00Z","updated_at":"0001-01-01T00:00:00Z"}}`
	for _, env := range []string{
		`{"key":"k","now":"2026-11-29T12:00:00Z","body":` + task + `}`,
		`{"key":"k","now":"2026-11-29T12:00:00Z","body":{"task":{"id":"t","title":"x"}}}`,
		`{"key":"k","now":"2026-11-29T12:00:00Z","body":{"task":{"title":"x","id":"t"}}}`,
		`{"key":"k","now":"2026-11-29T12:00:00Z","body":{"task":{"id":"t","title":"a\u0041\"b"}}}`,
		`{"key":"k","now":"2026-11-29T12:00:00Z","body":{"task":{"id":"t","colour":"red"}}}`,
		`{"key":"k","now":"2026-11-29T12:00:00Z","body":{"task":{"id":"t","id":"u"}}}`,
		`{"key":"k","now":"2026-11-29T12:00:00Z","body":{"TASK":{"ID":"t"}}}`,
		`{"key":"k","now":"2026-11-29T12:00:00Z","body":` + strings.Replace(task, `"x"`, `"é"`, 1) + `}`,
		`{"key":"k","now":"2026-11-29T12:00:00Z","body":` + strings.Replace(task, `"0001-01-01T00:00:00Z"`, `"not a time"`, 1) + `}`,
		`{"key":"k","now":"2026-11-29T12:00:00Z","body":` + strings.Replace(task, `"0001-01-01T00:00:00Z"`, `null`, 1) + `}`,
		`{"key":"k","now":"2026-11-29T12:00:00Z","body":null}`,
		`{"key":"k","now":"2026-11-29T12:00:00Z","body": null}`,
		`{"key":"k","now":"2026-11-29T12:00:00Z","body":"text"}`,
		`{"key":"k","now":"2026-11-29T12:00:00Z","body":{"task":7}}`,
		`{"key":"k","now":"2026-11-29T12:00:00Z","body":{}`,
		`{"key":"k","now":"2026-11-29T12:00:00Z","body":{}}`,
		`{"key":"k","now":"2026-11-29T12:00:00Z","body":{},"extra":1}`,
		`{"key":"k","now":"2026-11-29T12:00:00Z","body":{}} `,
		`{"key":"k","now":"2026-11-29T12:00:00Z","body":{}}}`,
		`{"key":"k","now":"bad","body":{}}`,
		`{"key":"a\"b","now":"2026-11-29T12:00:00Z","body":{}}`,
		`{ "key":"k","now":"2026-11-29T12:00:00Z","body":{}}`,
		`{"now":"2026-11-29T12:00:00Z","key":"k","body":{}}`,
		`{"key":"k","now":"2026-11-29T12:00:00Z","body":{"task":{"id":"t"}} ,"key":"other"}`,
	} {
		sameDecoding(t, append([]byte{byte(CmdCreateTask), bodyVersion}, env...))
		sameDecoding(t, append([]byte{byte(CmdSetTaskState), bodyVersion}, env...))
	}
}

func FuzzCanonicalDecodeMatchesEncodingJSON(f *testing.F) {
	for _, task := range codecTasks {
		data, _ := Command{Type: CmdCreateTask, Key: "k", Now: t0, Body: &CreateTaskBody{Task: task}}.Encode()
		f.Add(data)
	}
	data, _ := Command{Type: CmdPutMessage, Key: "k", Now: t0, Body: &PutMessageBody{SessionID: "s", Message: api.Message{ID: "m1", Text: "hi"}}}.Encode()
	f.Add(data)
	f.Fuzz(func(t *testing.T, data []byte) {
		sameDecoding(t, data)
	})
}

func BenchmarkEncodeCreateTask(b *testing.B) {
	cmd := Command{Type: CmdCreateTask, Key: "0123456789abcdef0123456789abcdef", Now: t0, Body: &CreateTaskBody{Task: codecTasks[0]}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := cmd.Encode(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeCreateTask(b *testing.B) {
	data, _ := Command{Type: CmdCreateTask, Key: "0123456789abcdef0123456789abcdef", Now: t0, Body: &CreateTaskBody{Task: codecTasks[0]}}.Encode()
	b.Run("codec", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := DecodeCommand(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := decodeWithEncodingJSON(data); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// A task as the API answers it: AppendIndentedTask writes what an
// indenting encoding/json Encoder writes, for every task whose strings are
// printable ASCII without a quote, backslash, <, > or &, and refuses the
// others.
func TestAppendIndentedTaskMatchesEncodingJSON(t *testing.T) {
	for i, task := range codecTasks {
		var want strings.Builder
		enc := json.NewEncoder(&want)
		enc.SetIndent("", "  ")
		if err := enc.Encode(task); err != nil {
			t.Fatal(err)
		}
		got, ok := AppendIndentedTask(nil, task)
		plain := true
		for _, s := range []string{task.ID, task.Title, task.Workspace.Path, task.Workspace.Branch, string(task.State)} {
			plain = plain && !strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r >= 0x7f || strings.ContainsRune(`"\<>&`, r) })
		}
		if ok != plain {
			t.Errorf("task %d (%q): ok=%v, want %v", i, task.Title, ok, plain)
		}
		if ok && string(got) != want.String() {
			t.Errorf("task %d written as\n%s\nencoding/json writes\n%s", i, got, want.String())
		}
	}
}

// appendTime writes what Time.MarshalJSON writes, and refuses the times it
// refuses (years outside 0–9999, zone offsets of 24 hours or more), leaving
// dst as it was.
func TestAppendTimeMatchesMarshalJSON(t *testing.T) {
	times := []time.Time{
		{}, t0, t0.Add(123456789 * time.Nanosecond), t0.Add(time.Microsecond),
		t0.In(time.FixedZone("x", -7*3600-30*60)), t0.In(time.FixedZone("s", 5*3600+30*60+15)),
		time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC), t0.In(time.FixedZone("far", 24*3600)),
	}
	for _, tm := range times {
		want, err := tm.MarshalJSON()
		got, ok := appendTime([]byte("prefix:"), tm)
		if ok != (err == nil) {
			t.Errorf("%v: ok=%v, MarshalJSON error %v", tm, ok, err)
			continue
		}
		if !ok {
			want = nil
		}
		if string(got) != "prefix:"+string(want) {
			t.Errorf("%v: appended %q, want %q", tm, got, "prefix:"+string(want))
		}
	}
}
