package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"time"

	"github.com/hashicorp/raft"

	"github.com/paddockhq/paddock/supervisor/state"
)

// PeerInfo is what a node tells peers about itself during bootstrap and join.
type PeerInfo struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	HTTPAddr string `json:"http_addr"`
	HasState bool   `json:"has_state"`
	LeaderID string `json:"leader_id"`
	// Stats are the node's raft figures for the leader's autopilot
	// (LocalInfo fills them; absent in a join request).
	Stats *ServerStats `json:"stats,omitempty"`
}

// joinInterval is how often the join loop retries.
const joinInterval = 250 * time.Millisecond

// joinLoop forms or joins the cluster (Consul's bootstrap_expect model):
//   - a node with existing raft state just runs, and makes sure the leader
//     knows its current addresses;
//   - bootstrap_expect = 1 bootstraps alone;
//   - otherwise the node polls retry_join peers; when a peer knows a leader it
//     asks to join; when bootstrap_expect servers without state see each other
//     they all bootstrap with the same configuration.
func (n *Node) joinLoop(ctx context.Context) {
	hasState, err := raft.HasExistingState(n.stores.logs, n.stores.stable, n.snaps)
	if err != nil {
		n.log.Error("read raft state", "error", err)
	}
	if !hasState && n.cfg.BootstrapExpect <= 1 {
		n.bootstrap([]PeerInfo{n.self(false)})
	}
	t := time.NewTicker(joinInterval)
	defer t.Stop()
	for {
		if n.membershipSettled(ctx) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// membershipSettled does one round of the join loop and reports whether there
// is nothing left to do.
func (n *Node) membershipSettled(ctx context.Context) bool {
	self := n.self(false)
	if id, addr := n.Leader(); id != "" {
		if id == n.cfg.NodeID {
			return true // the leader registers itself in its leader loop
		}
		if n.store.Nodes()[n.cfg.NodeID] == (state.NodeInfo{ID: self.ID, RaftAddr: self.RaftAddr, HTTPAddr: self.HTTPAddr}) {
			return true
		}
		if addr != "" {
			if err := n.requestJoin(ctx, addr); err != nil {
				n.log.Debug("join via leader", "leader", id, "error", err)
			}
		}
		return false
	}
	if len(n.cfg.RetryJoin) == 0 {
		return false
	}
	// A join is asked of the leader when it is among the peers (only the
	// leader adds servers), else of the first peer that knows a leader.
	var fresh []PeerInfo
	via := ""
	for _, addr := range n.cfg.RetryJoin {
		p, err := n.peerInfo(ctx, addr)
		if err != nil {
			n.log.Trace("peer not reachable", "addr", addr, "error", err)
			continue
		}
		if p.ID == n.cfg.NodeID {
			continue
		}
		if p.LeaderID != "" && p.LeaderID == p.ID {
			via = addr
			break
		}
		if p.LeaderID != "" && via == "" {
			via = addr
		}
		if !p.HasState {
			fresh = append(fresh, p)
		}
	}
	if via != "" {
		if err := n.requestJoin(ctx, via); err != nil {
			n.log.Debug("join via peer", "peer", via, "error", err)
		}
		return false
	}
	hasState, _ := raft.HasExistingState(n.stores.logs, n.stores.stable, n.snaps)
	if !hasState && n.cfg.BootstrapExpect > 1 && len(fresh)+1 >= n.cfg.BootstrapExpect {
		n.bootstrap(append(fresh, self))
	}
	return false
}

func (n *Node) self(withState bool) PeerInfo {
	return PeerInfo{ID: n.cfg.NodeID, RaftAddr: n.cfg.RaftAddr, HTTPAddr: n.cfg.HTTPAddr, HasState: withState}
}

// bootstrap starts a new cluster with the given servers. Every server of a
// new cluster calls it with the same configuration, which raft allows.
func (n *Node) bootstrap(peers []PeerInfo) {
	sort.Slice(peers, func(i, j int) bool { return peers[i].ID < peers[j].ID })
	var servers []raft.Server
	for _, p := range peers {
		servers = append(servers, raft.Server{ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.RaftAddr), Suffrage: raft.Voter})
	}
	n.log.Info("bootstrapping cluster", "servers", len(servers))
	if err := n.raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil && err != raft.ErrCantBootstrap {
		n.log.Error("bootstrap", "error", err)
	}
}

func (n *Node) requestJoin(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	body, _ := json.Marshal(n.self(false))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/v1/internal/join", bytes.NewReader(body))
	if err != nil {
		return err
	}
	n.authorize(req)
	resp, err := n.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("join via %s: %s: %s", addr, resp.Status, bytes.TrimSpace(msg))
	}
	return nil
}

// Join adds (or updates) a server: called on the leader for a join request
// and for `operator raft add-peer`. Nothing changes before the server has
// proven, at the HTTP address it names, that it is that server and knows the
// node secret (verifyPeer); a stale entry under its id or raft address is
// removed only then, so a join that fails leaves the configuration as it
// was. A new server comes in as a non-voter and is promoted once it answers
// over raft: its log has reached the entry that added it (promote, or
// autopilot's promoter on a later round). A server that can never be
// reached over raft thus never counts toward the quorum.
func (n *Node) Join(ctx context.Context, p PeerInfo) error {
	if p.ID == "" || p.RaftAddr == "" || p.HTTPAddr == "" {
		return fmt.Errorf("join: id, raft_addr and http_addr are required")
	}
	if err := n.verifyPeer(ctx, p); err != nil {
		return err
	}
	cf := n.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return fmt.Errorf("join %s: %w", p.ID, err)
	}
	var member *raft.Server
	for _, s := range cf.Configuration().Servers {
		if s.ID == raft.ServerID(p.ID) && s.Address == raft.ServerAddress(p.RaftAddr) {
			member = &s
		} else if s.ID == raft.ServerID(p.ID) || s.Address == raft.ServerAddress(p.RaftAddr) {
			if err := n.raft.RemoveServer(s.ID, 0, 0).Error(); err != nil {
				return fmt.Errorf("join %s: remove stale entry: %w", p.ID, err)
			}
		}
	}
	var added uint64
	if member == nil {
		f := n.raft.AddNonvoter(raft.ServerID(p.ID), raft.ServerAddress(p.RaftAddr), 0, 0)
		if err := f.Error(); err != nil {
			return fmt.Errorf("join %s: %w", p.ID, err)
		}
		added = f.Index()
		n.log.Info("server joined as a non-voter", "id", p.ID, "raft_addr", p.RaftAddr)
	}
	// Registered before its promotion: autopilot's probe finds a server's
	// HTTP address in the node registry.
	res, err := n.Apply(ctx, state.CmdRegisterNode, &state.RegisterNodeBody{Node: state.NodeInfo{ID: p.ID, RaftAddr: p.RaftAddr, HTTPAddr: p.HTTPAddr}})
	if err != nil {
		return err
	}
	if res.Err != nil {
		return res.Err
	}
	if member == nil || member.Suffrage != raft.Voter {
		n.promote(ctx, p, added)
	}
	return nil
}

// promoteWait bounds how long a join waits for its server to catch up
// before leaving the promotion to autopilot.
const promoteWait = 3 * time.Second

// promote makes a joining non-voter a voter once its raft log holds the
// entry at index (the one that added it; 0: the leader's last index), which
// proves the server answers over raft at its address as the server it
// claims to be. When it has not within promoteWait, autopilot promotes it
// once it is healthy.
func (n *Node) promote(ctx context.Context, p PeerInfo, index uint64) {
	if index == 0 {
		index = n.raft.LastIndex()
	}
	ctx, cancel := context.WithTimeout(ctx, promoteWait)
	defer cancel()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		got, err := n.peerInfo(ctx, p.HTTPAddr)
		if err == nil && got.ID == p.ID && got.Stats != nil && got.Stats.LastIndex >= index {
			if err := n.raft.AddVoter(raft.ServerID(p.ID), raft.ServerAddress(p.RaftAddr), 0, 0).Error(); err != nil {
				n.log.Warn("promote a joined server; autopilot will", "id", p.ID, "error", err)
				return
			}
			n.log.Info("server promoted to voter", "id", p.ID, "raft_addr", p.RaftAddr)
			return
		}
		select {
		case <-ctx.Done():
			n.log.Info("a joined server has not caught up yet; autopilot promotes it once it is healthy", "id", p.ID)
			return
		case <-t.C:
		}
	}
}

// AddPeer adds the server answering at httpAddr: the operator's explicit way
// to grow a cluster (a new server with retry_join asks the leader itself).
// Called on the leader. The server must prove it knows the node secret; the
// secret is never sent to it.
func (n *Node) AddPeer(ctx context.Context, httpAddr string) (PeerInfo, error) {
	p, err := n.peerInfo(ctx, httpAddr)
	if err != nil {
		return PeerInfo{}, fmt.Errorf("add peer: the server does not answer at %s as one of this cluster's servers: %w", httpAddr, err)
	}
	return p, n.Join(ctx, PeerInfo{ID: p.ID, RaftAddr: p.RaftAddr, HTTPAddr: p.HTTPAddr})
}

// verifyPeer checks, before anything changes, that the server answers at its
// HTTP address as the server it claims to be and proves it knows the node
// secret (peerInfo). A voter that cannot be reached would cost the cluster
// its quorum; one that does not know the secret is not ours.
func (n *Node) verifyPeer(ctx context.Context, p PeerInfo) error {
	httpHost, _, err1 := net.SplitHostPort(p.HTTPAddr)
	raftHost, _, err2 := net.SplitHostPort(p.RaftAddr)
	if err1 != nil || err2 != nil || httpHost != raftHost {
		return fmt.Errorf("join %s: http_addr %q and raft_addr %q must be host:port on the same host", p.ID, p.HTTPAddr, p.RaftAddr)
	}
	got, err := n.peerInfo(ctx, p.HTTPAddr)
	if err != nil {
		return fmt.Errorf("join %s: the server does not answer at %s: %w", p.ID, p.HTTPAddr, err)
	}
	if got.ID != p.ID || got.RaftAddr != p.RaftAddr {
		return fmt.Errorf("join %s: the server at %s is %s with raft address %s, not %s at %s", p.ID, p.HTTPAddr, got.ID, got.RaftAddr, p.ID, p.RaftAddr)
	}
	return nil
}

// LocalInfo describes this node for peers.
func (n *Node) LocalInfo() PeerInfo {
	hasState, _ := raft.HasExistingState(n.stores.logs, n.stores.stable, n.snaps)
	p := n.self(hasState)
	p.LeaderID, _ = n.Leader()
	st := n.localStats()
	p.Stats = &st
	return p
}
