// Package config loads Paddock's server configuration: HCL files in the schema of
// docs/CONFIGURATION.md, merged in order, with defaults applied and every value
// validated before anything starts.
//
// Errors are returned as a *DiagError holding hcl.Diagnostics whose subjects point at
// the offending file:line:column and whose details end with a one-line hint.
//
// A plugin's `config { … }` body is not interpreted here: it is kept as raw source with
// its position (see Plugin) so that the plugin validates it itself with true file ranges.
//
// This package is a leaf of the supervisor: it must not import any other supervisor/
// package, shared/, raft, go-plugin or anything that starts goroutines or touches the
// network. It only reads the files it is given.
package config
