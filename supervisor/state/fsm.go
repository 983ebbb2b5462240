package state

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/hashicorp/raft"
	"github.com/paddockhq/paddock/api"
)

// FSM applies raft log entries to a Store. It is the only writer of the store.
type FSM struct {
	store *Store
}

// NewFSM returns the raft FSM over store.
func NewFSM(store *Store) *FSM {
	return &FSM{store: store}
}

// applyFunc applies one decoded command body; it returns the events to
// publish and, for lease claims, the fencing token.
type applyFunc func(d *data, idx uint64, now time.Time, body any) ([]api.Event, uint64, error)

// Apply implements raft.FSM. A log entry that cannot be decoded panics: state
// must never silently diverge between nodes.
func (f *FSM) Apply(l *raft.Log) any {
	return f.ApplyBatch([]*raft.Log{l})[0]
}

// ApplyBatch implements raft.BatchingFSM: raft hands over every entry
// committed together, and they are decoded before the store is locked,
// applied under one lock and their events published at once. Entries that
// are not commands (configuration changes) get a nil result.
func (f *FSM) ApplyBatch(logs []*raft.Log) []any {
	type decoded struct {
		cmd   Command
		known bool
	}
	cmds := make([]decoded, len(logs))
	for i, l := range logs {
		if l.Type != raft.LogCommand {
			continue
		}
		cmd, known, err := DecodeCommand(l.Data)
		if err != nil {
			panic(fmt.Sprintf("raft log %d: %v", l.Index, err))
		}
		cmds[i] = decoded{cmd, known}
	}
	out := make([]any, len(logs))
	var events []api.Event
	s := f.store
	s.mu.Lock()
	for i, l := range logs {
		if l.Type != raft.LogCommand {
			continue
		}
		out[i] = s.d.applyLocked(l.Index, cmds[i].cmd, cmds[i].known, &events)
	}
	s.mu.Unlock()
	s.events.publish(events)
	return out
}

// applyLocked applies one decoded command at raft index idx (the store's
// lock held), appending its events to events.
func (d *data) applyLocked(idx uint64, cmd Command, known bool, events *[]api.Event) *Result {
	d.LastIndex = idx
	if !known {
		return &Result{Index: idx}
	}
	if cmd.Key != "" {
		if o, ok := d.Dedupe[cmd.Key]; ok {
			return o.result(true)
		}
	}
	evs, token, applyErr := commands[cmd.Type].apply(d, idx, cmd.Now, cmd.Body)
	*events = append(*events, evs...)
	if cmd.Key != "" {
		d.remember(cmd.Key, outcome{Index: idx, Token: token, Code: codeOf(applyErr), Msg: errText(applyErr)})
	}
	return &Result{Index: idx, FencingToken: token, Err: applyErr}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// remember records a key's outcome, forgetting the oldest keys beyond the
// window. The order slice is compacted only when it has doubled, so each
// apply does O(1) work on average.
func (d *data) remember(key string, o outcome) {
	d.Dedupe[key] = o
	d.DedupeOrder = append(d.DedupeOrder, key)
	if len(d.DedupeOrder) >= 2*maxDedupeKeys {
		drop := len(d.DedupeOrder) - maxDedupeKeys
		for _, k := range d.DedupeOrder[:drop] {
			delete(d.Dedupe, k)
		}
		d.DedupeOrder = append(make([]string, 0, 2*maxDedupeKeys), d.DedupeOrder[drop:]...)
	}
}

// Snapshot implements raft.FSM. It copies the state under the read lock
// (cheap value copies; the tasks into one slice, see snapshot) and leaves
// the encoding to Persist, so applies are not held up while a large state
// is written out.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.store.mu.RLock()
	defer f.store.mu.RUnlock()
	return f.store.d.snapshot(), nil
}

// snapshot copies the state deeply enough that later applies (which mutate
// entries in place) never touch the copy. The tasks, usually most of the
// state's entries, are copied by value into one slice rather than one
// allocation each; the copy's Tasks map is left nil. Like every other map
// of the copy, the tasks are written as an empty map when the state's map
// is nil.
func (d *data) snapshot() *snapshot {
	c := &data{
		Nodes:    make(map[string]NodeInfo, len(d.Nodes)),
		Sessions: make(map[string]*api.Session, len(d.Sessions)), Executors: make(map[string]*api.Executor, len(d.Executors)),
		Leases: make(map[string]*api.Lease, len(d.Leases)), Messages: make(map[string][]*api.Message, len(d.Messages)),
		Dedupe: make(map[string]outcome, len(d.Dedupe)), DedupeOrder: append([]string(nil), d.DedupeOrder...),
		Private: make(map[string]executorPrivate, len(d.Private)), SessionTokens: make(map[string]string, len(d.SessionTokens)),
		LastIndex: d.LastIndex,
	}
	for k, v := range d.Nodes {
		c.Nodes[k] = v
	}
	tasks := make([]keyedTask, 0, len(d.Tasks))
	for k, v := range d.Tasks {
		tasks = append(tasks, keyedTask{key: k, task: *v})
	}
	for k, v := range d.Sessions {
		s := *v
		s.RuntimeOptions = copyMap(v.RuntimeOptions)
		c.Sessions[k] = &s
	}
	for k, v := range d.Executors {
		e := *v
		c.Executors[k] = &e
	}
	for k, v := range d.Leases {
		l := *v
		c.Leases[k] = &l
	}
	for k, msgs := range d.Messages {
		out := make([]*api.Message, len(msgs))
		for i, m := range msgs {
			mm := *m
			out[i] = &mm
		}
		c.Messages[k] = out
	}
	for k, v := range d.Dedupe {
		c.Dedupe[k] = v
	}
	for k, v := range d.Private {
		c.Private[k] = v
	}
	for k, v := range d.SessionTokens {
		c.SessionTokens[k] = v
	}
	c.Transcripts = make(map[string]*transcript, len(d.Transcripts))
	for k, v := range d.Transcripts {
		c.Transcripts[k] = v.clone()
	}
	c.Permissions = make(map[string][]*api.Permission, len(d.Permissions))
	for k, ps := range d.Permissions {
		out := make([]*api.Permission, len(ps))
		for i, p := range ps {
			pp := *p
			out[i] = &pp
		}
		c.Permissions[k] = out
	}
	return &snapshot{d: c, tasks: tasks}
}

func copyMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Restore implements raft.FSM: it replaces the whole state.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	d, err := decodeSnapshot(rc)
	if err != nil {
		return err
	}
	f.store.mu.Lock()
	f.store.d = d
	f.store.mu.Unlock()
	return nil
}

// ValidateSnapshot checks that r holds a state snapshot this build can restore.
func ValidateSnapshot(r io.Reader) error {
	_, err := decodeSnapshot(r)
	return err
}

func decodeSnapshot(r io.Reader) (*data, error) {
	d := newData()
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(d); err != nil {
		return nil, fmt.Errorf("restore snapshot: %w", err)
	}
	d.fillNil()
	return d, nil
}

func (d *data) fillNil() {
	e := newData()
	if d.Nodes == nil {
		d.Nodes = e.Nodes
	}
	if d.Tasks == nil {
		d.Tasks = e.Tasks
	}
	if d.Sessions == nil {
		d.Sessions = e.Sessions
	}
	if d.Executors == nil {
		d.Executors = e.Executors
	}
	if d.Leases == nil {
		d.Leases = e.Leases
	}
	if d.Messages == nil {
		d.Messages = e.Messages
	}
	if d.Dedupe == nil {
		d.Dedupe = e.Dedupe
	}
	if d.Private == nil {
		d.Private = e.Private
	}
	if d.SessionTokens == nil {
		d.SessionTokens = e.SessionTokens
	}
	if d.Transcripts == nil {
		d.Transcripts = e.Transcripts
	}
	if d.Permissions == nil {
		d.Permissions = e.Permissions
	}
}

// snapshot is a point-in-time copy of the state, encoded by Persist
// (snapshot.go): d holds everything but the tasks, which are in tasks.
type snapshot struct {
	d     *data
	tasks []keyedTask
}

// keyedTask is one entry of the Tasks map in a snapshot.
type keyedTask struct {
	key  string
	task api.Task
}

func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	w := bufio.NewWriterSize(sink, 256<<10)
	err := s.encode(w)
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("persist snapshot: %w", err)
	}
	return sink.Close()
}

func (s *snapshot) Release() {}
