package cluster

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	wal "github.com/hashicorp/raft-wal"
	"go.etcd.io/bbolt"
	"golang.org/x/sys/unix"
)

// logCacheSize is how many recent raft entries are kept in memory, so that
// the leader replicates a burst without reading it back from disk.
const logCacheSize = 1024

// lockWait is how long a second server on the same data_dir waits for the
// first to let go of the raft store before it is refused.
const lockWait = 2 * time.Second

// The raft store kinds, as logged at start.
const (
	// storeWAL is hashicorp/raft-wal in raft/wal: segment files appended
	// with one fsync per batch. New data dirs get it.
	storeWAL = "wal"
	// storeBolt is raft-boltdb/v2 in raft/raft.db: a B-tree, two fsyncs per
	// commit. Data dirs written before the WAL keep it.
	storeBolt = "bolt"
)

// raftStores is where raft keeps its log and its stable state (term, vote).
type raftStores struct {
	// kind is storeWAL or storeBolt.
	kind string
	// logs is the log store raft uses: the store behind an in-memory cache
	// of the latest entries (hashicorp/raft reads every entry it replicates
	// back from the log store).
	logs   raft.LogStore
	stable raft.StableStore
	// path is the store's file (bolt) or directory (WAL).
	path  string
	close func() error
}

// openRaftStores opens the raft store under raftDir. A raftDir that holds a
// bolt store (raft.db, written before Paddock used a WAL) keeps it;
// otherwise the log and stable state live in the write-ahead log in
// raftDir/wal. Either is locked: a second server on the same data_dir is
// refused after lockWait.
func openRaftStores(raftDir string, log hclog.Logger) (*raftStores, error) {
	boltPath := filepath.Join(raftDir, "raft.db")
	_, err := os.Stat(boltPath)
	switch {
	case err == nil:
		return openBoltStores(boltPath, log)
	case errors.Is(err, fs.ErrNotExist):
		return openWALStores(filepath.Join(raftDir, "wal"), log)
	default:
		return nil, fmt.Errorf("%w: %v", ErrDataDir, err)
	}
}

func openBoltStores(path string, log hclog.Logger) (*raftStores, error) {
	bolt, err := raftboltdb.New(raftboltdb.Options{
		Path:        path,
		BoltOptions: &bbolt.Options{Timeout: lockWait},
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
	log.Info("raft log store", "store", storeBolt, "path", path)
	return &raftStores{kind: storeBolt, logs: cached, stable: bolt, path: path, close: bolt.Close}, nil
}

func openWALStores(dir string, log hclog.Logger) (*raftStores, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDataDir, err)
	}
	unlock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	w, err := wal.Open(dir, wal.WithLogger(log.Named("wal")))
	if err != nil {
		unlock()
		return nil, fmt.Errorf("%w: open raft log %s: %v (is the write-ahead log corrupt?)", ErrDataDir, dir, err)
	}
	cached, err := raft.NewLogCache(logCacheSize, w)
	if err != nil {
		w.Close()
		unlock()
		return nil, fmt.Errorf("raft log cache: %w", err)
	}
	log.Info("raft log store", "store", storeWAL, "path", dir)
	closeAll := func() error {
		err := w.Close()
		unlock()
		return err
	}
	return &raftStores{kind: storeWAL, logs: cached, stable: w, path: dir, close: closeAll}, nil
}

// lockDir takes an exclusive lock on the directory dir for this process
// (a file lock on the directory itself: nothing is written), waiting up to
// lockWait for another holder to let go. The kernel drops the lock when the
// process dies, however it dies.
func lockDir(dir string) (unlock func(), err error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDataDir, err)
	}
	deadline := time.Now().Add(lockWait)
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) || time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("%w: lock raft log %s: %v (is another server using this data_dir?)", ErrDataDir, dir, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// bytes is the size of the store on disk: the bolt file, or the WAL's
// files (its segments are preallocated, so this grows a segment at a time).
func (s *raftStores) bytes() int64 {
	fi, err := os.Stat(s.path)
	if err != nil {
		return 0
	}
	if !fi.IsDir() {
		return fi.Size()
	}
	entries, err := os.ReadDir(s.path)
	if err != nil {
		return 0
	}
	var n int64
	for _, e := range entries {
		if info, err := e.Info(); err == nil && info.Mode().IsRegular() {
			n += info.Size()
		}
	}
	return n
}
