package server

import (
	"net/http"
	"testing"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/shared/testkit"
	"github.com/paddockhq/paddock/supervisor/state"
)

// A rename and a pin sent to a follower are replicated and published; a
// search through a follower finds the session by its name and by what was
// said in it, pinned first, and a follower's stale search finds it too.
func TestRenamePinAndSearchOnACluster(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	c := newTestCluster(t, 3, testToken)
	f := c.follower()
	cl := c.client(f)
	ids := make([]string, 2)
	for i := range ids {
		ids[i] = transcriptSession(t, cl, "demo")
	}
	turn(t, cl, ids[0], "remember zebras", "ok, remembering zebras")
	before, err := cl.GetSession(ctx(t), ids[0])
	if err != nil {
		t.Fatal(err)
	}
	events := dialEvents(t, c.servers[f].HTTPAddr(), "session_id="+ids[0], http.Header{"Authorization": {"Bearer " + testToken}})

	if s, err := cl.RenameSession(ctx(t), ids[0], "Zoo inventory"); err != nil || s.Name != "Zoo inventory" {
		t.Fatalf("rename: %+v %v", s, err)
	}
	s, err := cl.PinSession(ctx(t), ids[0], true)
	if err != nil || !s.Pinned || !s.LastActivityAt.Equal(before.LastActivityAt) {
		t.Fatalf("pin: %+v %v (last_activity_at was %v)", s, err, before.LastActivityAt)
	}
	for _, want := range []bool{false, true} {
		for {
			e := readEvent(t, events)
			if e.Type != state.EventMetaChanged {
				continue
			}
			if e.Data["name"] != "Zoo inventory" || e.Data["pinned"] != want {
				t.Fatalf("event %+v, want pinned %v", e, want)
			}
			break
		}
	}

	items, next, err := cl.SearchSessions(ctx(t), "ZEBRA", "", 0)
	if err != nil || len(items) != 1 || items[0].ID != ids[0] || next != "" {
		t.Fatalf("search for what was said: %+v %q %v", items, next, err)
	}
	if it := items[0]; it.MatchField != api.MatchTranscript || it.FirstPrompt != "remember zebras" || it.LastReply != "ok, remembering zebras" || it.MessageCount != 2 {
		t.Errorf("item: %+v", it)
	}
	// Every session, a page at a time, the pinned one first.
	var all []string
	cursor := ""
	for {
		items, next, err := cl.SearchSessions(ctx(t), "", cursor, 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range items {
			all = append(all, it.ID)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if len(all) != 2 || all[0] != ids[0] || all[1] != ids[1] {
		t.Errorf("pages list %v, want %v", all, ids)
	}
	// Each node has the name and pin: a stale search on every one finds
	// the session by its name once it has caught up.
	for i := range c.servers {
		testkit.WaitFor(t, 10e9, "the rename on every node", testkit.Cond(func() bool {
			items, _, err := c.client(i).SearchSessions(ctx(t), "zoo", "", 0, client.Stale())
			return err == nil && len(items) == 1 && items[0].Pinned && items[0].MatchField == api.MatchName
		}))
	}
}
