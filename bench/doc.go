// Package bench is Paddock's benchmark suite: each suite measures one area
// against its goal (and, where possible, a peer such as etcd or a direct
// baseline in the same run) and reports medians and p99 over repeated trials.
// `make bench` runs it through bench/cmd/bench, which writes
// docs/BENCHMARKS.md and bench/results.json.
package bench
