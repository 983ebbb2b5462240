// Package cluster runs a Paddock server's raft node: the log and stable store
// (hashicorp/raft-wal, or raft-boltdb/v2 in a data_dir written before the
// WAL) and snapshots under data_dir, bootstrap from
// bootstrap_expect and retry_join, membership, command application with
// forwarding to the leader, and the leader loop that leader-only work (such as
// recovery) plugs into.
//
// It imports supervisor/state for the FSM and nothing else of the supervisor;
// the HTTP API sits above it.
package cluster
