package api

import "time"

// Health is a node's GET /v1/health answer: {"status":"ok","node","leader"}.
type Health struct {
	Status string `json:"status"`
	Node   string `json:"node"`
	Leader bool   `json:"leader"`
}

// Peer is one server of the raft configuration (GET /v1/status nodes,
// GET /v1/operator/raft/peers).
type Peer struct {
	ID       string `json:"id"`
	Address  string `json:"address"`
	Suffrage string `json:"suffrage"`
	Leader   bool   `json:"leader"`
	// Healthy and LastContact are the leader's view of the server (its
	// node watch, or autopilot's); null when the answering node does not
	// lead, or does not know.
	Healthy     *bool      `json:"healthy"`
	LastContact *time.Time `json:"last_contact"`
}

// ClusterStatus is the cluster status of GET /v1/status: leader, term,
// indexes and nodes.
type ClusterStatus struct {
	LeaderID      string `json:"leader_id"`
	LeaderAddress string `json:"leader_address"`
	LeaderHTTP    string `json:"leader_http"`
	Term          uint64 `json:"term"`
	CommitIndex   uint64 `json:"commit_index"`
	AppliedIndex  uint64 `json:"applied_index"`
	Nodes         []Peer `json:"nodes"`
}

// SnapshotRestoreResult is the PUT /v1/operator/snapshot answer.
type SnapshotRestoreResult struct {
	Restored bool   `json:"restored"`
	Index    uint64 `json:"index"`
}
