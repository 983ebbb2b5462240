package monitor

import (
	"context"

	"github.com/hashicorp/go-hclog"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/supervisor/state"
)

// LogLifecycle writes one info line per session lifecycle step the
// replicated state records — created, starting (resuming when it was
// stopped or failed), started, stopped, failed, deleted — until ctx ends.
// Run it on the leader (cluster.Node.OnLeader), so each step is logged once
// in the cluster, by the node that drove it. Turn-by-turn changes between
// RUNNING and WAITING_FOR_INPUT are logged at debug. It logs the steps
// after index since (the leader's: cluster.LeaderSince).
func LogLifecycle(ctx context.Context, store *state.Store, log hclog.Logger, since uint64) {
	for ctx.Err() == nil {
		sub := store.SubscribeAfter(state.EventFilter{}, since)
		since = follow(ctx, sub, store, log, since)
		sub.Close()
	}
}

// follow logs sub's events until ctx ends or the subscription is dropped
// for lagging, and returns the index of the last event it saw.
func follow(ctx context.Context, sub *state.Subscription, store *state.Store, log hclog.Logger, since uint64) uint64 {
	for {
		select {
		case <-ctx.Done():
			return since
		case e, ok := <-sub.C:
			if !ok {
				if sub.Lagged() {
					log.Warn("session lifecycle log fell behind; some steps were not logged", "after_index", since)
				}
				return max(since, store.LastIndex())
			}
			since = max(since, e.Index)
			if e.Type == api.EventStateChanged {
				logStep(log, store, e)
			}
		}
	}
}

func logStep(log hclog.Logger, store *state.Store, e api.Event) {
	from, _ := e.Data["from"].(string)
	to, _ := e.Data["to"].(string)
	args := []any{"session", e.SessionID, "task", e.TaskID, "from", from, "to", to}
	if r, ok := e.Data["reason"].(string); ok && r != "" {
		args = append(args, "reason", r)
	}
	if m, ok := e.Data["error_message"].(string); ok && m != "" {
		args = append(args, "error", m)
	}
	switch api.SessionState(to) {
	case api.SessionCreated:
		if sess, ok := store.Session(e.SessionID); ok {
			args = append(args, "agent", sess.Agent, "runtime", sess.Runtime)
		}
		log.Info("session created", args...)
	case api.SessionStarting:
		if from == string(api.SessionStopped) || from == string(api.SessionError) {
			log.Info("session resuming", args...)
		} else {
			log.Info("session starting", args...)
		}
	case api.SessionWaitingForInput, api.SessionRunning:
		if from == string(api.SessionStarting) {
			log.Info("session started", args...)
		} else {
			log.Debug("session turn", args...)
		}
	case api.SessionStopped:
		log.Info("session stopped", args...)
	case api.SessionError:
		log.Info("session failed", args...)
	case api.SessionCompleted:
		log.Info("session deleted", args...)
	default:
		log.Info("session state changed", args...)
	}
}
