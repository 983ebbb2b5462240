package state

import (
	"fmt"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/paddockhq/paddock/api"
)

// BenchmarkStreamedReplyApply is what a node does per streamed chunk of
// the paced storm's replies ("stream 600 every 50": 20 chunks a second,
// written every 100 ms, so two chunks per append): decode each raft entry,
// apply it, and hand its event to /v1/events subscribers that take its
// JSON as the events handler does. One iteration is one whole 600-chunk
// reply; ns/chunk is per chunk.
func BenchmarkStreamedReplyApply(b *testing.B) {
	for _, subs := range []int{1, 4} {
		b.Run(fmt.Sprintf("subscribers=%d", subs), func(b *testing.B) { benchStreamedReply(b, subs) })
	}
}

func benchStreamedReply(b *testing.B, subscribers int) {
	const chunks, perWrite = 600, 2
	store := NewStore()
	fsm := NewFSM(store)
	idx := uint64(0)
	entry := func(typ CommandType, body any) *raft.Log {
		buf, err := Command{Type: typ, Now: t0, Body: body}.Encode()
		if err != nil {
			b.Fatal(err)
		}
		idx++
		return &raft.Log{Index: idx, Type: raft.LogCommand, Data: buf}
	}
	fsm.ApplyBatch([]*raft.Log{
		entry(CmdCreateTask, &CreateTaskBody{Task: api.Task{ID: "t1", Title: "x"}}),
		entry(CmdCreateSession, &CreateSessionBody{Session: api.Session{ID: "s1", TaskID: "t1", Agent: "demo", Runtime: "standalone"}}),
	})
	var subs []*Subscription
	for range subscribers {
		sub := store.SubscribeEncoded(EventFilter{}, 0)
		defer sub.Close()
		subs = append(subs, sub)
	}
	sent := 0
	frames := make([]EventEncoder, len(subs))
	drain := func() {
		for i, sub := range subs {
			for len(sub.Encoded) > 0 {
				frame, err := frames[i].JSON(<-sub.Encoded)
				if err != nil {
					b.Fatal(err)
				}
				sent += len(frame)
			}
		}
	}
	// Every reply's entries, encoded as the leader proposes them.
	replies := make([][]*raft.Log, b.N)
	for i := range replies {
		id := fmt.Sprintf("r%d", i)
		text := "chunk 1 of 600\n"
		replies[i] = append(replies[i], entry(CmdPutMessage, &PutMessageBody{SessionID: "s1", Source: "boot1",
			Message: api.Message{ID: id, Role: api.RoleAgent, Text: text}}))
		for c := 2; c <= chunks; c += perWrite {
			add := ""
			for k := c; k < c+perWrite && k <= chunks; k++ {
				add += fmt.Sprintf("chunk %d of %d\n", k, chunks)
			}
			replies[i] = append(replies[i], entry(CmdAppendMessage, &AppendMessageBody{SessionID: "s1", Source: "boot1",
				MessageID: id, From: len(text), Text: add, Complete: c+perWrite > chunks}))
			text += add
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for _, reply := range replies {
		for _, l := range reply {
			fsm.ApplyBatch([]*raft.Log{l})
			drain()
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*chunks), "ns/chunk")
	b.ReportMetric(float64(len(store.Messages("s1")[len(store.Messages("s1"))-1].Text)), "textbytes")
}
