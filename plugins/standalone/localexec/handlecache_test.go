package localexec_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/paddockhq/paddock/plugins/standalone/localexec"
	"github.com/paddockhq/paddock/shared/runtime"
)

func setRoot(t *testing.T, r *localexec.Runtime, root string) {
	t.Helper()
	if diags, err := r.SetConfig(context.Background(), runtime.ConfigSource{Filename: "t.hcl", Source: fmt.Appendf(nil, "workspace_root = %q\n", root)}); err != nil || diags.HasErrors() {
		t.Fatalf("set config: %v %v", err, diags)
	}
}

// TestHandleCheckFollowsWorkspaceRoot: a handle accepted (and cached) under
// one workspace_root is refused once the root changes, and accepted again
// when it changes back.
func TestHandleCheckFollowsWorkspaceRoot(t *testing.T) {
	ctx := context.Background()
	rootA, rootB := t.TempDir(), t.TempDir()
	r := localexec.New(nil)
	setRoot(t, r, rootA)
	h := benchHandle(t, rootA)
	for i, step := range []struct {
		root    string
		wantErr error
	}{
		{rootA, nil}, {rootA, nil}, {rootB, runtime.ErrNotFound}, {rootB, runtime.ErrNotFound}, {rootA, nil},
	} {
		setRoot(t, r, step.root)
		resp, err := r.Inspect(ctx, h)
		if step.wantErr != nil {
			if !errors.Is(err, step.wantErr) {
				t.Fatalf("step %d: Inspect = %v, want %v", i, err, step.wantErr)
			}
			continue
		}
		if err != nil || resp.State != runtime.StateExited || resp.Details["workspace_exists"] != "true" {
			t.Fatalf("step %d: Inspect = %+v, %v", i, resp, err)
		}
	}
}

// TestMalformedHandlesStayRefused: refused handles are refused every time
// (only accepted ones are cached).
func TestMalformedHandlesStayRefused(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	r := localexec.New(nil)
	setRoot(t, r, root)
	for _, hb := range []string{
		"", "{", "null", `{"v":2,"session_id":"s1"}`,
		fmt.Sprintf(`{"v":1,"session_id":"../x","session_dir":%q,"workspace":"/w","state_dir":"/s"}`, root),
		fmt.Sprintf(`{"v":1,"session_id":"s1","session_dir":%q,"workspace":"/etc","owns_workspace":true,"state_dir":%q}`, root+"/s1", root+"/s1/state"),
	} {
		for range 2 {
			if _, err := r.Inspect(ctx, []byte(hb)); !errors.Is(err, runtime.ErrNotFound) {
				t.Fatalf("Inspect(%q) = %v, want ErrNotFound", hb, err)
			}
		}
	}
}

// TestManyHandles: more distinct handles than the cache holds are all
// still answered right.
func TestManyHandles(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	r := localexec.New(nil)
	setRoot(t, r, root)
	for i := range 5000 {
		id := fmt.Sprintf("s%d", i)
		hb := fmt.Appendf(nil, `{"v":1,"session_id":%q,"session_dir":%q,"workspace":%q,"owns_workspace":true,"state_dir":%q,"pid":%d}`,
			id, root+"/"+id, root+"/"+id+"/workspace", root+"/"+id+"/state", os.Getpid())
		// No session dir exists: the executor is gone.
		if _, err := r.Inspect(ctx, hb); !errors.Is(err, runtime.ErrNotFound) {
			t.Fatalf("Inspect(%s) = %v, want ErrNotFound", id, err)
		}
	}
	for range 2 {
		if resp, err := r.Inspect(ctx, benchHandle(t, root)); err != nil || resp.State != runtime.StateExited {
			t.Fatalf("Inspect after many handles = %+v, %v", resp, err)
		}
	}
}
