package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	autopilot "github.com/hashicorp/raft-autopilot"

	"github.com/paddockhq/paddock/certs"
	"github.com/paddockhq/paddock/supervisor/state"
)

// Sentinel errors of the cluster layer.
var (
	// ErrNoLeader means no leader was known within the wait bound.
	ErrNoLeader = errors.New("no cluster leader")
	// ErrDataDir means data_dir cannot be used by this node.
	ErrDataDir = errors.New("unusable data_dir")
)

// Config is what a node needs to run.
type Config struct {
	NodeID   string
	DataDir  string
	RaftAddr string // host:port raft binds to and advertises
	HTTPAddr string // host:port of this node's HTTP API
	// BootstrapExpect is the number of servers that form a new cluster.
	BootstrapExpect int
	// RetryJoin lists peers' HTTP addresses (host:port).
	RetryJoin          []string
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	// NodeSecret authenticates this node's calls to peers' node-to-node
	// routes (sent in NodeSecretHeader); "" when the cluster runs open.
	NodeSecret string
	// TLS, when not nil, runs raft over mutual TLS and this node's calls to
	// its peers' HTTP APIs over HTTPS with its server certificate.
	TLS *certs.TLS
	// ApplyTimeout bounds one raft apply (default 10s).
	ApplyTimeout time.Duration
	// LeaderWait bounds how long a write waits for a leader (default 5s).
	LeaderWait time.Duration
	// CleanupDeadServers lets the leader's autopilot remove a server that
	// stopped answering from the raft configuration (autopilot.go).
	CleanupDeadServers bool
	// RaftStore is server.raft_store: StoreBolt or StoreWAL for a new
	// data_dir, which one that already holds a store must match; "" keeps
	// the store a data_dir has and gives a new one bolt (logstore.go).
	RaftStore string
	// QuietSnapshotAfter and QuietSnapshotEntries set when a server takes
	// a snapshot because writes went quiet (snapshot.go; defaults 2 s and
	// 1,024 entries).
	QuietSnapshotAfter   time.Duration
	QuietSnapshotEntries uint64
	Logger               hclog.Logger
}

// LeaderFunc is leader-only work. It runs when this node becomes leader
// (after a barrier) and its context is cancelled when leadership is lost.
type LeaderFunc func(ctx context.Context)

// Node is one server's raft node.
type Node struct {
	cfg       Config
	log       hclog.Logger
	raft      *raft.Raft
	store     *state.Store
	stores    *raftStores
	snaps     raft.SnapshotStore
	transport *raft.NetworkTransport
	http      *http.Client
	notifyCh  chan bool

	mu          sync.Mutex
	leaderFuncs []LeaderFunc

	applied *sync.Cond

	dead *deadLeader
	// autopilot keeps the leader's view of server health (autopilot.go).
	autopilot *autopilot.Autopilot
	pilot     *pilot
	reads     *readBarrier                                       // batches read rounds (readindex.go)
	stalls    *stallWatch                                        // pauses of this process, which read rounds distrust
	badAddrs  sync.Map                                           // registered HTTP addresses already warned about
	timing    struct{ heartbeat, election, lease time.Duration } // as configured

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// identity is the node's record in data_dir.
type identity struct {
	NodeID string `json:"node_id"`
}

// New opens data_dir and starts raft. It does not bootstrap or join: Start
// does that in the background.
func New(cfg Config, store *state.Store) (*Node, error) {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.ApplyTimeout == 0 {
		cfg.ApplyTimeout = 10 * time.Second
	}
	if cfg.LeaderWait == 0 {
		cfg.LeaderWait = 5 * time.Second
	}
	writeIdentity, err := checkDataDir(cfg.DataDir, cfg.NodeID)
	if err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, log: cfg.Logger, store: store, notifyCh: make(chan bool, 16),
		http: newPeerHTTP(cfg.TLS), dead: newDeadLeader()}
	n.applied = sync.NewCond(&sync.Mutex{})

	raftDir := filepath.Join(cfg.DataDir, "raft")
	if err := os.MkdirAll(raftDir, 0o700); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDataDir, err)
	}
	stores, err := openRaftStores(raftDir, cfg.RaftStore, n.log)
	if err != nil {
		return nil, err
	}
	n.stores = stores
	if err := writeIdentity(); err != nil {
		stores.close()
		return nil, err
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(raftDir, 2, n.log.Named("snapshots"))
	if err != nil {
		stores.close()
		return nil, fmt.Errorf("%w: snapshots: %v", ErrDataDir, err)
	}
	n.snaps = snaps
	addr, err := net.ResolveTCPAddr("tcp", cfg.RaftAddr)
	if err != nil {
		stores.close()
		return nil, fmt.Errorf("raft address %q: %w", cfg.RaftAddr, err)
	}
	if addr.IP.IsUnspecified() {
		stores.close()
		return nil, fmt.Errorf("raft address %q: not an address peers can reach (bind a specific IP)", cfg.RaftAddr)
	}
	hints, err := newHintListener(cfg.RaftAddr, addr, n.dead.connEnded)
	if err != nil {
		stores.close()
		return nil, fmt.Errorf("raft transport on %s: %w", cfg.RaftAddr, err)
	}
	var stream raft.StreamLayer = hints
	if cfg.TLS != nil {
		stream = newTLSStream(hints, cfg.TLS)
	}
	// One AppendEntries in flight per follower (no pipeline): each then
	// carries every entry appended while the previous one was out. With
	// raft's default of two, a burst went out as many small RPCs, each
	// costing the follower a log write (an fsync) of its own: at 64
	// concurrent writers the three servers used 6–9% more CPU per write
	// (docs/PERFORMANCE-NOTES.md), and one writer's latency was no better.
	transport := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: stream, MaxPool: 5, MaxRPCsInFlight: 1, Timeout: 5 * time.Second, Logger: n.log.Named("transport"),
	})
	n.transport = transport

	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.NodeID)
	rc.Logger = n.log.Named("raft")
	rc.NotifyCh = n.notifyCh
	rc.BatchApplyCh = true
	rc.MaxAppendEntries = 512
	rc.SnapshotInterval = snapshotInterval
	if cfg.HeartbeatTimeout > 0 {
		rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	}
	if cfg.ElectionTimeout > 0 {
		rc.ElectionTimeout = cfg.ElectionTimeout
	}
	if cfg.LeaderLeaseTimeout > 0 {
		rc.LeaderLeaseTimeout = cfg.LeaderLeaseTimeout
	}
	n.timing.heartbeat, n.timing.election, n.timing.lease = rc.HeartbeatTimeout, rc.ElectionTimeout, rc.LeaderLeaseTimeout
	n.reads = newReadBarrier(n.readRound)
	n.stalls = newStallWatch(rc.HeartbeatTimeout / 4)
	fsm := &notifyingFSM{FSM: state.NewFSM(store), cond: n.applied}
	r, err := raft.NewRaft(rc, fsm, stores.logs, stores.stable, snaps, transport)
	if err != nil {
		transport.Close()
		stores.close()
		return nil, fmt.Errorf("start raft: %w", err)
	}
	n.raft = r
	n.pilot = newPilot(n)
	n.autopilot = autopilot.New(r, n.pilot, autopilot.WithLogger(n.log.Named("autopilot")),
		autopilot.WithUpdateInterval(autopilotInterval), autopilot.WithReconcileInterval(autopilotInterval))
	n.leaderFuncs = append(n.leaderFuncs, n.runAutopilot)
	return n, nil
}

// checkDataDir creates data_dir and checks that it belongs to nodeID. A new
// data_dir gets its identity file only once the raft store has opened (the
// returned func), so a refused start leaves nothing behind.
func checkDataDir(dir, nodeID string) (func() error, error) {
	nothing := func() error { return nil }
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDataDir, err)
	}
	path := filepath.Join(dir, "node.json")
	buf, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return func() error {
			buf, _ := json.Marshal(identity{NodeID: nodeID})
			if err := os.WriteFile(path, buf, 0o600); err != nil {
				return fmt.Errorf("%w: %v", ErrDataDir, err)
			}
			return nil
		}, nil
	case err != nil:
		return nil, fmt.Errorf("%w: %v", ErrDataDir, err)
	}
	var id identity
	if err := json.Unmarshal(buf, &id); err != nil || id.NodeID == "" {
		return nil, fmt.Errorf("%w: %s is not a Paddock node identity file", ErrDataDir, path)
	}
	if id.NodeID != nodeID {
		return nil, fmt.Errorf("%w: %s belongs to node %q, not %q", ErrDataDir, dir, id.NodeID, nodeID)
	}
	return nothing, nil
}

// notifyingFSM wakes WaitApplied callers after each apply: after each batch
// when raft applies a batch (raft.BatchingFSM).
type notifyingFSM struct {
	*state.FSM
	cond *sync.Cond
}

func (f *notifyingFSM) Apply(l *raft.Log) any {
	r := f.FSM.Apply(l)
	f.wake()
	return r
}

func (f *notifyingFSM) ApplyBatch(logs []*raft.Log) []any {
	r := f.FSM.ApplyBatch(logs)
	f.wake()
	return r
}

func (f *notifyingFSM) wake() {
	f.cond.L.Lock()
	f.cond.Broadcast()
	f.cond.L.Unlock()
}

var _ raft.BatchingFSM = (*notifyingFSM)(nil)

// OnLeader registers leader-only work. Register before Start.
func (n *Node) OnLeader(f LeaderFunc) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.leaderFuncs = append(n.leaderFuncs, f)
}

// Start bootstraps or joins the cluster in the background and runs the
// leadership monitor until Shutdown.
func (n *Node) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	n.wg.Add(7)
	go func() {
		defer n.wg.Done()
		n.monitorLeadership(ctx)
	}()
	go func() {
		defer n.wg.Done()
		n.electAlone(ctx)
	}()
	go func() {
		defer n.wg.Done()
		n.pilot.probe(ctx) // on every node, so a new leader knows at once
	}()
	go func() {
		defer n.wg.Done()
		n.stalls.run(ctx)
	}()
	go func() {
		defer n.wg.Done()
		n.watchLeader(ctx)
	}()
	go func() {
		defer n.wg.Done()
		n.joinLoop(ctx)
	}()
	go func() {
		defer n.wg.Done()
		n.snapshotWhenQuiet(ctx)
	}()
}

// Shutdown stops raft and the node's goroutines.
func (n *Node) Shutdown() error {
	if n.cancel != nil {
		n.cancel()
	}
	err := n.raft.Shutdown().Error()
	n.reads.close()
	n.applied.L.Lock()
	n.applied.Broadcast()
	n.applied.L.Unlock()
	n.wg.Wait()
	n.transport.Close()
	// Pooled connections to the peers too: they see this node go at once
	// (deadleader.go), as when its process exits.
	n.transport.CloseStreams()
	n.stores.close()
	return err
}

// ID is this node's id.
func (n *Node) ID() string { return n.cfg.NodeID }

// Store is the node's local state.
func (n *Node) Store() *state.Store { return n.store }

// IsLeader reports whether this node is the leader.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// Leader returns the leader's id and its HTTP address as registered in state
// (empty when unknown).
func (n *Node) Leader() (id, httpAddr string) {
	raftAddr, lid := n.raft.LeaderWithID()
	if lid == "" {
		return "", ""
	}
	if string(lid) == n.cfg.NodeID {
		return n.cfg.NodeID, n.cfg.HTTPAddr
	}
	return string(lid), n.peerHTTPAddr(string(lid), string(raftAddr))
}

// peerHTTPAddr is the registered HTTP address of a raft server, or "" when
// it is not on the host raft knows the server by. Followers forward clients'
// requests, tokens included, to that address, so a registration that points
// elsewhere (a forged or stale record) is never used.
func (n *Node) peerHTTPAddr(id, raftAddr string) string {
	addr := n.store.Nodes()[id].HTTPAddr
	httpHost, _, err1 := net.SplitHostPort(addr)
	raftHost, _, err2 := net.SplitHostPort(raftAddr)
	if err1 != nil || err2 != nil || httpHost != raftHost {
		if _, seen := n.badAddrs.LoadOrStore(id+" "+addr, true); !seen && addr != "" {
			n.log.Warn("ignoring a registered HTTP address that is not on the server's raft host", "server", id, "http_addr", addr, "raft_addr", raftAddr)
		}
		return ""
	}
	return addr
}

// WaitForLeader waits until a leader with a known HTTP address exists.
func (n *Node) WaitForLeader(ctx context.Context) (id, httpAddr string, err error) {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		if id, addr := n.Leader(); id != "" && addr != "" {
			return id, addr, nil
		}
		select {
		case <-ctx.Done():
			return "", "", ErrNoLeader
		case <-t.C:
		}
	}
}

// WaitApplied waits until the local store has applied index.
func (n *Node) WaitApplied(ctx context.Context, index uint64) error {
	if n.store.LastIndex() >= index {
		return nil // the common case on the leader: raft answered after the apply
	}
	stop := context.AfterFunc(ctx, func() {
		n.applied.L.Lock()
		n.applied.Broadcast()
		n.applied.L.Unlock()
	})
	defer stop()
	n.applied.L.Lock()
	defer n.applied.L.Unlock()
	for n.store.LastIndex() < index {
		if ctx.Err() != nil {
			return fmt.Errorf("wait for index %d: %w", index, ctx.Err())
		}
		n.applied.Wait()
	}
	return nil
}

// Raft exposes the raft node for status and operator endpoints.
func (n *Node) Raft() *raft.Raft { return n.raft }

// LogStoreBytes is the size on disk of this node's raft log store (raft.db
// for bolt, the write-ahead log's files for the WAL).
func (n *Node) LogStoreBytes() int64 { return n.stores.bytes() }

// RaftStore is the raft store this node opened: StoreBolt or StoreWAL.
func (n *Node) RaftStore() string { return n.stores.kind }

// NewKey returns a fresh idempotency key.
func NewKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
