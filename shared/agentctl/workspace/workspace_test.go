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
