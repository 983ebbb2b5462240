package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/api"
)

// strictBody exercises every shape checkKeys follows: nested structs,
// pointers, slices, maps, an embedded struct, an untagged field, values of
// type any and values that decode themselves.
type strictBody struct {
	Title    string            `json:"title"`
	Count    int               `json:"count,omitempty"`
	Nested   *strictNested     `json:"nested"`
	Items    []strictNested    `json:"items"`
	Labels   map[string]string `json:"labels"`
	Extra    any               `json:"extra"`
	Raw      json.RawMessage   `json:"raw"`
	Ignored  string            `json:"-"`
	Untagged string
	strictEmbedded
}

type strictNested struct {
	Name string          `json:"name"`
	Deep []*strictNested `json:"deep"`
}

type strictEmbedded struct {
	Kind string `json:"kind"`
}

// TestDecodeStrictRefusesDuplicateAndMiscasedKeys: encoding/json took the
// last of two equal keys ({"title":"a","title":"b"} read as title "b") and
// matched keys to fields ignoring case ({"Title":"x"} set title). Both are
// now a 400 naming the key.
func TestDecodeStrictRefusesDuplicateAndMiscasedKeys(t *testing.T) {
	refused := []struct{ body, key string }{
		{`{"title":"a","title":"b"}`, `"title" appears more than once`},
		{`{"title":"a","ti\u0074le":"b"}`, `"title" appears more than once`},
		{`{"nested":{"name":"a","name":"b"}}`, `"nested.name" appears more than once`},
		{`{"items":[{"name":"a"},{"name":"b","name":"c"}]}`, `"items[1].name" appears more than once`},
		{`{"nested":{"deep":[{"deep":[{"name":"a","name":"a"}]}]}}`, `"nested.deep[0].deep[0].name" appears more than once`},
		{`{"labels":{"a":"1","a":"2"}}`, `"labels.a" appears more than once`},
		{`{"extra":{"x":1,"x":2}}`, `"extra.x" appears more than once`},
		{`{"extra":[{"x":{"y":1,"y":2}}]}`, `"extra[0].x.y" appears more than once`},
		{`{"raw":{"x":1,"x":2}}`, `"raw.x" appears more than once`},
		{`{"kind":"a","kind":"b"}`, `"kind" appears more than once`},
		{`{"Title":"x"}`, `"Title" is not a known field: field names are case-sensitive (did you mean "title"?)`},
		{`{"TITLE":"x"}`, `"TITLE" is not a known field`},
		{`{"nested":{"Name":"x"}}`, `"nested.Name" is not a known field`},
		{`{"items":[{"name":"a"},{"NAME":"b"}]}`, `"items[1].NAME" is not a known field`},
		{`{"Kind":"x"}`, `"Kind" is not a known field`},
		{`{"untagged":"x"}`, `"untagged" is not a known field`},
		{`{"\u212aind":"x"}`, `"Kind" is not a known field`},     // the Kelvin sign folds to k
		{`{"title":"a"} {}`, `unexpected data after the object`}, // refused as before
		{`{"title":"a"}}`, `unexpected data after the object`},   // was let by
		{`{"title":"a"}]`, `unexpected data after the object`},
	}
	for _, tc := range refused {
		var v strictBody
		err := decodeStrict([]byte(tc.body), &v)
		var ae *apiError
		if !errors.As(err, &ae) || ae.status != http.StatusBadRequest || ae.code != CodeBadRequest || !strings.Contains(ae.msg, tc.key) {
			t.Errorf("%s: %v, want 400 bad_request naming %s", tc.body, err, tc.key)
		}
	}

	accepted := []struct {
		body string
		want strictBody
	}{
		{`{"title":"a"}`, strictBody{Title: "a"}},
		{`{"nested":{"name":"n","deep":[{"name":"d"}]}}`, strictBody{Nested: &strictNested{Name: "n", Deep: []*strictNested{{Name: "d"}}}}},
		{`{"labels":{"A":"1","a":"2"}}`, strictBody{Labels: map[string]string{"A": "1", "a": "2"}}},
		{`{"kind":"k","Untagged":"u"}`, strictBody{Untagged: "u", strictEmbedded: strictEmbedded{Kind: "k"}}},
		{`{"extra":{"X":1,"x":[1,{"a":null}]}}`, strictBody{Extra: map[string]any{"X": 1.0, "x": []any{1.0, map[string]any{"a": nil}}}}},
		{`{"raw":{"a":1, "A":2}}`, strictBody{Raw: json.RawMessage(`{"a":1, "A":2}`)}},
		{`{"items":[{"name":"a"},{"name":"a"}]}`, strictBody{Items: []strictNested{{Name: "a"}, {Name: "a"}}}},
	}
	for _, tc := range accepted {
		var v strictBody
		if err := decodeStrict([]byte(tc.body), &v); err != nil || !reflect.DeepEqual(v, tc.want) {
			t.Errorf("%s: %+v (%v), want %+v", tc.body, v, err, tc.want)
		}
	}

	// The API's own request types.
	var task createTaskRequest
	if err := decodeStrict([]byte(`{"title":"x","workspace":{"path":"/p","Branch":"b"}}`), &task); err == nil || !strings.Contains(err.Error(), `"workspace.Branch"`) {
		t.Errorf("task with a miscased workspace key: %v", err)
	}
	var sess api.CreateSessionRequest
	if err := decodeStrict([]byte(`{"agent":"a","runtime":"r","runtime_options":{"k":"1","k":"2"}}`), &sess); err == nil || !strings.Contains(err.Error(), `"runtime_options.k"`) {
		t.Errorf("session with a duplicate runtime option: %v", err)
	}
}

// FuzzDecodeStrict: decodeStrict answers any body with a value or a 400,
// never a panic; what it accepts, lenient encoding/json reads to the same
// value and holds no object with a key twice; and it accepts what
// json.Marshal writes.
func FuzzDecodeStrict(f *testing.F) {
	for _, seed := range []string{
		`{"title":"a"}`, `{"title":"a","title":"b"}`, `{"Title":"x"}`, `{"kind":"k","Untagged":"u"}`,
		`{"nested":{"name":"n","deep":[{"name":"d","deep":null}]}}`, `{"items":[{"name":"a"},{"NAME":"b"}]}`,
		`{"labels":{"A":"1","a":"2"}}`, `{"extra":{"x":[1,{"y":2,"y":3}]}}`, `{"raw":[{"a":1}]}`,
		`{"count":1e3}`, `{"title":"a"} {}`, `[1]`, `null`, ``, `{"ti\u0074le":"a"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var v strictBody
		err := decodeStrict(body, &v)
		if err != nil {
			var ae *apiError
			if !errors.As(err, &ae) || ae.status != http.StatusBadRequest {
				t.Fatalf("%q: %v, want a 400", body, err)
			}
			return
		}
		var lenient strictBody
		if err := json.Unmarshal(body, &lenient); err != nil || !reflect.DeepEqual(v, lenient) {
			t.Fatalf("%q: strict %+v, lenient %+v (%v)", body, v, lenient, err)
		}
		if key, dup := duplicateKey(body); dup {
			t.Fatalf("%q: accepted with %q twice in an object", body, key)
		}
		out, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var again strictBody
		if err := decodeStrict(out, &again); err != nil {
			t.Fatalf("%q: json.Marshal's %s refused: %v", body, out, err)
		}
		if out2, _ := json.Marshal(again); !bytes.Equal(out, out2) {
			t.Fatalf("%q: %s read back as %s", body, out, out2)
		}
	})
}

// duplicateKey reports a key given twice in an object of body, found
// without any type (the fuzz target's oracle).
func duplicateKey(body []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	var stack []map[string]bool
	expectKey := func() bool { return len(stack) > 0 && stack[len(stack)-1] != nil }
	for {
		if expectKey() && dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return "", false
			}
			key := tok.(string)
			if stack[len(stack)-1][key] {
				return key, true
			}
			stack[len(stack)-1][key] = true
		}
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, map[string]bool{})
		case json.Delim('['):
			stack = append(stack, nil)
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		if len(stack) == 0 {
			return "", false
		}
	}
}
