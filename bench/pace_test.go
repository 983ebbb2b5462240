package bench

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	wire "github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/bench/harness"
	"github.com/paddockhq/paddock/supervisor/state"
)

// messageFrame is an event frame as a server sends it: the message's whole
// text so far.
func messageFrame(t *testing.T, typ, session, msgID string, role wire.Role, text string, index uint64, written time.Time) []byte {
	t.Helper()
	b, err := json.Marshal(wire.Event{Type: typ, SessionID: session, TaskID: "task", Index: index,
		Data: map[string]any{"message": wire.Message{ID: msgID, Role: role, Text: text, UpdatedAt: written}}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The lean subscriber notes each chunk once, when the first frame that
// holds its line arrives, counting only what a message added since its
// last frame; it ignores other sessions, other roles and other events, and
// starts over with a new message.
func TestChunkWatchNotesEachChunkWhenItFirstShows(t *testing.T) {
	w := newChunkWatch([]string{"s1"}, 4)
	t0 := time.Unix(1000, 0)
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Second) }
	frames := [][]byte{
		messageFrame(t, wire.EventMessageAdded, "s1", "u1", wire.RoleUser, "stream 4 every 50\n\n", 1, at(0)),
		messageFrame(t, wire.EventMessageAdded, "s1", "m1", wire.RoleAgent, "chunk 1 of 4\n", 2, at(0)),
		messageFrame(t, wire.EventMessageAdded, "other", "m9", wire.RoleAgent, "chunk 1 of 4\nchunk 2 of 4\n", 3, at(0)),
		// Escapes the scan must step over: a quote, a backslash before an
		// n (not a newline), a character JSON writes as \u003c.
		messageFrame(t, wire.EventMessageUpdated, "s1", "m1", wire.RoleAgent, "chunk 1 of 4\n\"<\\n", 4, at(1)),
		messageFrame(t, wire.EventMessageUpdated, "s1", "m1", wire.RoleAgent, "chunk 1 of 4\n\"<\\n\nchunk 3 of 4\n", 5, at(2)),
		[]byte(`{"type":"session.state_changed","session_id":"s1","index":6,"data":{"state":"RUNNING"}}`),
		messageFrame(t, wire.EventMessageUpdated, "s1", "m1", wire.RoleAgent, "chunk 1 of 4\n\"<\\n\nchunk 3 of 4\n", 7, at(3)),
	}
	for i, f := range frames {
		idx, err := w.note(f, at(i))
		if err != nil {
			t.Fatal(err)
		}
		if want := uint64(i + 1); idx != want {
			t.Fatalf("frame %d: index %d, want %d", i, idx, want)
		}
	}
	seen := w.firstSeen("s1")
	want := []time.Time{at(1), at(4), at(4), {}}
	for k := range want {
		if !seen[k].Equal(want[k]) {
			t.Fatalf("chunk %d first seen at %v, want %v (all: %v)", k+1, seen[k], want[k], seen)
		}
	}
	if len(w.fromWrite) != 3 || w.fromWrite[0] != 1000 || w.fromWrite[1] != 2000 {
		t.Fatalf("write-to-subscriber times %v ms, want [1000 2000 2000]", w.fromWrite)
	}
	if w.frames != len(frames) {
		t.Fatalf("%d frames counted, want %d", w.frames, len(frames))
	}
	// A new agent message (a turn after a resume) is counted from its start.
	if _, err := w.note(messageFrame(t, wire.EventMessageAdded, "s1", "m2", wire.RoleAgent, "x\ny\nz\nw\n", 8, at(9)), at(9)); err != nil {
		t.Fatal(err)
	}
	if seen := w.firstSeen("s1"); !seen[3].Equal(at(9)) || !seen[0].Equal(at(1)) {
		t.Fatalf("after a new message: %v, want chunk 4 at %v and chunk 1 kept", seen, at(9))
	}
	if _, err := w.note([]byte("{"), at(10)); err == nil {
		t.Fatal("a malformed frame was taken")
	}
}

// deltaFrame is an update as a subscription that asked for deltas gets it
// once it holds the message: what the update added.
func deltaFrame(t *testing.T, session, msgID string, from int, text string, index uint64, written time.Time) []byte {
	t.Helper()
	b, err := json.Marshal(wire.Event{Type: wire.EventMessageUpdated, SessionID: session, TaskID: "task", Index: index, Data: map[string]any{},
		Delta: &wire.MessageDelta{ID: msgID, From: from, Text: text, UpdatedAt: written}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Deltas count the lines they add to the message the watch holds; a delta
// of another message is not counted.
func TestChunkWatchCountsDeltas(t *testing.T) {
	w := newChunkWatch([]string{"s1"}, 4)
	t0 := time.Unix(1000, 0)
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Second) }
	frames := [][]byte{
		messageFrame(t, wire.EventMessageAdded, "s1", "m1", wire.RoleAgent, "chunk 1 of 4\n", 1, at(0)),
		deltaFrame(t, "s1", "m1", 13, "chunk 2 of 4\nchunk 3", 2, at(1)),
		deltaFrame(t, "s1", "m9", 0, "x\ny\n", 3, at(2)),
		deltaFrame(t, "s1", "m1", 33, " of 4\n", 4, at(3)),
	}
	for i, f := range frames {
		if _, err := w.note(f, at(i)); err != nil {
			t.Fatal(err)
		}
	}
	seen := w.firstSeen("s1")
	want := []time.Time{at(0), at(1), at(3), {}}
	for k := range want {
		if !seen[k].Equal(want[k]) {
			t.Fatalf("chunk %d first seen at %v, want %v (all: %v)", k+1, seen[k], want[k], seen)
		}
	}
}

// readRaftBytes sums the command payloads of a log range from a bolt
// store, telling message writes apart, and scales what a snapshot
// compacted away.
func TestReadRaftBytesFromABoltLog(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "data", "raft", "raft.db")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	store, err := raftboltdb.NewBoltStore(path)
	if err != nil {
		t.Fatal(err)
	}
	var logs []*raft.Log
	for i := uint64(1); i <= 10; i++ {
		data := make([]byte, 100)
		data[0] = byte(state.CmdClaimLease)
		if i%2 == 0 {
			data = make([]byte, 300)
			data[0] = byte(state.CmdAppendMessage)
		}
		logs = append(logs, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: data})
	}
	logs[4].Type, logs[4].Data = raft.LogNoop, nil // index 5: not a command
	if err := store.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	if err := store.DeleteRange(1, 3); err != nil { // a snapshot compacted 1…3
		t.Fatal(err)
	}
	store.Close()

	got, err := readRaftBytes(&harness.Node{Dir: dir}, 2, 9)
	if err != nil {
		t.Fatal(err)
	}
	// Read: 4…9 (6 entries): 4, 6, 8 messages (900 bytes), 7, 9 leases
	// (200), 5 a no-op.
	if got.Entries != 8 || got.Read != 6 || got.Bytes != 1100 || got.Messages != 900 {
		t.Fatalf("read %+v, want 8 entries, 6 read, 1100 bytes, 900 of them messages", got)
	}
	if e := got.Estimate(); e != 1100*8.0/6 {
		t.Fatalf("estimate %.1f, want the bytes read scaled by 8/6", e)
	}
	if _, err := readRaftBytes(&harness.Node{Dir: t.TempDir()}, 1, 2); err == nil {
		t.Fatal("a missing raft.db was read")
	}
}
