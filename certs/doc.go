// Package certs holds Paddock's certificates: it creates a cluster's CA and
// the server and client certificates it signs (`paddock tls`), names the
// identities they carry, and builds the TLS configurations of the server's
// connections from a `tls` block (the HTTP API, raft and node-to-node calls).
//
// Keys are ECDSA P-256. A server certificate names its node as
// server.NODE.paddock (ServerName) and may serve and dial; a client
// certificate (client.paddock) may only dial, so it can never stand in for a
// server. It imports only the standard library.
package certs
