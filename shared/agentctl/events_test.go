package agentctl

import (
	"context"
	"encoding/json"
	"testing"
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
	all, next := l.since(context.Background(), 1, 0, false)
	if len(all) != 8 || next != 9 {
		t.Fatalf("plain answer: %d events, next %d; want 8, 9", len(all), next)
	}
	got, next := l.since(context.Background(), 1, 0, true)
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
	got, _ = l.since(context.Background(), 7, 0, true)
	if len(got) != 1 || got[0].Seq != 8 {
		t.Fatalf("compact answer from seq 7: %+v, want seq 8 alone", got)
	}
}
