package workspace_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/paddockhq/paddock/shared/runtime"
	"github.com/paddockhq/paddock/shared/runtime/workspace"
)

func mkdir(t *testing.T, p string) string {
	t.Helper()
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func symlink(t *testing.T, target, link string) string {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	return link
}

// TestConfine is the one rule every runtime applies to a task's path.
func TestConfine(t *testing.T) {
	base := t.TempDir()
	root := mkdir(t, filepath.Join(base, "root"))
	inside := mkdir(t, filepath.Join(root, "proj"))
	outside := mkdir(t, filepath.Join(base, "outside"))
	symlink(t, outside, filepath.Join(root, "escape"))
	symlink(t, inside, filepath.Join(root, "alias"))
	symlink(t, root, filepath.Join(base, "rootlink"))
	if err := os.WriteFile(filepath.Join(root, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, root, path, want string // want "" means refused
	}{
		{"absolute_inside", root, inside, inside},
		{"relative_inside", root, "proj", inside},
		{"the_root_itself", root, root, root},
		{"symlink_inside_to_inside", root, filepath.Join(root, "alias"), inside},
		{"root_given_through_a_symlink", filepath.Join(base, "rootlink"), filepath.Join(base, "rootlink", "proj"), inside},
		{"real_path_of_a_symlinked_root", filepath.Join(base, "rootlink"), inside, inside},
		{"dotdot_relative", root, "../outside", ""},
		{"dotdot_inside_absolute", root, filepath.Join(root, "proj", "..", "..", "outside"), ""},
		{"absolute_outside", root, outside, ""},
		{"symlink_inside_to_outside", root, filepath.Join(root, "escape"), ""},
		{"below_a_symlink_to_outside", root, filepath.Join(root, "escape", "."), ""},
		{"prefix_sibling", root, root + "2", ""},
		{"missing", root, filepath.Join(root, "nope"), ""},
		{"a_file", root, filepath.Join(root, "file"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := workspace.Confine(tc.root, "workspace_root", tc.path)
			if tc.want == "" {
				if !errors.Is(err, runtime.ErrInvalidRequest) {
					t.Fatalf("Confine(%q) = %q, %v; want ErrInvalidRequest", tc.path, got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Confine(%q) = %q, %v; want %q", tc.path, got, err, tc.want)
			}
		})
	}
}

// TestCheckPath is Confine's rule for a path that need not exist here: a
// task's workspace checked when the task is created.
func TestCheckPath(t *testing.T) {
	base := t.TempDir()
	root := mkdir(t, filepath.Join(base, "root"))
	inside := mkdir(t, filepath.Join(root, "proj"))
	outside := mkdir(t, filepath.Join(base, "outside"))
	symlink(t, outside, filepath.Join(root, "escape"))
	symlink(t, root, filepath.Join(base, "rootlink"))
	for _, tc := range []struct {
		name, root, path string
		ok               bool
	}{
		{"absolute_inside", root, inside, true},
		{"missing_inside", root, filepath.Join(root, "not", "yet"), true},
		{"the_root_itself", root, root, true},
		{"real_path_of_a_symlinked_root", filepath.Join(base, "rootlink"), filepath.Join(inside, "new"), true},
		{"a_root_not_made_yet", filepath.Join(base, "later"), filepath.Join(base, "later", "proj"), true},
		{"absolute_outside", root, outside, false},
		{"missing_outside", root, filepath.Join(base, "elsewhere", "proj"), false},
		{"dotdot_inside_absolute", root, filepath.Join(root, "proj", "..", "..", "outside"), false},
		{"missing_below_a_symlink_to_outside", root, filepath.Join(root, "escape", "new"), false},
		{"prefix_sibling", root, root + "2", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := workspace.CheckPath(tc.root, "task_workspace_root", tc.path)
			if tc.ok && err != nil {
				t.Fatalf("CheckPath(%q) = %v; want nil", tc.path, err)
			}
			if !tc.ok && (!errors.Is(err, runtime.ErrInvalidRequest) || !strings.Contains(err.Error(), "task_workspace_root "+tc.root)) {
				t.Fatalf("CheckPath(%q) = %v; want ErrInvalidRequest naming task_workspace_root %s", tc.path, err, tc.root)
			}
		})
	}
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v: %s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func TestPrepareOwnWorkspaceAndExistingCheck(t *testing.T) {
	root := filepath.Join(t.TempDir(), "ws")
	ctx := context.Background()
	p, err := workspace.Prepare(ctx, workspace.Request{Root: root, SessionID: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	if !p.Fresh || !p.OwnsWorkspace || p.Workspace != filepath.Join(root, "s1", "workspace") {
		t.Fatalf("prepared = %+v", p)
	}
	for _, dir := range []string{root, p.SessionDir, p.StateDir(), p.Workspace} {
		if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v, mode %v; want 0700", dir, err, st.Mode().Perm())
		}
	}
	again, err := workspace.Prepare(ctx, workspace.Request{Root: root, SessionID: "s1", Existing: true})
	if err != nil || again.Fresh {
		t.Fatalf("second Prepare = %+v, %v; want the same, not fresh", again, err)
	}
	if err := workspace.Remove(ctx, hclog.NewNullLogger(), p.Layout); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p.SessionDir); !os.IsNotExist(err) {
		t.Fatalf("session dir after Remove: %v", err)
	}
	// A session that ran before never gets a new, empty workspace.
	_, err = workspace.Prepare(ctx, workspace.Request{Root: root, SessionID: "s1", Existing: true})
	if !errors.Is(err, runtime.ErrNotFound) {
		t.Fatalf("Prepare of an existing session whose workspace is gone: %v, want ErrNotFound", err)
	}
	if _, err := os.Stat(p.Workspace); !os.IsNotExist(err) {
		t.Fatal("the refused Prepare made a workspace")
	}
}

func TestPrepareGitWorktreeAndPlainDirectory(t *testing.T) {
	root := t.TempDir()
	ctx := context.Background()
	repo := mkdir(t, filepath.Join(root, "repo"))
	git(t, repo, "init", "-q", "-b", "main")
	git(t, repo, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "--allow-empty", "-m", "init")
	p, err := workspace.Prepare(ctx, workspace.Request{Root: root, SessionID: "s1", Workspace: runtime.Workspace{Path: repo}})
	if err != nil {
		t.Fatal(err)
	}
	if p.Repo != repo || p.WorktreeBranch != "paddock/s1" || !p.OwnsWorkspace || p.GitCommonDir != filepath.Join(repo, ".git") {
		t.Fatalf("prepared = %+v", p)
	}
	if head := git(t, p.Workspace, "rev-parse", "--abbrev-ref", "HEAD"); head != "paddock/s1" {
		t.Errorf("worktree HEAD = %s", head)
	}
	var resp runtime.LaunchResponse
	p.Response(&resp)
	if resp.WorktreePath != p.Workspace || resp.WorktreeBranch != "paddock/s1" || resp.WorkspacePath != p.Workspace {
		t.Errorf("response = %+v", resp)
	}
	if err := p.Check(root, "s1"); err != nil {
		t.Errorf("Check of its own layout: %v", err)
	}
	if err := workspace.Remove(ctx, hclog.NewNullLogger(), p.Layout); err != nil {
		t.Fatal(err)
	}
	if git(t, repo, "branch", "--list", "paddock/s1") == "" {
		t.Error("Remove deleted the session's branch")
	}
	if _, err := workspace.Prepare(ctx, workspace.Request{Root: root, SessionID: "s2", Workspace: runtime.Workspace{Path: repo, Branch: "-D"}}); !errors.Is(err, runtime.ErrInvalidRequest) {
		t.Errorf("option-like branch: %v, want ErrInvalidRequest", err)
	}

	plain := mkdir(t, filepath.Join(root, "plain"))
	p, err = workspace.Prepare(ctx, workspace.Request{Root: root, SessionID: "s3", Workspace: runtime.Workspace{Path: plain}})
	if err != nil || p.Workspace != plain || p.OwnsWorkspace || p.Repo != "" {
		t.Fatalf("plain directory: %+v, %v", p, err)
	}
	if err := workspace.Remove(ctx, hclog.NewNullLogger(), p.Layout); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(plain); err != nil {
		t.Fatal("Remove deleted a plain task directory used in place")
	}
}

func TestLayoutCheckRefusesForeignPaths(t *testing.T) {
	for name, l := range map[string]workspace.Layout{
		"other_session_dir": {SessionDir: "/etc", Workspace: "/etc/workspace", OwnsWorkspace: true},
		"owned_outside":     {SessionDir: "/r/s1", Workspace: "/etc", OwnsWorkspace: true},
		"dotdot":            {SessionDir: "/r/s1", Workspace: "/r/s1/../../etc", OwnsWorkspace: true},
		"empty":             {},
	} {
		if err := l.Check("/r", "s1"); !errors.Is(err, runtime.ErrNotFound) {
			t.Errorf("%s: %v, want ErrNotFound", name, err)
		}
	}
}
