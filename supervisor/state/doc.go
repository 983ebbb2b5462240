// Package state is Paddock's replicated state: the model (tasks, sessions,
// executors, leases, messages), the raft commands that change it, the FSM that
// applies them, and the session event log that the API streams. The model
// is package api's wire types (api.Task, api.Session, api.Executor, …), used
// as they are: what the FSM stores is what the API sends, less the fields
// tagged `json:"-"`.
//
// Commands are a type byte, a body version byte and a JSON envelope carrying an
// idempotency key, the leader's clock reading and the body. Apply never reads
// the clock or randomness: the leader stamps ids and times into each command.
// A command whose key was already applied returns the first outcome again, so
// a retry after raft.ErrLeadershipLost never applies twice.
//
// This package must not import other supervisor packages, the API or raft
// transport code; it only implements raft.FSM.
package state
