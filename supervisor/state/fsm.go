package state

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/hashicorp/raft"
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
type applyFunc func(d *data, idx uint64, now time.Time, body any) ([]Event, uint64, error)

// dispatch is the table of command handlers, registered once.
var dispatch = map[CommandType]applyFunc{
	CmdRegisterNode:     applyRegisterNode,
	CmdCreateTask:       applyCreateTask,
	CmdSetTaskState:     applySetTaskState,
	CmdCreateSession:    applyCreateSession,
	CmdSetSessionState:  applySetSessionState,
	CmdSetResumeToken:   applySetResumeToken,
	CmdPutExecutor:      applyPutExecutor,
	CmdSetExecutorState: applySetExecutorState,
	CmdPutMessage:       applyPutMessage,
	CmdClaimLease:       applyClaimLease,
	CmdReleaseLease:     applyReleaseLease,
	CmdReclaimLease:     applyReclaimLease,
	CmdDeleteSession:    applyDeleteSession,
	CmdPublishEvent:     applyPublishEvent,
	CmdSetLeaseNonce:    applySetLeaseNonce,
}

// Apply implements raft.FSM. A log entry that cannot be decoded panics: state
// must never silently diverge between nodes.
func (f *FSM) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	cmd, known, err := DecodeCommand(l.Data)
	if err != nil {
		panic(fmt.Sprintf("raft log %d: %v", l.Index, err))
	}
	s := f.store
	s.mu.Lock()
	s.d.LastIndex = l.Index
	if !known {
		s.mu.Unlock()
		return &Result{Index: l.Index}
	}
	if cmd.Key != "" {
		if o, ok := s.d.Dedupe[cmd.Key]; ok {
			s.mu.Unlock()
			return o.result(true)
		}
	}
	events, token, applyErr := dispatch[cmd.Type](s.d, l.Index, cmd.Now, cmd.Body)
	if cmd.Key != "" {
		s.d.remember(cmd.Key, outcome{Index: l.Index, Token: token, Code: codeOf(applyErr), Msg: errText(applyErr)})
	}
	s.mu.Unlock()
	s.events.publish(events)
	return &Result{Index: l.Index, FencingToken: token, Err: applyErr}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func (d *data) remember(key string, o outcome) {
	d.Dedupe[key] = o
	d.DedupeOrder = append(d.DedupeOrder, key)
	if len(d.DedupeOrder) > maxDedupeKeys {
		drop := len(d.DedupeOrder) - maxDedupeKeys
		for _, k := range d.DedupeOrder[:drop] {
			delete(d.Dedupe, k)
		}
		d.DedupeOrder = append([]string(nil), d.DedupeOrder[drop:]...)
	}
}

// Snapshot implements raft.FSM.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.store.mu.RLock()
	defer f.store.mu.RUnlock()
	buf, err := json.Marshal(f.store.d)
	if err != nil {
		return nil, fmt.Errorf("snapshot state: %w", err)
	}
	return snapshot(buf), nil
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
}

type snapshot []byte

func (s snapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("persist snapshot: %w", err)
	}
	return sink.Close()
}

func (s snapshot) Release() {}
