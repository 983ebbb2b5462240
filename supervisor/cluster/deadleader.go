package cluster

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/raft"
)

// Dead-leader detection.
//
// hashicorp/raft notices a lost leader only when a follower's own heartbeat
// timer (randomised in [heartbeat_timeout, 2×heartbeat_timeout)) finds no
// contact for heartbeat_timeout, and a follower that still knows a leader
// refuses (pre-)votes, so an election waits for both survivors of a 3-node
// cluster to time out: about 500–750 ms with the 300 ms defaults, measured
// by `make bench` (failover_to_leader_ms).
//
// The commonest failure is cheaper to see: when the leader's process dies
// on a host that stays up, the kernel closes its raft connections at once
// and its raft port refuses new ones. So every inbound raft connection that
// ends makes a follower dial the leader's raft address; a refused dial means
// the leader process is gone, and the follower lowers its heartbeat and
// election timeouts to the floor raft accepts (leader_lease_timeout) until a
// leader is known again, when the configured timeouts come back. A paused or
// partitioned leader refuses nothing (the dial times out), so those cases
// keep raft's own timing. Timing affects only liveness in raft, never
// safety: a wrong guess costs at most an early pre-vote, which followers of
// a live leader refuse.

// hintListener is the raft stream layer: a TCP listener whose accepted
// connections report when they end (a read error), and a plain TCP dialer.
type hintListener struct {
	net.Listener
	advertise net.Addr
	ended     func()
}

func newHintListener(bind string, advertise net.Addr, ended func()) (*hintListener, error) {
	l, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
	}
	return &hintListener{Listener: l, advertise: advertise, ended: ended}, nil
}

// Accept wraps each connection so that its end is reported.
func (h *hintListener) Accept() (net.Conn, error) {
	c, err := h.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &hintConn{Conn: c, ended: h.ended}, nil
}

// Addr is the advertised address (raft refuses an unspecified one).
func (h *hintListener) Addr() net.Addr { return h.advertise }

// Dial implements raft.StreamLayer.
func (h *hintListener) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout}
	return d.Dial("tcp", string(address))
}

// hintConn calls ended once, on its first read error.
type hintConn struct {
	net.Conn
	once  sync.Once
	ended func()
}

func (c *hintConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil {
		c.once.Do(c.ended)
	}
	return n, err
}

// probeWait bounds one dial of the leader's raft port.
const probeWait = 250 * time.Millisecond

// deadLeader is the detector's state.
type deadLeader struct {
	hint     chan struct{} // an inbound raft connection ended (buffered 1)
	detected atomic.Uint64 // times a dead leader was detected
}

func newDeadLeader() *deadLeader {
	return &deadLeader{hint: make(chan struct{}, 1)}
}

// connEnded is the hintListener callback: it never blocks.
func (d *deadLeader) connEnded() {
	select {
	case d.hint <- struct{}{}:
	default:
	}
}

// DeadLeadersDetected is how many times this node found its leader's
// process gone and shortened its election timing.
func (n *Node) DeadLeadersDetected() uint64 { return n.dead.detected.Load() }

// watchLeader runs the detector until ctx ends.
func (n *Node) watchLeader(ctx context.Context) {
	obsCh := make(chan raft.Observation, 8)
	obs := raft.NewObserver(obsCh, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	n.raft.RegisterObserver(obs)
	defer n.raft.DeregisterObserver(obs)
	fast := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.dead.hint:
			if fast || n.raft.State() != raft.Follower || n.timing.lease >= n.timing.heartbeat {
				continue
			}
			addr, id := n.raft.LeaderWithID()
			if addr == "" || !n.leaderGone(ctx, string(addr)) {
				continue
			}
			if err := n.setElectionTiming(n.timing.lease); err != nil {
				n.log.Warn("cannot shorten election timing", "error", err)
				continue
			}
			fast = true
			n.dead.detected.Add(1)
			n.log.Info("leader's raft port refuses connections: its process is gone; electing with short timeouts",
				"leader", id, "timeout", n.timing.lease)
		case o := <-obsCh:
			lo := o.Data.(raft.LeaderObservation)
			if !fast || lo.LeaderAddr == "" {
				continue
			}
			if err := n.setElectionTiming(0); err != nil {
				n.log.Warn("cannot restore election timing", "error", err)
				continue
			}
			fast = false
			n.log.Info("leader known again; election timing restored", "leader", lo.LeaderID)
		}
	}
}

// setElectionTiming sets the heartbeat and election timeouts to d, or back
// to the configured ones when d is 0.
func (n *Node) setElectionTiming(d time.Duration) error {
	rc := n.raft.ReloadableConfig()
	rc.HeartbeatTimeout, rc.ElectionTimeout = n.timing.heartbeat, n.timing.election
	if d > 0 {
		rc.HeartbeatTimeout, rc.ElectionTimeout = d, d
	}
	return n.raft.ReloadConfig(rc)
}

// leaderGone probes the leader's raft address a few times over ~150 ms: a
// process being killed may still hold its listening socket for a moment
// after its connections closed.
func (n *Node) leaderGone(ctx context.Context, addr string) bool {
	for _, wait := range []time.Duration{0, 20 * time.Millisecond, 40 * time.Millisecond, 80 * time.Millisecond} {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(wait):
		}
		if cur, _ := n.raft.LeaderWithID(); string(cur) != addr {
			return false // a new leader, or none: raft has moved on
		}
		if refuses(ctx, addr) {
			return true
		}
	}
	return false
}

// refuses reports whether a TCP dial to addr is refused (a process gone from
// a live host). A successful dial is closed at once: raft's transport ends a
// connection that closes before its first byte without logging.
func refuses(ctx context.Context, addr string) bool {
	ctx, cancel := context.WithTimeout(ctx, probeWait)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err == nil {
		c.Close()
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

// electAlone shortens the election of a server whose configuration names it
// as the only voter (a one-server cluster restarting): it has no leader to
// hear from, yet raft would wait out a whole heartbeat timeout before its
// election. It elects with the short timeout, as after a dead leader, and
// the usual timing is restored once it leads. Run once, after raft started.
func (n *Node) electAlone(ctx context.Context) {
	cf := n.raft.GetConfiguration()
	if cf.Error() != nil || !onlyVoter(cf.Configuration(), raft.ServerID(n.cfg.NodeID)) ||
		n.timing.lease >= n.timing.heartbeat || n.raft.State() != raft.Follower {
		return
	}
	obsCh := make(chan raft.Observation, 4)
	obs := raft.NewObserver(obsCh, false, func(o *raft.Observation) bool {
		lo, ok := o.Data.(raft.LeaderObservation)
		return ok && lo.LeaderAddr != ""
	})
	n.raft.RegisterObserver(obs)
	defer n.raft.DeregisterObserver(obs)
	if err := n.setElectionTiming(n.timing.lease); err != nil {
		n.log.Warn("cannot shorten election timing", "error", err)
		return
	}
	n.log.Info("this server is its cluster's only voter: electing itself without waiting out a heartbeat timeout", "timeout", n.timing.lease)
	if _, id := n.raft.LeaderWithID(); id == "" {
		select {
		case <-ctx.Done():
		case <-obsCh:
		}
	}
	if err := n.setElectionTiming(0); err != nil {
		n.log.Warn("cannot restore election timing", "error", err)
	}
}

// onlyVoter reports whether self is the one voter of c.
func onlyVoter(c raft.Configuration, self raft.ServerID) bool {
	voters, found := 0, false
	for _, s := range c.Servers {
		if s.Suffrage == raft.Voter {
			voters++
			found = found || s.ID == self
		}
	}
	return voters == 1 && found
}
