package sessions

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/hashicorp/raft"

	"github.com/paddockhq/paddock/shared/runtime"
)

// Transient failures (issue 21). A leader keeps working through them: a
// raft command refused while a leadership transfer is pending, a plugin or
// agentctl call that timed out, a commit whose outcome is in doubt. Each
// either clears (the transfer fails and this node keeps leading; the call
// answers next time) or ends leadership, which cancels the leader context
// and hands the work to the next leader's recovery.

// notApplied reports whether raft refused a command before appending it to
// its log, while this node still leads: trying it again cannot apply it
// twice. raft.ErrLeadershipTransferInProgress lasts until the transfer ends
// (up to the transport timeout when the target does not answer);
// raft.ErrEnqueueTimeout means raft's apply queue stayed full.
func notApplied(err error) bool {
	return errors.Is(err, raft.ErrLeadershipTransferInProgress) || errors.Is(err, raft.ErrEnqueueTimeout)
}

// Retryable reports whether a failed lifecycle or recovery step may succeed
// when tried again under the same leadership: a raft command that did not
// commit for a cluster reason (never a domain refusal such as
// state.ErrConflict), a runtime that is temporarily unavailable, a call that
// timed out, or the leader context not being ready yet. The caller checks
// its own context first: a step cut off by the end of leadership is the
// next leader's, not a retry.
func Retryable(err error) bool {
	if err == nil {
		return false
	}
	var ae *applyError
	var ne net.Error
	return errors.As(err, &ae) || errors.Is(err, ErrNotLeader) || errors.Is(err, runtime.ErrUnavailable) ||
		errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) ||
		notApplied(err) || errors.Is(err, raft.ErrLeadershipLost)
}

// timedOut reports whether a call failed by its own deadline while ctx, the
// operation's context, is still alive.
func timedOut(ctx context.Context, err error) bool {
	var ne net.Error
	return ctx.Err() == nil && (errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()))
}

// applyError is a raft command that did not commit for a cluster reason
// (not leading, leadership lost or in doubt, a timeout): Retryable. It
// reads as the error it wraps.
type applyError struct{ err error }

func (e *applyError) Error() string { return e.err.Error() }
func (e *applyError) Unwrap() error { return e.err }

// callRetries bounds the retries of one timed-out agentctl call in recovery;
// a call that keeps timing out takes the step's failure path.
const callRetries = 3

// retryTimeouts runs call, retrying it with backoff while it times out, at
// most callRetries times and while ctx lives.
func retryTimeouts[T any](ctx context.Context, call func(context.Context) (T, error)) (T, error) {
	for i := 0; ; i++ {
		v, err := call(ctx)
		if err == nil || !timedOut(ctx, err) || i >= callRetries {
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(backoff(i)):
		}
	}
}
