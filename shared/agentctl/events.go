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
	mu     sync.Mutex
	events []Event
	next   uint64
	notify chan struct{} // closed and replaced on every append
}

func newEventLog() *eventLog {
	return &eventLog{next: 1, notify: make(chan struct{})}
}

func (l *eventLog) publish(typ string, data any) {
	raw, err := json.Marshal(data)
	if err != nil {
		raw = []byte("{}")
	}
	l.mu.Lock()
	ev := Event{Seq: l.next, Type: typ, Time: time.Now().UTC(), Data: raw}
	l.next++
	l.events = append(l.events, ev)
	if len(l.events) > eventLogSize {
		l.events = append([]Event(nil), l.events[len(l.events)-eventLogSize:]...)
	}
	close(l.notify)
	l.notify = make(chan struct{})
	l.mu.Unlock()
}

// since returns the events with Seq >= since, waiting up to wait for one.
func (l *eventLog) since(ctx context.Context, since uint64, wait time.Duration) ([]Event, uint64) {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		l.mu.Lock()
		var out []Event
		for _, ev := range l.events {
			if ev.Seq >= since {
				out = append(out, ev)
			}
		}
		next, ch := l.next, l.notify
		l.mu.Unlock()
		if len(out) > 0 || wait <= 0 {
			if out == nil {
				out = []Event{}
			}
			return out, next
		}
		select {
		case <-ch:
		case <-deadline.C:
			return []Event{}, next
		case <-ctx.Done():
			return []Event{}, next
		}
	}
}
