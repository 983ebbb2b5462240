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

// The raft store kinds, as server.raft_store names them and as logged at
// start.
const (
	// StoreBolt is raft-boltdb/v2 in raft/raft.db: a B-tree, two fsyncs per
	// commit. A new data dir gets it unless server.raft_store says "wal".
	StoreBolt = "bolt"
	// StoreWAL is hashicorp/raft-wal in raft/wal: segment files appended
	// with one fsync per batch. A new data dir gets it with
	// server.raft_store = "wal".
	StoreWAL = "wal"
)

// raftStores is where raft keeps its log and its stable state (term, vote).
type raftStores struct {
	// kind is StoreWAL or StoreBolt.
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

// openRaftStores opens the raft store under raftDir. want is
// server.raft_store: "" (unset), StoreBolt or StoreWAL.
//
// A raftDir that already holds a store keeps it: raft.db is a bolt store,
// a non-empty wal directory a write-ahead log. Unset, that store is opened;
// set to the other kind, the start is refused with ErrDataDir (a data dir
// never switches stores silently: its log would be left behind). A raftDir
// with no store gets want, bolt when unset. Either store is locked: a second
// server on the same data_dir is refused after lockWait.
func openRaftStores(raftDir, want string, log hclog.Logger) (*raftStores, error) {
	switch want {
	case "", StoreBolt, StoreWAL:
	default:
		return nil, fmt.Errorf("%w: unknown raft store %q (use %q or %q)", ErrDataDir, want, StoreBolt, StoreWAL)
	}
	found, path, err := existingStore(raftDir)
	if err != nil {
		return nil, err
	}
	kind := want
	switch {
	case found != "" && want != "" && found != want:
		return nil, fmt.Errorf("%w: server.raft_store is %q but %s holds a %s raft store; a data_dir keeps the store it was created with: "+
			"set server.raft_store = %q (or leave it unset), or move this server to the %s store through a fresh data_dir "+
			"(paddock operator snapshot save, start with raft_store = %q on an empty data_dir, paddock operator snapshot restore; "+
			"in a cluster, remove the server, start it on an empty data_dir and let it catch up)",
			ErrDataDir, want, path, found, found, want, want)
	case found != "":
		kind = found
	case kind == "":
		kind = StoreBolt
	}
	if kind == StoreWAL {
		return openWALStores(filepath.Join(raftDir, "wal"), log)
	}
	return openBoltStores(filepath.Join(raftDir, "raft.db"), log)
}

// existingStore says which store raftDir holds ("" for none) and its path:
// raft.db for bolt, a wal directory with anything in it for the WAL. Both
// at once is refused: which one holds the log cannot be told.
func existingStore(raftDir string) (kind, path string, err error) {
	boltPath, walDir := filepath.Join(raftDir, "raft.db"), filepath.Join(raftDir, "wal")
	_, err = os.Stat(boltPath)
	hasBolt := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", "", fmt.Errorf("%w: %v", ErrDataDir, err)
	}
	entries, err := os.ReadDir(walDir)
	hasWAL := err == nil && len(entries) > 0
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", "", fmt.Errorf("%w: %v", ErrDataDir, err)
	}
	switch {
	case hasBolt && hasWAL:
		return "", "", fmt.Errorf("%w: %s holds both a bolt raft store (%s) and a write-ahead log (%s); only one can be this server's log: "+
			"move the one it does not use out of the way (or start on a fresh data_dir and restore a snapshot)", ErrDataDir, raftDir, boltPath, walDir)
	case hasBolt:
		return StoreBolt, boltPath, nil
	case hasWAL:
		return StoreWAL, walDir, nil
	}
	return "", "", nil
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
	log.Info("raft log store", "store", StoreBolt, "path", path)
	return &raftStores{kind: StoreBolt, logs: cached, stable: bolt, path: path, close: bolt.Close}, nil
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
	log.Info("raft log store", "store", StoreWAL, "path", dir)
	closeAll := func() error {
		err := w.Close()
		unlock()
		return err
	}
	return &raftStores{kind: StoreWAL, logs: cached, stable: w, path: dir, close: closeAll}, nil
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
	refuse := func(err error) error {
		return fmt.Errorf("%w: lock raft log %s: %v (is another server using this data_dir?)", ErrDataDir, dir, err)
	}
	err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if err == nil {
		return func() { f.Close() }, nil
	}
	if !errors.Is(err, unix.EWOULDBLOCK) {
		f.Close()
		return nil, refuse(err)
	}
	// Held by another process: a blocking flock returns when it lets go
	// (or dies). flock(2) cannot be interrupted from here, so past
	// lockWait the wait is abandoned to its goroutine, which lets go of a
	// lock it gets too late (the server is refusing to start by then).
	got := make(chan error, 1)
	go func() {
		got <- unix.Flock(int(f.Fd()), unix.LOCK_EX)
	}()
	t := time.NewTimer(lockWait)
	defer t.Stop()
	select {
	case err := <-got:
		if err != nil {
			f.Close()
			return nil, refuse(err)
		}
		return func() { f.Close() }, nil
	case <-t.C:
		go func() { <-got; f.Close() }()
		return nil, refuse(unix.EWOULDBLOCK)
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
