// Package cli implements the paddock command-line subcommands other than
// `paddock server` (docs/CLI.md): status, operator, task, session,
// plugin, executor and agent commands that talk to a supervisor through the
// client package.
//
// Run is the entry point: it parses global and subcommand flags, prints aligned
// tables (or the server's raw JSON with -json) to stdout and exactly one error
// line to stderr, and returns the process exit code. It never exits the process
// itself. It must not import supervisor packages other than supervisor/state.
package cli
