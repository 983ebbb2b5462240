// Package monitor is what an operator watches a node with: live log
// streaming (`paddock monitor`, GET /v1/monitor) from the server's hclog
// intercept logger, and the info lines of session lifecycle the leader
// writes from the replicated events.
//
// A stream never slows the server: log lines are copied into a bounded
// buffer and dropped, and counted, when the reader falls behind.
//
// It imports supervisor/state for the events and nothing else of the
// supervisor.
package monitor
