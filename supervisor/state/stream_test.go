package state

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/api"
)

// A streamed message's text grows in place (transcript.go, streamText),
// but every event and every earlier read keeps the text it had: an
// addition never changes bytes an earlier version holds, also when a write
// goes back to an earlier point (a write whose answer was lost, sent
// again) and the stream goes on from there, or when a put replaced the
// text in between.
func TestStreamedTextKeepsEveryEarlierVersion(t *testing.T) {
	h := newHarness(t)
	h.taskAndSession()
	sub := h.store.Subscribe(EventFilter{SessionID: "s1"}, 0)
	defer sub.Close()
	h.mustApply(CmdPutMessage, &PutMessageBody{SessionID: "s1", Source: "boot1", Message: api.Message{ID: "m1", Role: api.RoleAgent, Text: "c1\n"}})
	want := []string{"c1\n"}
	text := "c1\n"
	add := func(from int, s string, complete bool) {
		t.Helper()
		h.mustApply(CmdAppendMessage, &AppendMessageBody{SessionID: "s1", Source: "boot1", MessageID: "m1", From: from, Text: s, Complete: complete})
		text = text[:from] + s
		want = append(want, text)
	}
	var reads []string
	for i := 2; i <= 300; i++ {
		switch i {
		case 100: // sent again from an earlier point, with other text
			add(len(text)-3, fmt.Sprintf("again %d\n", i), false)
		case 200: // replaced whole
			h.mustApply(CmdPutMessage, &PutMessageBody{SessionID: "s1", Source: "boot1", Message: api.Message{ID: "m1", Role: api.RoleAgent, Text: "whole\n"}})
			text = "whole\n"
			want = append(want, text)
		default:
			add(len(text), fmt.Sprintf("c%d\n", i), i == 300)
		}
		reads = append(reads, h.store.Messages("s1")[0].Text)
	}
	var got []string
	for len(sub.C) > 0 {
		e := <-sub.C
		if m, ok := e.Data["message"].(api.Message); ok {
			got = append(got, m.Text)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%d message events, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("event %d holds %q, want %q", i, got[i], want[i])
		}
	}
	for i, r := range reads {
		if r != want[i+1] {
			t.Fatalf("read %d holds %q, want %q", i, r, want[i+1])
		}
	}
	if final := h.store.Messages("s1")[0]; final.Text != text || !final.Complete {
		t.Fatalf("final message %+v", final)
	}
	if len(h.store.d.streams) != 0 {
		t.Errorf("a complete message's buffer is kept: %d", len(h.store.d.streams))
	}
}

// Subscribers that send events as JSON get the bytes json.Encoder writes
// for the event; when several take an event, it is encoded once and they
// share the bytes.
func TestEncodedSubscribersShareOneEncoding(t *testing.T) {
	h := newHarness(t)
	h.taskAndSession()
	plain := h.store.Subscribe(EventFilter{}, 0)
	defer plain.Close()
	a := h.store.SubscribeEncoded(EventFilter{SessionID: "s1"}, 0)
	defer a.Close()
	b := h.store.SubscribeEncoded(EventFilter{SessionID: "s1"}, 0)
	defer b.Close()
	other := h.store.SubscribeEncoded(EventFilter{SessionID: "nope"}, 0)
	defer other.Close()
	h.mustApply(CmdPutMessage, &PutMessageBody{SessionID: "s1", Source: "boot1", Message: api.Message{ID: "m1", Role: api.RoleAgent, Text: "a <b> & \"c\"\n"}})

	e := <-plain.C
	var want bytes.Buffer
	if err := json.NewEncoder(&want).Encode(e); err != nil {
		t.Fatal(err)
	}
	var ea, eb EventEncoder
	fa, err := ea.JSON(<-a.Encoded)
	if err != nil {
		t.Fatal(err)
	}
	fb, err := eb.JSON(<-b.Encoded)
	if err != nil {
		t.Fatal(err)
	}
	if string(fa) != want.String() || string(fb) != want.String() {
		t.Fatalf("frames\n%s%s\nwant\n%s", fa, fb, want.String())
	}
	if &fa[0] != &fb[0] {
		t.Error("two subscribers of one event encoded it twice")
	}
	if len(other.Encoded) != 0 {
		t.Error("an encoded subscriber got an event its filter leaves out")
	}

	// One subscriber alone: encoded into its own buffer, the same bytes.
	b.Close()
	h.mustApply(CmdAppendMessage, &AppendMessageBody{SessionID: "s1", Source: "boot1", MessageID: "m1", From: 12, Text: "more\n"})
	e = <-plain.C
	// The addition's event says what it added (Delta), which its whole
	// encoding leaves out and its delta form carries in place of data.
	if e.Delta == nil || e.Delta.ID != "m1" || e.Delta.From != 12 || e.Delta.Text != "more\n" {
		t.Fatalf("the addition's delta: %+v", e.Delta)
	}
	whole := e
	whole.Delta = nil
	want.Reset()
	if err := json.NewEncoder(&want).Encode(whole); err != nil {
		t.Fatal(err)
	}
	enc := <-a.Encoded
	if frame, ok, err := enc.DeltaJSON(); err != nil || !ok || !strings.Contains(string(frame), `"data":{},"delta":{"id":"m1","from":12,"text":"more\n"`) {
		t.Fatalf("delta frame %s (%v, %v)", frame, ok, err)
	}
	if enc.shared {
		t.Error("an event with one subscriber is marked shared")
	}
	if fa, err = ea.JSON(enc); err != nil || string(fa) != want.String() {
		t.Fatalf("frame %s (%v), want %s", fa, err, want.String())
	}
	if !strings.Contains(string(fa), `more\n`) {
		t.Fatalf("frame %s lacks the addition", fa)
	}
}

// An encoded subscriber that falls behind is dropped like any other, its
// channel closed, and replays retained events on subscribing with since.
func TestEncodedSubscriberLagsAndReplays(t *testing.T) {
	h := newHarness(t)
	h.taskAndSession()
	first := h.store.LastIndex()
	sub := h.store.SubscribeEncoded(EventFilter{SessionID: "s1"}, 0)
	h.mustApply(CmdPutMessage, &PutMessageBody{SessionID: "s1", Source: "boot1", Message: api.Message{ID: "m1", Role: api.RoleAgent, Text: "x"}})
	for i := 0; i <= subscriberBuffer; i++ {
		h.mustApply(CmdAppendMessage, &AppendMessageBody{SessionID: "s1", Source: "boot1", MessageID: "m1", From: 1 + i, Text: "y"})
	}
	n := 0
	for range sub.Encoded {
		n++
	}
	if !sub.Lagged() || n != subscriberBuffer {
		t.Fatalf("lagged %v after %d events, want dropped after %d", sub.Lagged(), n, subscriberBuffer)
	}
	replay := h.store.SubscribeEncoded(EventFilter{SessionID: "s1"}, first)
	defer replay.Close()
	if got := len(replay.Encoded); got != subscriberBuffer+2 {
		t.Fatalf("replayed %d events, want %d", got, subscriberBuffer+2)
	}
	var enc EventEncoder
	frame, err := enc.JSON(<-replay.Encoded)
	if err != nil || !strings.Contains(string(frame), `"type":"session.message.added"`) {
		t.Fatalf("first replayed frame %s (%v)", frame, err)
	}
}
