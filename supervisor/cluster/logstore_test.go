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
// holds it: for each store a new raft dir can be given (server.raft_store),
// reopened with raft_store unset as well as set to it.
func TestRaftStoresKeepWhatTheyTookAndAreLocked(t *testing.T) {
	for _, kind := range []string{StoreBolt, StoreWAL} {
		for _, reopenWith := range []string{kind, ""} {
			t.Run(fmt.Sprintf("%s reopened with raft_store %q", kind, reopenWith), func(t *testing.T) {
				dir := t.TempDir()
				s, err := openRaftStores(dir, kind, hclog.NewNullLogger())
				if err != nil {
					t.Fatal(err)
				}
				if s.kind != kind {
					t.Fatalf("store kind %q, want %q", s.kind, kind)
				}
				storeEntries(t, s, 1, 3, 1)
				if err := s.stable.SetUint64([]byte("CurrentTerm"), 7); err != nil {
					t.Fatal(err)
				}
				if s.bytes() <= 0 {
					t.Fatalf("store size %d bytes", s.bytes())
				}
				if _, err := openRaftStores(dir, reopenWith, hclog.NewNullLogger()); !errors.Is(err, ErrDataDir) {
					t.Fatalf("second open of a data_dir in use: %v, want ErrDataDir", err)
				}
				if err := s.close(); err != nil {
					t.Fatal(err)
				}
				s, err = openRaftStores(dir, reopenWith, hclog.NewNullLogger())
				if err != nil {
					t.Fatalf("reopen after close: %v", err)
				}
				defer s.close()
				if s.kind != kind {
					t.Fatalf("store kind after reopen %q, want %q", s.kind, kind)
				}
				checkEntries(t, s, 1, 3, 1)
				if term, err := s.stable.GetUint64([]byte("CurrentTerm")); err != nil || term != 7 {
					t.Fatalf("term after reopen: %d, %v", term, err)
				}
			})
		}
	}
}

// server.raft_store chooses the store of a new data_dir (bolt when unset);
// a data_dir that holds a store keeps it, and raft_store set to the other
// store is refused with ErrDataDir, naming the store found, its path and
// what to do, without touching the data_dir.
func TestRaftStoreChoice(t *testing.T) {
	bolt := func(t *testing.T, dir string) {
		b, err := raftboltdb.NewBoltStore(filepath.Join(dir, "raft.db"))
		if err != nil {
			t.Fatal(err)
		}
		b.Close()
	}
	walDir := func(t *testing.T, dir string) {
		s, err := openWALStores(filepath.Join(dir, "wal"), hclog.NewNullLogger())
		if err != nil {
			t.Fatal(err)
		}
		storeEntries(t, s, 1, 2, 1)
		s.close()
	}
	none := func(*testing.T, string) {}
	for _, tc := range []struct {
		name     string
		existing func(t *testing.T, dir string)
		set      string
		want     string   // the store opened; "" for a refusal
		errWords []string // in the refusal
	}{
		{"new data_dir, raft_store unset: bolt", none, "", StoreBolt, nil},
		{"new data_dir, raft_store bolt: bolt", none, StoreBolt, StoreBolt, nil},
		{"new data_dir, raft_store wal: wal", none, StoreWAL, StoreWAL, nil},
		{"new data_dir with an empty wal dir, raft_store unset: bolt", func(t *testing.T, dir string) {
			if err := os.Mkdir(filepath.Join(dir, "wal"), 0o700); err != nil {
				t.Fatal(err)
			}
		}, "", StoreBolt, nil},
		{"bolt data_dir, raft_store unset: keeps bolt", bolt, "", StoreBolt, nil},
		{"bolt data_dir, raft_store bolt: bolt", bolt, StoreBolt, StoreBolt, nil},
		{"bolt data_dir, raft_store wal: refused", bolt, StoreWAL, "",
			[]string{`server.raft_store is "wal"`, "holds a bolt raft store", "raft.db", `set server.raft_store = "bolt"`, "snapshot save", "snapshot restore"}},
		{"wal data_dir, raft_store unset: keeps wal", walDir, "", StoreWAL, nil},
		{"wal data_dir, raft_store wal: wal", walDir, StoreWAL, StoreWAL, nil},
		{"wal data_dir, raft_store bolt: refused", walDir, StoreBolt, "",
			[]string{`server.raft_store is "bolt"`, "holds a wal raft store", "/wal", `set server.raft_store = "wal"`, "snapshot save", "snapshot restore"}},
		{"both stores: refused", func(t *testing.T, dir string) { bolt(t, dir); walDir(t, dir) }, "", "",
			[]string{"holds both a bolt raft store", "raft.db", "write-ahead log"}},
		{"unknown raft_store: refused", none, "sqlite", "", []string{`unknown raft store "sqlite"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.existing(t, dir)
			before := snapshotDir(t, dir)
			s, err := openRaftStores(dir, tc.set, hclog.NewNullLogger())
			if tc.want == "" {
				if err == nil {
					s.close()
					t.Fatalf("opened a %s store, want a refusal", s.kind)
				}
				if !errors.Is(err, ErrDataDir) {
					t.Fatalf("error %v does not wrap ErrDataDir", err)
				}
				for _, w := range tc.errWords {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not say %q", err, w)
					}
				}
				if tc.set != "sqlite" && !strings.Contains(err.Error(), dir) {
					t.Errorf("error %q does not name the path %s", err, dir)
				}
				if after := snapshotDir(t, dir); after != before {
					t.Fatalf("data_dir changed by a refused open:\n%s\nvs\n%s", before, after)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer s.close()
			if s.kind != tc.want {
				t.Fatalf("opened a %s store, want %s", s.kind, tc.want)
			}
			if kind, path, err := existingStore(dir); kind != tc.want || err != nil {
				t.Errorf("after opening a %s store the data_dir holds %q (%s, %v)", tc.want, kind, path, err)
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

	s, err := openRaftStores(dir, "", hclog.NewNullLogger())
	if err != nil {
		t.Fatalf("open after the kill: %v", err)
	}
	defer s.close()
	if s.kind != StoreWAL {
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
	s, err := openRaftStores(dir, StoreWAL, hclog.NewNullLogger())
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
