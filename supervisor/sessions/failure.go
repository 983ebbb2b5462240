package sessions

import (
	"context"

	"github.com/paddockhq/paddock/api"
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
func (m *Manager) record(ctx context.Context, sess api.Session, f failure) {
	msg := f.Err.Error()
	if ctx.Err() != nil {
		m.log.Info("session operation interrupted", "session", sess.ID, "error", msg)
		return
	}
	if cur, ok := m.store.Session(sess.ID); ok && cur.State == api.SessionError && cur.StateReason == f.Reason && cur.ErrorMessage == msg &&
		(f.Executor == "" || m.executorFailed(f.Executor, msg)) {
		// Recorded already, as it is (a recovery on a restart found the
		// same failure): no second agentctl_error event, no state write.
		// Only the lease is ended as the failure says.
		m.log.Info("session failure recorded already", "session", sess.ID, "reason", f.Reason)
		m.endFailedLease(ctx, sess.ID, f)
		return
	}
	m.log.Warn("session failed", "session", sess.ID, "reason", f.Reason, "error", msg, "keep_lease", f.KeepLease)
	if f.Executor != "" {
		if _, err := m.apply(ctx, state.CmdSetExecutorState, &state.SetExecutorStateBody{ExecutorID: f.Executor, Status: api.ExecutorError, ErrorMessage: msg}); err != nil {
			m.log.Warn("record executor failure", "executor", f.Executor, "error", err)
		}
	}
	m.publish(ctx, sess.ID, api.EventAgentctlError, map[string]any{"message": msg, "reason": f.Reason})
	// An agent that is not running ends its lease, so a resume gets a
	// strictly higher token.
	m.endFailedLease(ctx, sess.ID, f)
	if _, err := m.apply(ctx, state.CmdSetSessionState, &state.SetSessionStateBody{SessionID: sess.ID, State: api.SessionError, ErrorMessage: msg, Reason: f.Reason, NotActivity: notActivity(ctx)}); err != nil {
		m.log.Warn("record session error", "session", sess.ID, "error", err)
	}
}

// endFailedLease ends the session's lease as failure f says.
func (m *Manager) endFailedLease(ctx context.Context, sessionID string, f failure) {
	switch f.lease() {
	case leaseReleased:
		m.endLease(ctx, sessionID, false)
	case leaseReclaimed:
		m.endLease(ctx, sessionID, true)
	}
}

// executorFailed reports whether the executor's row records the failure
// msg already.
func (m *Manager) executorFailed(id, msg string) bool {
	ex, ok := m.store.Executor(id)
	return ok && ex.Status == api.ExecutorError && ex.ErrorMessage == msg
}
