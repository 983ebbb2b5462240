package cluster

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// What the stores took is there after a reopen (behind the cache, on disk),
// and a second opener of the same data_dir is refused while the first
// holds it: for the write-ahead log a new raft dir gets, and for the bolt
// store a raft dir written before the WAL keeps.
func TestRaftStoresKeepWhatTheyTookAndAreLocked(t *testing.T) {
	for _, tc := range []struct {
		kind    string
		prepare func(t *testing.T, dir string)
	}{
		{storeWAL, func(*testing.T, string) {}},
		{storeBolt, func(t *testing.T, dir string) {
			b, err := raftboltdb.NewBoltStore(filepath.Join(dir, "raft.db"))
			if err != nil {
				t.Fatal(err)
			}
			b.Close()
		}},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			dir := t.TempDir()
			tc.prepare(t, dir)
			s, err := openRaftStores(dir, hclog.NewNullLogger())
			if err != nil {
				t.Fatal(err)
			}
			if s.kind != tc.kind {
				t.Fatalf("store kind %q, want %q", s.kind, tc.kind)
			}
			storeEntries(t, s, 1, 3, 1)
			if err := s.stable.SetUint64([]byte("CurrentTerm"), 7); err != nil {
				t.Fatal(err)
			}
			if s.bytes() <= 0 {
				t.Fatalf("store size %d bytes", s.bytes())
			}
			if _, err := openRaftStores(dir, hclog.NewNullLogger()); !errors.Is(err, ErrDataDir) {
				t.Fatalf("second open of a data_dir in use: %v, want ErrDataDir", err)
			}
			if err := s.close(); err != nil {
				t.Fatal(err)
			}
			s, err = openRaftStores(dir, hclog.NewNullLogger())
			if err != nil {
				t.Fatalf("reopen after close: %v", err)
			}
			defer s.close()
			if s.kind != tc.kind {
				t.Fatalf("store kind after reopen %q, want %q", s.kind, tc.kind)
			}
			checkEntries(t, s, 1, 3, 1)
			if term, err := s.stable.GetUint64([]byte("CurrentTerm")); err != nil || term != 7 {
				t.Fatalf("term after reopen: %d, %v", term, err)
			}
		})
	}
}

// A follower's log whose tail a new leader replaced (raft deletes the
// deposed leader's entries and appends the new leader's), in a process
// killed with SIGKILL right after, opens again with the new tail. raft-wal
// before v0.4.1 recorded the truncated segment as sealed without writing
// its index, and the restarted node panicked ("sealed segment has no index
// block").
func TestRaftLogWithATruncatedTailOpensAfterAKill(t *testing.T) {
	dir := t.TempDir()
	helper := exec.Command(os.Args[0], "-test.run=^TestRaftLogTruncateHelper$")
	helper.Env = append(os.Environ(), "PADDOCK_RAFT_LOG_HELPER_DIR="+dir)
	helper.Stderr = os.Stderr
	out, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := readLineWithPrefix(bufio.NewReader(out), "TRUNCATED ")
	if err != nil {
		_ = helper.Process.Kill()
		_ = helper.Wait()
		t.Fatalf("helper: %v", err)
	}
	_ = helper.Process.Kill() // SIGKILL: no Close
	_ = helper.Wait()
	last, err := strconv.ParseUint(strings.TrimSpace(strings.TrimPrefix(line, "TRUNCATED ")), 10, 64)
	if err != nil {
		t.Fatalf("helper said %q", line)
	}

	s, err := openRaftStores(dir, hclog.NewNullLogger())
	if err != nil {
		t.Fatalf("open after the kill: %v", err)
	}
	defer s.close()
	if s.kind != storeWAL {
		t.Fatalf("store kind %q", s.kind)
	}
	if got, err := s.logs.LastIndex(); err != nil || got != last {
		t.Fatalf("last index after the kill %d (%v), want %d", got, err, last)
	}
	checkEntries(t, s, 1, 7, 1)
	checkEntries(t, s, 8, last, 2)
	// It takes more after the reopen, as a follower catching up does.
	storeEntries(t, s, last+1, last+5, 2)
	checkEntries(t, s, last+1, last+5, 2)
}

// TestRaftLogTruncateHelper runs in the process the test above kills: it
// writes entries 1..10 in term 1, deletes 8..10 as raft does on a
// conflicting AppendEntries, appends 8..12 in term 2, says so on stdout and
// waits to be killed.
func TestRaftLogTruncateHelper(t *testing.T) {
	dir := os.Getenv("PADDOCK_RAFT_LOG_HELPER_DIR")
	if dir == "" {
		t.Skip("helper process only")
	}
	s, err := openRaftStores(dir, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	storeEntries(t, s, 1, 10, 1)
	if err := s.logs.DeleteRange(8, 10); err != nil {
		t.Fatal(err)
	}
	storeEntries(t, s, 8, 12, 2)
	fmt.Printf("TRUNCATED %d\n", 12)
	select {} // until killed
}

func readLineWithPrefix(r *bufio.Reader, prefix string) (string, error) {
	for {
		line, err := r.ReadString('\n')
		if strings.HasPrefix(line, prefix) {
			return line, nil
		}
		if err != nil {
			return "", fmt.Errorf("no %q line: %w", prefix, err)
		}
	}
}

// storeEntries stores entries first..last of term, each holding its index.
func storeEntries(t *testing.T, s *raftStores, first, last, term uint64) {
	t.Helper()
	var batch []*raft.Log
	for i := first; i <= last; i++ {
		batch = append(batch, &raft.Log{Index: i, Term: term, Type: raft.LogCommand, Data: []byte(fmt.Sprintf("entry %d term %d", i, term))})
	}
	if err := s.logs.StoreLogs(batch); err != nil {
		t.Fatal(err)
	}
}

// checkEntries checks that entries first..last are the ones storeEntries
// stored in term.
func checkEntries(t *testing.T, s *raftStores, first, last, term uint64) {
	t.Helper()
	for i := first; i <= last; i++ {
		var l raft.Log
		want := fmt.Sprintf("entry %d term %d", i, term)
		if err := s.logs.GetLog(i, &l); err != nil || l.Term != term || string(l.Data) != want {
			t.Fatalf("entry %d: term %d %q (%v), want term %d %q", i, l.Term, l.Data, err, term, want)
		}
	}
}
