// Package cluster runs a Paddock server's raft node: the log and stable store
// (raft-boltdb/v2, or hashicorp/raft-wal with server.raft_store = "wal"; a
// data_dir keeps the store it was created with) and snapshots under
// data_dir, bootstrap from bootstrap_expect and retry_join, membership,
// command application with forwarding to the leader, and the leader loop
// that leader-only work (such as recovery) plugs into.
//
// It imports supervisor/state for the FSM and nothing else of the supervisor;
// the HTTP API sits above it.
package cluster
