package state

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/paddockhq/paddock/api"
)

// An entry encoded the way earlier builds did (the envelope marshalled
// around the body as raw JSON) decodes to the same command, and this
// build's encoding is byte for byte the same.
func TestCommandEncodingMatchesEarlierBuilds(t *testing.T) {
	body := &CreateTaskBody{Task: api.Task{ID: "t1", Title: `quote " and <tag> é`}}
	raw, _ := json.Marshal(body)
	old, err := json.Marshal(struct {
		Key  string          `json:"key"`
		Now  time.Time       `json:"now"`
		Body json.RawMessage `json:"body"`
	}{Key: "k\"1", Now: t0, Body: raw})
	if err != nil {
		t.Fatal(err)
	}
	old = append([]byte{byte(CmdCreateTask), bodyVersion}, old...)
	now, err := Command{Type: CmdCreateTask, Key: "k\"1", Now: t0.In(time.FixedZone("x", 3600)), Body: body}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if string(now) != string(old) {
		t.Fatalf("encoding changed:\n%s\nvs earlier\n%s", now[2:], old[2:])
	}
	cmd, ok, err := DecodeCommand(old)
	if err != nil || !ok {
		t.Fatalf("decode: ok=%v err=%v", ok, err)
	}
	if cmd.Key != "k\"1" || !cmd.Now.Equal(t0) || !reflect.DeepEqual(cmd.Body, body) {
		t.Fatalf("decoded %+v", cmd)
	}
}

// A command whose body is null or of the wrong shape is refused, so it can
// never reach the FSM.
func TestCommandWithoutABodyIsRefused(t *testing.T) {
	for _, env := range []string{
		`{"key":"k","now":"2026-11-29T12:00:00Z","body":null}`,
		`{"key":"k","now":"2026-11-29T12:00:00Z","body":"text"}`,
		`{"key":"k","now":"2026-11-29T12:00:00Z","body":{"task":7}}`,
		`{"key":"k","now":"2026-11-29T12:00:00Z","body":{}`,
	} {
		if _, _, err := DecodeCommand(append([]byte{byte(CmdCreateTask), bodyVersion}, env...)); err == nil {
			t.Errorf("decoded %s", env)
		}
	}
}

// Applying entries as one batch gives each entry the result, and the store
// the state, that applying them one by one gives: a duplicate key inside
// the batch returns the first outcome, a failing entry fails alone, a
// configuration entry gets no result and leaves the applied index alone.
func TestApplyBatchEqualsOneByOne(t *testing.T) {
	type entry struct {
		typ  CommandType
		key  string
		body any
	}
	entries := []entry{
		{CmdCreateTask, "a", &CreateTaskBody{Task: api.Task{ID: "t1", Title: "one"}}},
		{CmdCreateTask, "a", &CreateTaskBody{Task: api.Task{ID: "t2", Title: "dup key"}}},
		{CmdCreateSession, "b", &CreateSessionBody{Session: api.Session{ID: "s1", TaskID: "t1", Agent: "demo", Runtime: "standalone"}}},
		{CmdSetSessionState, "c", &SetSessionStateBody{SessionID: "s1", State: api.SessionRunning}}, // CREATED → RUNNING: conflict
		{0, "", nil}, // a configuration entry
		{CmdSetSessionState, "d", &SetSessionStateBody{SessionID: "s1", State: api.SessionStarting}},
	}
	var logs []*raft.Log
	for i, e := range entries {
		l := &raft.Log{Index: uint64(i + 1), Type: raft.LogConfiguration}
		if e.body != nil {
			buf, err := Command{Type: e.typ, Key: e.key, Now: t0, Body: e.body}.Encode()
			if err != nil {
				t.Fatal(err)
			}
			l.Type, l.Data = raft.LogCommand, buf
		}
		logs = append(logs, l)
	}
	one := NewStore()
	var want []any
	for _, l := range logs {
		if l.Type != raft.LogCommand {
			want = append(want, nil)
			continue
		}
		want = append(want, NewFSM(one).Apply(l))
	}
	batched := NewStore()
	sub := batched.Subscribe(EventFilter{}, 0)
	defer sub.Close()
	got := NewFSM(batched).ApplyBatch(logs)
	if len(got) != len(want) {
		t.Fatalf("%d results for %d entries", len(got), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("entry %d: batch %#v, one by one %#v", i+1, got[i], want[i])
		}
	}
	if r := got[1].(*Result); !r.Duplicate || r.Index != 1 {
		t.Errorf("duplicate key in the batch: %+v", r)
	}
	if r := got[3].(*Result); !errors.Is(r.Err, ErrConflict) {
		t.Errorf("CREATED → RUNNING in the batch: %v", r.Err)
	}
	if batched.LastIndex() != 6 || !reflect.DeepEqual(batched.Sessions(SessionFilter{}), one.Sessions(SessionFilter{})) ||
		!reflect.DeepEqual(batched.Tasks(), one.Tasks()) {
		t.Fatalf("state differs: index %d; sessions %+v vs %+v", batched.LastIndex(), batched.Sessions(SessionFilter{}), one.Sessions(SessionFilter{}))
	}
	// The batch's events came out in log order.
	var last uint64
	for len(sub.C) > 0 {
		e := <-sub.C
		if e.Index < last {
			t.Fatalf("event of index %d after %d", e.Index, last)
		}
		last = e.Index
	}
	if last == 0 {
		t.Fatal("the batch published no events")
	}
}
