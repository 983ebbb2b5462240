package agentctl

import (
	"context"
	"encoding/json"
	"testing"
	"time"
)

// A compact answer keeps only the latest update of each message within a
// run of message events, and every addition and other event, in order; a
// plain answer keeps every event.
func TestCompactAnswerKeepsEachMessagesLatestUpdate(t *testing.T) {
	l := newEventLog()
	msg := func(id, text string) MessageData {
		return MessageData{Message: Message{ID: id, Role: "agent", Text: text}}
	}
	l.publish(EventMessageAdded, msg("m1", ""))       // 1
	l.publish(EventMessageUpdated, msg("m1", "a"))    // 2 superseded by 4
	l.publish(EventMessageAdded, msg("m2", "x"))      // 3
	l.publish(EventMessageUpdated, msg("m1", "ab"))   // 4
	l.publish(EventMessageUpdated, msg("m2", "xy"))   // 5
	l.publish(EventTurnFinished, TurnFinishedData{})  // 6 ends the run
	l.publish(EventMessageUpdated, msg("m1", "abc"))  // 7 superseded by 8
	l.publish(EventMessageUpdated, msg("m1", "abcd")) // 8
	all, next := l.since(context.Background(), EventsQuery{Since: 1})
	if len(all) != 8 || next != 9 {
		t.Fatalf("plain answer: %d events, next %d; want 8, 9", len(all), next)
	}
	got, next := l.since(context.Background(), EventsQuery{Since: 1, Compact: true})
	if next != 9 {
		t.Fatalf("compact answer: next %d, want 9", next)
	}
	want := []struct {
		seq  uint64
		text string
	}{{1, ""}, {3, "x"}, {4, "ab"}, {5, "xy"}, {6, ""}, {8, "abcd"}}
	if len(got) != len(want) {
		t.Fatalf("compact answer has %d events, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		var d MessageData
		_ = json.Unmarshal(got[i].Data, &d)
		if got[i].Seq != w.seq || d.Message.Text != w.text {
			t.Errorf("event %d: seq %d text %q, want seq %d text %q", i, got[i].Seq, d.Message.Text, w.seq, w.text)
		}
	}
	// From the middle of the run: what the answer starts with is compacted too.
	got, _ = l.since(context.Background(), EventsQuery{Since: 7, Compact: true})
	if len(got) != 1 || got[0].Seq != 8 {
		t.Fatalf("compact answer from seq 7: %+v, want seq 8 alone", got)
	}
}

// A gathering poll holds an answer of chunks for more, and answers at once
// with them all when a turn's end (or any event that is not a chunk) comes.
func TestAGatheringPollAnswersATurnsEndAtOnce(t *testing.T) {
	l := newEventLog()
	chunk := MessageData{Message: Message{ID: "m1", Role: "agent", Text: "a"}}
	l.publish(EventMessageAdded, chunk)
	const gather = time.Minute
	type answer struct {
		evs  []Event
		next uint64
	}
	got := make(chan answer, 1)
	start := time.Now()
	go func() {
		evs, next := l.since(context.Background(), EventsQuery{Since: 1, Wait: gather, Gather: gather})
		got <- answer{evs, next}
	}()
	chunk.Message.Text = "ab"
	l.publish(EventMessageUpdated, chunk)
	select {
	case a := <-got:
		t.Fatalf("answered with chunks only, %s after the first of a %s window: %d events", time.Since(start), gather, len(a.evs))
	default:
	}
	l.publish(EventTurnFinished, TurnFinishedData{Turn: 1, Outcome: "end_turn"})
	select {
	case a := <-got:
		if len(a.evs) != 3 || a.next != 4 || a.evs[2].Type != EventTurnFinished {
			t.Fatalf("answer: %d events, next %d (%+v); want both chunks and the turn's end, next 4", len(a.evs), a.next, a.evs)
		}
	case <-time.After(gather / 2):
		t.Fatalf("a turn's end did not answer the gathering poll within %s", gather/2)
	}
	// A complete message is not a chunk: answered at once too.
	l.publish(EventMessageAdded, MessageData{Message: Message{ID: "m2", Role: "user", Text: "hi", Complete: true}})
	if evs, _ := l.since(context.Background(), EventsQuery{Since: 4, Wait: gather, Gather: gather}); len(evs) != 1 || time.Since(start) > gather/2 {
		t.Fatalf("a complete message: %d events after %s", len(evs), time.Since(start))
	}
}

// Chunks alone are answered once the window has passed since the first of
// them, with every chunk published meanwhile; chunks older than the window
// are answered at once.
func TestAGatheringPollAnswersChunksAfterTheWindow(t *testing.T) {
	l := newEventLog()
	chunk := MessageData{Message: Message{ID: "m1", Role: "agent"}}
	l.publish(EventMessageAdded, chunk)
	chunk.Message.Text = "a"
	l.publish(EventMessageUpdated, chunk)
	const gather = 150 * time.Millisecond
	evs, next := l.since(context.Background(), EventsQuery{Since: 1, Wait: time.Minute, Gather: gather, Compact: true})
	if held := time.Since(l.events[0].at); held < gather {
		t.Fatalf("answered %s after the first chunk, before the %s window passed", held, gather)
	}
	if len(evs) != 2 || next != 3 {
		t.Fatalf("answer: %d events, next %d; want 2, 3", len(evs), next)
	}
	chunk.Message.Text = "ab"
	l.publish(EventMessageUpdated, chunk)
	l.events[2].at = time.Now().Add(-time.Hour)
	start := time.Now()
	if evs, _ := l.since(context.Background(), EventsQuery{Since: 3, Wait: time.Minute, Gather: time.Minute}); len(evs) != 1 || time.Since(start) > 30*time.Second {
		t.Fatalf("a chunk older than the window: %d events after %s", len(evs), time.Since(start))
	}
}

// Chunks a gathering wait holds are answered as soon as the agent's output
// read so far is handled (settleChunks), not at the window's end; a wait
// that begins after they were settled answers at once; chunks that came
// after the last settle are held again.
func TestAGatheringWaitAnswersSettledChunksAtOnce(t *testing.T) {
	l := newEventLog()
	chunk := MessageData{Message: Message{ID: "m1", Role: "agent", Text: "a"}}
	l.publish(EventMessageAdded, chunk)
	const gather = time.Minute
	answered := make(chan int)
	go func() {
		evs, _ := l.since(context.Background(), EventsQuery{Since: 1, Wait: time.Minute, Gather: gather, Compact: true})
		answered <- len(evs)
	}()
	chunk.Message.Text = "ab"
	l.publish(EventMessageUpdated, chunk)
	select {
	case n := <-answered:
		t.Fatalf("answered %d events before the chunks were settled", n)
	case <-time.After(50 * time.Millisecond):
	}
	l.settleChunks()
	select {
	case n := <-answered:
		if n != 2 {
			t.Fatalf("answered %d events, want the addition and the latest update", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("settled chunks were held for the window")
	}
	start := time.Now()
	if evs, _ := l.since(context.Background(), EventsQuery{Since: 2, Wait: time.Minute, Gather: gather}); len(evs) != 1 || time.Since(start) > 10*time.Second {
		t.Fatalf("a wait begun after the settle: %d events after %s", len(evs), time.Since(start))
	}
	chunk.Message.Text = "abc"
	l.publish(EventMessageUpdated, chunk)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if evs, _ := l.since(ctx, EventsQuery{Since: 3, Wait: time.Minute, Gather: gather}); len(evs) != 1 || time.Since(start) < 100*time.Millisecond {
		t.Fatalf("a chunk after the settle: %d events after %s, want it held until the wait ended", len(evs), time.Since(start))
	}
}

// The log keeps the latest eventLogSize events, in order with no gaps, and
// a poll from any point of them gets the rest.
func TestTheLogKeepsTheLatestEvents(t *testing.T) {
	l := newEventLog()
	const total = 3*eventLogSize + 5
	for i := range total {
		l.publish(EventMessageUpdated, MessageData{Message: Message{ID: "m1", Text: string(rune('a' + i%26))}})
	}
	oldest := uint64(total - eventLogSize + 1)
	for _, since := range []uint64{0, 1, oldest - 1, oldest, oldest + 7, total, total + 1, total + 50} {
		got, next := l.since(context.Background(), EventsQuery{Since: since})
		if next != total+1 {
			t.Fatalf("since %d: next %d, want %d", since, next, total+1)
		}
		first := max(since, oldest)
		if want := int(max(int64(total+1)-int64(first), 0)); len(got) != want {
			t.Fatalf("since %d: %d events, want %d", since, len(got), want)
		}
		for i, ev := range got {
			if ev.Seq != first+uint64(i) {
				t.Fatalf("since %d: event %d has seq %d, want %d", since, i, ev.Seq, first+uint64(i))
			}
		}
	}
}
