package workspace_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/paddockhq/paddock/shared/agentctl/workspace"
)

func writeFile(t *testing.T, p, content string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
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
