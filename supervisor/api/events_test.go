package api

import (
	"encoding/json"
	"testing"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/supervisor/state"
)

// A subscription that takes deltas gets a message whole until it holds it
// (its first event there may be an update: a subscription that began
// mid-stream), then what each update added; a complete message leaves the
// set, so a later update of it comes whole again. One that does not take
// deltas gets every event whole, with no delta in it.
func TestAHeldMessageIsSentAsDeltas(t *testing.T) {
	update := func(from int, text, whole string, complete bool) *state.EncodedEvent {
		m := api.Message{ID: "m-1", Role: api.RoleAgent, Text: whole, Complete: complete}
		return &state.EncodedEvent{Event: api.Event{Type: api.EventMessageUpdated, SessionID: "s", Index: 1,
			Data:  map[string]any{"message": m},
			Delta: &api.MessageDelta{ID: "m-1", From: from, Text: text, Complete: complete}}}
	}
	events := []*state.EncodedEvent{
		update(0, "a", "a", false),     // first seen mid-stream: whole
		update(1, "b", "ab", false),    // held: a delta
		update(2, "c", "abc", true),    // held, and complete: a delta, then no longer held
		update(3, "d", "abcd", false),  // whole again
		update(4, "e", "abcde", false), // a delta
	}
	wantDelta := []bool{false, true, true, false, true}
	var frames state.EventEncoder
	held, plain := heldMessages{}, heldMessages{}
	for i, e := range events {
		frame, err := held.frame(&frames, e, true)
		if err != nil {
			t.Fatal(err)
		}
		var got api.Event
		if err := json.Unmarshal(frame, &got); err != nil {
			t.Fatal(err)
		}
		if isDelta := got.Delta != nil; isDelta != wantDelta[i] || isDelta == (got.Data["message"] != nil) {
			t.Fatalf("event %d: %s, want a delta: %v", i, frame, wantDelta[i])
		}
		frame, err = plain.frame(&frames, e, false)
		if err != nil {
			t.Fatal(err)
		}
		got = api.Event{}
		if err := json.Unmarshal(frame, &got); err != nil || got.Delta != nil || got.Data["message"] == nil {
			t.Fatalf("event %d to a subscription without deltas: %s (%v)", i, frame, err)
		}
	}
}
