package sessions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/shared/agentctl"
	"github.com/paddockhq/paddock/supervisor/config"
	"github.com/paddockhq/paddock/supervisor/state"
)

// errRestarted: agentctl answers with a new boot nonce, so the holder that
// ran the agent is proven gone.
var errRestarted = errors.New("agentctl restarted")

// Pump timing.
const (
	// flushInterval coalesces streamed message chunks: at most ~10 writes a
	// second per session. Chunks that come after a quiet spell are written
	// at the next flushGrid tick; those that follow wait for the interval
	// to pass.
	flushInterval = 100 * time.Millisecond
	// flushGrid is the grid every pump's flushes fall on (wall clock):
	// chunks wait up to this long more, on average half of it, so that
	// the writes of many sessions reach raft together (see flushDelay).
	flushGrid = 25 * time.Millisecond
	// gatherWindow is how long, at most, agentctl holds a frame of its
	// event stream (or a poll's answer) while it carries only chunks of a
	// reply still being written: agentctl sends them once the agent's
	// output read so far is handled, so they come a read's worth per frame,
	// not a frame per chunk. A turn's end, a complete message or any other
	// event is sent at once; spacing the polls instead (as before agentctl
	// could gather) held each turn's end back by up to the window, twice a
	// turn.
	gatherWindow = flushInterval
	// pollSpacing is the least time between the starts of two polls of an
	// agentctl that does not gather (an older one): its answers do not
	// say "gather".
	pollSpacing = flushInterval
	// maxFlushBytesPerSecond bounds the message text one session's timed
	// flushes replicate per second: what a streamed message added, or a
	// whole tool call or plan, each time it is written. Past it, a
	// session's writes space out (64 KiB of text written in one flush
	// holds the next back about a second). A turn's end still flushes at
	// once.
	maxFlushBytesPerSecond = 64 << 10
	// pollWait is the long-poll wait of one events call.
	pollWait = 20 * time.Second
)

// pump mirrors one execution's agentctl events into replicated state until
// ctx ends or the execution ends. Message chunks are coalesced; a turn's end
// flushes them before the session returns to WAITING_FOR_INPUT.
func (m *Manager) pump(ctx context.Context, e *execution) {
	p := &pumper{m: m, e: e, pending: map[string]agentctl.Message{}, since: e.since, source: e.nonce, following: true}
	events := make(chan agentctl.EventsResponse)
	errs := make(chan error, 1)
	go p.follow(ctx, events, errs)
	// The flush timer runs only while chunks wait: an idle session costs no
	// wakeups (a ticker per session kept 1,000 idle sessions' leader busy).
	flush := time.NewTimer(flushInterval)
	flush.Stop()
	armed := false
	defer flush.Stop()
	for {
		select {
		case <-ctx.Done():
			p.flush(context.WithoutCancel(ctx))
			return
		case <-flush.C:
			armed = false
			p.flush(ctx)
		case resp := <-events:
			p.setSource(ctx, resp.Nonce)
			for _, ev := range resp.Events {
				if done := p.handle(ctx, ev); done {
					return
				}
			}
			if len(p.order) > 0 && !armed {
				flush.Reset(p.flushDelay(time.Now()))
				armed = true
			}
		case err := <-errs:
			p.flush(ctx)
			m.lost(ctx, e, err)
			return
		}
	}
}

type pumper struct {
	m       *Manager
	e       *execution
	pending map[string]agentctl.Message
	order   []string
	since   uint64
	// source is the agentctl boot (its nonce) whose message ids the pump
	// relays; the FSM gives each message an id unique in the session.
	source string
	// selfFenced is set when agentctl stopped the agent because renewals
	// stopped (e.g. across a slow leader change): a stop to resume from.
	selfFenced bool
	// notBefore is when the byte bound lets the next timed flush run.
	notBefore time.Time
	// lastFlush is when the last flush that wrote anything began.
	lastFlush time.Time
	// following: events are relayed as they happen (the pump), not
	// replayed from before this leader attached (catchUp).
	following bool
	// turnOpen: the pump saw a prompt and no turn end after it.
	turnOpen bool
	// proposed is the text last written of each message still streaming
	// (from source): its next write carries only what follows.
	proposed map[string]string
}

// flushDelay is how long chunks that arrive at now wait before their
// flush: until flushInterval has passed since the last flush and the
// per-session byte bound lets it, and then until the next tick of
// flushGrid. Every pump of the leader proposes on the same ticks, so raft
// stores and replicates the writes of all streaming sessions in a few
// batches per tick (one log commit and one AppendEntries per node each)
// instead of one batch per write: writes proposed each at its session's
// own moment cost every node a log commit apiece, ~40% of each server's
// CPU in the paced storm (PERFORMANCE-NOTES.md). Both bounds are rounded
// to the nearest tick, since a flush runs just after the tick it waited
// for.
func (p *pumper) flushDelay(now time.Time) time.Duration {
	due := now
	if t := p.lastFlush.Add(flushInterval - flushGrid/2); t.After(due) {
		due = t
	}
	if t := p.notBefore.Add(-flushGrid / 2); t.After(due) {
		due = t
	}
	return max(0, flushTick(due).Sub(now))
}

// flushTick is the first tick of the flushes' grid at or after t.
func flushTick(t time.Time) time.Time {
	t = t.Round(0) // wall-clock time: the grid is the same for every pump
	tick := t.Truncate(flushGrid)
	if tick.Before(t) {
		tick = tick.Add(flushGrid)
	}
	return tick
}

// turnSeen is what agentctl's retained events say of the agent's latest
// turn.
type turnSeen int

const (
	// turnUnseen: no prompt and no turn end is retained.
	turnUnseen turnSeen = iota
	// turnOpen: a prompt with no turn end after it (a turn runs).
	turnOpen
	// turnEnded: a turn end after the last prompt.
	turnEnded
)

// catchUp mirrors the messages agentctl kept from before this leader
// attached (a conversation may have moved while no leader watched) and
// returns the event position the pump continues from, and what the events
// say of the latest turn. Older turn and state events are not replayed:
// the caller sets the session state from the agent's.
func (m *Manager) catchUp(ctx context.Context, e *execution) (uint64, turnSeen) {
	resp, err := e.retainedEvents(ctx)
	if err != nil {
		m.log.Warn("catch up with agentctl events", "session", e.sessionID, "error", err)
		return 0, turnUnseen
	}
	p := &pumper{m: m, e: e, pending: map[string]agentctl.Message{}, source: e.nonce}
	p.setSource(ctx, resp.Nonce)
	// The outcome of a turn that ended while no leader watched is recorded
	// too: the last turn_finished, unless a prompt came after it.
	var ended *agentctl.TurnFinishedData
	seen := turnUnseen
	for _, ev := range resp.Events {
		switch ev.Type {
		case agentctl.EventMessageAdded, agentctl.EventMessageUpdated:
			p.handle(ctx, ev)
			if isPrompt(ev) {
				ended, seen = nil, turnOpen
			}
		case agentctl.EventTurnFinished:
			var d agentctl.TurnFinishedData
			if json.Unmarshal(ev.Data, &d) == nil {
				ended, seen = &d, turnEnded
			}
		case agentctl.EventCommandsUpdated, agentctl.EventModeUpdated:
			p.handle(ctx, ev)
		}
	}
	p.dropRecorded()
	var end *state.SetSessionStateBody
	if sess, ok := m.store.Session(e.sessionID); ok && ended != nil && sess.State == api.SessionRunning {
		end = p.turnEnd(*ended)
	}
	p.flushAnd(ctx, end)
	// Permission requests are listed rather than read from the events:
	// agentctl's event log is bounded, and a request may wait for days.
	// The list comes with the events (listed after them, so a request it
	// misses is in an event the pump reads next); an agentctl older than
	// that is asked for it.
	list := resp.Permissions
	if list == nil {
		l, err := retryTimeouts(ctx, p.e.client.Permissions)
		if err != nil {
			m.log.Warn("list the agent's permission requests", "session", e.sessionID, "error", err)
			return resp.Next, seen
		}
		list = &l
	}
	p.mirrorPermissions(ctx, *list)
	return resp.Next, seen
}

// mirrorPermissions records every permission request of the agent's run
// (list, as agentctl lists them) that the state does not hold as agentctl
// does.
func (p *pumper) mirrorPermissions(ctx context.Context, list api.Permissions) {
	for _, perm := range list.Permissions {
		if rec, ok := p.m.store.Permission(p.e.sessionID, perm.ID); ok && (rec.State != api.PermissionPending || perm.State == api.PermissionPending) &&
			rec.CreatedAt.Equal(perm.CreatedAt) {
			continue // recorded, as it is or already ended
		}
		p.recordPermission(ctx, perm)
	}
}

// recordPermission writes one permission request of the session's agent.
func (p *pumper) recordPermission(ctx context.Context, perm api.Permission) {
	perm.SessionID = p.e.sessionID
	if _, err := p.m.apply(ctx, state.CmdUpsertPermission, &state.UpsertPermissionBody{SessionID: p.e.sessionID, Permission: perm}); err != nil {
		p.m.log.Warn("record a permission request", "session", p.e.sessionID, "permission", perm.ID, "error", err)
	}
}

// isPrompt reports whether an agentctl event adds a prompt: a user message
// that is not replayed history.
func isPrompt(ev agentctl.Event) bool {
	var d agentctl.MessageData
	return ev.Type == agentctl.EventMessageAdded && json.Unmarshal(ev.Data, &d) == nil && addsPrompt(ev.Type, d.Message)
}

// addsPrompt reports whether a message event of type typ adds msg as a
// prompt.
func addsPrompt(typ string, msg agentctl.Message) bool {
	return typ == agentctl.EventMessageAdded && msg.Role == string(api.RoleUser) && !msg.History
}

// setSource notes the agentctl boot the events come from.
func (p *pumper) setSource(ctx context.Context, nonce string) {
	if nonce != "" && nonce != p.source {
		p.flush(ctx)
		p.source, p.proposed = nonce, nil
	}
}

// follow relays agentctl's events from its event stream (GET
// /v1/events/stream: compacted, gathered for up to gatherWindow, a streamed
// message's text as what it added), opened again from the last frame when
// it breaks. An agentctl older than the stream is polled instead (poll). It
// reports an error when agentctl stays unreachable past the health bound,
// or restarted (its nonce changed).
func (p *pumper) follow(ctx context.Context, out chan<- agentctl.EventsResponse, errs chan<- error) {
	since := p.since
	retry := p.newRetry()
	for ctx.Err() == nil {
		err := p.e.client.Stream(ctx, agentctl.EventsQuery{Since: since, Gather: gatherWindow}, func(resp agentctl.EventsResponse) error {
			retry.reset()
			if err := p.restarted(resp); err != nil {
				return err
			}
			since = resp.Next
			if len(resp.Events) == 0 {
				return nil
			}
			select {
			case out <- resp:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		var apiErr *agentctl.APIError
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, errRestarted):
			errs <- err
			return
		case errors.As(err, &apiErr) && apiErr.Status == 404:
			p.poll(ctx, since, out, errs)
			return
		}
		if !retry.again(ctx, err, errs) {
			return
		}
	}
}

// restarted is errRestarted when agentctl's answer comes from another boot
// than the one that ran this execution's agent.
func (p *pumper) restarted(resp agentctl.EventsResponse) error {
	if resp.Nonce != "" && p.e.nonce != "" && resp.Nonce != p.e.nonce {
		return fmt.Errorf("%w (nonce %s, was %s): the agent it ran is gone", errRestarted, resp.Nonce, p.e.nonce)
	}
	return nil
}

// pumpRetry paces a pump's attempts to reach an agentctl that failed it.
type pumpRetry struct {
	failingSince time.Time
	bound        time.Duration
}

func (p *pumper) newRetry() *pumpRetry {
	return &pumpRetry{bound: max(p.m.cfg.Recovery.HealthTimeout, time.Second)}
}

// reset notes an answer: agentctl is reachable.
func (r *pumpRetry) reset() { r.failingSince = time.Time{} }

// again notes a failed attempt and reports whether to try again (after a
// pause): not once agentctl refuses connections (nothing listens any more;
// lost() asks the runtime whether the holder is proven gone) or has failed
// for longer than the health bound, which it reports on errs.
func (r *pumpRetry) again(ctx context.Context, err error, errs chan<- error) bool {
	if r.failingSince.IsZero() {
		r.failingSince = time.Now()
	}
	if errors.Is(err, syscall.ECONNREFUSED) || time.Since(r.failingSince) > r.bound {
		errs <- fmt.Errorf("agentctl unreachable for %s: %w", r.bound.Round(time.Millisecond), err)
		return false
	}
	t := time.NewTimer(200 * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// poll long-polls the events of an agentctl older than the event stream,
// from since, compacted and gathered as the stream is. Each poll renews
// the session's lease as it reaches agentctl (the lease keeper then skips
// the renewals it would send), until agentctl answers without renewing
// (one older than the parameter) or refuses this execution's token.
func (p *pumper) poll(ctx context.Context, since uint64, out chan<- agentctl.EventsResponse, errs chan<- error) {
	retry := p.newRetry()
	lease := p.m.cfg.Lease.TTL
	for ctx.Err() == nil {
		started := time.Now()
		resp, err := p.e.client.Poll(ctx, agentctl.EventsQuery{Since: since, Wait: pollWait, Compact: true, Gather: gatherWindow, Lease: lease})
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			var apiErr *agentctl.APIError
			if lease > 0 && errors.As(err, &apiErr) && apiErr.Status == 409 {
				// A newer token holds agentctl: this execution renews
				// nothing there (nor would the keeper's renewals); poll on
				// as before, and let the lease run its course.
				p.m.log.Info("agentctl refused the pump's renewing poll; polling without renewing", "session", p.e.sessionID, "error", err)
				lease = 0
				continue
			}
			if !retry.again(ctx, err, errs) {
				return
			}
			continue
		}
		retry.reset()
		if err := p.restarted(resp); err != nil {
			errs <- err
			return
		}
		switch {
		case resp.LeaseDeadline != nil && resp.Nonce == p.e.nonce:
			p.m.leases.renewedByPoll(p.e.sessionID, started, p.m.cfg.Lease.TTL)
		case resp.LeaseDeadline == nil:
			lease = 0 // an agentctl that does not renew through polls
		}
		since = resp.Next
		if len(resp.Events) == 0 {
			continue
		}
		select {
		case out <- resp:
		case <-ctx.Done():
			return
		}
		if wait := pollSpacing - time.Since(started); resp.Gather == "" && wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return
			}
		}
	}
}

// handle applies one agentctl event; it returns true when the execution ended.
func (p *pumper) handle(ctx context.Context, ev agentctl.Event) bool {
	m, id := p.m, p.e.sessionID
	switch ev.Type {
	case agentctl.EventMessageAdded, agentctl.EventMessageUpdated:
		msg := ev.Message // decoded by the stream
		if msg == nil {
			var d agentctl.MessageData
			if json.Unmarshal(ev.Data, &d) != nil || d.Message.ID == "" {
				m.log.Warn("malformed message event from agentctl", "session", id)
				return false
			}
			msg = &d.Message
		}
		if _, ok := p.pending[msg.ID]; !ok {
			p.order = append(p.order, msg.ID)
		}
		p.pending[msg.ID] = *msg
		if p.following && addsPrompt(ev.Type, *msg) {
			p.turnOpen = true
			p.promptSeen(ctx)
		}
	case agentctl.EventTurnFinished:
		var d agentctl.TurnFinishedData
		_ = json.Unmarshal(ev.Data, &d)
		p.turnOpen = false
		p.flushAnd(ctx, p.turnEnd(d))
	case agentctl.EventAgentStarted:
		var d agentctl.AgentStartedData
		if json.Unmarshal(ev.Data, &d) == nil && d.ResumeToken != "" {
			if sess, ok := m.store.Session(id); ok && sess.ResumeToken != d.ResumeToken {
				_, _ = m.apply(ctx, state.CmdSetResumeToken, &state.SetResumeTokenBody{SessionID: id, ResumeToken: d.ResumeToken})
			}
		}
	case agentctl.EventPermissionRequested, agentctl.EventPermissionAnswered:
		var d agentctl.PermissionData
		if json.Unmarshal(ev.Data, &d) != nil || d.Permission.ID == "" {
			m.log.Warn("malformed permission event from agentctl", "session", id, "type", ev.Type)
			return false
		}
		// The request's tool call entry is recorded first.
		p.flush(ctx)
		p.recordPermission(ctx, d.Permission)
	case agentctl.EventCommandsUpdated:
		var d agentctl.CommandsData
		if json.Unmarshal(ev.Data, &d) == nil {
			p.e.facts.setCommands(d.Commands)
		}
	case agentctl.EventModeUpdated:
		var d agentctl.ModesData
		if json.Unmarshal(ev.Data, &d) == nil {
			p.e.facts.setModes(d.Modes)
		}
	case agentctl.EventAgentError, agentctl.EventLeaseExpired:
		var data map[string]any
		_ = json.Unmarshal(ev.Data, &data)
		if data == nil {
			data = map[string]any{}
		}
		data["agent_event"] = ev.Type
		m.publish(ctx, id, api.EventAgentctlError, data)
	case agentctl.EventAgentStopped:
		p.flush(ctx)
		if m.store.PendingPermissions(id) > 0 {
			// Nobody waits for them any more.
			if _, err := m.apply(ctx, state.CmdCancelPermissions, &state.CancelPermissionsBody{SessionID: id}); err != nil {
				m.log.Warn("cancel the permission requests of an agent that exited", "session", id, "error", err)
			}
		}
		var d agentctl.AgentStoppedData
		_ = json.Unmarshal(ev.Data, &d)
		m.agentExited(ctx, p.e, d.ExitCode, p.selfFenced)
		return true
	}
	if ev.Type == agentctl.EventLeaseExpired {
		p.selfFenced = true
	}
	return false
}

// promptSeen makes a session that waits for input RUNNING when its agent
// took a prompt anyway: a previous leader's prompt still in flight when this
// leader took the session over, or one whose answer was lost after agentctl
// accepted it. Left waiting, the session would show WAITING_FOR_INPUT while
// its reply streams, and the turn's end (RUNNING → WAITING_FOR_INPUT) would
// be refused. A prompt sent through this leader is RUNNING before agentctl
// sees it, so this costs nothing then. agentctl is asked whether a turn
// runs: a line typed in a pty agent's terminal is a user message too, with
// no turn (and no turn end) of agentctl's.
func (p *pumper) promptSeen(ctx context.Context) {
	if sess, ok := p.m.store.Session(p.e.sessionID); !ok || sess.State != api.SessionWaitingForInput {
		return
	}
	if agent, err := retryTimeouts(ctx, p.e.client.AgentState); err != nil || !agent.TurnRunning {
		return
	}
	if err := p.m.move(ctx, p.e.sessionID, api.SessionRunning, api.SessionWaitingForInput); err != nil && !errors.Is(err, state.ErrConflict) {
		p.m.log.Warn("a prompt the session state missed", "session", p.e.sessionID, "error", err)
	}
}

// turnOutcomes maps agentctl's turn outcomes to the session's.
var turnOutcomes = map[string]api.TurnOutcome{
	agentctl.OutcomeEndTurn:   api.TurnCompleted,
	agentctl.OutcomeCancelled: api.TurnCancelled,
	agentctl.OutcomeError:     api.TurnFailed,
}

// turnEnd is the state change that ends a turn: RUNNING →
// WAITING_FOR_INPUT with its outcome. A turn its agent's exit interrupted
// has none (nil): the session stays RUNNING, the agent_stopped that follows
// moves it to ERROR, and the FSM records that the turn was interrupted,
// and why.
func (p *pumper) turnEnd(d agentctl.TurnFinishedData) *state.SetSessionStateBody {
	if d.Outcome == agentctl.OutcomeInterrupted {
		return nil
	}
	outcome, ok := turnOutcomes[d.Outcome]
	if !ok {
		outcome = api.TurnCompleted
	}
	return &state.SetSessionStateBody{SessionID: p.e.sessionID, State: api.SessionWaitingForInput, From: []api.SessionState{api.SessionRunning},
		TurnOutcome: outcome, TurnError: d.Error}
}

// flush writes coalesced messages, one raft write per changed message.
func (p *pumper) flush(ctx context.Context) { p.flushAnd(ctx, nil) }

// flushAnd writes coalesced messages, one raft write per changed message,
// and then end (a turn's end; nil for none). The writes are proposed
// together, so a turn's last chunks and its end wait for about one commit
// between them, and end follows the messages in the log: a reader that
// sees the turn over sees its whole reply.
func (p *pumper) flushAnd(ctx context.Context, end *state.SetSessionStateBody) {
	started := time.Now()
	written := 0
	props := make([]state.Proposal, 0, len(p.order)+1)
	for _, mid := range p.order {
		prop, n := p.messageWrite(p.pending[mid])
		written += n
		props = append(props, prop)
	}
	if end != nil {
		props = append(props, state.Proposal{Type: state.CmdSetSessionState, Body: end})
	}
	if len(props) > 0 {
		var whole []state.Proposal
		for i, err := range p.m.applyAll(ctx, props) {
			switch {
			case i < len(p.order):
				if msg := p.pending[p.order[i]]; p.recordWrite(msg, props[i], err) {
					whole = append(whole, state.Proposal{Type: state.CmdPutMessage, Body: p.messageBody(msg)})
				}
			case err != nil && !errors.Is(err, state.ErrConflict):
				p.m.log.Warn("turn finished", "session", p.e.sessionID, "error", err)
			}
		}
		// An addition the state could not take (it lacks the text it
		// follows) is written whole, after the batch and so after a turn's
		// end proposed with it; not expected unless a write was lost.
		if len(whole) > 0 {
			for i, err := range p.m.applyAll(ctx, whole) {
				b := whole[i].Body.(*state.PutMessageBody)
				p.recordWrite(p.pending[b.Message.ID], whole[i], err)
			}
		}
	}
	if len(p.order) > 0 {
		p.lastFlush = started
		// A turn's reply streams: a session recorded waiting for input
		// meanwhile (a prompt undone after agentctl's answer and the
		// check of its turn both failed on a starved machine, though
		// the prompt had been taken) runs again, before the turn's end
		// is refused and a reader takes the reply as complete.
		if p.following && p.turnOpen {
			p.promptSeen(ctx)
		}
	}
	p.pending, p.order = map[string]agentctl.Message{}, p.order[:0]
	if written > 0 {
		p.notBefore = started.Add(flushCost(written))
	}
}

// messageWrite is the write that records msg, and how many bytes of its
// text it carries: what the message added since its last write when that
// write's text begins msg's (a streamed reply grows at its end), else the
// whole message.
func (p *pumper) messageWrite(msg agentctl.Message) (state.Proposal, int) {
	if whole(msg) {
		return state.Proposal{Type: state.CmdPutMessage, Body: p.messageBody(msg)}, encodedSize(msg)
	}
	if prev, ok := p.proposed[msg.ID]; ok && !msg.History && strings.HasPrefix(msg.Text, prev) {
		return state.Proposal{Type: state.CmdAppendMessage, Body: &state.AppendMessageBody{SessionID: p.e.sessionID, Source: p.source,
			MessageID: msg.ID, From: len(prev), Text: msg.Text[len(prev):], Complete: msg.Complete}}, len(msg.Text) - len(prev)
	}
	return state.Proposal{Type: state.CmdPutMessage, Body: p.messageBody(msg)}, len(msg.Text)
}

// whole reports whether a message is always written whole: a tool call or
// a plan (an update replaces the entry; only text grows at its end).
func whole(msg agentctl.Message) bool {
	return msg.ToolCall != nil || msg.Plan != nil || msg.Role == string(api.RoleTool) || msg.Role == string(api.RolePlan)
}

// encodedSize is what a whole write of msg weighs against
// maxFlushBytesPerSecond: its text and its encoded tool call and plan.
func encodedSize(msg agentctl.Message) int {
	n := len(msg.Text)
	for _, v := range []any{msg.ToolCall, msg.Plan} {
		if b, err := json.Marshal(v); err == nil && string(b) != "null" {
			n += len(b)
		}
	}
	return n
}

// recordWrite notes the outcome of msg's write prop (a message still
// streaming remembers the text written) and reports whether msg is to be
// written again whole: an addition the state could not take.
func (p *pumper) recordWrite(msg agentctl.Message, prop state.Proposal, err error) (rewrite bool) {
	delete(p.proposed, msg.ID)
	switch {
	case err == nil && !msg.Complete && !msg.History && !whole(msg):
		if p.proposed == nil {
			p.proposed = map[string]string{}
		}
		p.proposed[msg.ID] = msg.Text
	case err == nil:
	case prop.Type == state.CmdAppendMessage && errors.Is(err, state.ErrConflict):
		return true
	default:
		p.m.log.Warn("record message", "session", p.e.sessionID, "error", err)
	}
	return false
}

// flushCost is how long a flush of written bytes of message text holds
// the next timed flush back under maxFlushBytesPerSecond.
func flushCost(written int) time.Duration {
	return time.Duration(written) * time.Second / maxFlushBytesPerSecond
}

// agentExited handles an agent that stopped on its own (not a user stop):
// the session is ERROR with agent_not_running; agentctl still serves the
// workspace, so the executor stays ready.
func (m *Manager) agentExited(ctx context.Context, e *execution, code int, selfFenced bool) {
	m.mu.Lock()
	stopping := e.stopping
	if m.live[e.sessionID] == e {
		delete(m.live, e.sessionID)
	}
	m.mu.Unlock()
	if stopping {
		return
	}
	sess, _ := m.store.Session(e.sessionID)
	if !selfFenced {
		m.record(ctx, sess, failure{Reason: api.ReasonAgentNotRunning, Err: fmt.Errorf("the agent exited with code %d", code)})
		return
	}
	m.record(ctx, sess, failure{Reason: api.ReasonAgentNotRunning, Err: errors.New("agentctl stopped the agent when its lease was not renewed in time")})
	if m.cfg.Recovery.AutoResume != config.AutoResumeNone {
		if err := m.Resume(ctx, e.sessionID); err != nil {
			m.log.Info("not auto-resuming session", "session", e.sessionID, "reason", err)
		}
	}
}

// lost handles an agentctl that died or restarted under a live leader:
// executor error, session ERROR with agent_not_running (docs/API.md, "Status object").
func (m *Manager) lost(ctx context.Context, e *execution, err error) {
	m.mu.Lock()
	stopping := e.stopping
	if m.live[e.sessionID] == e {
		delete(m.live, e.sessionID)
	}
	m.mu.Unlock()
	if stopping || ctx.Err() != nil {
		return
	}
	sess, _ := m.store.Session(e.sessionID)
	ex, _ := m.store.Executor(e.executorID)
	dead := errors.Is(err, errRestarted)
	if !dead {
		rt, rerr := m.runtimeOf(ctx, ex)
		if rerr == nil {
			dead, rerr = m.provenGone(ctx, rt, ex)
		}
		if nodeDown(rerr) && !m.sharedWorkspace(ctx, ex.Runtime) {
			m.nodeLost(ctx, sess, ex, err)
			return
		}
	}
	if !dead {
		// Unreachable but maybe alive: the lease expires first (agentctl
		// self-fences), then reclaimExpired resumes the session.
		m.record(ctx, sess, failure{Reason: api.ReasonAgentNotRunning, Executor: e.executorID, KeepLease: true, Err: err})
		return
	}
	// A dead holder is proven: its lease is reclaimed at once.
	m.record(ctx, sess, failure{Reason: api.ReasonAgentNotRunning, Executor: e.executorID, Err: err})
	if m.cfg.Recovery.AutoResume == config.AutoResumeNone {
		return
	}
	// auto_resume: relaunch agentctl through the runtime and resume at once.
	if rerr := m.Resume(ctx, e.sessionID); rerr != nil {
		m.log.Info("not auto-resuming session", "session", e.sessionID, "reason", rerr)
	}
}
