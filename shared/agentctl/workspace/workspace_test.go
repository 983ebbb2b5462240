package workspace_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddockhq/paddock/shared/agentctl/workspace"
)

// newRepo returns a workspace holding a git repository with one commit of
// "tracked.txt".
func newRepo(t *testing.T) (*workspace.Workspace, string) {
	t.Helper()
	dir := t.TempDir()
	gitRun(t, dir, "init", "-q", "-b", "main")
	writeFile(t, filepath.Join(dir, "tracked.txt"), "one\n")
	gitRun(t, dir, "add", "tracked.txt")
	gitRun(t, dir, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "-m", "init")
	ws, err := workspace.New(dir, ".paddock")
	if err != nil {
		t.Fatal(err)
	}
	return ws, dir
}

func gitRun(t *testing.T, dir string, args ...string) {
	t.Helper()
	if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v: %s", args, err, out)
	}
}

func writeFile(t *testing.T, p, content string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func appendFile(t *testing.T, p, content string) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(content); err != nil {
		t.Fatal(err)
	}
}

// markerScript writes a script that creates marker when run (and passes its
// input through, so it also works as a filter or textconv).
func markerScript(t *testing.T) (script, marker string) {
	t.Helper()
	d := t.TempDir()
	script, marker = filepath.Join(d, "payload.sh"), filepath.Join(d, "ran")
	if err := os.WriteFile(script, []byte(fmt.Sprintf("#!/bin/sh\ntouch %q\ncat\n", marker)), 0o755); err != nil {
		t.Fatal(err)
	}
	return script, marker
}

// TestGitRunsNoProgramFromWorkspaceConfig: the agent can write the
// workspace's .git/config and .gitattributes directly on disk; git status and
// diff through the API must not start any program they name.
func TestGitRunsNoProgramFromWorkspaceConfig(t *testing.T) {
	for _, tc := range []struct {
		name   string
		config string // appended to .git/config; %s is the payload script
		attrs  string // .gitattributes, if any
	}{
		{name: "fsmonitor", config: "[core]\n\tfsmonitor = %s\n"},
		{name: "hooks path", config: "[core]\n\thooksPath = HOOKS\n"},
		{name: "clean filter", config: "[filter \"x\"]\n\tclean = %s\n\tsmudge = %s\n\trequired = true\n", attrs: "* filter=x\n"},
		{name: "filter with a dot and equals in its name", config: "[filter \"a.b=c\"]\n\tclean = %s\n", attrs: "* filter=a.b=c\n"},
		{name: "textconv", config: "[diff \"x\"]\n\ttextconv = %s\n", attrs: "* diff=x\n"},
		{name: "diff driver command", config: "[diff \"x\"]\n\tcommand = %s\n", attrs: "* diff=x\n"},
		{name: "external diff", config: "[diff]\n\texternal = %s\n"},
		{name: "pager", config: "[core]\n\tpager = %s\n[pager]\n\tdiff = %s\n\tstatus = %s\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws, dir := newRepo(t)
			script, marker := markerScript(t)
			hooks := t.TempDir()
			for _, h := range []string{"post-index-change", "pre-commit", "reference-transaction"} {
				if err := os.Symlink(script, filepath.Join(hooks, h)); err != nil {
					t.Fatal(err)
				}
			}
			if tc.attrs != "" {
				writeFile(t, filepath.Join(dir, ".gitattributes"), tc.attrs)
				gitRun(t, dir, "add", ".gitattributes")
			}
			// A tracked file changed (with an old mtime, so the index's stat
			// data cannot vouch for it and git must read its content) and a
			// staged change, so status and both diffs have work to do.
			writeFile(t, filepath.Join(dir, "tracked.txt"), "two\n")
			old := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
			if err := os.Chtimes(filepath.Join(dir, "tracked.txt"), old, old); err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(dir, "staged.txt"), "staged\n")
			gitRun(t, dir, "add", "staged.txt")
			// Last, as an agent would: the payload goes into .git/config on disk.
			cfg := strings.ReplaceAll(tc.config, "%s", script)
			cfg = strings.ReplaceAll(cfg, "HOOKS", hooks)
			appendFile(t, filepath.Join(dir, ".git", "config"), cfg)

			ctx := context.Background()
			st, err := ws.Status(ctx)
			if err != nil {
				t.Fatalf("Status: %v", err)
			}
			if !st.IsRepo || len(st.Entries) == 0 {
				t.Errorf("Status = %+v, want a repository with changes", st)
			}
			for _, staged := range []bool{false, true} {
				d, err := ws.Diff(ctx, staged)
				if err != nil {
					t.Fatalf("Diff(staged=%v): %v", staged, err)
				}
				if d == "" {
					t.Errorf("Diff(staged=%v) is empty", staged)
				}
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatalf("git through the workspace API ran %s from the workspace's .git/config", script)
			}
		})
	}
}

// TestGitIgnoresInheritedGitEnvironment: GIT_* variables in agentctl's own
// environment (GIT_DIR, extra config) do not reach the API's git.
func TestGitIgnoresInheritedGitEnvironment(t *testing.T) {
	ws, dir := newRepo(t)
	_, otherDir := newRepo(t)
	script, marker := markerScript(t)
	t.Setenv("GIT_DIR", filepath.Join(otherDir, ".git"))
	t.Setenv("GIT_CONFIG_COUNT", "1")
	t.Setenv("GIT_CONFIG_KEY_0", "diff.external")
	t.Setenv("GIT_CONFIG_VALUE_0", script)
	global := filepath.Join(t.TempDir(), "gitconfig")
	writeFile(t, global, "[core]\n\tfsmonitor = "+script+"\n")
	t.Setenv("GIT_CONFIG_GLOBAL", global)
	writeFile(t, filepath.Join(dir, "only-here.txt"), "x\n")

	st, err := ws.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Entries) != 1 || st.Entries[0].Path != "only-here.txt" {
		t.Errorf("Status entries = %+v, want only-here.txt from the workspace's own repository", st.Entries)
	}
	if _, err := ws.Diff(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("git ran a program named by agentctl's inherited GIT_* environment")
	}
}

// TestWriteIntoGitDirIsRefused: git metadata is never written through the
// file API, whatever the case of ".git" or the symlinks on the way.
func TestWriteIntoGitDirIsRefused(t *testing.T) {
	ws, dir := newRepo(t)
	if err := os.Symlink(".git", filepath.Join(dir, "meta")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(".git/config", filepath.Join(dir, "cfg")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "sub", ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(filepath.Join(dir, ".git", "config"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{".git/config", "./.git/config", ".GIT/config", ".Git/hooks/pre-commit", "sub/.git/config", ".git",
		"meta/config", "cfg", "sub/../.git/config"} {
		t.Run(p, func(t *testing.T) {
			err := ws.WriteFile(p, []byte("[core]\n\tfsmonitor = /bin/false\n"))
			if !errors.Is(err, workspace.ErrGitDir) {
				t.Fatalf("WriteFile(%q) = %v, want ErrGitDir", p, err)
			}
		})
	}
	after, err := os.ReadFile(filepath.Join(dir, ".git", "config"))
	if err != nil {
		t.Fatal(err)
	}
	if string(after) != string(before) {
		t.Fatalf(".git/config changed:\n%s", after)
	}
	// Reading git metadata stays allowed, and names merely containing "git" are ordinary.
	if _, err := ws.ReadFile(".git/config"); err != nil {
		t.Errorf("ReadFile(.git/config) = %v", err)
	}
	for _, p := range []string{".gitignore", "a.git/x", "git/config", ".github/workflows/ci.yml"} {
		if err := ws.WriteFile(p, []byte("ok\n")); err != nil {
			t.Errorf("WriteFile(%q) = %v", p, err)
		}
	}
}

// TestReadSpecialFileReturnsPromptly: a FIFO in the workspace (no writer) is
// refused at once by ReadFile, List and WriteFile instead of blocking a
// thread forever.
func TestReadSpecialFileReturnsPromptly(t *testing.T) {
	dir := t.TempDir()
	ws, err := workspace.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "pipe")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	// Should an open block after all, unblock it at the end so that the
	// failed test leaves no thread behind.
	t.Cleanup(func() {
		for _, flag := range []int{os.O_WRONLY, os.O_RDONLY} {
			if f, err := os.OpenFile(fifo, flag|syscall.O_NONBLOCK, 0); err == nil {
				f.Close()
			}
		}
	})
	ops := []struct {
		name string
		do   func() error
		want error
	}{
		{"ReadFile", func() error { _, err := ws.ReadFile("pipe"); return err }, workspace.ErrNotRegular},
		{"WriteFile", func() error { return ws.WriteFile("pipe", []byte("x")) }, workspace.ErrNotRegular},
		{"List", func() error {
			es, err := ws.List("pipe")
			if err == nil && (len(es) != 1 || es[0].Type != "other") {
				return fmt.Errorf("entries %+v, want one of type other", es)
			}
			return err
		}, nil},
	}
	for _, op := range ops {
		t.Run(op.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- op.do() }()
			select {
			case err := <-done:
				if op.want == nil && err != nil || op.want != nil && !errors.Is(err, op.want) {
					t.Fatalf("%s(FIFO) = %v, want %v", op.name, err, op.want)
				}
			case <-ctx.Done():
				t.Fatalf("%s(FIFO) still blocked after 5s", op.name)
			}
		})
	}
}

// TestWriteReplacesHardLinkInsteadOfWritingThrough: a hard link in the
// workspace to a file outside it is replaced by the write; the outside file
// keeps its content.
func TestWriteReplacesHardLinkInsteadOfWritingThrough(t *testing.T) {
	dir := t.TempDir()
	ws, err := workspace.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "victim")
	writeFile(t, outside, "outside content\n")
	if err := os.Link(outside, filepath.Join(dir, "linked")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, "linked"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := ws.WriteFile("linked", []byte("new content\n")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(outside); string(b) != "outside content\n" {
		t.Fatalf("the file outside the workspace now holds %q", b)
	}
	if b, err := ws.ReadFile("linked"); err != nil || string(b) != "new content\n" {
		t.Fatalf("ReadFile(linked) = %q, %v", b, err)
	}
	if st, err := os.Stat(filepath.Join(dir, "linked")); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("mode after write = %v, %v; want the old file's 0600 kept", st.Mode(), err)
	}
	entries, err := ws.List(".")
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("workspace holds %+v after the write, want only linked (no temporary file left)", entries)
	}
}

// TestWriteThroughSymlinkWritesItsTarget: a symlink inside the workspace is
// kept and its target written, as before writes became renames.
func TestWriteThroughSymlinkWritesItsTarget(t *testing.T) {
	dir := t.TempDir()
	ws, err := workspace.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "docs"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "docs", "AGENTS.md"), "old\n")
	if err := os.Symlink("docs/AGENTS.md", filepath.Join(dir, "CLAUDE.md")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("docs", filepath.Join(dir, "d")); err != nil {
		t.Fatal(err)
	}
	if err := ws.WriteFile("CLAUDE.md", []byte("new\n")); err != nil {
		t.Fatal(err)
	}
	if err := ws.WriteFile("d/new/file.txt", []byte("made\n")); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(filepath.Join(dir, "CLAUDE.md")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("CLAUDE.md is no longer a symlink: %v %v", fi, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "docs", "AGENTS.md")); string(b) != "new\n" {
		t.Errorf("docs/AGENTS.md = %q, want the write through the symlink", b)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "docs", "new", "file.txt")); string(b) != "made\n" {
		t.Errorf("docs/new/file.txt = %q", b)
	}
	if err := os.Symlink("../..", filepath.Join(dir, "up")); err != nil {
		t.Fatal(err)
	}
	if err := ws.WriteFile("up/x", []byte("x")); !errors.Is(err, workspace.ErrEscape) {
		t.Errorf("WriteFile through a symlink out of the workspace = %v, want ErrEscape", err)
	}
}
