package state

import (
	"sync"

	"github.com/paddockhq/paddock/api"
)

// defaultEventLogSize is how many recent events a node keeps for ?since=.
const defaultEventLogSize = 10000

// subscriberBuffer is how many events a subscriber may fall behind before it
// is dropped (and must reconnect with ?since=).
const subscriberBuffer = 1024

// EventFilter selects events; empty fields match everything.
type EventFilter struct {
	SessionID string
	TaskID    string
}

func (f EventFilter) match(e api.Event) bool {
	return (f.SessionID == "" || f.SessionID == e.SessionID) && (f.TaskID == "" || f.TaskID == e.TaskID)
}

// Subscription delivers events matching its filter. C is closed when the
// subscription ends: on Close, or when the subscriber fell too far behind
// (Lagged then reports true).
type Subscription struct {
	C      <-chan api.Event
	c      chan api.Event
	filter EventFilter
	log    *eventLog
	lagged bool
	once   sync.Once
}

// Close ends the subscription.
func (s *Subscription) Close() {
	s.log.remove(s)
}

// Lagged reports whether the subscription was dropped for falling behind.
func (s *Subscription) Lagged() bool {
	s.log.mu.Lock()
	defer s.log.mu.Unlock()
	return s.lagged
}

// eventLog keeps the most recent events in a ring and fans new ones out.
type eventLog struct {
	mu   sync.Mutex
	ring []api.Event
	next int
	full bool
	subs map[*Subscription]struct{}
}

func newEventLog(size int) *eventLog {
	return &eventLog{ring: make([]api.Event, size), subs: map[*Subscription]struct{}{}}
}

func (l *eventLog) publish(events []api.Event) {
	if len(events) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range events {
		l.ring[l.next] = e
		l.next = (l.next + 1) % len(l.ring)
		if l.next == 0 {
			l.full = true
		}
		for s := range l.subs {
			if !s.filter.match(e) {
				continue
			}
			select {
			case s.c <- e:
			default:
				s.lagged = true
				l.dropLocked(s)
			}
		}
	}
}

// subscribe registers a subscriber and first queues retained events with an
// index greater than since (when since > 0).
func (l *eventLog) subscribe(f EventFilter, since uint64, replay bool) *Subscription {
	l.mu.Lock()
	defer l.mu.Unlock()
	var backlog []api.Event
	if replay {
		for _, e := range l.orderedLocked() {
			if e.Index > since && f.match(e) {
				backlog = append(backlog, e)
			}
		}
	}
	c := make(chan api.Event, subscriberBuffer+len(backlog))
	for _, e := range backlog {
		c <- e
	}
	s := &Subscription{C: c, c: c, filter: f, log: l}
	l.subs[s] = struct{}{}
	return s
}

func (l *eventLog) orderedLocked() []api.Event {
	if !l.full {
		return l.ring[:l.next]
	}
	out := make([]api.Event, 0, len(l.ring))
	out = append(out, l.ring[l.next:]...)
	return append(out, l.ring[:l.next]...)
}

func (l *eventLog) remove(s *Subscription) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dropLocked(s)
}

func (l *eventLog) dropLocked(s *Subscription) {
	if _, ok := l.subs[s]; !ok {
		return
	}
	delete(l.subs, s)
	s.once.Do(func() { close(s.c) })
}

// Subscribe streams session events matching f; with since > 0 it first
// replays retained events with a greater raft index.
func (s *Store) Subscribe(f EventFilter, since uint64) *Subscription {
	return s.events.subscribe(f, since, since > 0)
}

// SubscribeAfter is Subscribe that replays every retained event after
// index after, 0 included (where Subscribe streams live events only).
func (s *Store) SubscribeAfter(f EventFilter, after uint64) *Subscription {
	return s.events.subscribe(f, after, true)
}
