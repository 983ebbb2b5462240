package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	wire "github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/bench/harness"
)

// chunkWatch follows a task's events on one node and notes when each chunk
// of each session's streamed reply ("chunk k of n\n" lines, as the demo
// agent streams them) first shows in the session's agent message.
//
// It is lean on purpose: the storms measure the CPU the cluster spends per
// chunk on a machine the bench shares with it. So it asks for deltas (a
// streamed message comes whole once, then as what each update added),
// reads each frame into one reused buffer, decodes only the envelope and
// the message's (or delta's) id, role and updated_at into a small struct
// (the text is left where it lies in the frame, not copied into a string),
// and counts the new lines: a delta's, or a whole message's from where the
// previous event of that message ended (the JSON encoding of a text that
// grew by appending starts with the encoding of what it was). Which line
// is which chunk, and their order, the final transcripts check.
type chunkWatch struct {
	mu   sync.Mutex
	seen map[string]*watched // session → its reply
	// fromWrite is, for each chunk when first seen, the time since the
	// leader built the write that carried it (the message's updated_at).
	fromWrite []float64
	frames    int
	bytes     int64
	reopened  int
	conn      *websocket.Conn // the subscription now (it is reopened after lagging)
	cancel    context.CancelFunc
	done      chan struct{}
}

// watched is what the watch knows of one session's streamed reply.
type watched struct {
	msgID string      // the agent message being counted
	raw   int         // bytes of its JSON-encoded text counted so far
	lines int         // complete lines in them: chunks seen
	first []time.Time // chunk k-1 → when first seen
}

// leanEvent is the part of an event frame the watch reads.
type leanEvent struct {
	Type      string `json:"type"`
	SessionID string `json:"session_id"`
	Index     uint64 `json:"index"`
	Data      struct {
		Message struct {
			ID        string      `json:"id"`
			Role      string      `json:"role"`
			Text      rawJSONText `json:"text"`
			UpdatedAt string      `json:"updated_at"`
		} `json:"message"`
	} `json:"data"`
	// Delta is what an update added, in place of data (the watch asks
	// for deltas: the server sends a streamed message whole once, then
	// what each update added).
	Delta *struct {
		ID        string      `json:"id"`
		Text      rawJSONText `json:"text"`
		UpdatedAt string      `json:"updated_at"`
	} `json:"delta"`
}

// rawJSONText is a JSON string as it lies in the frame, quotes and escapes
// included: decoding it costs no copy. It is valid only while the frame's
// buffer is.
type rawJSONText []byte

func (t *rawJSONText) UnmarshalJSON(b []byte) error {
	*t = b
	return nil
}

// newLines counts the "\n" escapes in an encoded JSON string's bytes from
// offset from on (from being the end of an earlier, complete encoding, so
// never inside an escape), and returns where the scan ended.
func newLines(enc []byte, from int) (lines, end int) {
	i := from
	for i < len(enc) {
		if enc[i] != '\\' {
			i++
			continue
		}
		if i+1 >= len(enc) {
			break
		}
		switch enc[i+1] {
		case 'n':
			lines++
			i += 2
		case 'u':
			i += 6
		default:
			i += 2
		}
	}
	return lines, min(i, len(enc))
}

// watchChunks subscribes to node's /v1/events for the task's events: the
// sessions ids stream replies of n chunks each.
func watchChunks(ctx context.Context, node *harness.Node, taskID string, ids []string, n int) (*chunkWatch, error) {
	ctx, cancel := context.WithCancel(ctx)
	w := newChunkWatch(ids, n)
	w.cancel = cancel
	conn, err := dialEvents(ctx, node, taskID, 0)
	if err != nil {
		cancel()
		return nil, err
	}
	w.conn = conn
	go func() {
		defer close(w.done)
		var last uint64
		var buf bytes.Buffer
		for {
			err := w.readFrame(conn, &buf, &last)
			if err == nil {
				continue
			}
			_ = conn.Close()
			if ctx.Err() != nil || !websocket.IsCloseError(err, 4408) {
				return
			}
			// Fell behind: the server closed the stream; nothing is lost
			// when it is opened again from the last index read.
			if conn, err = dialEvents(ctx, node, taskID, last); err != nil {
				return
			}
			w.mu.Lock()
			w.conn = conn
			w.reopened++
			w.mu.Unlock()
			if ctx.Err() != nil { // closed while it was reopened
				_ = conn.Close()
				return
			}
		}
	}()
	go func() {
		<-ctx.Done()
		w.mu.Lock()
		_ = w.conn.Close() // unblocks the read; the reader then returns
		w.mu.Unlock()
	}()
	return w, nil
}

func newChunkWatch(ids []string, n int) *chunkWatch {
	w := &chunkWatch{seen: map[string]*watched{}, done: make(chan struct{})}
	for _, id := range ids {
		w.seen[id] = &watched{first: make([]time.Time, n)}
	}
	return w
}

// dialEvents opens GET /v1/events?task_id=… on node (since > 0: replaying
// the events after that raft index first).
func dialEvents(ctx context.Context, node *harness.Node, taskID string, since uint64) (*websocket.Conn, error) {
	u, err := url.Parse(node.URL() + "/v1/events")
	if err != nil {
		return nil, err
	}
	q := url.Values{"task_id": {taskID}, "deltas": {"true"}}
	if since > 0 {
		q.Set("since", strconv.FormatUint(since, 10))
	}
	u.RawQuery = q.Encode()
	u.Scheme = map[string]string{"https": "wss", "http": "ws"}[u.Scheme]
	dialer := *websocket.DefaultDialer
	dialer.HandshakeTimeout = 10 * time.Second
	dialer.TLSClientConfig = node.TLS
	conn, resp, err := dialer.DialContext(ctx, u.String(), nil)
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("subscribe to %s: %w", u, err)
	}
	conn.SetReadLimit(16 << 20)
	return conn, nil
}

// readFrame reads one frame into buf and notes the chunks it shows.
func (w *chunkWatch) readFrame(conn *websocket.Conn, buf *bytes.Buffer, last *uint64) error {
	mt, r, err := conn.NextReader()
	if err != nil {
		return err
	}
	buf.Reset()
	if _, err := buf.ReadFrom(r); err != nil {
		return err
	}
	if mt != websocket.TextMessage {
		return nil
	}
	idx, err := w.note(buf.Bytes(), time.Now())
	if err != nil {
		return err
	}
	*last = idx
	return nil
}

// note reads one event frame that arrived at at and returns its index.
func (w *chunkWatch) note(frame []byte, at time.Time) (uint64, error) {
	var e leanEvent
	if err := json.Unmarshal(frame, &e); err != nil {
		return 0, fmt.Errorf("event frame: %w", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.frames++
	w.bytes += int64(len(frame))
	if e.Type != wire.EventMessageAdded && e.Type != wire.EventMessageUpdated {
		return e.Index, nil
	}
	s := w.seen[e.SessionID]
	if s == nil {
		return e.Index, nil
	}
	var lines int
	var updatedAt string
	if d := e.Delta; d != nil {
		// What a message the watch holds added (the server sends deltas
		// only of a message it sent whole before): counted as appended,
		// as the demo agent's streams only append.
		if d.ID != s.msgID || len(d.Text) < 2 {
			return e.Index, nil
		}
		lines, _ = newLines(d.Text[1:len(d.Text)-1], 0)
		updatedAt = d.UpdatedAt
	} else {
		m := &e.Data.Message
		if m.Role != string(wire.RoleAgent) || len(m.Text) < 2 {
			return e.Index, nil
		}
		enc := m.Text[1 : len(m.Text)-1] // the quotes off
		if m.ID != s.msgID || len(enc) < s.raw {
			// Another message, or this one's text replaced by a shorter
			// one: count it from its start.
			s.msgID, s.raw, s.lines = m.ID, 0, 0
		}
		var end int
		lines, end = newLines(enc, s.raw)
		s.raw = end
		updatedAt = m.UpdatedAt
	}
	if lines == 0 {
		return e.Index, nil
	}
	var written time.Time
	if updatedAt != "" {
		written, _ = time.Parse(time.RFC3339Nano, updatedAt)
	}
	for k := s.lines; k < s.lines+lines && k < len(s.first); k++ {
		if s.first[k].IsZero() {
			s.first[k] = at
			if !written.IsZero() {
				w.fromWrite = append(w.fromWrite, ms(at.Sub(written)))
			}
		}
	}
	s.lines += lines
	return e.Index, nil
}

// firstSeen is when each chunk of a session's reply was first seen (zero:
// never).
func (w *chunkWatch) firstSeen(id string) []time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	if s := w.seen[id]; s != nil {
		return append([]time.Time(nil), s.first...)
	}
	return nil
}

// close ends the subscription and waits for its reader.
func (w *chunkWatch) close() {
	w.cancel()
	<-w.done
}
