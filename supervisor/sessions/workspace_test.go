package sessions

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/shared/runtime"
)

// A stopped session's workspace is asked of its executor's own plugin (on
// n2 here, not the leader's n1): one that reports it gone makes the
// session not resumable, and a resume is refused naming the path; one that
// reports it there, or says nothing of it, changes nothing.
func TestWorkspaceMissingIsAskedOfTheExecutorsPlugin(t *testing.T) {
	w := newWorld(t, "n1", "n2")
	exists := map[string]string{"s-gone": "false", "s-there": "true", "s-silent": ""}
	w.rts["n2"].onInspect = func(h fakeHandle) (runtime.InspectResponse, error) {
		d := map[string]string{"workspace": "/w/" + h.ID + "/workspace"}
		if v := exists[strings.TrimPrefix(h.ID, "ex-")]; v != "" {
			d["workspace_exists"] = v
		}
		return runtime.InspectResponse{State: runtime.StateExited, Details: d}, nil
	}
	for id := range exists {
		w.recorded(id, api.SessionStopped, api.Executor{ID: "ex-" + id, Node: "n2", Status: api.ExecutorStopped,
			Handle: handleOf("ex-" + id), WorkspacePath: "/w/ex-" + id + "/workspace"})
	}
	m := w.leader("n1")
	ctx := context.Background()

	path, missing := m.WorkspaceMissing(ctx, "s-gone")
	if !missing || path != "/w/ex-s-gone/workspace" {
		t.Fatalf("WorkspaceMissing(s-gone) = %q, %v; want the path, true", path, missing)
	}
	err := m.Resume(ctx, "s-gone")
	if !errors.Is(err, ErrNotResumable) || !strings.Contains(err.Error(), path) {
		t.Fatalf("Resume(s-gone) = %v; want ErrNotResumable naming %s", err, path)
	}
	if s := w.session("s-gone"); s.State != api.SessionStopped {
		t.Fatalf("the refused resume moved the session to %s", s.State)
	}
	for _, id := range []string{"s-there", "s-silent"} {
		if path, missing := m.WorkspaceMissing(ctx, id); missing {
			t.Errorf("WorkspaceMissing(%s) = %q, true; want false", id, path)
		}
	}
	if calls := w.rts["n1"].executorCalls(); len(calls) != 0 {
		t.Errorf("the leader's own plugin was asked %v about executors on n2", calls)
	}
}
