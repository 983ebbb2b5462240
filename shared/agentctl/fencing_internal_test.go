package agentctl

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Two agentctls on one state dir share its fencing file: a token one of
// them admits fences the other off, however long the file had stood
// unchanged (when a stat stands in for reading it) and however soon after
// the other's own write (when it does not).
func TestAFenceSeesATokenAnotherAgentctlAdmitted(t *testing.T) {
	dir := t.TempDir()
	older, err := loadFence(dir)
	if err != nil {
		t.Fatal(err)
	}
	newer, err := loadFence(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := older.Check(5); err != nil {
		t.Fatal(err)
	}
	// Right after a write: the other sees it at once.
	if err := newer.Check(4); !errors.Is(err, ErrStaleFencingToken) {
		t.Fatalf("token 4 after 5 was written: %v", err)
	}
	// A settled file: its stat is what the next checks compare.
	path := filepath.Join(dir, "fencing.json")
	hourAgo := time.Now().Add(-time.Hour)
	if err := os.Chtimes(path, hourAgo, hourAgo); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := older.Check(5); err != nil {
			t.Fatal(err)
		}
	}
	if older.read == nil {
		t.Fatal("a settled file was not recorded as read")
	}
	if err := newer.Check(9); err != nil {
		t.Fatal(err)
	}
	if err := older.Check(8); !errors.Is(err, ErrStaleFencingToken) || older.Highest() != 9 {
		t.Fatalf("token 8 after another agentctl admitted 9: %v (highest %d)", err, older.Highest())
	}
}

// A file another agentctl is replacing, or one that cannot be decoded, never
// lowers the token a fence holds.
func TestAnUnreadableFencingFileKeepsTheTokenInMemory(t *testing.T) {
	dir := t.TempDir()
	f, err := loadFence(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Check(7); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "fencing.json")
	for _, content := range []string{`{"highest":`, `{"highest":2}`} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := f.Check(6); !errors.Is(err, ErrStaleFencingToken) {
			t.Fatalf("token 6 with %q on disk: %v", content, err)
		}
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := f.Check(6); !errors.Is(err, ErrStaleFencingToken) {
		t.Fatalf("token 6 with no file: %v", err)
	}
}
