// Package workspace prepares a session's files for a runtime that keeps them
// on a local (or mounted) disk: the session directory
// workspace_root/<session-id>/ with state/ (agentctl's state) and
// workspace/ (an empty directory, or a git worktree on the session's branch
// when the task's workspace is a git repository), or the task's own plain
// directory used in place.
//
// Every runtime confines task workspaces by the one rule of [Confine]: a
// relative path is relative to the root, symlinks are resolved, and the
// real path must be the root or lie inside it, whether it was given
// relative or absolute. It imports only shared/runtime, never supervisor/.
package workspace

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/hashicorp/go-hclog"

	"github.com/paddockhq/paddock/shared/runtime"
)

// Within reports whether path is dir or inside it (both cleaned, absolute).
func Within(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && filepath.IsAbs(path) && rel != ".." && !strings.HasPrefix(rel, "../")
}

// Confine resolves a task's workspace path against root (named in errors
// by name, e.g. "workspace_root"): a relative path is
// relative to root; the path must not leave root as written, and once every
// symlink (in it and in root) is resolved its real path must be root or
// inside root and be a directory. It returns the real path. Failures wrap
// runtime.ErrInvalidRequest.
func Confine(root, name, path string) (string, error) {
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", name, root, err)
	}
	p := path
	if !filepath.IsAbs(p) {
		p = filepath.Join(root, p)
	}
	p = filepath.Clean(p)
	if !Within(root, p) && !Within(realRoot, p) {
		return "", fmt.Errorf("workspace path %s is outside %s %s: %w", path, name, root, runtime.ErrInvalidRequest)
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", fmt.Errorf("workspace path %s: %v: %w", path, err, runtime.ErrInvalidRequest)
	}
	if !Within(realRoot, real) {
		return "", fmt.Errorf("workspace path %s is outside %s %s (it resolves to %s): %w", path, name, root, real, runtime.ErrInvalidRequest)
	}
	if st, err := os.Stat(real); err != nil || !st.IsDir() {
		return "", fmt.Errorf("workspace path %s is not a directory: %w", path, runtime.ErrInvalidRequest)
	}
	return real, nil
}

// CheckPath is Confine for a path that may not exist here (on another
// node's disk, or not created yet): it refuses a path that leaves root, as
// written or once the symlinks of its longest existing prefix (and of
// root) are resolved, and accepts anything else. It is the check of a
// task's workspace when the task is created; Confine still runs at each
// launch, on the path as it is then. Failures wrap runtime.ErrInvalidRequest
// and name root.
func CheckPath(root, name, path string) error {
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		realRoot = root // a root not made yet: nothing under it is a symlink
	}
	p := path
	if !filepath.IsAbs(p) {
		p = filepath.Join(root, p)
	}
	p = filepath.Clean(p)
	if !Within(root, p) && !Within(realRoot, p) {
		return fmt.Errorf("workspace path %s is outside %s %s: %w", path, name, root, runtime.ErrInvalidRequest)
	}
	if real := resolveExisting(p); !Within(realRoot, real) {
		return fmt.Errorf("workspace path %s is outside %s %s (it resolves to %s): %w", path, name, root, real, runtime.ErrInvalidRequest)
	}
	return nil
}

// resolveExisting resolves the symlinks of p's longest existing prefix and
// appends the rest of p as written (p is clean and absolute).
func resolveExisting(p string) string {
	rest := ""
	for dir := p; ; dir = filepath.Dir(dir) {
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			return filepath.Join(real, rest)
		}
		if dir == filepath.Dir(dir) {
			return p
		}
		rest = filepath.Join(filepath.Base(dir), rest)
	}
}

// Request is what Prepare needs.
type Request struct {
	// Root is workspace_root (absolute): session directories live in it.
	Root string
	// TaskRoot confines the task's workspace path (see Confine); empty
	// means Root. TaskRootName names it in errors.
	TaskRoot, TaskRootName string
	// SessionID names the session directory (already a valid id).
	SessionID string
	// Workspace is the task's workspace; an empty path means a fresh
	// directory of the session's own.
	Workspace runtime.Workspace
	// Existing is the launch's runtime.OptionExistingWorkspace: the session
	// ran before, so its own workspace must still be there.
	Existing bool
}

// NewRequest is the Request of a launch whose session directories live in
// root and whose task workspaces are confined to root.
func NewRequest(root string, req runtime.LaunchRequest) Request {
	return Request{Root: root, SessionID: req.SessionID, Workspace: req.Workspace,
		Existing: req.Options[runtime.OptionExistingWorkspace] == "true"}
}

// Layout is where a session's files are. Runtimes store it in their
// handles (its JSON field names are part of those handles).
type Layout struct {
	SessionDir string `json:"session_dir"`
	Workspace  string `json:"workspace"`
	// OwnsWorkspace: Workspace is the session's own (inside SessionDir) and
	// goes with it; a plain task directory used in place is never deleted.
	OwnsWorkspace bool `json:"owns_workspace"`
	// Repo and WorktreeBranch are set when Workspace is a git worktree of
	// the task's repository.
	Repo           string `json:"repo,omitempty"`
	WorktreeBranch string `json:"worktree_branch,omitempty"`
}

// StateDir is agentctl's state directory.
func (l Layout) StateDir() string { return filepath.Join(l.SessionDir, "state") }

// Check reports whether l is a layout of a session of root: the session dir
// is root/<id> and an owned workspace lies inside it. Runtimes check every
// handle with it.
func (l Layout) Check(root, sessionID string) error {
	if l.SessionDir == "" || l.Workspace == "" {
		return fmt.Errorf("handle has no session dir or workspace: %w", runtime.ErrNotFound)
	}
	if l.SessionDir != filepath.Join(root, sessionID) || (l.OwnsWorkspace && !Within(l.SessionDir, l.Workspace)) {
		return fmt.Errorf("handle paths are outside workspace_root %s: %w", root, runtime.ErrNotFound)
	}
	return nil
}

// Response fills the workspace fields of a launch response.
func (l Layout) Response(resp *runtime.LaunchResponse) {
	resp.WorkspacePath = l.Workspace
	if l.Repo != "" {
		resp.WorktreePath, resp.WorktreeBranch = l.Workspace, l.WorktreeBranch
	}
}

// Prepared is a prepared session.
type Prepared struct {
	Layout
	// GitCommonDir is the repository's git directory (absolute) when
	// Workspace is a worktree: a container must mount it at the same path
	// for git to work inside.
	GitCommonDir string
	// Fresh: Prepare made the session directory (an undo may remove it).
	Fresh bool
}

// Prepare makes (or reuses) a session's directories: root and the session
// directory 0700 (an existing root is the operator's and keeps its mode; a
// session dir made 0755 by an earlier version is tightened), state/, and
// the workspace. A task path is confined by Confine; a git repository gets
// a worktree on the request's branch (default paddock/<session>), which an
// earlier launch of the session may already have made.
func Prepare(ctx context.Context, req Request) (Prepared, error) {
	p := Prepared{Layout: Layout{SessionDir: filepath.Join(req.Root, req.SessionID)}}
	if err := os.MkdirAll(req.Root, 0o700); err != nil {
		return p, fmt.Errorf("create workspace_root: %w", err)
	}
	taskRoot, name := req.TaskRoot, req.TaskRootName
	if taskRoot == "" {
		taskRoot, name = req.Root, "workspace_root"
	}
	var src string
	if req.Workspace.Path != "" {
		var err error
		if src, err = Confine(taskRoot, name, req.Workspace.Path); err != nil {
			return p, err
		}
	}
	_, statErr := os.Stat(p.SessionDir)
	p.Fresh = os.IsNotExist(statErr)
	if err := os.MkdirAll(p.StateDir(), 0o700); err != nil {
		return p, fmt.Errorf("create session dir: %w", err)
	}
	if err := os.Chmod(p.SessionDir, 0o700); err != nil {
		return p, fmt.Errorf("session dir: %w", err)
	}
	own := filepath.Join(p.SessionDir, "workspace")
	if src == "" {
		p.Workspace, p.OwnsWorkspace = own, true
		if req.Existing {
			// The session ran before: never start it again in an empty
			// workspace that only looks like its own.
			if st, err := os.Stat(own); err != nil || !st.IsDir() {
				return p, fmt.Errorf("the session's workspace %s is gone (removed, or on another machine's disk): %w", own, runtime.ErrNotFound)
			}
		}
		if err := os.MkdirAll(own, 0o700); err != nil {
			return p, fmt.Errorf("create workspace: %w", err)
		}
		return p, nil
	}
	repo, isGit := gitOutput(ctx, src, "rev-parse", "--show-toplevel")
	if !isGit {
		p.Workspace = src // a plain directory, used in place and never deleted
		return p, nil
	}
	branch := req.Workspace.Branch
	if branch == "" {
		branch = "paddock/" + req.SessionID
	}
	if strings.HasPrefix(branch, "-") || git(ctx, repo, "check-ref-format", "--branch", branch) != nil {
		return p, fmt.Errorf("branch %q is not a valid branch name: %w", branch, runtime.ErrInvalidRequest)
	}
	p.GitCommonDir, _ = gitOutput(ctx, repo, "rev-parse", "--path-format=absolute", "--git-common-dir")
	p.Repo, p.WorktreeBranch = repo, branch
	p.Workspace, p.OwnsWorkspace = own, true
	if _, err := os.Stat(own); err == nil {
		return p, nil // the worktree of an earlier launch of this session
	}
	var err error
	if git(ctx, repo, "show-ref", "--verify", "--quiet", "refs/heads/"+branch) == nil {
		err = git(ctx, repo, "worktree", "add", own, branch)
	} else {
		err = git(ctx, repo, "worktree", "add", "-b", branch, own)
	}
	if err != nil {
		return p, fmt.Errorf("create worktree for branch %s: %w", branch, err)
	}
	return p, nil
}

// Remove removes a session's worktree (its branch stays: it holds the
// session's commits) and its session directory. A plain task directory
// used in place is outside the session directory and is never touched.
func Remove(ctx context.Context, logger hclog.Logger, l Layout) error {
	if l.Repo != "" {
		if _, err := os.Stat(l.Workspace); err == nil {
			if err := git(ctx, l.Repo, "worktree", "remove", "--force", l.Workspace); err != nil {
				logger.Warn("git worktree remove failed; removing the directory", "workspace", l.Workspace, "error", err)
			}
		}
	}
	if err := os.RemoveAll(l.SessionDir); err != nil {
		return fmt.Errorf("remove %s: %w", l.SessionDir, err)
	}
	if l.Repo != "" {
		_ = git(ctx, l.Repo, "worktree", "prune")
	}
	return nil
}

// gitOutput runs one git command in dir and returns its trimmed output.
func gitOutput(ctx context.Context, dir string, args ...string) (string, bool) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0")
	out, err := cmd.Output()
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(out)), true
}

// git runs one git command in repo (argv only, never a shell).
func git(ctx context.Context, repo string, args ...string) error {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", repo}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// GiveTo prepares l for an agent that runs as uid:gid while agentctl keeps
// its own user: a workspace the session owns (its own directory or
// worktree) is chowned to uid:gid, and the session directory and root
// become traversable (0711: no listing), so the agent reaches its
// workspace; the state directory stays 0700, agentctl's alone. See Chown
// for the workspace.
func (l Layout) GiveTo(root string, uid, gid int) error {
	for _, dir := range []string{root, l.SessionDir} {
		st, err := os.Stat(dir)
		if err != nil {
			return fmt.Errorf("give workspace to uid %d: %w", uid, err)
		}
		if mode := st.Mode().Perm(); mode&0o011 != 0o011 {
			if err := os.Chmod(dir, mode|0o011); err != nil {
				return fmt.Errorf("give workspace to uid %d: %w", uid, err)
			}
		}
	}
	if err := os.Chmod(l.StateDir(), 0o700); err != nil {
		return fmt.Errorf("give workspace to uid %d: state dir: %w", uid, err)
	}
	return l.Chown(uid, gid)
}

// Chown gives a workspace the session owns (its own directory or worktree)
// to uid:gid, every file in it; a task directory used in place keeps its
// owner. Runtimes whose agent runs as another user than agentctl call it at
// launch.
func (l Layout) Chown(uid, gid int) error {
	if !l.OwnsWorkspace {
		return nil
	}
	err := filepath.WalkDir(l.Workspace, func(p string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
	if err != nil {
		return fmt.Errorf("give workspace %s to uid %d: %w", l.Workspace, uid, err)
	}
	return nil
}
