package telemetry

import (
	"strings"
	"testing"
	"time"

	metrics "github.com/hashicorp/go-metrics/compat"
)

func TestJoinedHasPrefixIsAPrefixOfTheJoinedKey(t *testing.T) {
	keys := [][]string{
		nil, {""}, {"paddock"}, {"paddock", "raft"}, {"paddock", "raft", "replication", "heartbeat"},
		{"paddock", "raft", "replication", "heartbeat", "node2"}, {"paddock", "raft", "replication", "heartbeatx", "n"},
		{"paddock", "raft", "replication", "appendEntries", "rpc", "node.2"}, {"paddock", "raft.replication", "heartbeat", "n"},
		{"paddock", "raft", "replication", "appendEntries", "rpcs"}, {"paddock", "", "x"},
	}
	prefixes := append([]string{"", "p", "paddock", "paddock.", "paddock.raft", "paddock.raftx", "paddock..x"}, raftBlocked...)
	for _, k := range keys {
		for _, p := range prefixes {
			if got, want := joinedHasPrefix(k, p), strings.HasPrefix(strings.Join(k, "."), p); got != want {
				t.Errorf("joinedHasPrefix(%q, %q) = %v, want %v", k, p, got, want)
			}
		}
	}
}

// Raft's per-peer copies of its replication metrics are left out of the
// Prometheus families; the same metrics with a peer label, and every other
// key, are exported.
func TestRaftMetricsLeaveOutPerPeerNames(t *testing.T) {
	g, err := Raft()
	if err != nil {
		t.Fatal(err)
	}
	peer := []metrics.Label{{Name: "peer", Value: "node2"}}
	metrics.MeasureSinceWithLabels([]string{"raft", "replication", "heartbeat"}, time.Now(), peer)
	metrics.AddSample([]string{"raft", "replication", "heartbeat", "node2"}, 1)
	metrics.IncrCounterWithLabels([]string{"raft", "replication", "appendEntries", "logs"}, 3, peer)
	metrics.IncrCounter([]string{"raft", "replication", "appendEntries", "logs", "node2"}, 3)
	metrics.AddSample([]string{"raft", "replication", "appendEntries", "rpc", "node2"}, 1)
	metrics.IncrCounter([]string{"raft", "apply"}, 1)
	metrics.SetGauge([]string{"raft", "replication", "heartbeatish"}, 2)
	fams, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range fams {
		names[f.GetName()] = true
	}
	for _, want := range []string{"paddock_raft_replication_heartbeat", "paddock_raft_replication_appendEntries_logs", "paddock_raft_apply", "paddock_raft_replication_heartbeatish"} {
		if !names[want] {
			t.Errorf("family %s missing", want)
		}
	}
	for name := range names {
		if strings.Contains(name, "node2") {
			t.Errorf("family %s names a peer", name)
		}
	}
}
