package state

import (
	"bytes"
	"encoding/json"
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
// (Lagged then reports true). A subscription made with SubscribeEncoded
// delivers on Encoded instead (C is nil).
type Subscription struct {
	C       <-chan api.Event
	c       chan api.Event
	Encoded <-chan *EncodedEvent
	enc     chan *EncodedEvent
	filter  EventFilter
	log     *eventLog
	lagged  bool
	once    sync.Once
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

// EncodedEvent is a published event for subscribers that send it as JSON
// (SubscribeEncoded). A message event carries the message's whole text, so
// an event that several of them take is encoded once and the bytes shared;
// one that a single subscriber takes is encoded into that subscriber's
// reused buffer (EventEncoder), which allocates nothing per event.
type EncodedEvent struct {
	api.Event
	shared bool // set before the event is sent, read-only after
	once   sync.Once
	json   []byte
	err    error
	// The delta form (DeltaJSON), encoded once when a subscriber asks.
	deltaOnce sync.Once
	deltaJSON []byte
	deltaErr  error
}

// DeltaJSON returns e as a subscriber that holds its message takes it: the
// event with its Delta in place of Data. ok is false when e carries no
// delta (only message updates that added text do). The bytes are shared
// and must not be changed.
func (e *EncodedEvent) DeltaJSON() (frame []byte, ok bool, err error) {
	if e.Delta == nil {
		return nil, false, nil
	}
	e.deltaOnce.Do(func() {
		ev := e.Event
		ev.Data = map[string]any{}
		var b bytes.Buffer
		e.deltaErr = json.NewEncoder(&b).Encode(ev)
		e.deltaJSON = b.Bytes()
	})
	return e.deltaJSON, true, e.deltaErr
}

// EventEncoder encodes one subscriber's events as json.Encoder writes them
// (a newline after each). Not safe for concurrent use.
type EventEncoder struct {
	buf bytes.Buffer
	enc *json.Encoder
}

// JSON returns e encoded. The bytes are valid until the next call and must
// not be changed: they may be shared with other subscribers.
func (w *EventEncoder) JSON(e *EncodedEvent) ([]byte, error) {
	whole := e.Event
	whole.Delta = nil // the delta form is DeltaJSON's
	if e.shared {
		e.once.Do(func() {
			var b bytes.Buffer
			e.err = json.NewEncoder(&b).Encode(whole)
			e.json = b.Bytes()
		})
		return e.json, e.err
	}
	if w.enc == nil {
		w.enc = json.NewEncoder(&w.buf)
	}
	w.buf.Reset()
	if err := w.enc.Encode(whole); err != nil {
		return nil, err
	}
	return w.buf.Bytes(), nil
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
		var enc *EncodedEvent // one per event, shared by its encoded subscribers
		for s := range l.subs {
			if s.enc != nil && s.filter.match(e) {
				if enc != nil {
					enc.shared = true
					break
				}
				enc = &EncodedEvent{Event: e}
			}
		}
		for s := range l.subs {
			if !s.filter.match(e) {
				continue
			}
			if s.enc != nil {
				select {
				case s.enc <- enc:
				default:
					s.lagged = true
					l.dropLocked(s)
				}
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
func (l *eventLog) subscribe(f EventFilter, since uint64, replay, encoded bool) *Subscription {
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
	s := &Subscription{filter: f, log: l}
	if encoded {
		s.enc = make(chan *EncodedEvent, subscriberBuffer+len(backlog))
		s.Encoded = s.enc
		for _, e := range backlog {
			s.enc <- &EncodedEvent{Event: e}
		}
	} else {
		s.c = make(chan api.Event, subscriberBuffer+len(backlog))
		s.C = s.c
		for _, e := range backlog {
			s.c <- e
		}
	}
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
	s.once.Do(func() {
		if s.enc != nil {
			close(s.enc)
		} else {
			close(s.c)
		}
	})
}

// Subscribe streams session events matching f; with since > 0 it first
// replays retained events with a greater raft index.
func (s *Store) Subscribe(f EventFilter, since uint64) *Subscription {
	return s.events.subscribe(f, since, since > 0, false)
}

// SubscribeEncoded is Subscribe for a subscriber that sends events as
// JSON: its events come on Encoded, each encoded once for every such
// subscriber.
func (s *Store) SubscribeEncoded(f EventFilter, since uint64) *Subscription {
	return s.events.subscribe(f, since, since > 0, true)
}

// SubscribeAfter is Subscribe that replays every retained event after
// index after, 0 included (where Subscribe streams live events only).
func (s *Store) SubscribeAfter(f EventFilter, after uint64) *Subscription {
	return s.events.subscribe(f, after, true, false)
}
