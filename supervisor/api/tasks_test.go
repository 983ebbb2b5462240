package api

import (
	"fmt"
	"regexp"
	"testing"
)

// newID returns distinct version-4 UUIDs in their canonical text form.
func TestNewIDIsAVersion4UUID(t *testing.T) {
	uuid := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for i := 0; i < 1000; i++ {
		id := newID()
		if !uuid.MatchString(id) {
			t.Fatalf("newID() = %q, not a version-4 UUID", id)
		}
		if seen[id] {
			t.Fatalf("newID() repeated %q", id)
		}
		seen[id] = true
	}
}

// readCreateTask reads a task creation body the way decode does, after
// the body was read: the compact reader, else encoding/json.
func readCreateTask(body []byte) (createTaskRequest, error) {
	var req createTaskRequest
	if req.decodeCompact(body) {
		return req, nil
	}
	return req, decodeStrict(body, &req)
}

// strictCreateTask reads it with encoding/json alone.
func strictCreateTask(body []byte) (createTaskRequest, error) {
	var req createTaskRequest
	return req, decodeStrict(body, &req)
}

var createTaskBodies = []string{
	`{"title":"a"}`,
	`{"title":"bench-12"}` + "\n",
	`{"title":"x","workspace":{"path":"/srv/r","branch":"main"}}`,
	`{"title":"x","workspace":{"path":"","branch":""}}`,
	`{"title":"x","workspace":{"path":"/p"}}`,
	`{"title":"x","workspace":{"branch":"b","path":"/p"}}`,
	`{"workspace":{"path":"/p","branch":"b"},"title":"x"}`,
	`{ "title": "spaced" }`,
	`{"title":"esc\"aped"}`,
	`{"title":"\u0041"}`,
	`{"title":"é"}`,
	`{"title":"a","colour":"red"}`,
	`{"title":"a","workspace":{"path":"/p","branch":"b","x":1}}`,
	`{"title":"a"}}`,
	`{"title":"a"} {}`,
	`{"title":"a"`,
	`{"title":7}`,
	`{"TITLE":"a"}`,
	`{"title":"a","title":"b"}`,
	`{"title":null}`,
	`null`,
	``,
	`   `,
	`[1]`,
}

// The compact reader of a task creation agrees with encoding/json's strict
// reading on every body: the same request, or the same error.
func TestCreateTaskCompactReaderMatchesStrictDecoding(t *testing.T) {
	for _, body := range createTaskBodies {
		sameCreateTask(t, []byte(body))
	}
}

func FuzzCreateTaskCompactReaderMatchesStrictDecoding(f *testing.F) {
	for _, body := range createTaskBodies {
		f.Add([]byte(body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		sameCreateTask(t, body)
	})
}

func sameCreateTask(t *testing.T, body []byte) {
	t.Helper()
	got, gotErr := readCreateTask(body)
	want, wantErr := strictCreateTask(body)
	if got != want || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
		t.Fatalf("%q: compact reader %+v (%v), encoding/json %+v (%v)", body, got, gotErr, want, wantErr)
	}
}
