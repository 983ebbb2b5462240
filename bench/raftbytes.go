package bench

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/paddockhq/paddock/bench/harness"
	"github.com/paddockhq/paddock/supervisor/state"
)

// raftBytes is what a range of a server's raft log holds: the servers
// expose no byte counter of what they replicate, so the bench reads the
// entries themselves from a stopped server's log store.
type raftBytes struct {
	// Entries is the range's length (last − first + 1); Read how many of
	// them were still in the log (a snapshot compacts the log down to
	// raft's trailing 10,240 entries).
	Entries, Read int
	// Bytes is the command payloads (raft.Log.Data) of the entries read:
	// what the leader sends each follower before framing; Messages the part
	// of it in message writes (put and append).
	Bytes, Messages int64
}

// Estimate is the range's payload bytes: Bytes when every entry was read,
// else Bytes scaled by the entries that were compacted away.
func (r raftBytes) Estimate() float64 {
	if r.Read == 0 {
		return 0
	}
	return float64(r.Bytes) * float64(r.Entries) / float64(r.Read)
}

// String says how the figure was read.
func (r raftBytes) String() string {
	s := fmt.Sprintf("%d raft entries, %.1f MiB of command payload (%.0f%% of it message writes)",
		r.Entries, r.Estimate()/(1<<20), 100*float64(r.Messages)/float64(max(r.Bytes, 1)))
	if r.Read < r.Entries {
		s += fmt.Sprintf("; a snapshot had compacted the first %d entries, the figure scales the %d still in the log", r.Entries-r.Read, r.Read)
	}
	return s
}

// readRaftBytes kills node (kill -9: the suite is done with it; bolt
// keeps every committed transaction) and sums the payloads of its raft log
// entries first…last from its bolt store (DIR/data/raft/raft.db, the
// default raft_store).
func readRaftBytes(node *harness.Node, first, last uint64) (raftBytes, error) {
	var out raftBytes
	if last < first {
		return out, errors.New("empty range")
	}
	out.Entries = int(last - first + 1)
	node.Kill()
	path := filepath.Join(node.Dir, "data", "raft", "raft.db")
	if _, err := os.Stat(path); err != nil {
		return out, fmt.Errorf("the follower's raft log: %w", err)
	}
	// Opened as the server opens it (the lock is free: the server is gone).
	store, err := raftboltdb.NewBoltStore(path)
	if err != nil {
		return out, fmt.Errorf("open %s: %w", path, err)
	}
	defer store.Close()
	lo, err := store.FirstIndex()
	if err != nil {
		return out, err
	}
	var l raft.Log
	for i := max(first, lo); i <= last; i++ {
		if err := store.GetLog(i, &l); err != nil {
			if errors.Is(err, raft.ErrLogNotFound) {
				continue
			}
			return out, fmt.Errorf("entry %d: %w", i, err)
		}
		out.Read++
		if l.Type != raft.LogCommand {
			continue
		}
		out.Bytes += int64(len(l.Data))
		if len(l.Data) > 0 {
			switch state.CommandType(l.Data[0]) {
			case state.CmdPutMessage, state.CmdAppendMessage:
				out.Messages += int64(len(l.Data))
			}
		}
	}
	return out, nil
}
