// Package telemetry holds the metrics of a Paddock process that do not
// belong to one API handler: raft's own metrics, which hashicorp/raft
// reports through go-metrics' process-wide sink (go-metrics/compat) and which this package
// turns into Prometheus families; the raft log's size; and
// paddock_build_info. supervisor/api serves them on /v1/metrics next to its
// own.
//
// It imports hashicorp/raft and the Prometheus client only, never another
// supervisor package.
package telemetry
