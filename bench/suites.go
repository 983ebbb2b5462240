package bench

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/paddockhq/paddock/bench/harness"
)

// Env is what every suite gets.
type Env struct {
	Bin   string // directory with paddock, agentctl, plugins/
	Quick bool
	Dir   string // scratch directory
	// Profiles is where suites save CPU profiles of the servers they
	// measure (empty: none are taken).
	Profiles string
	// ChaosRaftStore is the chaos suite's server.raft_store ("bolt",
	// "wal"; "": unset, the default store).
	ChaosRaftStore string
	Logf           func(format string, args ...any)
}

const areaCluster = "Cluster: reads, writes and failover (side by side with etcd)"

// ClusterSuite measures API reads (consistent against ?stale=true) and
// writes on a 3-node Paddock cluster of real processes at 1 and 64 clients,
// and leader failover (kill -9 until a write
// succeeds), side by side with a 3-node etcd cluster doing the same work in
// the same run: trials alternate Paddock, etcd, Paddock, … so that load from
// other users of the machine hits both alike. The cluster runs the default
// raft store (bolt); the writes also run on a second cluster with
// raft_store = "wal", alternating with the others (the _wal results).
func ClusterSuite(ctx context.Context, env Env) ([]Result, error) {
	dir, err := os.MkdirTemp(env.Dir, "cluster-")
	if err != nil {
		return nil, err
	}
	c, err := harness.Start(harness.Options{Bin: env.Bin, Dir: dir, Size: 3, LogLevel: "warn", Extra: "enable_debug = true"})
	if err != nil {
		return nil, err
	}
	defer c.Stop()
	leader, err := c.Leader(30 * time.Second)
	if err != nil {
		return nil, err
	}
	var ec *EtcdCluster
	etcdBin, err := EnsureEtcd(env.Logf)
	if err != nil {
		env.Logf("etcd unavailable, Paddock runs alone: %v", err)
	} else if ec, err = StartEtcd(etcdBin, dir, 3); err != nil {
		env.Logf("etcd did not start, Paddock runs alone: %v", err)
		ec = nil
	}
	var etcdLeader *EtcdMember
	if ec != nil {
		defer ec.Stop()
		if etcdLeader, err = ec.Leader(30 * time.Second); err != nil {
			env.Logf("etcd has no leader, Paddock runs alone: %v", err)
			ec.Stop()
			ec = nil
		}
	}
	trials, d, kills := 5, 5*time.Second, 20
	if env.Quick {
		trials, d, kills = 2, 2*time.Second, 3
	}
	// Every trial goes to the node that leads when it starts: a leader
	// change under load (the machine is shared) would otherwise make the
	// rest of the trials go through a follower's forwarding.
	lead := leaderTracker(env, c, &leader)
	etcdURL := ""
	if ec != nil {
		etcdURL = etcdLeader.Client
	}
	reads, err := readLatencies(ctx, env, lead, etcdURL, trials, d)
	if err != nil {
		return nil, err
	}
	timing := fmt.Sprintf("Paddock raft: heartbeat_timeout = election_timeout = 300ms, leader_lease_timeout 150ms (defaults); etcd: --election-timeout %d --heartbeat-interval %d", etcdElectionMS, etcdHeartbeatMS)
	out := reads
	// The same writes to a second cluster whose servers keep raft's log in
	// the WAL (server.raft_store = "wal"), in the same run, trials
	// alternating bolt, WAL, etcd: the names without a suffix are the
	// default store (bolt), as before; the _wal ones compare with them.
	// The WAL cluster runs only for the writes.
	wal, err := startStoreCluster(env, dir, "wal")
	if err != nil {
		return out, fmt.Errorf("the WAL cluster: %w", err)
	}
	defer wal.c.Stop()
	for _, clients := range []int{1, 64} {
		var rates, lats, peerRates, peerLats, walRates, walLats []float64
		errs, peerErrs, walErrs := 0, 0, 0
		// One unmeasured trial first, profiled: it warms the path and shows
		// where a write's time goes at this concurrency.
		wait := cpuProfile(env, lead("writes"), fmt.Sprintf("cluster-writes-c%d-leader", clients), d)
		RunWrites(ctx, clients, d, PaddockWriter(leader.URL()))
		profiled := ""
		if p := wait(); p != "" {
			env.Logf("writes c%d: leader CPU profile of an unmeasured trial in %s", clients, p)
			if top := profileTop(p, 5); top != "" {
				profiled = "; the leader's CPU in an unmeasured trial before them: " + top
			}
		}
		// The WAL cluster's warm-up is profiled likewise: its figures
		// carry the goals.
		walLeader := wal.lead("writes (wal)")
		walWait := cpuProfile(env, walLeader, fmt.Sprintf("cluster-writes-c%d-wal-leader", clients), d)
		RunWrites(ctx, clients, d, PaddockWriter(walLeader.URL()))
		walProfiled := ""
		if p := walWait(); p != "" {
			if top := profileTop(p, 5); top != "" {
				walProfiled = "; the WAL leader's CPU in an unmeasured trial before them: " + top
			}
		}
		breakdown, walBreakdown := "", ""
		for t := 0; t < trials; t++ {
			l := lead("writes")
			load := RunWrites(ctx, clients, d, PaddockWriter(l.URL()))
			rates = append(rates, load.Rate)
			lats = append(lats, load.Latencies...)
			errs += load.Errors
			if t == trials-1 {
				breakdown = raftBreakdown(raftTimings(l), raftTimings(surviving(c, l)))
			}
			wl := wal.lead("writes (wal)")
			load = RunWrites(ctx, clients, d, PaddockWriter(wl.URL()))
			walRates = append(walRates, load.Rate)
			walLats = append(walLats, load.Latencies...)
			walErrs += load.Errors
			if t == trials-1 {
				walBreakdown = raftBreakdown(raftTimings(wl), raftTimings(surviving(wal.c, wl)))
			}
			if ec != nil {
				load := RunWrites(ctx, clients, d, EtcdWriter(etcdLeader.Client))
				peerRates = append(peerRates, load.Rate)
				peerLats = append(peerLats, load.Latencies...)
				peerErrs += load.Errors
			}
		}
		env.Logf("writes c%d: paddock bolt %.0f/s (%d errors), paddock wal %.0f/s (%d errors), etcd %.0f/s (%d errors)", clients,
			Percentile(rates, 50), errs, Percentile(walRates, 50), walErrs, Percentile(peerRates, 50), peerErrs)
		rate := Summary(Result{Name: fmt.Sprintf("writes_per_s_c%d", clients), Area: areaCluster, Unit: "writes/s",
			Note: fmt.Sprintf("raft_store = bolt (the default; _wal below: the WAL); closed loop, %d client(s), each POST /v1/tasks (~30-byte record) to the leader over HTTP/1.1 keep-alive; etcd: POST /v3/kv/put of the same record through its JSON gateway to its leader; 3 processes each on one host, fsync on; %d×%s trials alternating bolt, WAL, etcd; %d/%d errors%s", clients, trials, d, errs, peerErrs, profiled)}, rates, true)
		lat := Summary(Result{Name: fmt.Sprintf("write_latency_ms_c%d", clients), Area: areaCluster, Unit: "ms",
			Note: "raft_store = bolt (the default); per-write latency over every write of the trials" + breakdown}, lats, false)
		if len(peerRates) > 0 {
			rate = withPeer(rate, Percentile(peerRates, 50), false)
			lat = withPeer(lat, Percentile(peerLats, 50), true)
		}
		walRate := Summary(Result{Name: fmt.Sprintf("writes_per_s_c%d_wal", clients), Area: areaCluster, Unit: "writes/s",
			Note: fmt.Sprintf("as writes_per_s_c%d on a second 3-server cluster with raft_store = \"wal\" (hashicorp/raft-wal), its trials alternating with the bolt cluster's and etcd's in the same run; %d errors%s", clients, walErrs, walProfiled)}, walRates, true)
		walLat := Summary(Result{Name: fmt.Sprintf("write_latency_ms_c%d_wal", clients), Area: areaCluster, Unit: "ms",
			Note: "raft_store = \"wal\"; per-write latency over every write of its trials" + walBreakdown}, walLats, false)
		walRate = withStorePeer(walRate, rate.P50, false)
		walLat = withStorePeer(walLat, lat.P50, true)
		// The goals are set against etcd in the same run for the WAL
		// (writes at 64 clients ≥ 2× etcd's, one client's latency ≤ 0.8×);
		// the bolt rows report the same figures without one.
		if len(peerRates) > 0 {
			etcdRate, etcdLat := Percentile(peerRates, 50), Percentile(peerLats, 50)
			switch clients {
			case 64:
				walRate.Goal = "≥ 2× etcd"
				walRate.Note += fmt.Sprintf("; %.2f× etcd's %.0f/s in the same run", walRate.P50/etcdRate, etcdRate)
				walRate = Verdict(walRate, walRate.P50 >= 2*etcdRate)
			case 1:
				walLat.Goal = "≤ 0.8× etcd"
				walLat.Note += fmt.Sprintf("; %.2f× etcd's %.2f ms in the same run", walLat.P50/etcdLat, etcdLat)
				walLat = Verdict(walLat, walLat.P50 <= 0.8*etcdLat)
			}
		}
		out = append(out, rate, lat, walRate, walLat)
	}
	wal.c.Stop()
	var times, peerTimes, elect, peerElect []float64
	for k := 0; k < kills; k++ {
		ts, err := Failover(ctx, c, 1, func(n *harness.Node) Writer { return PaddockWriter(n.URL()) })
		if err != nil {
			return out, fmt.Errorf("paddock failover: %w", err)
		}
		for _, t := range ts {
			times, elect = append(times, t.Write), append(elect, t.Leader)
		}
		if ec != nil {
			t, err := EtcdFailover(ctx, ec)
			if err != nil {
				env.Logf("etcd failover %d: %v", k, err)
			} else {
				peerTimes, peerElect = append(peerTimes, t.Write), append(peerElect, t.Leader)
			}
		}
	}
	env.Logf("failover: paddock p50 %.0fms (leader %.0fms), etcd p50 %.0fms (leader %.0fms)",
		Percentile(times, 50), Percentile(elect, 50), Percentile(peerTimes, 50), Percentile(peerElect, 50))
	fo := Summary(Result{Name: "failover_to_write_ms", Area: areaCluster, Unit: "ms", Goal: "p50 ≤ 600, p99 ≤ 1500",
		Note: fmt.Sprintf("kill -9 of the leader until a write through a survivor succeeds (a new attempt every 20 ms round robin over the survivors, each waiting up to 5 s; first success counts), %d kills each alternating with etcd; before each kill the cluster settles (one agreed leader, every member applied what the leader committed); the killed member restarts from its data. %s", len(times), timing)}, times, false)
	fo = Verdict(fo, fo.P50 <= 600 && fo.P99 <= 1500)
	el := Summary(Result{Name: "failover_to_leader_ms", Area: areaCluster, Unit: "ms",
		Note: "the election part of the same kills: kill -9 until a survivor says it leads (Paddock GET /v1/health leader=true; etcd maintenance status names a new leader), polled every 5 ms"}, elect, false)
	if len(peerTimes) > 0 {
		fo = withPeer(fo, Percentile(peerTimes, 50), true)
		el = withPeer(el, Percentile(peerElect, 50), true)
	}
	out = append(out, el)
	out = append(out, fo)
	return out, nil
}

// withStorePeer fills the comparison of a _wal result with the same result
// on the default store: ratio is WAL/bolt of the p50s.
func withStorePeer(r Result, boltP50 float64, lowerBetter bool) Result {
	r.Peer, r.PeerP50 = "bolt", boltP50
	if boltP50 > 0 {
		r.Ratio = r.P50 / boltP50
	}
	dir := "higher"
	if lowerBetter {
		dir = "lower"
	}
	r.Note += fmt.Sprintf(" (peer: the same trials on raft_store = bolt; ratio WAL/bolt; %s is better)", dir)
	return r
}

// trackedCluster is a cluster and the node that last led it.
type trackedCluster struct {
	c      *harness.Cluster
	leader *harness.Node
	lead   func(what string) *harness.Node
}

// startStoreCluster starts a 3-server cluster like ClusterSuite's whose
// servers are given server.raft_store = store, and waits for its leader.
func startStoreCluster(env Env, dir, store string) (*trackedCluster, error) {
	sub, err := os.MkdirTemp(dir, store+"-")
	if err != nil {
		return nil, err
	}
	c, err := harness.Start(harness.Options{Bin: env.Bin, Dir: sub, Size: 3, LogLevel: "warn", Extra: "enable_debug = true",
		ServerExtra: fmt.Sprintf("  raft_store = %q", store)})
	if err != nil {
		return nil, err
	}
	t := &trackedCluster{c: c}
	if t.leader, err = c.Leader(30 * time.Second); err != nil {
		c.Stop()
		return nil, err
	}
	t.lead = leaderTracker(env, c, &t.leader)
	return t, nil
}

// leaderTracker returns what finds the node that leads c now: *leader if
// it still leads, else the new leader, which it keeps in *leader.
func leaderTracker(env Env, c *harness.Cluster, leader **harness.Node) func(what string) *harness.Node {
	return func(what string) *harness.Node {
		if l, err := (*leader).Leads(); err == nil && l {
			return *leader
		}
		if l, err := c.Leader(30 * time.Second); err == nil {
			env.Logf("%s: the leader changed from %s to %s", what, (*leader).Name, l.Name)
			*leader = l
		}
		return *leader
	}
}

// withPeer fills the etcd comparison: ratio is Paddock/etcd of the p50s
// (lowerBetter only documents the direction in the note).
func withPeer(r Result, peerP50 float64, lowerBetter bool) Result {
	r.Peer, r.PeerP50 = "etcd", peerP50
	if peerP50 > 0 {
		r.Ratio = r.P50 / peerP50
	}
	dir := "higher"
	if lowerBetter {
		dir = "lower"
	}
	r.Note += fmt.Sprintf(" (ratio Paddock/etcd; %s is better)", dir)
	return r
}
