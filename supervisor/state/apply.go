package state

import (
	"time"

	"github.com/paddockhq/paddock/api"
)

// sessionTransitions lists, for each state, the states a session may move to
// (docs/API.md, "Sessions"). ERROR and COMPLETED are reachable from anywhere and
// are handled separately.
var sessionTransitions = map[api.SessionState][]api.SessionState{
	api.SessionCreated:         {api.SessionStarting, api.SessionStopped},
	api.SessionStarting:        {api.SessionWaitingForInput, api.SessionRunning, api.SessionStopped},
	api.SessionWaitingForInput: {api.SessionRunning, api.SessionStopped, api.SessionStarting},
	api.SessionRunning:         {api.SessionWaitingForInput, api.SessionStopped, api.SessionStarting},
	api.SessionStopped:         {api.SessionStarting},
	api.SessionError:           {api.SessionStarting},
}

// CanTransition reports whether a session may move from one state to another.
func CanTransition(from, to api.SessionState) bool {
	if from == api.SessionCompleted {
		return false
	}
	if from == to || to == api.SessionError || to == api.SessionCompleted {
		return true
	}
	for _, s := range sessionTransitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

func sessionEvent(s *api.Session, typ string, idx uint64, data map[string]any) api.Event {
	if data == nil {
		data = map[string]any{}
	}
	return api.Event{Type: typ, SessionID: s.ID, TaskID: s.TaskID, Index: idx, Data: data}
}

// CmdRegisterNode records a server's addresses (RegisterNodeBody).
const CmdRegisterNode CommandType = 1

func init() { register(CmdRegisterNode, newBody[RegisterNodeBody], applyRegisterNode) }

func applyRegisterNode(d *data, _ uint64, _ time.Time, body any) ([]api.Event, uint64, error) {
	b := body.(*RegisterNodeBody)
	if b.Node.ID == "" {
		return nil, 0, invalidf("node id is empty")
	}
	d.Nodes[b.Node.ID] = b.Node
	return nil, 0, nil
}

// CmdCreateTask creates a task (CreateTaskBody).
const CmdCreateTask CommandType = 2

func init() { register(CmdCreateTask, newBody[CreateTaskBody], applyCreateTask) }

func applyCreateTask(d *data, _ uint64, now time.Time, body any) ([]api.Event, uint64, error) {
	t := body.(*CreateTaskBody).Task
	if t.ID == "" {
		return nil, 0, invalidf("task id is empty")
	}
	if _, ok := d.Tasks[t.ID]; ok {
		return nil, 0, conflictf("task %q already exists", t.ID)
	}
	t.State = api.TaskOpen
	t.CreatedAt, t.UpdatedAt = now, now
	d.Tasks[t.ID] = &t
	return nil, 0, nil
}

// CmdSetTaskState closes or reopens a task (SetTaskStateBody).
const CmdSetTaskState CommandType = 3

func init() { register(CmdSetTaskState, newBody[SetTaskStateBody], applySetTaskState) }

func applySetTaskState(d *data, _ uint64, now time.Time, body any) ([]api.Event, uint64, error) {
	b := body.(*SetTaskStateBody)
	t, ok := d.Tasks[b.TaskID]
	if !ok {
		return nil, 0, notFound("task", b.TaskID)
	}
	switch b.State {
	case api.TaskDone:
		if t.State != api.TaskDone {
			t.State, t.UpdatedAt = api.TaskDone, now
		}
	case api.TaskOpen:
		// Reopen: the task follows its sessions again. A task that is not
		// done is left as it is.
		if t.State == api.TaskDone {
			t.State, t.UpdatedAt = api.TaskOpen, now
			deriveTaskState(d, t.ID, now)
		}
	default:
		return nil, 0, invalidf("a task is closed (%s) or reopened (%s), not set to %q", api.TaskDone, api.TaskOpen, b.State)
	}
	return nil, 0, nil
}

// CmdDeleteTask removes a task whose sessions have all ended (DeleteTaskBody).
const CmdDeleteTask CommandType = 16

func init() { register(CmdDeleteTask, newBody[DeleteTaskBody], applyDeleteTask) }

// applyDeleteTask removes a task and its sessions, which must all have
// ended (COMPLETED): the caller stops and deletes them first, so a session
// created meanwhile makes the delete a conflict instead of an orphan.
func applyDeleteTask(d *data, _ uint64, _ time.Time, body any) ([]api.Event, uint64, error) {
	b := body.(*DeleteTaskBody)
	if _, ok := d.Tasks[b.TaskID]; !ok {
		return nil, 0, notFound("task", b.TaskID)
	}
	var ids []string
	for id, s := range d.Sessions {
		if s.TaskID != b.TaskID {
			continue
		}
		if s.State != api.SessionCompleted {
			return nil, 0, conflictf("task %s still has session %s in %s", b.TaskID, id, s.State)
		}
		ids = append(ids, id)
	}
	for _, id := range ids {
		for eid, e := range d.Executors {
			// One still to be destroyed on its node stays until it is
			// (applySetExecutorState).
			if e.SessionID == id && !e.DestroyPending {
				delete(d.Executors, eid)
				delete(d.Private, eid)
			}
		}
		delete(d.Sessions, id)
		delete(d.Messages, id)
		delete(d.Transcripts, id)
		delete(d.Permissions, id)
		delete(d.Leases, id)
		delete(d.SessionTokens, id)
		delete(d.streams, id)
	}
	delete(d.Tasks, b.TaskID)
	delete(d.tallies, b.TaskID)
	return nil, 0, nil
}

// CmdCreateSession creates a session (CreateSessionBody).
const CmdCreateSession CommandType = 4

func init() { register(CmdCreateSession, newBody[CreateSessionBody], applyCreateSession) }

func applyCreateSession(d *data, idx uint64, now time.Time, body any) ([]api.Event, uint64, error) {
	b := body.(*CreateSessionBody)
	s := b.Session
	if _, ok := d.Tasks[s.TaskID]; !ok {
		return nil, 0, notFound("task", s.TaskID)
	}
	if s.ID == "" {
		return nil, 0, invalidf("session id is empty")
	}
	if _, ok := d.Sessions[s.ID]; ok {
		return nil, 0, conflictf("session %q already exists", s.ID)
	}
	s.State = api.SessionCreated
	s.CreatedAt, s.UpdatedAt, s.LastActivityAt = now, now, now
	s.ResumeToken, s.HasResumeToken = "", b.ResumeToken != ""
	if b.ResumeToken != "" {
		d.SessionTokens[s.ID] = b.ResumeToken
	}
	d.Sessions[s.ID] = &s
	if t, ok := d.tallies[s.TaskID]; ok {
		t.add(s.State, 1)
	}
	return []api.Event{sessionEvent(&s, api.EventStateChanged, idx, map[string]any{"from": "", "to": string(api.SessionCreated)})}, 0, nil
}

// CmdSetSessionState moves a session to a state (SetSessionStateBody).
const CmdSetSessionState CommandType = 5

func init() { register(CmdSetSessionState, newBody[SetSessionStateBody], applySetSessionState) }

func applySetSessionState(d *data, idx uint64, now time.Time, body any) ([]api.Event, uint64, error) {
	b := body.(*SetSessionStateBody)
	s, ok := d.Sessions[b.SessionID]
	if !ok {
		return nil, 0, notFound("session", b.SessionID)
	}
	if len(b.From) > 0 && !containsState(b.From, s.State) {
		return nil, 0, conflictf("session %s is %s, expected one of %v", s.ID, s.State, b.From)
	}
	if !CanTransition(s.State, b.State) {
		return nil, 0, conflictf("session %s cannot go from %s to %s", s.ID, s.State, b.State)
	}
	from := s.State
	d.setSessionState(s, b.State)
	s.UpdatedAt = now
	if !b.NotActivity {
		s.LastActivityAt = now
	}
	switch b.State {
	case api.SessionError, api.SessionStopped:
		s.ErrorMessage, s.StateReason = b.ErrorMessage, b.Reason
	case api.SessionStarting, api.SessionWaitingForInput, api.SessionRunning:
		s.ErrorMessage, s.StateReason = "", ""
	}
	deriveTaskState(d, s.TaskID, now)
	data := map[string]any{"from": string(from), "to": string(b.State)}
	if b.ErrorMessage != "" {
		data["error_message"] = b.ErrorMessage
	}
	if b.Reason != "" {
		data["reason"] = b.Reason
	}
	events := []api.Event{sessionEvent(s, api.EventStateChanged, idx, data)}
	events = append(events, endTurn(d, s, from, b, idx, now)...)
	if b.State == api.SessionError || b.State == api.SessionStopped {
		// The agent is gone: nobody waits for its requests any more.
		events = append(events, d.cancelPermissions(s, idx, now)...)
	}
	return events, 0, nil
}

func containsState(list []api.SessionState, s api.SessionState) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// deriveTaskState keeps a task's state in step with its sessions: IN_PROGRESS
// while one starts or runs, REVIEW while one waits for input. DONE is final.
// It reads the task's tally, so a state change costs the same however many
// sessions the task has (a scan of every session per change made a
// 1,000-session task's log apply quadratic).
func deriveTaskState(d *data, taskID string, now time.Time) {
	t, ok := d.Tasks[taskID]
	if !ok || t.State == api.TaskDone {
		return
	}
	tally := d.tally(taskID)
	next := t.State
	switch {
	case tally.busy > 0:
		next = api.TaskInProgress
	case tally.waiting > 0:
		next = api.TaskReview
	}
	if next != t.State {
		t.State, t.UpdatedAt = next, now
	}
}

// taskTally counts a task's sessions that start or run (busy) and those
// that wait for input.
type taskTally struct {
	busy, waiting int
}

// add counts a session in state st n times (n is 1 or -1).
func (t *taskTally) add(st api.SessionState, n int) {
	switch st {
	case api.SessionStarting, api.SessionRunning:
		t.busy += n
	case api.SessionWaitingForInput:
		t.waiting += n
	}
}

// tally returns a task's tally, counting its sessions on first use.
func (d *data) tally(taskID string) *taskTally {
	if t, ok := d.tallies[taskID]; ok {
		return t
	}
	t := &taskTally{}
	for _, s := range d.Sessions {
		if s.TaskID == taskID {
			t.add(s.State, 1)
		}
	}
	if d.tallies == nil {
		d.tallies = map[string]*taskTally{}
	}
	d.tallies[taskID] = t
	return t
}

// setSessionState moves a session to st, keeping its task's tally (when
// one was counted) in step. Every change of a recorded session's state
// goes through here.
func (d *data) setSessionState(s *api.Session, st api.SessionState) {
	if t, ok := d.tallies[s.TaskID]; ok {
		t.add(s.State, -1)
		t.add(st, 1)
	}
	s.State = st
	if st != api.SessionCreated && !st.Active() {
		s.StopRequested = false // the stop is done, or overtaken
	}
}

// CmdRequestStop records that a session's stop was answered (see
// Session.StopRequested; RequestStopBody). An older node may skip it: it
// loses only the finishing of a stop cut off by a leader change.
const CmdRequestStop CommandType = IgnoreUnknownFlag | 19

func init() { register(CmdRequestStop, newBody[RequestStopBody], applyRequestStop) }

func applyRequestStop(d *data, _ uint64, now time.Time, body any) ([]api.Event, uint64, error) {
	b := body.(*RequestStopBody)
	s, ok := d.Sessions[b.SessionID]
	if !ok {
		return nil, 0, notFound("session", b.SessionID)
	}
	if s.State != api.SessionCreated && !s.State.Active() {
		return nil, 0, conflictf("session %s is %s; only a starting or running session can be stopped", s.ID, s.State)
	}
	s.StopRequested, s.UpdatedAt = true, now
	return nil, 0, nil
}

// CmdSetResumeToken stores a session's resume token (SetResumeTokenBody).
const CmdSetResumeToken CommandType = 6

func init() { register(CmdSetResumeToken, newBody[SetResumeTokenBody], applySetResumeToken) }

func applySetResumeToken(d *data, _ uint64, now time.Time, body any) ([]api.Event, uint64, error) {
	b := body.(*SetResumeTokenBody)
	s, ok := d.Sessions[b.SessionID]
	if !ok {
		return nil, 0, notFound("session", b.SessionID)
	}
	if b.ResumeToken == "" {
		delete(d.SessionTokens, s.ID)
	} else {
		d.SessionTokens[s.ID] = b.ResumeToken
	}
	s.HasResumeToken, s.UpdatedAt = b.ResumeToken != "", now
	return nil, 0, nil
}

// CmdPutExecutor inserts or replaces an executor row (PutExecutorBody).
const CmdPutExecutor CommandType = 7

func init() { register(CmdPutExecutor, newBody[PutExecutorBody], applyPutExecutor) }

func applyPutExecutor(d *data, _ uint64, now time.Time, body any) ([]api.Event, uint64, error) {
	b := body.(*PutExecutorBody)
	e := b.Executor
	s, ok := d.Sessions[e.SessionID]
	if !ok {
		return nil, 0, notFound("session", e.SessionID)
	}
	if e.ID == "" {
		return nil, 0, invalidf("executor id is empty")
	}
	d.Private[e.ID] = executorPrivate{Secret: b.Secret, Handle: b.Handle, AgentExecutionID: b.AgentExecutionID}
	e.Secret, e.Handle, e.AgentExecutionID = "", nil, ""
	e.TaskID = s.TaskID
	e.LastSeenAt = now
	d.Executors[e.ID] = &e
	s.ExecutorID, s.UpdatedAt = e.ID, now
	return nil, 0, nil
}

// CmdSetExecutorState updates an executor's status (SetExecutorStateBody).
const CmdSetExecutorState CommandType = 8

func init() { register(CmdSetExecutorState, newBody[SetExecutorStateBody], applySetExecutorState) }

func applySetExecutorState(d *data, _ uint64, now time.Time, body any) ([]api.Event, uint64, error) {
	b := body.(*SetExecutorStateBody)
	e, ok := d.Executors[b.ExecutorID]
	if !ok {
		return nil, 0, notFound("executor", b.ExecutorID)
	}
	if b.Status != "" {
		e.Status = b.Status
	}
	e.ErrorMessage = b.ErrorMessage
	if b.Nonce != "" {
		e.Nonce = b.Nonce
	}
	if b.Destroyed {
		e.DestroyPending = false
		if _, ok := d.Sessions[e.SessionID]; !ok {
			// Its task was deleted meanwhile: nothing refers to it now.
			delete(d.Executors, b.ExecutorID)
			delete(d.Private, b.ExecutorID)
			return nil, 0, nil
		}
	}
	e.LastSeenAt = now
	return nil, 0, nil
}

// CmdPutMessage inserts or updates a message of a session (PutMessageBody).
const CmdPutMessage CommandType = 9

func init() { register(CmdPutMessage, newBody[PutMessageBody], applyPutMessage) }

func applyPutMessage(d *data, idx uint64, now time.Time, body any) ([]api.Event, uint64, error) {
	b := body.(*PutMessageBody)
	s, ok := d.Sessions[b.SessionID]
	if !ok {
		return nil, 0, notFound("session", b.SessionID)
	}
	if b.Message.ID == "" {
		return nil, 0, invalidf("message id is empty")
	}
	if b.Source != "" {
		return putSourcedMessage(d, s, b, idx, now), 0, nil
	}
	if t := d.Transcripts[s.ID]; t != nil {
		t.Seq = max(t.Seq, messageNumber(b.Message.ID))
	}
	msgs := d.Messages[s.ID]
	typ := api.EventMessageAdded
	var m *api.Message
	for _, old := range msgs {
		if old.ID == b.Message.ID {
			m, typ = old, api.EventMessageUpdated
			break
		}
	}
	if m == nil {
		m = &api.Message{ID: b.Message.ID, Role: b.Message.Role, CreatedAt: now}
		msgs = append(msgs, m)
		if len(msgs) > MaxMessagesPerSession {
			msgs = msgs[len(msgs)-MaxMessagesPerSession:]
		}
		d.Messages[s.ID] = msgs
	}
	m.Text, m.Complete, m.UpdatedAt = b.Message.Text, b.Message.Complete, now
	m.ToolCall, m.Plan = b.Message.ToolCall, b.Message.Plan
	s.LastActivityAt = now
	return []api.Event{sessionEvent(s, typ, idx, map[string]any{"message": *m})}, 0, nil
}

// CmdClaimLease claims a session's lease (ClaimLeaseBody).
const CmdClaimLease CommandType = 10

func init() { register(CmdClaimLease, newBody[ClaimLeaseBody], applyClaimLease) }

// applyClaimLease grants a session's lease. The fencing token is the raft
// index of the grant, so it strictly increases across leaders. The holder is
// an executor plus a nonce (the agentctl boot nonce, or a per-launch nonce
// until agentctl answers). A claim by the same holder renews; a lease held by
// anyone else is a conflict: a dead holder's lease must first be reclaimed
// (a compare-and-set write), so the next claim gets a higher token.
func applyClaimLease(d *data, idx uint64, now time.Time, body any) ([]api.Event, uint64, error) {
	b := body.(*ClaimLeaseBody)
	s, ok := d.Sessions[b.SessionID]
	if !ok {
		return nil, 0, notFound("session", b.SessionID)
	}
	if l, ok := d.Leases[s.ID]; ok && l.State == api.LeaseHeld {
		if l.HolderExecutorID == b.ExecutorID && l.HolderNonce == b.Nonce {
			l.ExpiresAt = now.Add(b.TTL)
			return nil, l.FencingToken, nil
		}
		return nil, 0, conflictf("session %s has a live owner: executor %s (nonce %s, fencing token %d)", s.ID, l.HolderExecutorID, l.HolderNonce, l.FencingToken)
	}
	l := &api.Lease{SessionID: s.ID, HolderExecutorID: b.ExecutorID, HolderNonce: b.Nonce, FencingToken: idx, State: api.LeaseHeld, ExpiresAt: now.Add(b.TTL)}
	d.Leases[s.ID] = l
	return []api.Event{sessionEvent(s, api.EventLeaseChanged, idx, map[string]any{"lease": *l})}, idx, nil
}

// CmdSetLeaseNonce records a lease holder's boot nonce (SetLeaseNonceBody).
const CmdSetLeaseNonce CommandType = 15

func init() { register(CmdSetLeaseNonce, newBody[SetLeaseNonceBody], applySetLeaseNonce) }

func applySetLeaseNonce(d *data, idx uint64, _ time.Time, body any) ([]api.Event, uint64, error) {
	b := body.(*SetLeaseNonceBody)
	l, ok := d.Leases[b.SessionID]
	if !ok || l.State != api.LeaseHeld || l.FencingToken != b.FencingToken {
		return nil, 0, conflictf("lease of session %s is not held with token %d", b.SessionID, b.FencingToken)
	}
	l.HolderNonce = b.Nonce
	if s := d.Sessions[b.SessionID]; s != nil {
		return []api.Event{sessionEvent(s, api.EventLeaseChanged, idx, map[string]any{"lease": *l})}, l.FencingToken, nil
	}
	return nil, l.FencingToken, nil
}

// CmdReleaseLease releases a lease (ReleaseLeaseBody).
const CmdReleaseLease CommandType = 11

func init() { register(CmdReleaseLease, newBody[ReleaseLeaseBody], applyReleaseLease) }

func applyReleaseLease(d *data, idx uint64, _ time.Time, body any) ([]api.Event, uint64, error) {
	return endLease(d, idx, body.(*ReleaseLeaseBody), api.LeaseReleased)
}

// CmdReclaimLease reclaims (expires) a dead holder's lease (ReleaseLeaseBody).
const CmdReclaimLease CommandType = 12

func init() { register(CmdReclaimLease, newBody[ReleaseLeaseBody], applyReclaimLease) }

func applyReclaimLease(d *data, idx uint64, _ time.Time, body any) ([]api.Event, uint64, error) {
	return endLease(d, idx, body.(*ReleaseLeaseBody), api.LeaseExpired)
}

// endLease is a compare-and-set on the fencing token: only the grant it names
// can be ended, so a stale release never frees a newer holder's lease.
func endLease(d *data, idx uint64, b *ReleaseLeaseBody, to api.LeaseState) ([]api.Event, uint64, error) {
	l, ok := d.Leases[b.SessionID]
	if !ok {
		return nil, 0, notFound("lease of session", b.SessionID)
	}
	if l.FencingToken != b.FencingToken {
		return nil, 0, conflictf("lease of session %s has token %d, not %d", b.SessionID, l.FencingToken, b.FencingToken)
	}
	if l.State != api.LeaseHeld {
		return nil, l.FencingToken, nil
	}
	l.State = to
	s := d.Sessions[b.SessionID]
	if s == nil {
		return nil, l.FencingToken, nil
	}
	return []api.Event{sessionEvent(s, api.EventLeaseChanged, idx, map[string]any{"lease": *l})}, l.FencingToken, nil
}

// CmdDeleteSession ends a session for good (DeleteSessionBody).
const CmdDeleteSession CommandType = 13

func init() { register(CmdDeleteSession, newBody[DeleteSessionBody], applyDeleteSession) }

func applyDeleteSession(d *data, idx uint64, now time.Time, body any) ([]api.Event, uint64, error) {
	b := body.(*DeleteSessionBody)
	s, ok := d.Sessions[b.SessionID]
	if !ok {
		return nil, 0, notFound("session", b.SessionID)
	}
	from := s.State
	d.setSessionState(s, api.SessionCompleted)
	s.UpdatedAt = now
	if e, ok := d.Executors[s.ExecutorID]; ok {
		e.Status = api.ExecutorStopped
		if b.Abandon && len(d.Private[e.ID].Handle) > 0 {
			e.DestroyPending = true
		}
	}
	deriveTaskState(d, s.TaskID, now)
	events := []api.Event{sessionEvent(s, api.EventStateChanged, idx, map[string]any{"from": string(from), "to": string(api.SessionCompleted)})}
	return append(events, d.cancelPermissions(s, idx, now)...), 0, nil
}

// CmdPublishEvent records a session event (PublishEventBody).
const CmdPublishEvent CommandType = 14

func init() { register(CmdPublishEvent, newBody[PublishEventBody], applyPublishEvent) }

func applyPublishEvent(d *data, idx uint64, _ time.Time, body any) ([]api.Event, uint64, error) {
	b := body.(*PublishEventBody)
	s, ok := d.Sessions[b.SessionID]
	if !ok {
		return nil, 0, notFound("session", b.SessionID)
	}
	return []api.Event{sessionEvent(s, b.Type, idx, b.Data)}, 0, nil
}

// CmdRecoverExecutors records many sessions' recoveries in one entry
// (RecoverExecutorsBody).
const CmdRecoverExecutors CommandType = 17

func init() { register(CmdRecoverExecutors, newBody[RecoverExecutorsBody], applyRecoverExecutors) }

// applyRecoverExecutors checks every item against its session's lease
// first, then applies them all: all or nothing.
func applyRecoverExecutors(d *data, idx uint64, now time.Time, body any) ([]api.Event, uint64, error) {
	b := body.(*RecoverExecutorsBody)
	if len(b.Items) == 0 {
		return nil, 0, invalidf("recover_executors carries no items")
	}
	seen := make(map[string]bool, len(b.Items))
	for _, it := range b.Items {
		if seen[it.SessionID] {
			return nil, 0, invalidf("recover_executors names session %s twice", it.SessionID)
		}
		seen[it.SessionID] = true
		s, ok := d.Sessions[it.SessionID]
		if !ok {
			return nil, 0, notFound("session", it.SessionID)
		}
		l, ok := d.Leases[it.SessionID]
		if !ok || l.State != api.LeaseHeld || l.FencingToken != it.FencingToken || it.Nonce == "" || l.HolderNonce != it.Nonce ||
			l.HolderExecutorID != it.ExecutorID || s.ExecutorID != it.ExecutorID {
			return nil, 0, conflictf("lease of session %s is not held with token %d by executor %s (agentctl %s)", it.SessionID, it.FencingToken, it.ExecutorID, it.Nonce)
		}
		if e := it.Executor; e != nil && (e.Executor.SessionID != it.SessionID || e.Executor.Nonce != it.Nonce || e.Executor.ID != it.ExecutorID) {
			return nil, 0, invalidf("recover_executors: executor %s is not the lease holder of session %s", e.Executor.ID, it.SessionID)
		}
	}
	var events []api.Event
	for _, it := range b.Items {
		if it.Executor != nil {
			if _, _, err := applyPutExecutor(d, idx, now, it.Executor); err != nil {
				return nil, 0, err // checked above: cannot fail
			}
		}
		s := d.Sessions[it.SessionID]
		for _, ev := range it.Events {
			events = append(events, sessionEvent(s, ev.Type, idx, ev.Data))
		}
	}
	return events, 0, nil
}
