package agentctl

import (
	"context"
	"encoding/json"
	"sync"
	"time"
)

// eventLogSize bounds the events kept in memory for long polls.
const eventLogSize = 2048

// eventLog is a bounded in-memory log of events with long-poll waiting.
type eventLog struct {
	mu sync.Mutex
	// events are the kept events, in Seq order with no gaps (events[i] has
	// Seq events[0].Seq+i).
	events []*loggedEvent
	next   uint64
	notify chan struct{} // closed and replaced on every append
	// settle is closed and replaced on every append of an event that is
	// not a chunk, and by settleChunks after chunks: a gathering poll
	// holding chunks waits on it, not on notify, so a streamed reply's
	// chunks do not wake every such poll once per chunk only for it to
	// find more chunks and wait again.
	settle chan struct{}
	// unsettled: chunks were appended since settle was last closed.
	unsettled bool
}

// loggedEvent is one kept event. Its data is encoded when a poll first
// returns it, not when it is published: a streamed reply publishes an
// update carrying the message's whole text for every chunk, and a poll
// that carries only the latest of them encodes that one alone.
type loggedEvent struct {
	Event
	data      any
	messageID string // of a message event's message
	// chunk: a message event of a message still being written, which a
	// gathering poll may hold for more.
	chunk bool
	// at is when it was published, on the monotonic clock (Time is UTC,
	// which has none).
	at     time.Time
	encode sync.Once
}

func newEventLog() *eventLog {
	return &eventLog{next: 1, notify: make(chan struct{}), settle: make(chan struct{})}
}

// publish appends an event. data is kept as it is and encoded later, so it
// must not change after the call (the callers pass values).
func (l *eventLog) publish(typ string, data any) {
	le := &loggedEvent{data: data}
	if d, ok := data.(MessageData); ok {
		le.messageID = d.Message.ID
		le.chunk = !d.Message.Complete
	}
	l.mu.Lock()
	le.at = time.Now()
	le.Event = Event{Seq: l.next, Type: typ, Time: le.at.UTC()}
	l.next++
	l.events = append(l.events, le)
	if len(l.events) > eventLogSize {
		// Drop the oldest; append moves the rest to a new array now and
		// then (not a copy of all 2,048 per event, as each chunk of a
		// streamed reply publishes one).
		l.events[0] = nil
		l.events = l.events[1:]
	}
	close(l.notify)
	l.notify = make(chan struct{})
	l.unsettled = le.chunk
	if !le.chunk {
		close(l.settle)
		l.settle = make(chan struct{})
	}
	l.mu.Unlock()
}

// settleChunks answers the gathering waits that hold chunks (if chunks
// came since the last answer's cue): the agent's output read so far is
// handled, and the next read is at least the agent output's pace away, so
// holding them longer would only delay them. Gathering waits for the
// window only when nothing calls this (an agent whose chunks come some
// other way).
func (l *eventLog) settleChunks() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.unsettled {
		l.unsettled = false
		close(l.settle)
		l.settle = make(chan struct{})
	}
}

// event is the event with its data encoded.
func (le *loggedEvent) event() Event {
	le.encode.Do(func() {
		raw, err := json.Marshal(le.data)
		if err != nil {
			raw = []byte("{}")
		}
		le.Data = raw
	})
	return le.Event
}

// since returns the events with Seq >= q.Since, waiting up to q.Wait for
// one, and then, while they are all chunks, until q.Gather has passed since
// the first (see EventsQuery) or settleChunks says no more are coming yet.
// Compact leaves out each message update that a later update of the same
// message in the answer supersedes (no other kind of event between them):
// an update carries the message's whole text, so the later one holds all
// the earlier one said.
func (l *eventLog) since(ctx context.Context, q EventsQuery) ([]Event, uint64) {
	kept, next := l.wait(ctx, q)
	out := make([]Event, len(kept))
	for i, ev := range kept {
		out[i] = ev.event()
	}
	return out, next
}

// wait is since with the events as kept, their data not encoded.
func (l *eventLog) wait(ctx context.Context, q EventsQuery) ([]*loggedEvent, uint64) {
	deadline := time.NewTimer(q.Wait)
	defer deadline.Stop()
	gathered := q.Gather <= 0
	for {
		l.mu.Lock()
		var kept []*loggedEvent
		if n := len(l.events); n > 0 {
			first := min(uint64(n), q.Since-min(q.Since, l.events[0].Seq))
			kept = append(kept, l.events[first:]...)
		}
		next, ch, settle, unsettled := l.next, l.notify, l.settle, l.unsettled
		l.mu.Unlock()
		if len(kept) == 0 && q.Wait > 0 {
			select {
			case <-ch:
				continue
			case <-deadline.C:
			case <-ctx.Done():
			}
			return nil, next
		}
		// Chunks are held while more may come: not once settleChunks
		// said the agent's output read so far is handled.
		if hold := time.Until(firstAt(kept).Add(q.Gather)); !gathered && hold > 0 && unsettled && allChunks(kept) {
			t := time.NewTimer(hold)
			select {
			case <-settle: // look again: a turn's end answers at once, settled chunks too
			case <-t.C:
				gathered = true
			case <-ctx.Done():
				gathered = true
			}
			t.Stop()
			continue
		}
		if q.Compact {
			kept = latestUpdates(kept)
		}
		return kept, next
	}
}

// firstAt is when the first of evs was published (zero for none).
func firstAt(evs []*loggedEvent) time.Time {
	if len(evs) == 0 {
		return time.Time{}
	}
	return evs[0].at
}

// allChunks reports whether every one of evs is a chunk of a message still
// being written.
func allChunks(evs []*loggedEvent) bool {
	for _, ev := range evs {
		if !ev.chunk {
			return false
		}
	}
	return true
}

// latestUpdates drops the message updates a later update of the same
// message supersedes within a run of message events. Additions and every
// other event are kept, in order.
func latestUpdates(evs []*loggedEvent) []*loggedEvent {
	drop := make([]bool, len(evs))
	later := map[string]bool{} // messages updated later in the current run
	for i := len(evs) - 1; i >= 0; i-- {
		ev := evs[i]
		switch ev.Type {
		case EventMessageUpdated:
			drop[i] = later[ev.messageID]
			later[ev.messageID] = true
		case EventMessageAdded:
		default:
			clear(later)
		}
	}
	out := evs[:0:0]
	for i, ev := range evs {
		if !drop[i] {
			out = append(out, ev)
		}
	}
	return out
}
