package monitor

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/supervisor/state"
)

// lockedBuffer is a log output the test reads while LogLifecycle writes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestLifecycleLogsFromTheLeadersIndex: a session created after a leader's
// barrier but before its lifecycle log started (a busy machine) is still
// logged: the log starts at the index it is given, here 0 on a fresh
// cluster, not at whatever the store reached when it ran.
func TestLifecycleLogsFromTheLeadersIndex(t *testing.T) {
	store := state.NewStore()
	fsm := state.NewFSM(store)
	apply := func(i uint64, typ state.CommandType, body any) {
		t.Helper()
		buf, err := state.Command{Type: typ, Now: time.Now(), Body: body}.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if r := fsm.Apply(&raft.Log{Index: i, Type: raft.LogCommand, Data: buf}).(*state.Result); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	since := store.LastIndex() // the barrier
	apply(3, state.CmdCreateTask, &state.CreateTaskBody{Task: api.Task{ID: "t1", Title: "x"}})
	apply(4, state.CmdCreateSession, &state.CreateSessionBody{Session: api.Session{ID: "s1", TaskID: "t1", Agent: "demo", Runtime: "standalone"}})

	out := &lockedBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		LogLifecycle(ctx, store, hclog.New(&hclog.LoggerOptions{Output: out, Level: hclog.Info}), since)
	}()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "session created") {
		if time.Now().After(deadline) {
			t.Fatalf("the session created before the log started was not logged; log: %q", out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !strings.Contains(out.String(), "session=s1") {
		t.Fatalf("created line does not name the session: %q", out.String())
	}
}
