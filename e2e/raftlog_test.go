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

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/bench/harness"
	"github.com/paddockhq/paddock/shared/testkit"
)

// A leader whose followers died appends writes it cannot commit; the
// followers restart, elect a leader and commit other entries at those indexes; when the
// deposed leader runs again, raft deletes its uncommitted tail and appends
// the new leader's. Killed with SIGKILL right after, the node must start
// again from that log and catch up. (raft-wal before v0.4.1 left the
// truncated segment without its index, and the node panicked on restart.)
// The servers run the WAL (server.raft_store = "wal"), where that bug was.
func TestNodeWhoseLogTailWasReplacedRestartsAfterAKill(t *testing.T) {
	if testing.Short() {
		t.Skip("process cluster")
	}
	c := startClusterWith(t, harness.Options{Size: 3, SeparateIPs: true, ServerExtra: `  raft_store = "wal"`})
	for _, n := range c.Nodes {
		testkit.WaitFor(t, 20*time.Second, n.Name+" to open the WAL", testkit.Cond(func() bool { return strings.Contains(n.Log(), "store=wal") }))
	}
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
	testkit.WaitFor(t, 20*time.Second, old.Name+" to answer after its restart", testkit.Cond(func() bool {
		_, err := old.Leads()
		return err == nil
	}))
	leader := leaderOf(t, c)
	if _, err := apiClient(t, leader).CreateTask(testCtx(t), api.CreateTaskRequest{Title: "after-the-restart"}); err != nil {
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
			_, _ = nodeClient(old).CreateTask(ctx, api.CreateTaskRequest{Title: fmt.Sprintf("uncommitted-%d", i)})
		}()
	}
	testkit.WaitFor(t, 10*time.Second, old.Name+" to append entries it cannot commit", testkit.Cond(func() bool {
		last, err := raftGauge(old, "paddock_raft_last_log_index")
		return err == nil && last > before
	}))
	if err := old.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	for _, n := range followers {
		if err := n.Start(); err != nil {
			t.Fatal(err)
		}
	}
	newLeader := leaderAmong(t, followers, 20*time.Second)
	if _, err := apiClient(t, newLeader).CreateTask(testCtx(t), api.CreateTaskRequest{Title: "after-the-takeover"}); err != nil {
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
	testkit.WaitFor(t, 20*time.Second, fmt.Sprintf("%s to apply up to index %.0f", n.Name, commit), testkit.Cond(func() bool {
		applied, err := raftGauge(n, "paddock_state_applied_index")
		return err == nil && applied >= commit
	}))
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

// A data_dir keeps the raft store it was created with. In a cluster on
// the default store (bolt, server.raft_store unset), node3 restarted with
// raft_store = "wal" is refused: it exits naming the store it found, its
// path and what to do, and leaves its data_dir alone; with raft_store unset
// again it starts on bolt and catches up. Moved as OPERATIONS.md says
// (stopped, removed, its data_dir/raft deleted, started with raft_store =
// "wal"), it joins again on the WAL and catches up; started again with
// raft_store unset it keeps the WAL, and with raft_store = "bolt" it is
// refused.
func TestADataDirKeepsItsRaftStore(t *testing.T) {
	if testing.Short() {
		t.Skip("process cluster")
	}
	c := startCluster(t, 3, true, "")
	for _, n := range c.Nodes {
		testkit.WaitFor(t, 20*time.Second, n.Name+" to open its raft log", testkit.Cond(func() bool { return strings.Contains(n.Log(), "raft log store") }))
		if _, err := os.Stat(filepath.Join(n.Dir, "data", "raft", "raft.db")); err != nil {
			t.Fatalf("%s on a new data_dir with raft_store unset has no bolt raft.db: %v", n.Name, err)
		}
	}
	// node2 leads and node3 moves: node3's retry_join names node1 first, a
	// follower, which cannot add a server (the join must go to the leader).
	leader, moved := c.Nodes[1], c.Nodes[2]
	if l := leaderOf(t, c); l != leader {
		if _, err := apiClient(t, l).TransferLeadership(testCtx(t), leader.Name); err != nil {
			t.Fatal(err)
		}
		testkit.WaitFor(t, 20*time.Second, leader.Name+" to lead", testkit.Cond(func() bool { return leaderOf(t, c) == leader }))
	}
	raftDir := filepath.Join(moved.Dir, "data", "raft")

	// restart runs moved again with raft_store set to store ("" unset)
	// and waits until it opens want, or, with want "", is refused.
	restart := func(store, want string) {
		t.Helper()
		moved.Kill()
		setRaftStore(t, moved, store)
		opened, refused := strings.Count(moved.Log(), "store="+want), strings.Count(moved.Log(), "server.raft_store is")
		if err := moved.Start(); err != nil {
			t.Fatal(err)
		}
		if want == "" {
			testkit.WaitFor(t, 20*time.Second, fmt.Sprintf("%s with raft_store %q to be refused", moved.Name, store), testkit.Cond(func() bool {
				return !moved.Running()
			}))
			if strings.Count(moved.Log(), "server.raft_store is") == refused {
				t.Fatalf("%s exited without saying why:\n%s", moved.Name, moved.Log())
			}
			return
		}
		testkit.WaitFor(t, 20*time.Second, fmt.Sprintf("%s to open its raft log in %s", moved.Name, want), testkit.Cond(func() bool {
			return strings.Count(moved.Log(), "store="+want) > opened
		}))
		if !moved.Running() {
			t.Fatalf("%s exited:\n%s", moved.Name, moved.Log())
		}
	}
	write := func(title string) {
		t.Helper()
		if _, err := apiClient(t, leader).CreateTask(testCtx(t), api.CreateTaskRequest{Title: title}); err != nil {
			t.Fatal(err)
		}
		caughtUp(t, moved, leader)
	}
	refusal := func(found, path, set string) {
		t.Helper()
		// The line of the last refusal, as the server logged it (hclog
		// quotes the error).
		log := moved.Log()
		log = log[strings.LastIndex(log[:strings.LastIndex(log, "server.raft_store is")], "\n")+1:]
		log = strings.ReplaceAll(log, `\"`, `"`)
		for _, w := range []string{fmt.Sprintf("server.raft_store is %q", set), "holds a " + found + " raft store", path,
			fmt.Sprintf("set server.raft_store = %q", found), "snapshot save", "snapshot restore", "unusable data_dir"} {
			if !strings.Contains(log, w) {
				t.Errorf("%s's refusal does not say %q:\n%s", moved.Name, w, log)
			}
		}
	}

	boltFile := filepath.Join(raftDir, "raft.db")
	before, _ := os.ReadFile(boltFile)
	restart("wal", "")
	refusal("bolt", boltFile, "wal")
	if entries, err := os.ReadDir(filepath.Join(raftDir, "wal")); err == nil && len(entries) > 0 {
		t.Errorf("the refused start left a write-ahead log in %s", raftDir)
	}
	if after, _ := os.ReadFile(boltFile); string(after) != string(before) {
		t.Errorf("the refused start changed %s", boltFile)
	}
	restart("", "bolt")
	write("on-bolt")

	// Stopped and removed first: a voter must never forget its log.
	moved.Kill()
	if err := apiClient(t, leader).RemovePeer(testCtx(t), moved.Name); err != nil {
		t.Fatalf("remove %s: %v", moved.Name, err)
	}
	if err := os.RemoveAll(raftDir); err != nil {
		t.Fatal(err)
	}
	restart("wal", "wal")
	testkit.WaitFor(t, 30*time.Second, moved.Name+" to be a voter again", testkit.Cond(func() bool {
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
	}))
	write("on-wal")
	if _, err := os.Stat(boltFile); err == nil {
		t.Errorf("%s still has a raft.db after its move", moved.Name)
	}

	restart("", "wal")
	write("on-wal-unset")
	restart("bolt", "")
	refusal("wal", filepath.Join(raftDir, "wal"), "bolt")
	restart("wal", "wal")
	write("on-wal-again")
}

// setRaftStore sets server.raft_store in n's config file ("": unset).
func setRaftStore(t *testing.T, n *harness.Node, store string) {
	t.Helper()
	b, err := os.ReadFile(n.Config)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for line := range strings.SplitSeq(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "raft_store") {
			continue
		}
		lines = append(lines, line)
		if store != "" && strings.TrimSpace(line) == "server {" {
			lines = append(lines, fmt.Sprintf("  raft_store = %q", store))
		}
	}
	if err := os.WriteFile(n.Config, []byte(strings.Join(lines, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
}
