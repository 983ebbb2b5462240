package sessions

import (
	"context"

	"github.com/paddockhq/paddock/supervisor/state"
)

// failure is one lifecycle failure of a session, as it is recorded: the
// session goes to ERROR with Reason and Err's text, an agentctl_error event
// says so, the executor row is marked when the executor itself failed, and
// the lease ends unless KeepLease says its holder may still run. Every
// failure of a launch, a recovery, a pump or a lease expiry is one of these
// values, recorded by Manager.record: whether a failure is safe to release
// the session's lease on is a field a reader (and a test) can see.
type failure struct {
	// Reason is the session's state_reason (a state.Reason* constant, or ""
	// for a failure no reason describes).
	Reason string
	// Err is what failed; its text is the session's error_message.
	Err error
	// Executor, when set, is the executor whose row goes to error: the
	// executor itself failed, not only its agent. Its lease, when it ends,
	// is reclaimed (its holder died) rather than released.
	Executor string
	// KeepLease keeps the session's lease held until it expires. Set it
	// when the holder is not proven gone (agentctl unreachable, an executor
	// this node cannot recover): its agent may still run out of reach, and
	// no one may claim the session before agentctl has fenced itself. The
	// lease keeper reclaims it at expiry.
	KeepLease bool
}

// leaseEnd says what record does with the session's held lease.
type leaseEnd int

const (
	leaseKept      leaseEnd = iota // held until it expires
	leaseReleased                  // the agent is known not to run
	leaseReclaimed                 // the holder died
)

// lease is what recording f does with the session's lease.
func (f failure) lease() leaseEnd {
	switch {
	case f.KeepLease:
		return leaseKept
	case f.Executor != "":
		return leaseReclaimed
	default:
		return leaseReleased
	}
}

// record records a failure (see failure). A failure whose context has
// ended is not recorded: leadership ended or the operation was abandoned,
// and whatever failed is the next leader's to find out.
func (m *Manager) record(ctx context.Context, sess state.Session, f failure) {
	msg := f.Err.Error()
	if ctx.Err() != nil {
		m.log.Info("session operation interrupted", "session", sess.ID, "error", msg)
		return
	}
	m.log.Warn("session failed", "session", sess.ID, "reason", f.Reason, "error", msg, "keep_lease", f.KeepLease)
	if f.Executor != "" {
		if _, err := m.apply(ctx, state.CmdSetExecutorState, &state.SetExecutorStateBody{ExecutorID: f.Executor, Status: state.ExecutorError, ErrorMessage: msg}); err != nil {
			m.log.Warn("record executor failure", "executor", f.Executor, "error", err)
		}
	}
	m.publish(ctx, sess.ID, state.EventAgentctlError, map[string]any{"message": msg, "reason": f.Reason})
	// An agent that is not running ends its lease, so a resume gets a
	// strictly higher token.
	switch f.lease() {
	case leaseReleased:
		m.endLease(ctx, sess.ID, false)
	case leaseReclaimed:
		m.endLease(ctx, sess.ID, true)
	}
	if _, err := m.apply(ctx, state.CmdSetSessionState, &state.SetSessionStateBody{SessionID: sess.ID, State: state.SessionError, ErrorMessage: msg, Reason: f.Reason}); err != nil {
		m.log.Warn("record session error", "session", sess.ID, "error", err)
	}
}
