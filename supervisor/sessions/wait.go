package sessions

import (
	"context"
	"fmt"
	"time"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/supervisor/state"
)

// Bounds of the waits a request makes on a session's lifecycle.
const (
	// startWait bounds how long a prompt waits for a starting session to
	// take prompts.
	startWait = time.Minute
	// drainWait bounds how long a resume waits for a stop's drain.
	drainWait = launchTimeout
)

// waitSession waits until until(session) holds, the session is gone, the
// bound passes or ctx ends, and returns the session as last read. It reads
// the store after subscribing to the session's events, so no change is
// missed between the read and the wait.
func (m *Manager) waitSession(ctx context.Context, sessionID string, bound time.Duration, until func(api.Session) bool) (api.Session, error) {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	// A tick re-reads the store as well: a subscriber that fell behind is
	// dropped, and the lock-based conditions of callers change without an
	// event.
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		sub := m.store.Subscribe(state.EventFilter{SessionID: sessionID}, 0)
		for open := true; open; {
			sess, ok := m.store.Session(sessionID)
			if !ok {
				sub.Close()
				return sess, fmt.Errorf("session %q %w", sessionID, state.ErrNotFound)
			}
			if until(sess) {
				sub.Close()
				return sess, nil
			}
			select {
			case <-ctx.Done():
				sub.Close()
				return sess, ctx.Err()
			case _, open = <-sub.C:
			case <-tick.C:
			}
		}
		sub.Close()
	}
}
