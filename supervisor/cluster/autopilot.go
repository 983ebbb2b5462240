package cluster

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	autopilot "github.com/hashicorp/raft-autopilot"
)

// Server health is hashicorp/raft-autopilot's, as in Consul, Nomad and
// Vault: on the leader, probe gathers every server's raft stats (over the
// peer's proof route, cluster/proof.go) each autopilotInterval, and autopilot calls a server
// healthy when it answers, heard from the leader within
// LastContactThreshold, is on the leader's term and trails its log by at
// most MaxTrailingLogs entries. A server that has not answered for
// failedAfter is "failed"; with Config.CleanupDeadServers autopilot then
// removes it from the raft configuration while the voters left are at
// least a majority of BootstrapExpect (a removed server comes back with
// `paddock operator raft add-peer`).
//
// A joining server comes in as a non-voter (join.go): autopilot's default
// promoter makes it a voter once it is healthy, if the join's own promotion
// did not. A server that answers only over HTTP (or not at all) never
// becomes a voter, so it never costs the cluster its quorum.

const (
	// autopilotInterval is how often the leader probes every server and
	// refreshes server health.
	autopilotInterval = time.Second
	// maxTrailingLogs is how far behind the leader's log a healthy server
	// may be.
	maxTrailingLogs = 250
)

// ServerStats are one server's raft figures as autopilot reads them.
type ServerStats struct {
	// LastContact is how long ago the server heard from its leader (0 on
	// the leader; -1 when it never has).
	LastContact time.Duration `json:"last_contact_ns"`
	LastTerm    uint64        `json:"last_term"`
	LastIndex   uint64        `json:"last_index"`
}

// ServerHealth is the leader's autopilot view of one server.
type ServerHealth struct {
	Healthy bool
	// Failed: the server has not answered for a while (autopilot's
	// NodeFailed); a failed server is never healthy.
	Failed bool
	// LastContact is when the server was last heard from (zero: never).
	LastContact time.Time
	// StableSince is when the server last became healthy.
	StableSince time.Time
}

// localStats are this node's raft stats.
func (n *Node) localStats() ServerStats {
	s := n.raft.Stats()
	st := ServerStats{LastContact: -1}
	switch v := s["last_contact"]; v {
	case "0":
		st.LastContact = 0
	case "never", "":
	default:
		if d, err := time.ParseDuration(v); err == nil {
			st.LastContact = d
		}
	}
	if n.raft.State() == raft.Leader {
		st.LastContact = 0
	}
	st.LastTerm, _ = strconv.ParseUint(s["last_log_term"], 10, 64)
	st.LastIndex, _ = strconv.ParseUint(s["last_log_index"], 10, 64)
	return st
}

// pilot is the Node's autopilot delegate (autopilot.ApplicationIntegration).
type pilot struct {
	n           *Node
	failedAfter time.Duration

	mu       sync.Mutex
	known    map[raft.ServerID]time.Time // first sight of each server this term
	answered map[raft.ServerID]time.Time // its last answer with stats
	stats    map[raft.ServerID]ServerStats
	state    *autopilot.State
	running  bool
}

func newPilot(n *Node) *pilot {
	p := &pilot{n: n, failedAfter: max(3*time.Second, 10*n.cfg.HeartbeatTimeout)}
	p.reset()
	return p
}

// reset forgets what an earlier term's autopilot saw; what the probe
// heard stays (call with mu held or before use).
func (p *pilot) reset() {
	p.known, p.state = map[raft.ServerID]time.Time{}, nil
	if p.answered == nil {
		p.answered, p.stats = map[raft.ServerID]time.Time{}, map[raft.ServerID]ServerStats{}
	}
}

// AutopilotConfig implements autopilot.ApplicationIntegration.
func (p *pilot) AutopilotConfig() *autopilot.Config {
	return &autopilot.Config{
		CleanupDeadServers:   p.n.cfg.CleanupDeadServers,
		LastContactThreshold: max(time.Second, 5*p.n.cfg.HeartbeatTimeout),
		MaxTrailingLogs:      maxTrailingLogs,
		// Never prune below a majority of the servers the cluster formed with.
		MinQuorum: uint(max(1, p.n.cfg.BootstrapExpect/2+1)),
	}
}

// NotifyState implements autopilot.ApplicationIntegration.
func (p *pilot) NotifyState(s *autopilot.State) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.state = s
}

// KnownServers implements autopilot.ApplicationIntegration: the servers of
// the raft configuration, alive unless they stopped answering.
func (p *pilot) KnownServers() map[raft.ServerID]*autopilot.Server {
	f := p.n.raft.GetConfiguration()
	if f.Error() != nil {
		return nil
	}
	_, leader := p.n.raft.LeaderWithID()
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[raft.ServerID]*autopilot.Server{}
	for _, s := range f.Configuration().Servers {
		if _, ok := p.known[s.ID]; !ok {
			p.known[s.ID] = now // a server just seen gets its grace
		}
		// A server is judged from its last answer, or from when this term
		// first saw it when it has not answered since.
		last := p.known[s.ID]
		if a := p.answered[s.ID]; !a.IsZero() {
			last = a
		}
		status := autopilot.NodeAlive
		if string(s.ID) != p.n.cfg.NodeID && now.Sub(last) > p.failedAfter {
			status = autopilot.NodeFailed
		}
		out[s.ID] = &autopilot.Server{ID: s.ID, Name: string(s.ID), Address: s.Address, NodeStatus: status,
			IsLeader: s.ID == leader, NodeType: autopilot.NodeVoter, RaftVersion: raft.ProtocolVersionMax}
	}
	return out
}

// FetchServerStats implements autopilot.ApplicationIntegration with what
// the probe loop last heard from each server (this node's from raft).
// Autopilot asks only about servers it takes to be alive, so liveness comes
// from probe, which asks every server, failed ones included.
func (p *pilot) FetchServerStats(_ context.Context, servers map[raft.ServerID]*autopilot.Server) map[raft.ServerID]*autopilot.ServerStats {
	out := map[raft.ServerID]*autopilot.ServerStats{}
	fresh := time.Now().Add(-2 * autopilotInterval)
	p.mu.Lock()
	defer p.mu.Unlock()
	for id := range servers {
		st, ok := p.stats[id]
		if string(id) == p.n.cfg.NodeID {
			st, ok = p.n.localStats(), true
		} else if !p.answered[id].After(fresh) {
			ok = false
		}
		if ok {
			out[id] = &autopilot.ServerStats{LastContact: st.LastContact, LastTerm: st.LastTerm, LastIndex: st.LastIndex}
		}
	}
	return out
}

// probe asks every other server of the raft configuration for its stats
// (the proof route: a challenge, never the secret) each autopilotInterval until ctx ends. It runs on
// every node, so a new leader knows at once which servers answer and when
// each last did.
func (p *pilot) probe(ctx context.Context) {
	t := time.NewTicker(autopilotInterval)
	defer t.Stop()
	for {
		f := p.n.raft.GetConfiguration()
		if f.Error() == nil {
			var wg sync.WaitGroup
			for _, srv := range f.Configuration().Servers {
				if string(srv.ID) == p.n.cfg.NodeID {
					continue
				}
				addr := p.n.peerHTTPAddr(string(srv.ID), string(srv.Address))
				if addr == "" {
					continue // not registered yet
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					info, err := p.n.peerInfo(ctx, addr) // bounded by 1s
					if err != nil || info.ID != string(srv.ID) || info.Stats == nil {
						return
					}
					p.mu.Lock()
					p.answered[srv.ID], p.stats[srv.ID] = time.Now(), *info.Stats
					p.mu.Unlock()
				}()
			}
			wg.Wait()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// RemoveFailedServer implements autopilot.ApplicationIntegration; autopilot
// calls it only with Config.CleanupDeadServers and when a quorum remains.
func (p *pilot) RemoveFailedServer(srv *autopilot.Server) {
	go func() {
		p.n.log.Warn("autopilot: removing a failed server from the raft configuration", "server", srv.ID)
		if err := p.n.raft.RemoveServer(srv.ID, 0, 0).Error(); err != nil {
			p.n.log.Error("autopilot: remove failed server", "server", srv.ID, "error", err)
		}
	}()
}

// runAutopilot runs autopilot while this node leads (a LeaderFunc).
func (n *Node) runAutopilot(ctx context.Context) {
	n.pilot.mu.Lock()
	n.pilot.reset()
	n.pilot.running = true
	n.pilot.mu.Unlock()
	n.autopilot.Start(ctx)
	<-ctx.Done()
	<-n.autopilot.Stop()
	n.pilot.mu.Lock()
	n.pilot.running, n.pilot.state = false, nil
	n.pilot.mu.Unlock()
}

// ServerHealth is autopilot's view of every server while this node leads;
// ok is false on a follower or before autopilot's first round.
func (n *Node) ServerHealth() (health map[string]ServerHealth, ok bool) {
	n.pilot.mu.Lock()
	defer n.pilot.mu.Unlock()
	if !n.pilot.running || n.pilot.state == nil {
		return nil, false
	}
	now := time.Now()
	health = map[string]ServerHealth{}
	for id, s := range n.pilot.state.Servers {
		h := ServerHealth{Healthy: s.Health.Healthy, Failed: s.Server.NodeStatus == autopilot.NodeFailed, StableSince: s.Health.StableSince}
		if string(id) == n.cfg.NodeID {
			h.LastContact = now
		} else {
			h.LastContact = n.pilot.answered[id] // zero when it never answered
		}
		if h.Failed {
			h.Healthy = false
		}
		health[string(id)] = h
	}
	return health, true
}
