package api

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/shared/runtime"
	"github.com/paddockhq/paddock/supervisor/plugins"
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

// checkingRuntime is a plugin with runtime.WorkspaceChecker that accepts
// paths under root; plainRuntime is one without it (as docker, remote).
type checkingRuntime struct {
	runtime.Runtime
	root string
}

func (r checkingRuntime) CheckTaskWorkspace(_ context.Context, path string) error {
	if strings.HasPrefix(path, r.root+"/") {
		return nil
	}
	return fmt.Errorf("runtime check task workspace: workspace path %s is outside task_workspace_root %s: %w", path, r.root, runtime.ErrInvalidRequest)
}

type plainRuntime struct{ runtime.Runtime }

type fakePlugins map[string]runtime.Runtime

func (p fakePlugins) List() []plugins.Status {
	var out []plugins.Status
	for name := range p {
		out = append(out, plugins.Status{Name: name, Healthy: true})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (p fakePlugins) Get(name string) (runtime.Runtime, error) { return p[name], nil }

// A task's workspace is refused only when every runtime refuses it: a
// task names no runtime, and one that accepts the path or does not check
// it may run the task's sessions.
func TestCheckTaskWorkspaceRefusesOnlyWhatEveryRuntimeRefuses(t *testing.T) {
	src, other := checkingRuntime{root: "/src"}, checkingRuntime{root: "/other"}
	for _, tc := range []struct {
		name    string
		plugins fakePlugins
		path    string
		refused bool
	}{
		{"inside", fakePlugins{"standalone": src}, "/src/app", false},
		{"outside", fakePlugins{"standalone": src}, "/etc", true},
		{"no path", fakePlugins{"standalone": src}, "", false},
		{"another runtime accepts", fakePlugins{"standalone": src, "x": other}, "/other/app", false},
		{"every runtime refuses", fakePlugins{"standalone": src, "x": other}, "/etc", true},
		{"a runtime that does not check", fakePlugins{"standalone": src, "remote": plainRuntime{}}, "/etc", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Server{plugins: tc.plugins}
			err := s.checkTaskWorkspace(context.Background(), tc.path)
			if !tc.refused {
				if err != nil {
					t.Fatalf("checkTaskWorkspace(%q) = %v; want nil", tc.path, err)
				}
				return
			}
			status, _ := classify(err)
			if status != http.StatusBadRequest || !strings.Contains(err.Error(), `runtime "standalone" says it is outside task_workspace_root /src`) {
				t.Fatalf("checkTaskWorkspace(%q) = %v (%d); want 400 naming standalone's root", tc.path, err, status)
			}
		})
	}
}
