package agentctl

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// ErrStaleFencingToken is returned when a request carries a token lower than
// the highest one already seen.
var ErrStaleFencingToken = errors.New("stale fencing token")

// fence keeps the highest fencing token seen, durably (fsync'd) in the state dir.
type fence struct {
	mu      sync.Mutex
	path    string
	highest uint64
	// read is the file as it was when last read here; while it
	// is unchanged there is nothing new to read (see Check).
	read   os.FileInfo
	readAt time.Time
}

// stampSettle is how old a fencing file's modification time must be before
// an unchanged stat stands for unchanged contents. A write replaces the file
// (a new inode, a modification time of the write), so a stat that matches
// one recorded after the file had settled cannot hide a later write; a
// younger file is read each time, since a filesystem's coarse timestamps
// (a clock tick, two seconds on some) could give two writes one time.
const stampSettle = 2 * time.Second

type fenceFile struct {
	Highest uint64 `json:"highest"`
}

func loadFence(stateDir string) (*fence, error) {
	f := &fence{path: filepath.Join(stateDir, "fencing.json")}
	b, err := os.ReadFile(f.path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return f, nil
	case err != nil:
		return nil, fmt.Errorf("read fencing state: %w", err)
	}
	var ff fenceFile
	if err := json.Unmarshal(b, &ff); err != nil {
		return nil, fmt.Errorf("decode fencing state %s: %w", f.path, err)
	}
	f.highest = ff.Highest
	return f, nil
}

// Highest returns the highest token seen.
func (f *fence) Highest() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.highest
}

// Check admits tok when it is >= the highest seen, persisting a new highest
// before it returns. The durable file is looked at again first: another
// agentctl on the same state dir (a restarted or re-launched executor of the
// session) may have seen a higher token. It is read only when a stat says
// it may have changed: a read and a decode on every fenced request were a
// fifth of what agentctl spent on a lease renewal (BenchmarkLeaseRenewal).
func (f *fence) Check(tok uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refresh()
	if tok < f.highest {
		return fmt.Errorf("fencing token %d is lower than %d already seen: %w", tok, f.highest, ErrStaleFencingToken)
	}
	if tok == f.highest {
		return nil
	}
	b, _ := json.Marshal(fenceFile{Highest: tok})
	if err := writeFileSync(f.path, b); err != nil {
		return fmt.Errorf("persist fencing token: %w", err)
	}
	f.highest = tok
	f.read = nil // read it back next time: the stamp of our own write settles later
	return nil
}

// refresh takes a higher token from the durable file when the file may have
// changed since it was last read. A file that cannot be read or decoded
// leaves the token in memory as it is (it only ever goes up).
func (f *fence) refresh() {
	st, err := os.Stat(f.path)
	if err != nil {
		return
	}
	if f.read != nil && os.SameFile(st, f.read) && st.Size() == f.read.Size() && st.ModTime().Equal(f.read.ModTime()) &&
		f.readAt.Sub(f.read.ModTime()) > stampSettle {
		return
	}
	b, err := os.ReadFile(f.path)
	if err != nil {
		return
	}
	var ff fenceFile
	if json.Unmarshal(b, &ff) != nil {
		return
	}
	if ff.Highest > f.highest {
		f.highest = ff.Highest
	}
	f.read, f.readAt = st, time.Now()
}

// writeFileSync writes data to path atomically: temp file, fsync, rename, fsync dir.
func writeFileSync(path string, data []byte) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	name := tmp.Name()
	defer os.Remove(name)
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(name, path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
