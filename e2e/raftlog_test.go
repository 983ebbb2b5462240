package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/paddockhq/paddock/bench/harness"
	"github.com/paddockhq/paddock/client"
)

// A leader whose followers died appends writes it cannot commit; the
// followers restart, elect a leader and commit other entries at those indexes; when the
// deposed leader runs again, raft deletes its uncommitted tail and appends
// the new leader's. Killed with SIGKILL right after, the node must start
// again from that log and catch up. (raft-wal before v0.4.1 left the
// truncated segment without its index, and the node panicked on restart.)
func TestNodeWhoseLogTailWasReplacedRestartsAfterAKill(t *testing.T) {
	if testing.Short() {
		t.Skip("process cluster")
	}
	c := startCluster(t, 3, true, "")
	old := leaderOf(t, c)
	cleared := strings.Count(old.Log(), "clearing log suffix")
	newLeader := replaceUncommittedTail(t, old, without(c.Nodes, old))
	caughtUp(t, old, newLeader)
	if strings.Count(old.Log(), "clearing log suffix") == cleared {
		t.Fatalf("%s caught up without deleting its uncommitted tail", old.Name)
	}

	old.Kill()
	if err := old.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, old.Name+" to answer after its restart", func() bool {
		_, err := old.Leads()
		return err == nil
	})
	leader := leaderOf(t, c)
	if _, err := apiClient(t, leader).CreateTask(testCtx(t), client.CreateTaskRequest{Title: "after-the-restart"}); err != nil {
		t.Fatal(err)
	}
	caughtUp(t, old, leader)
	titles, err := listTitles(testCtx(t), old)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"after-the-takeover", "after-the-restart"} {
		if !slices.Contains(titles, want) {
			t.Errorf("%s lists %v after its restart, without %s", old.Name, titles, want)
		}
	}
	if strings.Contains(old.Log(), "panic:") {
		t.Errorf("%s panicked", old.Name)
	}
}

// replaceUncommittedTail kills old's followers (old leads; killed, they
// receive nothing more from it), has old append writes it cannot commit,
// pauses it, restarts the followers, lets them elect a leader and commit a
// write, and runs old again. It returns the new leader.
func replaceUncommittedTail(t *testing.T, old *harness.Node, followers []*harness.Node) *harness.Node {
	t.Helper()
	before, err := raftGauge(old, "paddock_raft_last_log_index")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range followers {
		n.Kill()
	}
	var writes sync.WaitGroup
	defer writes.Wait()
	for i := range 5 {
		writes.Add(1)
		go func() {
			defer writes.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_, _ = nodeClient(old).CreateTask(ctx, client.CreateTaskRequest{Title: fmt.Sprintf("uncommitted-%d", i)})
		}()
	}
	waitFor(t, 10*time.Second, old.Name+" to append entries it cannot commit", func() bool {
		last, err := raftGauge(old, "paddock_raft_last_log_index")
		return err == nil && last > before
	})
	if err := old.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	for _, n := range followers {
		if err := n.Start(); err != nil {
			t.Fatal(err)
		}
	}
	newLeader := leaderAmong(t, followers, 20*time.Second)
	if _, err := apiClient(t, newLeader).CreateTask(testCtx(t), client.CreateTaskRequest{Title: "after-the-takeover"}); err != nil {
		t.Fatal(err)
	}
	if err := old.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	return newLeader
}

// caughtUp waits until n has applied everything leader had committed when
// it was called.
func caughtUp(t *testing.T, n, leader *harness.Node) {
	t.Helper()
	commit, err := raftGauge(leader, "paddock_raft_commit_index")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, fmt.Sprintf("%s to apply up to index %.0f", n.Name, commit), func() bool {
		applied, err := raftGauge(n, "paddock_state_applied_index")
		return err == nil && applied >= commit
	})
}

// raftGauge reads one unlabelled gauge from n's /v1/metrics, with a timeout
// (n may be paused).
func raftGauge(n *harness.Node, name string) (float64, error) {
	resp, err := (&http.Client{Timeout: time.Second}).Get(n.URL() + "/v1/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, fmt.Errorf("%s has no %s", n.Name, name)
}

// A server whose data_dir holds a bolt raft.db (written by a build that
// kept raft in bolt) keeps bolt, in a cluster whose other servers run the
// write-ahead log; moved as OPERATIONS.md says (stopped, removed, its
// data_dir/raft deleted, started), it joins again on the write-ahead log
// and catches up. The test gives node3 its bolt store the same way: it
// replaces node3's raft state with an empty raft.db.
func TestServerKeepsABoltLogAndMovesToTheWAL(t *testing.T) {
	if testing.Short() {
		t.Skip("process cluster")
	}
	c := startCluster(t, 3, true, "")
	// node2 leads and node3 moves: node3's retry_join names node1 first, a
	// follower, which cannot add a server (the join must go to the leader).
	leader, moved := c.Nodes[1], c.Nodes[2]
	if l := leaderOf(t, c); l != leader {
		if _, err := apiClient(t, l).TransferLeadership(testCtx(t), leader.Name); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 20*time.Second, leader.Name+" to lead", func() bool { return leaderOf(t, c) == leader })
	}
	raftDir := filepath.Join(moved.Dir, "data", "raft")
	for i, store := range []string{"bolt", "wal"} {
		// Stopped and removed first: a voter must never forget its log.
		moved.Kill()
		if err := apiClient(t, leader).RemovePeer(testCtx(t), moved.Name); err != nil {
			t.Fatalf("remove %s: %v", moved.Name, err)
		}
		if err := os.RemoveAll(raftDir); err != nil {
			t.Fatal(err)
		}
		if store == "bolt" {
			if err := os.MkdirAll(raftDir, 0o700); err != nil {
				t.Fatal(err)
			}
			b, err := raftboltdb.NewBoltStore(filepath.Join(raftDir, "raft.db"))
			if err != nil {
				t.Fatal(err)
			}
			b.Close()
		}
		opened := strings.Count(moved.Log(), "store="+store)
		if err := moved.Start(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 20*time.Second, fmt.Sprintf("%s to open its raft log in %s", moved.Name, store), func() bool {
			return strings.Count(moved.Log(), "store="+store) > opened
		})
		waitFor(t, 30*time.Second, moved.Name+" to be a voter again", func() bool {
			peers, err := apiClient(t, leader).RaftPeers(testCtx(t))
			if err != nil {
				return false
			}
			for _, p := range peers {
				if p.ID == moved.Name && p.Suffrage == "Voter" {
					return true
				}
			}
			return false
		})
		if _, err := apiClient(t, leader).CreateTask(testCtx(t), client.CreateTaskRequest{Title: fmt.Sprintf("on-%s-%d", store, i)}); err != nil {
			t.Fatal(err)
		}
		caughtUp(t, moved, leader)
	}
	if _, err := os.Stat(filepath.Join(raftDir, "raft.db")); err == nil {
		t.Errorf("%s still has a raft.db after its move", moved.Name)
	}
}
