// Package client is a Go client for Paddock's supervisor HTTP API (docs/API.md):
// one method per endpoint, each taking a context, plus a WebSocket
// stream of session events.
//
// API errors come back as *APIError so callers can branch with errors.As on the
// error code ("not_found", "conflict", ...). The package is used by the paddock
// CLI, tests and third-party tools; it depends only on supervisor/state for the
// model types and must not import any other supervisor package.
package client
