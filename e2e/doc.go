// Package e2e holds end-to-end tests that run Paddock's real binaries as
// separate processes: server clusters on several loopback addresses, the CLI,
// agentctl and runtime plugins. Binaries come from $PADDOCK_BIN (make test
// sets it to ./bin) or are built once into a temporary directory.
package e2e
