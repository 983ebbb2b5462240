// Package api is the supervisor's HTTP and WebSocket API (docs/API.md),
// served by every node: authentication, Origin checks, body limits,
// the JSON error format, transparent forwarding to the leader, and the
// handlers over replicated state.
//
// It depends on the cluster node through the small Cluster interface it
// declares, and on supervisor/state for the model.
package api
