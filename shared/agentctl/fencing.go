package agentctl

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// ErrStaleFencingToken is returned when a request carries a token lower than
// the highest one already seen.
var ErrStaleFencingToken = errors.New("stale fencing token")

// fence keeps the highest fencing token seen, durably (fsync'd) in the state dir.
type fence struct {
	mu      sync.Mutex
	path    string
	highest uint64
}

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
// before it returns. The durable file is read again first: another agentctl
// on the same state dir (a restarted or re-launched executor of the session)
// may have seen a higher token.
func (f *fence) Check(tok uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if b, err := os.ReadFile(f.path); err == nil {
		var ff fenceFile
		if json.Unmarshal(b, &ff) == nil && ff.Highest > f.highest {
			f.highest = ff.Highest
		}
	}
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
	return nil
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
