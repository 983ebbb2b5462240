// Package api holds the wire types of Paddock's HTTP API (docs/API.md): the
// task, session, executor, lease, message, status and event objects the
// server sends, with their state and reason constants.
//
// Both sides use these types: supervisor/state stores them as its model, and
// the Go client (package client) decodes into them, so a client of the API
// links neither raft nor any supervisor package. This package imports only the
// standard library and its own subpackage termproto (the terminal protocol,
// whose client identity it shares); TestImportsOnlyStandardLibrary keeps it so.
//
// Fields tagged `json:"-"` (a session's resume token, an executor's secret and
// runtime handle) are held by the servers only: they are never sent, so a
// client always sees them empty.
package api
