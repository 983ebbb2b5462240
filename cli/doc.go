// Package cli implements the paddock command-line subcommands other than
// `paddock server` (docs/CLI.md): status, operator, task, session, attach,
// resume (the interactive picker), events, plugin, executor, agent, version
// and completion, all clients of a supervisor through the client package.
//
// Run is the entry point: it parses global and subcommand flags, prints aligned
// tables (or the server's raw JSON with -json) to stdout and exactly one error
// line to stderr, and returns the process exit code. It never exits the process
// itself; `paddock resume` replaces it (exec) with `paddock attach` once a
// session is chosen. The picker is a Bubble Tea model (picker.go) that knows
// nothing of HTTP: what it asks the server goes through a pickerSource.
//
// It must not import supervisor packages other than supervisor/state.
package cli
