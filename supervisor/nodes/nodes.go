// Package nodes reaches the other servers of a cluster as executor hosts.
//
// Every Paddock server is also an executor host (as a Nomad agent can be a
// server and a client): an executor of a node-local runtime belongs to the
// node that launched it, and every runtime call for it runs in that node's
// plugin. The leader makes those calls through Runtime, which answers with
// the local plugin for this node and with a client of the owner's
// /v1/internal/runtimes route (authenticated with the node secret) for any
// other. Watch keeps the leader's view of which nodes answer, and of their
// plugins' health, for placement and for the node_unavailable status.
package nodes

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/paddockhq/paddock/certs"
	"github.com/paddockhq/paddock/shared/runtime"
	"github.com/paddockhq/paddock/supervisor/plugins"
	"github.com/paddockhq/paddock/supervisor/state"
)

// ErrNodeUnavailable means the node that owns an executor does not answer.
var ErrNodeUnavailable = errors.New("node unavailable")

// Plugins are this node's own runtime plugins.
type Plugins interface {
	Get(name string) (runtime.Runtime, error)
	List() []plugins.Status
}

// Options configure Nodes.
type Options struct {
	// Self is this node's id.
	Self string
	// Store is the replicated state (node addresses come from it).
	Store *state.Store
	// Plugins are this node's plugins.
	Plugins Plugins
	// MaxSessions is this node's limits.max_sessions_per_node (0: no cap),
	// reported with its plugins so that the leader places within it.
	MaxSessions int
	// Secret is the node secret sent to peers ("" in an open cluster).
	Secret string
	// TLS, when not nil, makes calls to peers over HTTPS with this node's
	// server certificate.
	TLS *certs.TLS
	// Interval is how often Watch probes each node (default 1s); a node is
	// unavailable once it has not answered for DownAfter (default 3×Interval).
	Interval, DownAfter time.Duration
	Logger              hclog.Logger
}

// Health is the leader's view of one node.
type Health struct {
	Node string `json:"node"`
	// Available is false once the node has not answered for DownAfter.
	Available bool `json:"available"`
	// LastContact is when the node last answered (zero: never, this term).
	LastContact time.Time `json:"last_contact"`
	// Plugins maps runtime name → healthy, as the node last reported.
	Plugins map[string]bool `json:"plugins"`
	// MaxSessions is the node's limits.max_sessions_per_node as it last
	// reported it (0: no cap, or not reported yet).
	MaxSessions int `json:"max_sessions,omitempty"`
	// Error is the last probe's failure ("" when it answered).
	Error string `json:"error,omitempty"`
}

// Nodes routes runtime calls to executors' owners and watches node health.
type Nodes struct {
	o   Options
	log hclog.Logger
	rpc *rpcClient

	mu      sync.Mutex
	watched bool // a Watch runs: health below is meaningful
	health  map[string]*Health
	onUp    []func(node string)
}

// New returns Nodes; Watch must run (on the leader) for health to be known.
func New(o Options) *Nodes {
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if o.Interval == 0 {
		o.Interval = time.Second
	}
	if o.DownAfter == 0 {
		o.DownAfter = 3 * o.Interval
	}
	return &Nodes{o: o, log: o.Logger, rpc: newRPCClient(o.Secret, o.TLS), health: map[string]*Health{}}
}

// Self is this node's id.
func (n *Nodes) Self() string { return n.o.Self }

// Runtime returns the runtime plugin name on node: this node's own plugin,
// or a client that runs each call in node's plugin. "" means this node.
func (n *Nodes) Runtime(node, name string) (runtime.Runtime, error) {
	if node == "" || node == n.o.Self {
		return n.o.Plugins.Get(name)
	}
	addr := n.o.Store.Nodes()[node].HTTPAddr
	if addr == "" {
		return nil, fmt.Errorf("%w: node %q is not a registered server of this cluster", ErrNodeUnavailable, node)
	}
	return &remoteRuntime{rpc: n.rpc, node: node, addr: addr, name: name}, nil
}

// OnUp registers f to run (in its own goroutine) when a node that was
// unavailable answers again.
func (n *Nodes) OnUp(f func(node string)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.onUp = append(n.onUp, f)
}

// Available reports whether node answers. This node always does; without a
// running Watch (a follower) every node is taken to.
func (n *Nodes) Available(node string) bool {
	if node == "" || node == n.o.Self {
		return true
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.watched {
		return true
	}
	h, ok := n.health[node]
	return !ok || h.Available
}

// Usable lists the registered nodes that answer and whose plugin name is
// healthy, as last reported (a node not probed yet counts as usable).
func (n *Nodes) Usable(name string) []string {
	var out []string
	for id := range n.o.Store.Nodes() {
		if id == n.o.Self {
			if _, err := n.o.Plugins.Get(name); err == nil {
				out = append(out, id)
			}
			continue
		}
		h := n.healthOf(id)
		if healthy, known := h.Plugins[name]; h.Available && (healthy || (!known && h.Plugins == nil)) {
			out = append(out, id)
		}
	}
	if len(out) == 0 && len(n.o.Store.Nodes()) == 0 {
		// Not registered yet (a leader's first moments): this node serves.
		if _, err := n.o.Plugins.Get(name); err == nil {
			out = append(out, n.o.Self)
		}
	}
	sort.Strings(out)
	return out
}

// MaxSessions is node's limits.max_sessions_per_node as the leader knows it
// (0: no cap, or the node has not reported one yet).
func (n *Nodes) MaxSessions(node string) int {
	return n.healthOf(node).MaxSessions
}

// Health returns the view of every registered node, this one included.
func (n *Nodes) Health() []Health {
	var out []Health
	for id := range n.o.Store.Nodes() {
		out = append(out, n.healthOf(id))
	}
	sortHealth(out)
	return out
}

func (n *Nodes) healthOf(id string) Health {
	if id == n.o.Self {
		return Health{Node: id, Available: true, LastContact: time.Now(), Plugins: localPlugins(n.o.Plugins), MaxSessions: n.o.MaxSessions}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if h, ok := n.health[id]; ok {
		c := *h
		return c
	}
	// Not probed yet (the watch just started, or the node just joined):
	// taken to answer until a probe says otherwise.
	return Health{Node: id, Available: true}
}

// Watch probes every registered node each Interval until ctx ends (the
// leader runs it for its term). A node is available from its first answer
// and unavailable once it has not answered for DownAfter; nodes are taken
// to be available when the watch starts, so a new leader does not declare
// every node lost before it has asked.
func (n *Nodes) Watch(ctx context.Context) {
	start := time.Now()
	n.mu.Lock()
	n.watched, n.health = true, map[string]*Health{}
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		n.watched = false
		n.mu.Unlock()
	}()
	t := time.NewTicker(n.o.Interval)
	defer t.Stop()
	for {
		var wg sync.WaitGroup
		for id, info := range n.o.Store.Nodes() {
			if id == n.o.Self {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				pctx, cancel := context.WithTimeout(ctx, n.o.Interval)
				defer cancel()
				ans, err := n.rpc.probe(pctx, id, info.HTTPAddr)
				if ctx.Err() == nil {
					n.record(id, ans, err, start)
				}
			}()
		}
		wg.Wait()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// record updates a node's health with one probe's result.
func (n *Nodes) record(id string, ans ProbeAnswer, err error, watchStart time.Time) {
	now := time.Now()
	n.mu.Lock()
	h, ok := n.health[id]
	if !ok {
		h = &Health{Node: id, Available: true, LastContact: watchStart}
		n.health[id] = h
	}
	was := h.Available
	if err == nil {
		h.LastContact, h.Error, h.Available = now, "", true
		h.Plugins = map[string]bool{}
		for _, p := range ans.Plugins {
			h.Plugins[p.Name] = p.Healthy
		}
		h.MaxSessions = ans.MaxSessions
	} else {
		h.Error = err.Error()
		h.Available = now.Sub(h.LastContact) < n.o.DownAfter
	}
	up := !was && h.Available
	down := was && !h.Available
	last := h.LastContact
	var hooks []func(string)
	if up {
		hooks = append(hooks, n.onUp...)
	}
	n.mu.Unlock()
	switch {
	case down:
		n.log.Warn("node unavailable", "node", id, "last_contact", last.Format(time.RFC3339Nano), "error", err)
	case up:
		n.log.Info("node available again", "node", id)
	}
	for _, f := range hooks {
		go f(id)
	}
}

func localPlugins(p Plugins) map[string]bool {
	out := map[string]bool{}
	for _, s := range p.List() {
		out[s.Name] = s.Healthy
	}
	return out
}
