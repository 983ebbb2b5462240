package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/client"
)

const areaAgentWork = "Agent work: permission requests and tool calls (demo agent `work FILE`)"

// AgentWorkSuite measures, on one node with the demo agent asking before it
// runs a command (permission = "ask", the default):
//   - permission_round_trip_ms: from the agent's request (the permission's
//     created_at, stamped by agentctl as the request arrives) through its
//     event at a subscriber and a person's answer sent at once, until the
//     answer's POST returns, which it does once agentctl has answered the
//     agent's waiting request and the answer is replicated; with its two
//     legs, request → subscriber and subscriber → answer recorded;
//   - tool_update_bytes: the size of each tool-call entry as written (a
//     tool entry is replicated whole on every update, as its event carries
//     it).
func AgentWorkSuite(ctx context.Context, env Env) ([]Result, error) {
	c, _, stop, err := paddockCluster(env, "agentwork", 1, false, "")
	if err != nil {
		return nil, err
	}
	defer stop()
	node, err := c.Leader(30 * time.Second)
	if err != nil {
		return nil, err
	}
	cl := apiOf(node)
	task, err := cl.CreateTask(ctx, api.CreateTaskRequest{Title: "bench agent work"})
	if err != nil {
		return nil, fmt.Errorf("create task: %w", err)
	}
	sess, err := cl.CreateSession(ctx, task.ID, api.CreateSessionRequest{Agent: "demo", Runtime: "standalone"})
	if err != nil {
		return nil, fmt.Errorf("create session: %w", err)
	}
	if err := waitSession(ctx, cl, sess.ID, api.SessionWaitingForInput, time.Minute, 20*time.Millisecond); err != nil {
		return nil, err
	}
	stream, err := cl.Events(ctx, client.EventFilter{SessionID: sess.ID}, 0)
	if err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	defer stream.Close()
	events := make(chan api.Event, 1024)
	go func() {
		defer close(events)
		for {
			ev, err := stream.Next()
			if err != nil {
				return
			}
			events <- ev
		}
	}()

	n := 30
	if env.Quick {
		n = 8
	}
	var roundTrips, toSubscriber, answerLeg, toolBytes []float64
	for i := 0; i < n; i++ {
		if err := cl.Prompt(ctx, sess.ID, fmt.Sprintf("work bench-%d.txt", i)); err != nil {
			return nil, fmt.Errorf("prompt %d: %w", i, err)
		}
		var perm api.Permission
		var seen time.Time
		// The request's event; tool entries' sizes on the way.
		for perm.ID == "" {
			ev, err := nextEvent(ctx, events, time.Minute)
			if err != nil {
				return nil, fmt.Errorf("turn %d: waiting for its permission request: %w", i, err)
			}
			switch ev.Type {
			case api.EventPermissionRequested:
				seen = time.Now()
				if err := decodeField(ev.Data, "permission", &perm); err != nil {
					return nil, err
				}
			case api.EventMessageAdded, api.EventMessageUpdated:
				if b, ok := toolEntryBytes(ev.Data); ok {
					toolBytes = append(toolBytes, float64(b))
				}
			}
		}
		option := ""
		for _, o := range perm.Options {
			if o.Kind == api.OptionAllowOnce {
				option = o.OptionID
			}
		}
		if _, err := cl.AnswerPermission(ctx, sess.ID, perm.ID, option); err != nil {
			return nil, fmt.Errorf("turn %d: answer: %w", i, err)
		}
		answered := time.Now()
		roundTrips = append(roundTrips, ms(answered.Sub(perm.CreatedAt)))
		toSubscriber = append(toSubscriber, ms(seen.Sub(perm.CreatedAt)))
		answerLeg = append(answerLeg, ms(answered.Sub(seen)))
		// The rest of the turn: its tool entries, until it ends.
		for done := false; !done; {
			ev, err := nextEvent(ctx, events, time.Minute)
			if err != nil {
				return nil, fmt.Errorf("turn %d: waiting for its end: %w", i, err)
			}
			switch ev.Type {
			case api.EventStateChanged:
				done = ev.Data["to"] == string(api.SessionWaitingForInput)
			case api.EventMessageAdded, api.EventMessageUpdated:
				if b, ok := toolEntryBytes(ev.Data); ok {
					toolBytes = append(toolBytes, float64(b))
				}
			}
		}
	}
	rt := Summary(Result{Name: "permission_round_trip_ms", Area: areaAgentWork, Unit: "ms",
		Note: fmt.Sprintf("agent asks (created_at) → session.permission.requested at a subscriber → POST …/permissions/{id} answered at once → agentctl answered the agent and the answer is replicated (the POST returns); %d turns of `work FILE`, one node", n)}, roundTrips, false)
	sub := Summary(Result{Name: "permission_to_subscriber_ms", Area: areaAgentWork, Unit: "ms",
		Note: "the first leg: the agent's request until its event reaches a subscriber of GET /v1/events"}, toSubscriber, false)
	ans := Summary(Result{Name: "permission_answer_ms", Area: areaAgentWork, Unit: "ms",
		Note: "the second leg: the subscriber's answer until its POST returns (leader → agentctl → the agent's request answered → raft write)"}, answerLeg, false)
	tb := Summary(Result{Name: "tool_update_bytes", Area: areaAgentWork, Unit: "bytes",
		Note: fmt.Sprintf("the encoded tool entry each tool-call update replicates (a tool entry is written whole; %d updates of read, edit and execute calls with a diff and a terminal)", len(toolBytes))}, toolBytes, false)
	env.Logf("permission round trip p50 %.1fms p99 %.1fms; tool update %.0f bytes p50", rt.P50, rt.P99, tb.P50)
	return []Result{rt, sub, ans, tb}, nil
}

// nextEvent is the next event of a stream's channel, or an error once
// timeout passes or the stream ends.
func nextEvent(ctx context.Context, events <-chan api.Event, timeout time.Duration) (api.Event, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case ev, ok := <-events:
		if !ok {
			return api.Event{}, errors.New("the event stream ended")
		}
		return ev, nil
	case <-t.C:
		return api.Event{}, fmt.Errorf("no event in %s", timeout)
	case <-ctx.Done():
		return api.Event{}, ctx.Err()
	}
}

// decodeField decodes data[key] into v.
func decodeField(data map[string]any, key string, v any) error {
	raw, err := json.Marshal(data[key])
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("event field %s: %w", key, err)
	}
	return nil
}

// toolEntryBytes is the encoded size of a message event's entry when it is
// a tool call.
func toolEntryBytes(data map[string]any) (int, bool) {
	var m api.Message
	if decodeField(data, "message", &m) != nil || m.Role != api.RoleTool {
		return 0, false
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return 0, false
	}
	return len(raw), true
}
