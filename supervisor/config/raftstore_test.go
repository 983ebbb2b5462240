package config

import (
	"errors"
	"strings"
	"testing"
)

// server.raft_store accepts "bolt" and "wal" (any case), is "" when unset
// (the cluster then gives a new data_dir bolt and keeps an existing one's
// store), and anything else is an error at the value with a hint.
func TestServerRaftStore(t *testing.T) {
	for _, tc := range []struct{ src, want, err string }{
		{"", "", ""},
		{"server {\n  raft_store = \"bolt\"\n}\n", RaftStoreBolt, ""},
		{"server {\n  raft_store = \"wal\"\n}\n", RaftStoreWAL, ""},
		{"server {\n  raft_store = \"WAL\"\n}\n", RaftStoreWAL, ""},
		{"server {\n  raft_store = \"sqlite\"\n}\n", "", `m.hcl:2:16: Invalid server.raft_store`},
		{"server {\n  raft_store = \"raft-wal\"\n}\n", "", `m.hcl:2:16: Invalid server.raft_store`},
		{"server {\n  raft_store = true\n}\n", "", `m.hcl:2:16: Incorrect attribute value type`},
	} {
		c, err := Parse([]byte(tc.src), "m.hcl")
		if tc.err != "" {
			var de *DiagError
			if !errors.As(err, &de) {
				t.Errorf("%q: error %v, want a *DiagError", tc.src, err)
				continue
			}
			if !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %q lacks %q", tc.src, err, tc.err)
			}
			if strings.Contains(tc.err, "Invalid server.raft_store") && !strings.Contains(err.Error(), `use "bolt"`) {
				t.Errorf("%q: error %q has no hint", tc.src, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.src, err)
			continue
		}
		if c.Server.RaftStore != tc.want {
			t.Errorf("%q: raft_store %q, want %q", tc.src, c.Server.RaftStore, tc.want)
		}
	}
	if Default().Server.RaftStore != "" {
		t.Errorf("the default raft_store is %q, want unset", Default().Server.RaftStore)
	}
}
