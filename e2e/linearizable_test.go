package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/bench/harness"
	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/shared/testkit"
)

// Linearizability of the task API, checked the Jepsen way: clients create
// and list tasks through every node of a three-process cluster while the
// leader is paused for longer than an election and killed, and Porcupine
// checks the whole history against a model of the API.

// tasksInput is one operation: a create of a task with a unique title, or a
// list.
type tasksInput struct {
	list  bool
	title string
}

// tasksOutput is what an operation saw: the sorted titles a list returned.
// A create whose outcome is unknown (a timeout, a 503) may have happened; it
// is recorded with unknown set and a return at the end of the history, so it
// can take effect at any point after its call, or never.
type tasksOutput struct {
	titles  []string
	unknown bool
}

// titleSet is an immutable set of titles, numbered: the model's state and
// what a list saw, cheap to copy, compare and hash for Porcupine.
type titleSet []uint64

func (s titleSet) has(i int) bool { return i/64 < len(s) && s[i/64]&(1<<(i%64)) != 0 }

func (s titleSet) with(i int) titleSet {
	out := make(titleSet, max(len(s), i/64+1))
	copy(out, s)
	out[i/64] |= 1 << (i % 64)
	return out
}

func (s titleSet) equal(o titleSet) bool {
	for i := range max(len(s), len(o)) {
		var a, b uint64
		if i < len(s) {
			a = s[i]
		}
		if i < len(o) {
			b = o[i]
		}
		if a != b {
			return false
		}
	}
	return true
}

// numbered operations, as the model checks them.
type (
	numberedInput struct {
		list  bool
		title int
	}
	numberedOutput struct {
		titles  titleSet
		n       int // how many titles a list saw
		unknown bool
	}
)

// tasksModel is the task API's sequential specification over numbered
// titles: the state is the set of titles; a create adds its title (titles
// are unique: a second create of one is refused); a list returns exactly the
// state. names gives each number its title for the visualization.
func tasksModel(names []string) porcupine.Model {
	return porcupine.Model{
		Init: func() any { return titleSet(nil) },
		Step: func(st, in, out any) (bool, any) {
			s, i, o := st.(titleSet), in.(numberedInput), out.(numberedOutput)
			if i.list {
				return s.equal(o.titles), s
			}
			if s.has(i.title) {
				return false, s
			}
			return true, s.with(i.title)
		},
		Equal: func(a, b any) bool { return a.(titleSet).equal(b.(titleSet)) },
		Hash: func(st any) uint64 {
			var h uint64
			for _, w := range st.(titleSet) {
				h = h*1099511628211 ^ w
			}
			return h
		},
		DescribeOperation: func(in, out any) string {
			i, o := in.(numberedInput), out.(numberedOutput)
			switch {
			case i.list:
				return fmt.Sprintf("list() -> %d tasks", o.n)
			case o.unknown:
				return fmt.Sprintf("create(%s) -> unknown", names[i.title])
			}
			return fmt.Sprintf("create(%s) -> ok", names[i.title])
		},
		DescribeState: func(st any) string {
			var in []string
			for i, name := range names {
				if st.(titleSet).has(i) {
					in = append(in, name)
				}
			}
			return fmt.Sprintf("%d tasks: %s", len(in), strings.Join(in, " "))
		},
	}
}

// numbered rewrites a recorded history over numbered titles.
func numbered(ops []porcupine.Operation) ([]porcupine.Operation, []string) {
	index := map[string]int{}
	var names []string
	number := func(title string) int {
		i, ok := index[title]
		if !ok {
			i = len(names)
			index[title] = i
			names = append(names, title)
		}
		return i
	}
	out := make([]porcupine.Operation, len(ops))
	for k, op := range ops {
		in, o := op.Input.(tasksInput), op.Output.(tasksOutput)
		ni, no := numberedInput{list: in.list}, numberedOutput{unknown: o.unknown, n: len(o.titles)}
		if in.list {
			for _, t := range o.titles {
				no.titles = no.titles.with(number(t))
			}
		} else {
			ni.title = number(in.title)
		}
		out[k] = porcupine.Operation{ClientId: op.ClientId, Input: ni, Call: op.Call, Output: no, Return: op.Return}
	}
	return out, names
}

// history records operations with call and return times on one clock.
type history struct {
	start time.Time
	mu    sync.Mutex
	ops   []porcupine.Operation
}

func newHistory() *history { return &history{start: time.Now()} }

func (h *history) now() int64 { return int64(time.Since(h.start)) }

// list lists tasks through n (a consistent read) and records it; a failed
// list has no effect and is left out.
func (h *history) list(ctx context.Context, clientID int, n *harness.Node) ([]string, error) {
	call := h.now()
	titles, err := listTitles(ctx, n)
	ret := h.now()
	if err != nil {
		return nil, err
	}
	h.add(porcupine.Operation{ClientId: clientID, Input: tasksInput{list: true}, Call: call, Output: tasksOutput{titles: titles}, Return: ret})
	return titles, nil
}

// create creates a task titled title through n and records it. A create
// refused before it reached the server (connection refused) did not happen
// and is left out; any other failure may have happened.
func (h *history) create(ctx context.Context, clientID int, n *harness.Node, title string) error {
	call := h.now()
	_, err := nodeClient(n).CreateTask(ctx, api.CreateTaskRequest{Title: title})
	ret := h.now()
	out := tasksOutput{}
	switch {
	case err == nil:
	case errors.Is(err, syscall.ECONNREFUSED):
		return err
	default:
		out.unknown, ret = true, -1 // filled in at the end
	}
	h.add(porcupine.Operation{ClientId: clientID, Input: tasksInput{title: title}, Call: call, Output: out, Return: ret})
	return err
}

func (h *history) add(op porcupine.Operation) {
	h.mu.Lock()
	h.ops = append(h.ops, op)
	h.mu.Unlock()
}

// operations returns the history with unknown creates returning after every
// other operation.
func (h *history) operations() []porcupine.Operation {
	h.mu.Lock()
	defer h.mu.Unlock()
	end := h.now()
	ops := slices.Clone(h.ops)
	for i := range ops {
		if ops[i].Return < 0 {
			ops[i].Return = end
		}
	}
	return ops
}

// check runs Porcupine on the history and fails t, with a visualization
// kept for people, when it is not linearizable.
func (h *history) check(t *testing.T) {
	t.Helper()
	ops, names := numbered(h.operations())
	model := tasksModel(names)
	began := time.Now()
	res, info := porcupine.CheckOperationsVerbose(model, ops, 60*time.Second)
	t.Logf("Porcupine checked %d operations in %s: %s", len(ops), time.Since(began).Round(time.Millisecond), res)
	if res == porcupine.Ok {
		return
	}
	f, err := os.CreateTemp("", "paddock-linearizability-*.html")
	if err == nil {
		_ = porcupine.Visualize(model, info, f)
		f.Close()
		t.Logf("visualization of the history: %s", f.Name())
	}
	if res == porcupine.Unknown {
		t.Fatalf("Porcupine gave up on a history of %d operations within its time bound", len(ops))
	}
	t.Fatalf("the history of %d operations is not linearizable", len(ops))
}

// listTitles is GET /v1/tasks through n, sorted titles.
func listTitles(ctx context.Context, n *harness.Node) ([]string, error) {
	tasks, err := nodeClient(n).ListTasks(ctx)
	if err != nil {
		return nil, err
	}
	titles := make([]string, 0, len(tasks))
	for _, t := range tasks {
		titles = append(titles, t.Title)
	}
	slices.Sort(titles)
	return titles, nil
}

// TestTaskHistoryIsLinearizableUnderLeaderPausesAndKills runs once on each
// raft store (server.raft_store), with half the fault cycles each, so that
// the two together take about what one run of 6 cycles took.
func TestTaskHistoryIsLinearizableUnderLeaderPausesAndKills(t *testing.T) {
	if testing.Short() {
		t.Skip("process cluster")
	}
	for _, store := range []string{"bolt", "wal"} {
		t.Run(store, func(t *testing.T) { linearizableUnderLeaderPausesAndKills(t, store) })
	}
}

func linearizableUnderLeaderPausesAndKills(t *testing.T, store string) {
	const (
		clients    = 4
		cycles     = 3                      // each pauses the leader, then kills it
		faultLimit = 18 * time.Second       // bounds the fault loop
		opTimeout  = 3 * time.Second        // longer than a pause, so requests queue on a paused node
		calm       = 800 * time.Millisecond // workload without faults after each fault
	)
	c := startClusterWith(t, harness.Options{Size: 3, SeparateIPs: true, ServerExtra: fmt.Sprintf("  raft_store = %q", store)})
	for _, n := range c.Nodes {
		testkit.WaitFor(t, 20*time.Second, n.Name+" to open a "+store+" raft store", testkit.Cond(func() bool {
			return strings.Contains(n.Log(), "store="+store)
		}))
	}
	leaderOf(t, c)
	h := newHistory()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for id := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(id), 13))
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				n := c.Nodes[(id+k)%len(c.Nodes)]
				ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
				if rng.IntN(2) == 0 {
					_ = h.create(ctx, id, n, fmt.Sprintf("c%d-%d", id, k))
				} else {
					_, _ = h.list(ctx, id, n)
				}
				cancel()
				time.Sleep(time.Duration(5+rng.IntN(20)) * time.Millisecond)
			}
		}()
	}

	// The fault injector is a client too: while the leader is paused it
	// creates a task through the new leader, and as soon as the old one
	// runs again it lists through it. A leader that serves reads without
	// confirming its leadership answers those lists without that task.
	injector := clients
	began := time.Now()
	pauses, kills := 0, 0
	for cycle := 0; cycle < cycles && time.Since(began) < faultLimit; cycle++ {
		old := leaderOf(t, c)
		if err := old.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		others := without(c.Nodes, old)
		newLeader := leaderAmong(t, others, 15*time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		if err := h.create(ctx, injector, newLeader, fmt.Sprintf("paused-%d", cycle)); err != nil {
			t.Logf("create through the new leader %s: %v", newLeader.Name, err)
		}
		cancel()
		var reads sync.WaitGroup
		for range 3 {
			reads.Add(1)
			go func() {
				defer reads.Done()
				ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
				defer cancel()
				_, _ = h.list(ctx, injector+1, old)
			}()
		}
		time.Sleep(5 * time.Millisecond) // let the reads reach the paused node's listen queue
		if err := old.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		reads.Wait()
		pauses++
		time.Sleep(calm)

		victim := leaderOf(t, c)
		victim.Kill()
		leaderAmong(t, without(c.Nodes, victim), 15*time.Second)
		if err := victim.Start(); err != nil {
			t.Fatal(err)
		}
		kills++
		testkit.WaitFor(t, 20*time.Second, victim.Name+" to rejoin", testkit.Cond(func() bool {
			_, err := victim.Leads()
			return err == nil
		}))
		time.Sleep(calm)
	}
	close(stop)
	wg.Wait()
	// A last list settles creates whose outcome was unknown.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	final, err := h.list(ctx, injector, leaderOf(t, c))
	if err != nil {
		t.Fatalf("final list: %v", err)
	}
	ops := h.operations()
	lists, unknown := 0, 0
	for _, op := range ops {
		if op.Input.(tasksInput).list {
			lists++
		} else if op.Output.(tasksOutput).unknown {
			unknown++
		}
	}
	t.Logf("%d pauses and %d kills in %s; %d operations: %d creates (%d with unknown outcome), %d lists; %d tasks at the end",
		pauses, kills, time.Since(began).Round(time.Millisecond), len(ops), len(ops)-lists, unknown, lists, len(final))
	if pauses < cycles || kills < cycles {
		t.Errorf("only %d pauses and %d kills of %d in the time bound", pauses, kills, cycles)
	}
	h.check(t)
}

// TestDeposedLeaderServesNoStaleRead: a leader paused for longer than an
// election, while the others elect a leader and commit a task, must not
// list tasks without that task when it runs again, neither for reads that
// queued while it was paused nor for reads that arrive right after.
func TestDeposedLeaderServesNoStaleRead(t *testing.T) {
	if testing.Short() {
		t.Skip("process cluster")
	}
	c := startCluster(t, 3, true, "")
	for round := range 5 {
		old := leaderOf(t, c)
		if err := old.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		newLeader := leaderAmong(t, without(c.Nodes, old), 15*time.Second)
		title := fmt.Sprintf("while-%s-was-paused-%d", old.Name, round)
		if _, err := apiClient(t, newLeader).CreateTask(testCtx(t), api.CreateTaskRequest{Title: title}); err != nil {
			t.Fatal(err)
		}
		type answer struct {
			titles []string
			err    error
		}
		answers := make(chan answer, 8)
		read := func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			titles, err := listTitles(ctx, old)
			answers <- answer{titles, err}
		}
		for range 4 {
			go read() // queued on the paused node
		}
		time.Sleep(5 * time.Millisecond)
		if err := old.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		for range 4 {
			go read() // arriving as it resumes
		}
		served := 0
		for range 8 {
			a := <-answers
			if a.err != nil {
				var api *client.APIError
				if errors.As(a.err, &api) && api.Status == http.StatusServiceUnavailable {
					continue // refusing is allowed; serving stale state is not
				}
				t.Fatalf("read from the resumed node: %v", a.err)
			}
			served++
			if !slices.Contains(a.titles, title) {
				t.Fatalf("round %d: %s, deposed while paused, listed %d tasks without %q, committed before the read began (a stale read)",
					round, old.Name, len(a.titles), title)
			}
		}
		if served == 0 {
			t.Fatalf("round %d: every read of the resumed node was refused", round)
		}
	}
}

// nodeClient is a client of n's API (the address is always valid).
func nodeClient(n *harness.Node) *client.Client {
	c, _ := client.New(n.URL(), "")
	return c
}

// without returns nodes other than n.
func without(nodes []*harness.Node, n *harness.Node) []*harness.Node {
	var out []*harness.Node
	for _, m := range nodes {
		if m != n {
			out = append(out, m)
		}
	}
	return out
}
