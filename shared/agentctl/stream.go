package agentctl

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// StreamHeartbeat is how often GET /v1/events/stream sends a frame when no
// event comes: a frame with no events, so a reader can tell an agentctl
// that stopped answering from a quiet one.
const StreamHeartbeat = 15 * time.Second

// streamHeartbeat is StreamHeartbeat, shortened by tests.
var streamHeartbeat = StreamHeartbeat

// GET /v1/events/stream?since=N&gather=D follows the event log: one JSON
// object per line (an EventsResponse), written as events come, for as long
// as the request lasts. It is the supervisor's way to follow a session: a
// long poll per answer cost a request, a response and a decode of each
// streamed message's whole text, several times a second per streaming
// session (the largest share of the leader's and agentctl's CPU in the
// prompt storm, docs/PERFORMANCE-NOTES.md). Frames are gathered and
// compacted as a poll with compact=true and gather=D is, and a message
// update whose text grows what the stream already carried of that message
// comes as a TextDelta (Event.Delta, no Data), so a streamed reply crosses
// the stream once. A frame with no events is sent every StreamHeartbeat.
// The stream renews no lease (POST /v1/lease does).
func (s *Server) streamEvents(w http.ResponseWriter, r *http.Request) {
	q, err := parseEventsQuery(r.URL.Query())
	if err == nil && (q.Lease > 0 || q.Permissions || r.URL.Query().Has("wait")) {
		err = fmt.Errorf("the event stream takes since and gather only (it renews no lease, lists no permission requests, and sends a frame at least every %s)", StreamHeartbeat)
	}
	if err != nil {
		writeError(w, 400, CodeBadRequest, err.Error())
		return
	}
	q.Wait, q.Compact = streamHeartbeat, true
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(200)
	rc := http.NewResponseController(w)
	var (
		deltas deltaWriter
		buf    bytes.Buffer
	)
	enc := json.NewEncoder(&buf)
	for {
		kept, next := s.events.wait(r.Context(), q)
		if r.Context().Err() != nil {
			return
		}
		frame := EventsResponse{Nonce: s.nonce, Events: make([]Event, len(kept)), Next: next}
		for i, le := range kept {
			frame.Events[i] = deltas.event(le)
		}
		buf.Reset()
		if err := enc.Encode(frame); err != nil {
			return
		}
		if _, err := w.Write(buf.Bytes()); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
		q.Since = next
	}
}

// deltaWriter turns one stream's message updates into deltas. It keeps the
// text the stream carried of each message still being written (strings of
// the message's own growing text, so nothing is copied).
type deltaWriter struct {
	carried map[string]string
}

// event is le as the stream carries it: a TextDelta when it updates a
// message whose earlier text the stream carried and which it extends, else
// the whole event.
func (d *deltaWriter) event(le *loggedEvent) Event {
	md, ok := le.data.(MessageData)
	if !ok {
		return le.event()
	}
	msg := md.Message
	prev, seen := d.carried[msg.ID]
	if msg.Complete || carriedWhole(msg) {
		delete(d.carried, msg.ID)
	} else {
		if d.carried == nil {
			d.carried = map[string]string{}
		}
		d.carried[msg.ID] = msg.Text
	}
	if !seen || le.Type != EventMessageUpdated || carriedWhole(msg) || !strings.HasPrefix(msg.Text, prev) {
		return le.event()
	}
	return Event{Seq: le.Seq, Type: le.Type, Time: le.Time,
		Delta: &TextDelta{ID: msg.ID, From: len(prev), Text: msg.Text[len(prev):], Complete: msg.Complete, UpdatedAt: msg.UpdatedAt}}
}

// carriedWhole reports whether a message's updates are always carried
// whole: a tool call's or a plan's entry (an update replaces it; only text
// grows at its end).
func carriedWhole(msg Message) bool { return msg.ToolCall != nil || msg.Plan != nil }

// deltaReader applies one stream's deltas: it keeps the text of each
// message still being written, as the stream carried it.
type deltaReader struct {
	msgs map[string]*streamedMessage
}

type streamedMessage struct {
	msg  Message // every field but Text
	text strings.Builder
}

// resolve sets each message event's Message: decoded from its data, or the
// message as the stream carried it with the delta applied. A delta that
// does not follow what the stream carried is an error (the stream is then
// to be opened again from the frame's since, which sends whole messages).
func (r *deltaReader) resolve(evs []Event) error {
	for i := range evs {
		ev := &evs[i]
		var msg Message
		switch {
		case ev.Delta != nil:
			d := ev.Delta
			sm, ok := r.msgs[d.ID]
			if !ok || sm.text.Len() != d.From {
				have := -1
				if ok {
					have = sm.text.Len()
				}
				return fmt.Errorf("event %d adds to message %q from byte %d, but the stream carried %d bytes of it (-1: none)", ev.Seq, d.ID, d.From, have)
			}
			sm.text.WriteString(d.Text)
			msg = sm.msg
			msg.Text, msg.Complete, msg.UpdatedAt = sm.text.String(), d.Complete, d.UpdatedAt
		case ev.Type == EventMessageAdded || ev.Type == EventMessageUpdated:
			var md MessageData
			if err := json.Unmarshal(ev.Data, &md); err != nil || md.Message.ID == "" {
				return fmt.Errorf("event %d: malformed message data", ev.Seq)
			}
			msg = md.Message
		default:
			continue
		}
		ev.Message = &msg
		if msg.Complete || carriedWhole(msg) {
			delete(r.msgs, msg.ID)
			continue
		}
		if ev.Delta == nil {
			sm := &streamedMessage{msg: msg}
			sm.msg.Text = ""
			sm.text.WriteString(msg.Text)
			if r.msgs == nil {
				r.msgs = map[string]*streamedMessage{}
			}
			r.msgs[msg.ID] = sm
		}
	}
	return nil
}

// Stream follows GET /v1/events/stream from q.Since, gathered by q.Gather
// (q's other fields are not used), and calls each with every frame, its
// message events' Message set (deltas applied), until ctx ends, the stream
// breaks, or each returns an error, which it returns. A stream with no
// frame for StreamHeartbeat and the client's timeout ends with an error: an
// agentctl that stopped answering. An agentctl older than the stream
// answers *APIError with Status 404.
func (c *Client) Stream(ctx context.Context, q EventsQuery, each func(EventsResponse) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	idle := c.timeout + streamHeartbeat
	silent := time.AfterFunc(idle, func() {
		cancel(fmt.Errorf("no frame from agentctl's event stream in %s", idle))
	})
	defer silent.Stop()
	params := url.Values{"since": {strconv.FormatUint(q.Since, 10)}}
	if q.Gather > 0 {
		params.Set("gather", q.Gather.String())
	}
	req, err := http.NewRequestWithContext(ctx, "GET", c.base+"/v1/events/stream?"+params.Encode(), nil)
	if err != nil {
		return fmt.Errorf("agentctl event stream: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.secret)
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("agentctl event stream: %w", streamCause(ctx, err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		if err := decodeResponse(resp, nil); err != nil {
			return err
		}
		return fmt.Errorf("agentctl event stream: answered %s", resp.Status)
	}
	dec := json.NewDecoder(resp.Body)
	var deltas deltaReader
	for {
		var f EventsResponse
		if err := dec.Decode(&f); err != nil {
			return fmt.Errorf("agentctl event stream: %w", streamCause(ctx, err))
		}
		silent.Reset(idle)
		if err := deltas.resolve(f.Events); err != nil {
			return fmt.Errorf("agentctl event stream: %w", err)
		}
		if err := each(f); err != nil {
			return err
		}
	}
}

// streamCause is err, or why ctx ended when it did (a silent stream).
func streamCause(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); ctx.Err() != nil && cause != nil && cause != ctx.Err() {
		return cause
	}
	return err
}
