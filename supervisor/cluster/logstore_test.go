package cluster

import (
	"errors"
	"testing"

	"github.com/hashicorp/raft"
)

// What the stores took is there after a reopen (behind the cache, on disk),
// and a second opener of the same data_dir is refused while the first
// holds it.
func TestRaftStoresKeepWhatTheyTookAndAreLocked(t *testing.T) {
	dir := t.TempDir()
	s, err := openRaftStores(dir)
	if err != nil {
		t.Fatal(err)
	}
	var batch []*raft.Log
	for i := uint64(1); i <= 3; i++ {
		batch = append(batch, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: []byte{byte('a' + i)}})
	}
	if err := s.logs.StoreLogs(batch); err != nil {
		t.Fatal(err)
	}
	if err := s.stable.SetUint64([]byte("CurrentTerm"), 7); err != nil {
		t.Fatal(err)
	}
	if _, err := openRaftStores(dir); !errors.Is(err, ErrDataDir) {
		t.Fatalf("second open of a data_dir in use: %v, want ErrDataDir", err)
	}
	if err := s.close(); err != nil {
		t.Fatal(err)
	}
	s, err = openRaftStores(dir)
	if err != nil {
		t.Fatalf("reopen after close: %v", err)
	}
	defer s.close()
	for i := uint64(1); i <= 3; i++ {
		var l raft.Log
		if err := s.logs.GetLog(i, &l); err != nil || len(l.Data) != 1 || l.Data[0] != byte('a'+i) {
			t.Fatalf("entry %d after reopen: %q, %v", i, l.Data, err)
		}
	}
	if term, err := s.stable.GetUint64([]byte("CurrentTerm")); err != nil || term != 7 {
		t.Fatalf("term after reopen: %d, %v", term, err)
	}
}
