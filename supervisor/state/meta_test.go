package state

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

func ptrTo[T any](v T) *T { return &v }

// A rename or a pin changes the session's name or pin and updated_at,
// publishes session.meta_changed, and is not activity: last_activity_at
// stays as it was.
func TestSetSessionMeta(t *testing.T) {
	h := newHarness(t)
	h.taskAndSession()
	before, _ := h.store.Session("s1")
	sub := h.store.Subscribe(EventFilter{SessionID: "s1"}, 0)
	defer sub.Close()

	h.mustApply(CmdSetSessionMeta, &SetSessionMetaBody{SessionID: "s1", Name: ptrTo("the flaky test")})
	h.mustApply(CmdSetSessionMeta, &SetSessionMetaBody{SessionID: "s1", Pinned: ptrTo(true)})
	s, _ := h.store.Session("s1")
	if s.Name != "the flaky test" || !s.Pinned {
		t.Fatalf("session after rename and pin: name %q pinned %v", s.Name, s.Pinned)
	}
	if !s.LastActivityAt.Equal(before.LastActivityAt) {
		t.Errorf("last_activity_at moved from %v to %v", before.LastActivityAt, s.LastActivityAt)
	}
	if !s.UpdatedAt.After(before.UpdatedAt) {
		t.Errorf("updated_at %v, not after %v", s.UpdatedAt, before.UpdatedAt)
	}
	for _, want := range []map[string]any{{"name": "the flaky test", "pinned": false}, {"name": "the flaky test", "pinned": true}} {
		e := <-sub.C
		if e.Type != EventMetaChanged || e.Data["name"] != want["name"] || e.Data["pinned"] != want["pinned"] {
			t.Fatalf("event %+v, want %s %v", e, EventMetaChanged, want)
		}
	}

	// Setting what is already set changes nothing and publishes nothing.
	h.mustApply(CmdSetSessionMeta, &SetSessionMetaBody{SessionID: "s1", Name: ptrTo("the flaky test"), Pinned: ptrTo(true)})
	if again, _ := h.store.Session("s1"); !again.UpdatedAt.Equal(s.UpdatedAt) {
		t.Errorf("a no-op moved updated_at to %v", again.UpdatedAt)
	}
	// Both at once; an empty name clears it.
	h.mustApply(CmdSetSessionMeta, &SetSessionMetaBody{SessionID: "s1", Name: ptrTo(""), Pinned: ptrTo(false)})
	if e := <-sub.C; e.Type != EventMetaChanged || e.Data["name"] != "" || e.Data["pinned"] != false {
		t.Fatalf("event %+v after clearing", e)
	}
	select {
	case e := <-sub.C:
		t.Fatalf("unexpected event %+v", e)
	default:
	}
	if s, _ := h.store.Session("s1"); s.Name != "" || s.Pinned || !s.LastActivityAt.Equal(before.LastActivityAt) {
		t.Errorf("after clearing: %+v", s)
	}
}

func TestSetSessionMetaRefusals(t *testing.T) {
	h := newHarness(t)
	h.taskAndSession()
	cases := []struct {
		body *SetSessionMetaBody
		want error
	}{
		{&SetSessionMetaBody{SessionID: "nope", Pinned: ptrTo(true)}, ErrNotFound},
		{&SetSessionMetaBody{SessionID: "s1"}, ErrInvalid},
		{&SetSessionMetaBody{SessionID: "s1", Name: ptrTo(strings.Repeat("é", MaxSessionNameLen+1))}, ErrInvalid},
		{&SetSessionMetaBody{SessionID: "s1", Name: ptrTo("two\nlines")}, ErrInvalid},
		{&SetSessionMetaBody{SessionID: "s1", Name: ptrTo("tab\there")}, ErrInvalid},
		{&SetSessionMetaBody{SessionID: "s1", Name: ptrTo("esc\x1b[31m")}, ErrInvalid},
		{&SetSessionMetaBody{SessionID: "s1", Name: ptrTo("\u0085next line")}, ErrInvalid},
	}
	for _, c := range cases {
		if err := h.apply(CmdSetSessionMeta, "", c.body).Err; !errors.Is(err, c.want) {
			t.Errorf("%+v: %v, want %v", c.body, err, c.want)
		}
	}
	if s, _ := h.store.Session("s1"); s.Name != "" || s.Pinned {
		t.Errorf("a refused command changed the session: %+v", s)
	}
	// Not UTF-8 (the raft log's JSON would make it U+FFFD; refused before).
	if err := CheckSessionName("bad \xff"); !errors.Is(err, ErrInvalid) {
		t.Errorf("CheckSessionName of a name that is not UTF-8: %v", err)
	}
	// 200 characters, however many bytes, are fine.
	h.mustApply(CmdSetSessionMeta, &SetSessionMetaBody{SessionID: "s1", Name: ptrTo(strings.Repeat("é", MaxSessionNameLen))})
}

// Name and pin are in snapshots.
func TestSessionMetaSurvivesSnapshot(t *testing.T) {
	h := newHarness(t)
	h.taskAndSession()
	h.mustApply(CmdSetSessionMeta, &SetSessionMetaBody{SessionID: "s1", Name: ptrTo("naïve ☃"), Pinned: ptrTo(true)})
	want, _ := h.store.Session("s1")
	other := newHarness(t)
	if err := other.fsm.Restore(io.NopCloser(bytes.NewReader(persisted(t, h.fsm)))); err != nil {
		t.Fatal(err)
	}
	got, _ := other.store.Session("s1")
	if got.Name != "naïve ☃" || !got.Pinned || !got.LastActivityAt.Equal(want.LastActivityAt) || !got.UpdatedAt.Equal(want.UpdatedAt) {
		t.Errorf("after restore: %+v, want %+v", got, want)
	}
	if !bytes.Equal(persisted(t, h.fsm), encodedWithEncodingJSON(t, h.store)) {
		t.Error("the snapshot is not what encoding/json writes")
	}
}

// The command survives its encoding, each field's absence included.
func TestSetSessionMetaEncoding(t *testing.T) {
	for _, b := range []*SetSessionMetaBody{
		{SessionID: "s1", Name: ptrTo("x")},
		{SessionID: "s1", Pinned: ptrTo(false)},
		{SessionID: "s1", Name: ptrTo(""), Pinned: ptrTo(true)},
	} {
		buf, err := Command{Type: CmdSetSessionMeta, Key: "k", Now: t0, Body: b}.Encode()
		if err != nil {
			t.Fatal(err)
		}
		cmd, ok, err := DecodeCommand(buf)
		if err != nil || !ok {
			t.Fatalf("decode: %v %v", ok, err)
		}
		got := cmd.Body.(*SetSessionMetaBody)
		if got.SessionID != b.SessionID || (got.Name == nil) != (b.Name == nil) || (got.Pinned == nil) != (b.Pinned == nil) ||
			got.Name != nil && *got.Name != *b.Name || got.Pinned != nil && *got.Pinned != *b.Pinned {
			t.Errorf("decoded %+v, want %+v", got, b)
		}
	}
}
