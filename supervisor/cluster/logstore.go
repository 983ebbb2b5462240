package cluster

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
)

// logCacheSize is how many recent raft entries are kept in memory, so that
// the leader replicates a burst without reading it back from disk.
const logCacheSize = 1024

// raftStores is where raft keeps its log and its stable state (term, vote).
type raftStores struct {
	// logs is the log store raft uses: the bolt store behind an in-memory
	// cache of the latest entries (hashicorp/raft reads every entry it
	// replicates back from the log store: one bolt read transaction each).
	logs   raft.LogStore
	stable raft.StableStore
	close  func() error
}

// openRaftStores opens raft's bolt store (raftDir/raft.db). Bolt locks the
// file: a second server on the same data_dir is refused after 2 s.
func openRaftStores(raftDir string) (*raftStores, error) {
	path := filepath.Join(raftDir, "raft.db")
	bolt, err := raftboltdb.New(raftboltdb.Options{
		Path:        path,
		BoltOptions: &bbolt.Options{Timeout: 2 * time.Second},
	})
	if err != nil {
		return nil, fmt.Errorf("%w: open raft log %s: %v (is another server using this data_dir, or is the file corrupt?)",
			ErrDataDir, path, err)
	}
	cached, err := raft.NewLogCache(logCacheSize, bolt)
	if err != nil {
		bolt.Close()
		return nil, fmt.Errorf("raft log cache: %w", err)
	}
	return &raftStores{logs: cached, stable: bolt, close: bolt.Close}, nil
}
