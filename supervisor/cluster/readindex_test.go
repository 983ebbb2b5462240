package cluster

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/shared/testkit"
	"github.com/paddockhq/paddock/supervisor/state"
)

// gatedRounds is a read round that blocks until the test releases it, and
// counts the rounds that started.
type gatedRounds struct {
	started atomic.Int64
	startCh chan int64    // the number of each round as it starts
	release chan struct{} // one receive per round
}

func newGatedRounds() *gatedRounds {
	return &gatedRounds{startCh: make(chan int64, 100), release: make(chan struct{})}
}

func (g *gatedRounds) round(<-chan struct{}) (uint64, error) {
	n := g.started.Add(1)
	g.startCh <- n
	<-g.release
	return uint64(n), nil
}

func TestReadBarrierBatchesConcurrentReaders(t *testing.T) {
	g := newGatedRounds()
	b := newReadBarrier(g.round)
	defer b.close()
	ctx := context.Background()

	// The first reader starts round 1 at once.
	first := make(chan uint64, 1)
	go func() {
		i, _ := b.await(ctx)
		first <- i
	}()
	if n := <-g.startCh; n != 1 {
		t.Fatalf("first round is %d", n)
	}
	// Readers arriving while round 1 is in flight must not be answered by
	// it: they all share round 2, which starts when round 1 ends.
	const late = 20
	var wg sync.WaitGroup
	got := make(chan uint64, late)
	for range late {
		wg.Add(1)
		go func() {
			defer wg.Done()
			i, err := b.await(ctx)
			if err != nil {
				t.Error(err)
			}
			got <- i
		}()
	}
	testkit.WaitFor(t, 5*time.Second, "late readers to queue", testkit.Cond(func() bool { return queued(b) }))
	time.Sleep(20 * time.Millisecond) // let every late reader reach await
	g.release <- struct{}{}
	if i := <-first; i != 1 {
		t.Fatalf("first reader answered by round %d, want 1", i)
	}
	if n := <-g.startCh; n != 2 {
		t.Fatalf("second round is %d", n)
	}
	g.release <- struct{}{}
	wg.Wait()
	close(got)
	for i := range got {
		if i != 2 {
			t.Fatalf("a reader that arrived during round 1 was answered by round %d, want 2", i)
		}
	}
	if n := g.started.Load(); n != 2 {
		t.Fatalf("%d rounds for 21 readers in two waves, want 2", n)
	}
}

func TestReadBarrierReaderGivesUpWithItsContext(t *testing.T) {
	g := newGatedRounds()
	b := newReadBarrier(g.round)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := b.await(ctx)
		done <- err
	}()
	<-g.startCh
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("await after cancel: %v", err)
	}
	g.release <- struct{}{}
	b.close()
	if _, err := b.await(context.Background()); err == nil {
		t.Fatal("await on a closed barrier succeeded")
	}
}

func TestStallWatchDistrustsRoundsNearAStall(t *testing.T) {
	s := newStallWatch(40 * time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.run(ctx)
	testkit.WaitFor(t, 5*time.Second, "the watch to start", testkit.Cond(func() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.running }))
	start := time.Now()
	if d := s.settle(start); d != 0 {
		t.Fatalf("a round with no stall must be trusted, got wait %s", d)
	}
	// A stall the ticker has not yet caught up with: an overdue tick.
	s.mu.Lock()
	s.lastTick = time.Now().Add(-time.Second)
	s.mu.Unlock()
	if d := s.settle(time.Now()); d == 0 {
		t.Fatal("a round during an unnoticed stall was trusted")
	}
	// A stall that ended just before the round began.
	s.mu.Lock()
	s.lastTick, s.lastStall = time.Now(), time.Now()
	s.mu.Unlock()
	if d := s.settle(time.Now()); d == 0 {
		t.Fatal("a round right after a stall was trusted")
	}
	// A round that began a threshold after the stall ended is trusted.
	testkit.WaitFor(t, 5*time.Second, "rounds to be trusted again", testkit.Cond(func() bool { return s.settle(time.Now()) == 0 }))
}

// TestConfirmReadOnASingleNode: a read round on a fresh leader whose log ends
// in entries the FSM never sees (the leader's no-op, the configuration)
// returns, and one after a write waits for that write.
func TestConfirmReadOnASingleNode(t *testing.T) {
	store := state.NewStore()
	n, err := New(Config{NodeID: "n1", DataDir: t.TempDir(), RaftAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:1",
		BootstrapExpect: 1, HeartbeatTimeout: 100 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond,
		LeaderLeaseTimeout: 50 * time.Millisecond}, store)
	if err != nil {
		t.Fatal(err)
	}
	n.Start()
	defer n.Shutdown()
	testkit.WaitFor(t, 5*time.Second, "the node to lead", testkit.Cond(n.IsLeader))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := n.ConfirmRead(ctx); err != nil {
		t.Fatalf("read on a fresh leader: %v", err)
	}
	res, err := n.Apply(ctx, state.CmdCreateTask, &state.CreateTaskBody{Task: api.Task{ID: "t1", Title: "x"}})
	if err != nil || res.Err != nil {
		t.Fatalf("apply: %v %v", err, res)
	}
	if err := n.ConfirmRead(ctx); err != nil {
		t.Fatalf("read after a write: %v", err)
	}
	if _, ok := store.Task("t1"); !ok {
		t.Fatal("a confirmed read does not see a write committed before it")
	}
}

func queued(b *readBarrier) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.next != nil
}
