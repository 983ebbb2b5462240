package cluster

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/paddockhq/paddock/supervisor/state"
)

func TestUnusableDataDirIsRefused(t *testing.T) {
	cases := []struct {
		name  string
		setup func(dir string)
		store string // server.raft_store
	}{
		{"foreign node", func(dir string) {
			_ = os.WriteFile(filepath.Join(dir, "node.json"), []byte(`{"node_id":"someone-else"}`), 0o600)
		}, ""},
		{"garbage identity", func(dir string) {
			_ = os.WriteFile(filepath.Join(dir, "node.json"), []byte("\x00\x01 not json"), 0o600)
		}, ""},
		{"corrupt raft log", func(dir string) {
			_ = os.MkdirAll(filepath.Join(dir, "raft"), 0o700)
			_ = os.WriteFile(filepath.Join(dir, "raft", "raft.db"), []byte("this is not a bolt database, just text padded out"), 0o600)
		}, ""},
		{"corrupt write-ahead log", func(dir string) {
			_ = os.MkdirAll(filepath.Join(dir, "raft", "wal"), 0o700)
			_ = os.WriteFile(filepath.Join(dir, "raft", "wal", "wal-meta.db"), []byte("this is not the WAL's meta database, just text padded out"), 0o600)
		}, ""},
		{"bolt store with raft_store wal", func(dir string) {
			_ = os.MkdirAll(filepath.Join(dir, "raft"), 0o700)
			b, err := raftboltdb.NewBoltStore(filepath.Join(dir, "raft", "raft.db"))
			if err == nil {
				b.Close()
			}
		}, StoreWAL},
		{"write-ahead log with raft_store bolt", func(dir string) {
			_ = os.MkdirAll(filepath.Join(dir, "raft", "wal"), 0o700)
			_ = os.WriteFile(filepath.Join(dir, "raft", "wal", "wal-meta.db"), []byte("a WAL's meta database"), 0o600)
		}, StoreBolt},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.setup(dir)
			before := snapshotDir(t, dir)
			n, err := New(Config{NodeID: "n1", DataDir: dir, RaftAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:1", RaftStore: tc.store}, state.NewStore())
			if err == nil {
				n.Shutdown()
				t.Fatal("New succeeded on an unusable data_dir")
			}
			if !errors.Is(err, ErrDataDir) {
				t.Fatalf("error %v does not wrap ErrDataDir", err)
			}
			if after := snapshotDir(t, dir); after != before {
				t.Fatalf("data_dir changed by a refused start:\n%s\nvs\n%s", before, after)
			}
		})
	}
}

// A node on a new data_dir opens the store server.raft_store names, bolt
// when unset, and keeps it when started again with raft_store unset.
func TestNodeOpensTheConfiguredRaftStore(t *testing.T) {
	for _, tc := range []struct{ set, want, file string }{
		{"", StoreBolt, "raft.db"},
		{StoreBolt, StoreBolt, "raft.db"},
		{StoreWAL, StoreWAL, filepath.Join("wal", "wal-meta.db")},
	} {
		t.Run("raft_store "+tc.set, func(t *testing.T) {
			dir := t.TempDir()
			for _, set := range []string{tc.set, ""} {
				n, err := New(Config{NodeID: "n1", DataDir: dir, RaftAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:1", RaftStore: set}, state.NewStore())
				if err != nil {
					t.Fatal(err)
				}
				got := n.RaftStore()
				n.Shutdown()
				if got != tc.want {
					t.Fatalf("raft_store %q opened %s, want %s", set, got, tc.want)
				}
				if _, err := os.Stat(filepath.Join(dir, "raft", tc.file)); err != nil {
					t.Fatalf("no %s: %v", tc.file, err)
				}
			}
		})
	}
}

func snapshotDir(t *testing.T, dir string) string {
	t.Helper()
	var out string
	_ = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			b, _ := os.ReadFile(p)
			out += p + "=" + string(b) + "\n"
		}
		return nil
	})
	return out
}

// TestRaftReplicatesWithoutAPipeline: a node's raft transport refuses
// AppendEntries pipelines, so raft sends each follower one AppendEntries at
// a time, each with every entry appended meanwhile.
func TestRaftReplicatesWithoutAPipeline(t *testing.T) {
	n, err := New(Config{NodeID: "n1", DataDir: t.TempDir(), RaftAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:1", BootstrapExpect: 1}, state.NewStore())
	if err != nil {
		t.Fatal(err)
	}
	defer n.Shutdown()
	if p, err := n.transport.AppendEntriesPipeline("n2", "127.0.0.1:1"); p != nil || !errors.Is(err, raft.ErrPipelineReplicationNotSupported) {
		t.Fatalf("AppendEntriesPipeline = %v, %v; want raft.ErrPipelineReplicationNotSupported", p, err)
	}
}
