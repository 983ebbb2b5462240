package cluster

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/hashicorp/raft"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/supervisor/state"
)

// Peers lists the servers of the raft configuration (Healthy and
// LastContact are left nil: the API server fills them in on the leader).
func (n *Node) Peers() ([]api.Peer, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, fmt.Errorf("raft configuration: %w", err)
	}
	_, leader := n.raft.LeaderWithID()
	var out []api.Peer
	for _, s := range f.Configuration().Servers {
		out = append(out, api.Peer{ID: string(s.ID), Address: string(s.Address), Suffrage: s.Suffrage.String(), Leader: s.ID == leader})
	}
	return out, nil
}

// Status reports leader, term, indexes and nodes.
func (n *Node) Status() (api.ClusterStatus, error) {
	peers, err := n.Peers()
	if err != nil {
		return api.ClusterStatus{}, err
	}
	addr, id := n.raft.LeaderWithID()
	stats := n.raft.Stats()
	st := api.ClusterStatus{LeaderID: string(id), LeaderAddress: string(addr), Nodes: peers, AppliedIndex: n.raft.AppliedIndex()}
	_, st.LeaderHTTP = n.Leader()
	if st.LeaderHTTP != "" {
		st.LeaderHTTP = n.scheme() + "://" + st.LeaderHTTP
	}
	st.Term, _ = strconv.ParseUint(stats["term"], 10, 64)
	st.CommitIndex, _ = strconv.ParseUint(stats["commit_index"], 10, 64)
	return st, nil
}

// RemovePeer removes a server from the cluster (leader only).
func (n *Node) RemovePeer(id string) error {
	peers, err := n.Peers()
	if err != nil {
		return err
	}
	for _, p := range peers {
		if p.ID == id {
			if err := n.raft.RemoveServer(raft.ServerID(id), 0, 0).Error(); err != nil {
				return fmt.Errorf("remove peer %s: %w", id, err)
			}
			return nil
		}
	}
	return fmt.Errorf("peer %q %w", id, state.ErrNotFound)
}

// TransferLeadership hands leadership to another server (to id when given)
// and returns the new leader's id. A transfer that fails (the target did not
// take over within raft's election timeout) leaves this node leading.
func (n *Node) TransferLeadership(id string) (string, error) {
	var f raft.Future
	if id == "" {
		f = n.raft.LeadershipTransfer()
	} else {
		peers, err := n.Peers()
		if err != nil {
			return "", err
		}
		addr := ""
		for _, p := range peers {
			if p.ID == id {
				addr = p.Address
			}
		}
		if addr == "" {
			return "", fmt.Errorf("peer %q %w", id, state.ErrNotFound)
		}
		f = n.raft.LeadershipTransferToServer(raft.ServerID(id), raft.ServerAddress(addr))
	}
	if err := f.Error(); err != nil {
		// This node keeps leading: its leader loop was never stopped, and
		// the work the transfer held up (commands raft refused meanwhile)
		// is retried by its callers (see leaderLoop).
		n.log.Warn("leadership transfer failed; this node keeps leading", "target", id, "error", err)
		return "", fmt.Errorf("transfer leadership: %w", err)
	}
	_, leader := n.raft.LeaderWithID()
	return string(leader), nil
}

// SnapshotTo writes a consistent copy of the replicated state to w (leader
// only: a barrier first makes sure every committed write is included).
func (n *Node) SnapshotTo(w io.Writer) error {
	if err := n.raft.Barrier(n.cfg.ApplyTimeout).Error(); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	snap, err := state.NewFSM(n.store).Snapshot()
	if err != nil {
		return err
	}
	sink := &writerSink{w: w}
	return snap.Persist(sink)
}

// Restore replaces the replicated state with a snapshot taken by SnapshotTo,
// on every server (leader only). A snapshot that does not parse is refused
// before anything changes.
func (n *Node) Restore(r io.Reader) error {
	buf, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("read snapshot: %w", err)
	}
	if err := state.ValidateSnapshot(bytes.NewReader(buf)); err != nil {
		return fmt.Errorf("%w: %v", state.ErrInvalid, err)
	}
	meta := &raft.SnapshotMeta{Version: raft.SnapshotVersionMax, Size: int64(len(buf))}
	if err := n.raft.Restore(meta, bytes.NewReader(buf), 30*time.Second); err != nil {
		return fmt.Errorf("restore snapshot: %w", err)
	}
	return nil
}

type writerSink struct {
	w io.Writer
}

func (s *writerSink) Write(p []byte) (int, error) { return s.w.Write(p) }
func (s *writerSink) Close() error                { return nil }
func (s *writerSink) ID() string                  { return "api" }
func (s *writerSink) Cancel() error               { return nil }
