package sessions

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/shared/runtime"
	"github.com/paddockhq/paddock/supervisor/nodes"
	"github.com/paddockhq/paddock/supervisor/state"
)

// Executors belong to nodes. An executor of a node-local runtime (standalone,
// docker on the node's own engine) lives on the machine of the node that
// launched it, the executor row's Node, and only that node's plugin can
// recover, inspect, stop or destroy it: the leader reaches it through Nodes.
// A new session is placed on runtime_options.node when given, else on the
// usable node with the fewest live executors of its runtime; a resumed one
// stays on its node (its workspace is there). A node at its
// limits.max_sessions_per_node (counted over every runtime) takes no new
// executor: a session that must go there, or that finds every usable node
// at its cap, is refused with ErrNodeFull.

// ErrNodeUnavailable means the node that owns a session's executor does not
// answer. The session is neither moved nor failed: it waits for its node.
var ErrNodeUnavailable = nodes.ErrNodeUnavailable

// ErrNodeFull means the node a session must run on, or every node that can
// run it, already runs as many sessions as its limits.max_sessions_per_node
// allows. The API answers it with 503 before anything is recorded.
var ErrNodeFull = errors.New("at its session limit")

// OptionNode is the runtime option that places a session on a node.
const OptionNode = "node"

// localNodes serves every runtime call from this node's plugins: a manager
// built without Nodes (one node, or a test).
type localNodes struct {
	self string
	rt   Runtimes
}

func (l localNodes) Runtime(node, name string) (runtime.Runtime, error) {
	if node != "" && node != l.self {
		return nil, fmt.Errorf("%w: %s (this server reaches no other node)", ErrNodeUnavailable, node)
	}
	if l.rt == nil {
		return nil, fmt.Errorf("runtime %q: %w", name, runtime.ErrUnavailable)
	}
	return l.rt.Get(name)
}

func (l localNodes) Available(node string) bool { return node == "" || node == l.self }
func (l localNodes) Usable(string) []string     { return []string{l.self} }
func (l localNodes) MaxSessions(string) int     { return 0 }

// nodeDown reports whether err says an executor's node does not answer.
func nodeDown(err error) bool { return errors.Is(err, ErrNodeUnavailable) }

// runtimeOf returns the runtime that manages ex: its owner's plugin. When
// the owner does not answer, a runtime that is not node-local (a remote
// host, a shared Docker engine) or whose workspaces are on shared storage
// is managed from this node instead.
func (m *Manager) runtimeOf(ctx context.Context, ex api.Executor) (runtime.Runtime, error) {
	rt, err := m.nodes.Runtime(ex.Node, ex.Runtime)
	if err == nil && m.nodes.Available(ex.Node) {
		return rt, nil
	}
	if err == nil {
		err = fmt.Errorf("%w: node %s does not answer", ErrNodeUnavailable, ex.Node)
	}
	local, lerr := m.nodes.Runtime(m.cluster.ID(), ex.Runtime)
	if lerr != nil {
		return nil, err
	}
	if caps, cerr := local.Capabilities(ctx); cerr == nil && (!caps.NodeLocal || caps.Extra[runtime.CapSharedWorkspace]) {
		return local, nil
	}
	return nil, err
}

// place picks the node for a session's executor: the node of its previous
// executor (a resume finds its workspace there), else runtime_options.node,
// else the usable node with the fewest live executors of the runtime (this
// node first among equals).
func (m *Manager) place(ctx context.Context, sess api.Session) (string, error) {
	live, load := m.executorCounts(sess)
	if old, ok := m.store.Executor(sess.ExecutorID); ok && old.Node != "" {
		if m.nodes.Available(old.Node) || !m.sharedWorkspace(ctx, sess.Runtime) {
			return old.Node, m.roomOn(old.Node, live)
		}
		// The workspace is on shared storage: a survivor can take it.
	}
	usable := m.nodes.Usable(sess.Runtime)
	if want := sess.RuntimeOptions[OptionNode]; want != "" {
		if !slices.Contains(usable, want) {
			return "", fmt.Errorf("%w: node %q cannot take the session now (it does not answer, or its %q plugin is unhealthy)", ErrNodeUnavailable, want, sess.Runtime)
		}
		return want, m.roomOn(want, live)
	}
	if len(usable) == 0 {
		return "", fmt.Errorf("%w: no node can run runtime %q now", runtime.ErrUnavailable, sess.Runtime)
	}
	self := m.cluster.ID()
	best := ""
	for _, n := range usable {
		switch {
		case m.roomOn(n, live) != nil:
		case best == "":
			best = n
		case load[n] < load[best]:
			best = n
		case load[n] == load[best] && n == self:
			best = n
		}
	}
	if best == "" {
		return "", fmt.Errorf("%w: every node that can run runtime %q (%s) already runs as many sessions as its limits.max_sessions_per_node allows; stop or delete a session first",
			ErrNodeFull, sess.Runtime, strings.Join(usable, ", "))
	}
	return best, nil
}

// executorCounts counts the live (starting or ready) executors on each
// node, over every runtime and over sess's runtime, leaving out sess's own
// executor: a resume that recovers it adds none.
func (m *Manager) executorCounts(sess api.Session) (all, ofRuntime map[string]int) {
	all, ofRuntime = map[string]int{}, map[string]int{}
	for _, e := range m.store.Executors("") {
		if e.ID == sess.ExecutorID || (e.Status != api.ExecutorStarting && e.Status != api.ExecutorReady) {
			continue
		}
		all[e.Node]++
		if e.Runtime == sess.Runtime {
			ofRuntime[e.Node]++
		}
	}
	return all, ofRuntime
}

// roomOn says whether node may take one more executor under its
// limits.max_sessions_per_node (ErrNodeFull when it may not).
func (m *Manager) roomOn(node string, live map[string]int) error {
	if limit := m.limitOf(node); limit > 0 && live[node] >= limit {
		return fmt.Errorf("%w: node %s already runs %d sessions, its limits.max_sessions_per_node; stop or delete a session there first", ErrNodeFull, node, live[node])
	}
	return nil
}

// limitOf is node's limits.max_sessions_per_node (0: no cap): this node's
// from its configuration, another's as it last reported it.
func (m *Manager) limitOf(node string) int {
	if node != m.cluster.ID() {
		return m.nodes.MaxSessions(node)
	}
	return m.cfg.Limits.MaxSessionsPerNode
}

// CheckRoom refuses a session that no node has room for under the nodes'
// limits.max_sessions_per_node (ErrNodeFull), as its launch would place
// it: the API asks before it records a new session or resumes one, so a
// refused request leaves nothing behind. Two requests racing at a cap's
// edge may both pass this check; the launches then place one at a time
// (launch), and the one that finds the node full ends in ERROR with
// ErrNodeFull, so the cap holds exactly.
func (m *Manager) CheckRoom(ctx context.Context, sess api.Session) error {
	if _, err := m.place(ctx, sess); errors.Is(err, ErrNodeFull) {
		return err
	}
	return nil
}

// NodeOf is the node that owns a session's executor ("" when none).
func (m *Manager) NodeOf(sessionID string) string {
	sess, _ := m.store.Session(sessionID)
	ex, _ := m.store.Executor(sess.ExecutorID)
	return ex.Node
}

// NodeUnavailable reports whether the node owning a session's executor does
// not answer, and which node that is.
func (m *Manager) NodeUnavailable(sessionID string) (string, bool) {
	node := m.NodeOf(sessionID)
	return node, node != "" && !m.nodes.Available(node)
}

// launchOptions are the runtime options a launch passes to its plugin: the
// session's own, without the placement key, and OptionExistingWorkspace
// when an earlier launch made the workspace (a resume must find it).
func launchOptions(sess api.Session, existing bool) map[string]string {
	out := map[string]string{}
	for k, v := range sess.RuntimeOptions {
		if k != OptionNode {
			out[k] = v
		}
	}
	if existing {
		out[runtime.OptionExistingWorkspace] = "true"
	}
	return out
}

// sharedWorkspace reports whether runtime name declares runtime.CapSharedWorkspace
// (asked of this node's plugin; every node configures it alike).
func (m *Manager) sharedWorkspace(ctx context.Context, name string) bool {
	rt, err := m.nodes.Runtime(m.cluster.ID(), name)
	if err != nil {
		return false
	}
	caps, err := rt.Capabilities(ctx)
	return err == nil && caps.Extra[runtime.CapSharedWorkspace]
}

// waitsForNode reports whether a session's executor must wait for its node:
// the node does not answer and the runtime cannot move the session.
func (m *Manager) waitsForNode(ctx context.Context, ex api.Executor) bool {
	return ex.Node != "" && !m.nodes.Available(ex.Node) && !m.sharedWorkspace(ctx, ex.Runtime)
}

// nodeLost handles a live session whose agentctl went out of reach while
// its node does not answer (the whole machine may be down). The session is
// neither failed nor relaunched elsewhere: it keeps its state and its lease,
// its status says node_unavailable, and recovery takes it up when the node
// answers again (Recovery.RecoverNode). An agent that still runs behind a
// partition stops itself when its lease is not renewed.
func (m *Manager) nodeLost(ctx context.Context, sess api.Session, ex api.Executor, err error) {
	m.log.Warn("session's node does not answer; the session waits for it", "session", sess.ID, "node", ex.Node, "error", err)
	m.publish(ctx, sess.ID, api.EventAgentctlError, map[string]any{"message": state.NodeUnavailableMessage(ex.Node), "reason": api.ReasonNodeUnavailable, "node": ex.Node})
}
