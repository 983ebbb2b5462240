// Package client is a Go client for Paddock's supervisor HTTP API (docs/API.md):
// one method per endpoint, each taking a context, plus a WebSocket
// stream of session events.
//
// API errors come back as *APIError so callers can branch with errors.As on the
// error code ("not_found", "conflict", ...). The package is used by the paddock
// CLI, tests and third-party tools. Its objects are the wire types of package
// api; it must not import raft or any supervisor or shared package
// (TestLinksNoServerCode checks it).
package client
