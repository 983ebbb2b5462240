// Package term is Paddock's terminal core: the replay buffer that keeps recent PTY
// output indexed by absolute stream offset (Ring), the paddock.terminal.v1 wire codec
// (frames and JSON control messages), PTY-backed shells (Terminal) and the per-session
// set of named terminals served over WebSockets (Manager).
//
// agentctl embeds a Manager; the supervisor only proxies bytes and may use the codec.
// This package must not import anything under supervisor/ or shared/agentctl: it is part
// of the SDK that third-party code builds against.
package term
