package cluster

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/hashicorp/raft"
)

// Snapshot policy. A restarting server restores its latest snapshot and
// then applies every log entry after it, one decode each, before it serves
// as leader (the leader loop's barrier) or catches up as follower; it also
// reads each of those entries once at start for configuration changes.
// raft's own policy (a snapshot every 2–4 minutes once 8,192 entries are
// new) left the whole log since the cluster began to apply after a restart
// in its first minutes: 12,000 entries and 0.56 s for 1,000 sessions. So:
//
//   - once writes go quiet (no new entry for quietFor) after at least
//     quietEntries new entries, the server snapshots: a burst (many sessions
//     created, a recovery run) costs one snapshot when it ends, and a
//     restart after it restores that snapshot and applies only what came
//     after;
//   - raft's own check runs every snapshotInterval (30–60 s) instead of
//     120–240 s, so a server that never goes quiet still snapshots every
//     8,192 entries, and a restart applies at most about that many plus
//     what a minute writes.
//
// Disk: each snapshot holds the whole state (3.4 MB with 1,000 idle demo
// sessions, mostly their executors, leases, messages and the idempotency
// keys) and two are kept; a busy server writes one per 8,192 entries at most.
const (
	defaultQuietFor     = 2 * time.Second
	defaultQuietEntries = 1024
	snapshotInterval    = 30 * time.Second
)

// snapshotWhenQuiet takes a snapshot each time the log has been still for
// quietFor with at least quietEntries entries since the last snapshot,
// until ctx ends. It runs on every server: each keeps its own log short.
func (n *Node) snapshotWhenQuiet(ctx context.Context) {
	quiet, entries := n.cfg.QuietSnapshotAfter, n.cfg.QuietSnapshotEntries
	if quiet <= 0 {
		quiet = defaultQuietFor
	}
	if entries == 0 {
		entries = defaultQuietEntries
	}
	tick := time.NewTicker(quiet / 4)
	defer tick.Stop()
	last, since := n.raft.LastIndex(), time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if idx := n.raft.LastIndex(); idx != last {
			last, since = idx, time.Now()
			continue
		}
		if time.Since(since) < quiet || n.raft.AppliedIndex() < n.lastSnapshotIndex()+entries {
			continue
		}
		began := time.Now()
		err := n.raft.Snapshot().Error()
		switch {
		case err == nil:
			n.log.Info("snapshot taken after writes went quiet", "index", n.raft.AppliedIndex(), "took", time.Since(began).Round(time.Millisecond))
		case errors.Is(err, raft.ErrNothingNewToSnapshot):
		default:
			n.log.Warn("snapshot after writes went quiet", "error", err)
			since = time.Now() // try again after another quiet spell
		}
	}
}

// lastSnapshotIndex is the index of this server's latest snapshot (0: none).
func (n *Node) lastSnapshotIndex() uint64 {
	idx, _ := strconv.ParseUint(n.raft.Stats()["last_snapshot_index"], 10, 64)
	return idx
}
