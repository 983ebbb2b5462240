package state

import (
	"sort"
	"sync"

	"github.com/paddockhq/paddock/api"
)

// Limits that keep replicated state bounded.
const (
	// MaxMessagesPerSession bounds a session's stored conversation; the
	// oldest messages are dropped first.
	MaxMessagesPerSession = 1000
	// maxDedupeKeys bounds the idempotency window (oldest keys forgotten first).
	maxDedupeKeys = 20000
)

// data is everything that is replicated and snapshotted.
type data struct {
	Nodes     map[string]NodeInfo       `json:"nodes"`
	Tasks     map[string]*api.Task      `json:"tasks"`
	Sessions  map[string]*api.Session   `json:"sessions"`
	Executors map[string]*api.Executor  `json:"executors"`
	Leases    map[string]*api.Lease     `json:"leases"`
	Messages  map[string][]*api.Message `json:"messages"`
	// Dedupe maps idempotency keys to their first outcome; DedupeOrder is
	// the insertion order used to forget the oldest keys.
	Dedupe      map[string]outcome `json:"dedupe"`
	DedupeOrder []string           `json:"dedupe_order"`
	// ExecutorSecrets and handles are part of Executor (json:"-" there), so
	// they are carried here for snapshots.
	Private map[string]executorPrivate `json:"private"`
	// SessionTokens carries resume tokens (json:"-" on Session).
	SessionTokens map[string]string `json:"session_tokens"`
	// Transcripts numbers each session's messages (transcript.go).
	Transcripts map[string]*transcript `json:"transcripts,omitempty"`
	// Permissions holds each session's permission requests, in the order
	// they were first recorded (permissions.go).
	Permissions map[string][]*api.Permission `json:"permissions,omitempty"`
	LastIndex   uint64                       `json:"last_index"`
	// tallies counts each task's busy and waiting sessions (see
	// deriveTaskState); derived, so not in snapshots, and built per task
	// on first use.
	tallies map[string]*taskTally
	// streams holds each session's streamed message text buffer
	// (transcript.go); derived, so not in snapshots: a restored state
	// starts new buffers.
	streams map[string]*streamText
}

type outcome struct {
	Index uint64 `json:"index"`
	Token uint64 `json:"token,omitempty"`
	Code  string `json:"code,omitempty"`
	Msg   string `json:"msg,omitempty"`
}

type executorPrivate struct {
	Secret           string `json:"secret"`
	Handle           []byte `json:"handle"`
	AgentExecutionID string `json:"agent_execution_id"`
}

func newData() *data {
	return &data{
		Nodes:         map[string]NodeInfo{},
		Tasks:         map[string]*api.Task{},
		Sessions:      map[string]*api.Session{},
		Executors:     map[string]*api.Executor{},
		Leases:        map[string]*api.Lease{},
		Messages:      map[string][]*api.Message{},
		Dedupe:        map[string]outcome{},
		Private:       map[string]executorPrivate{},
		SessionTokens: map[string]string{},
		Transcripts:   map[string]*transcript{},
		Permissions:   map[string][]*api.Permission{},
	}
}

// Store is the local copy of replicated state. Reads are safe from any
// goroutine; only the FSM writes.
type Store struct {
	mu     sync.RWMutex
	d      *data
	events *eventLog
}

// NewStore returns an empty store.
func NewStore() *Store {
	return &Store{d: newData(), events: newEventLog(defaultEventLogSize)}
}

// LastIndex is the raft index of the last applied command.
func (s *Store) LastIndex() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.d.LastIndex
}

// Nodes returns the registered servers.
func (s *Store) Nodes() map[string]NodeInfo {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make(map[string]NodeInfo, len(s.d.Nodes))
	for k, v := range s.d.Nodes {
		out[k] = v
	}
	return out
}

// Task returns a task by id.
func (s *Store) Task(id string) (api.Task, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	t, ok := s.d.Tasks[id]
	if !ok {
		return api.Task{}, false
	}
	return *t, true
}

// Tasks returns every task, oldest first.
func (s *Store) Tasks() []api.Task {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]api.Task, 0, len(s.d.Tasks))
	for _, t := range s.d.Tasks {
		out = append(out, *t)
	}
	sort.Slice(out, func(i, j int) bool { return lessByTime(out[i].CreatedAt, out[j].CreatedAt, out[i].ID, out[j].ID) })
	return out
}

// Session returns a session by id, with its resume token filled in.
func (s *Store) Session(id string) (api.Session, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	sess, ok := s.d.Sessions[id]
	if !ok {
		return api.Session{}, false
	}
	out := *sess
	out.ResumeToken = s.d.SessionTokens[id]
	return out, true
}

// SessionFilter selects sessions; empty fields match everything.
type SessionFilter struct {
	TaskID string
	State  api.SessionState
}

// Sessions returns the sessions matching f, oldest first.
func (s *Store) Sessions(f SessionFilter) []api.Session {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]api.Session, 0, len(s.d.Sessions))
	for id, sess := range s.d.Sessions {
		if f.TaskID != "" && sess.TaskID != f.TaskID {
			continue
		}
		if f.State != "" && sess.State != f.State {
			continue
		}
		c := *sess
		c.ResumeToken = s.d.SessionTokens[id]
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return lessByTime(out[i].CreatedAt, out[j].CreatedAt, out[i].ID, out[j].ID) })
	return out
}

// Executor returns an executor by id, with its private fields filled in.
func (s *Store) Executor(id string) (api.Executor, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	e, ok := s.d.Executors[id]
	if !ok {
		return api.Executor{}, false
	}
	return s.executorLocked(e), true
}

func (s *Store) executorLocked(e *api.Executor) api.Executor {
	out := *e
	p := s.d.Private[e.ID]
	out.Secret, out.Handle, out.AgentExecutionID = p.Secret, p.Handle, p.AgentExecutionID
	return out
}

// Executors returns executors, optionally only those of one session.
func (s *Store) Executors(sessionID string) []api.Executor {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]api.Executor, 0, len(s.d.Executors))
	for _, e := range s.d.Executors {
		if sessionID != "" && e.SessionID != sessionID {
			continue
		}
		out = append(out, s.executorLocked(e))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Lease returns a session's lease.
func (s *Store) Lease(sessionID string) (api.Lease, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	l, ok := s.d.Leases[sessionID]
	if !ok {
		return api.Lease{}, false
	}
	return *l, true
}

// HeldLeases returns the held lease of every session, in no order: what
// the leader's lease keeper renews, read several times a second, without
// the copy and sort of every session that Sessions makes.
func (s *Store) HeldLeases() []api.Lease {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]api.Lease, 0, len(s.d.Leases))
	for id, l := range s.d.Leases {
		if _, ok := s.d.Sessions[id]; ok && l.State == api.LeaseHeld {
			c := *l
			c.SessionID = id // the key names the session
			out = append(out, c)
		}
	}
	return out
}

// Messages returns a session's messages in order.
func (s *Store) Messages(sessionID string) []api.Message {
	s.mu.RLock()
	defer s.mu.RUnlock()
	msgs := s.d.Messages[sessionID]
	out := make([]api.Message, len(msgs))
	for i, m := range msgs {
		out[i] = *m
	}
	return out
}

// Outcome reports whether an idempotency key was applied, and its result.
func (s *Store) Outcome(key string) (*Result, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	o, ok := s.d.Dedupe[key]
	if !ok {
		return nil, false
	}
	return o.result(true), true
}

func (o outcome) result(dup bool) *Result {
	r := &Result{Index: o.Index, Duplicate: dup, FencingToken: o.Token}
	if o.Code != "" {
		r.Err = &outcomeError{code: o.Code, msg: o.Msg}
	}
	return r
}
