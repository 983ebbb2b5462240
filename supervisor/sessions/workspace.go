package sessions

import (
	"context"
	"time"

	"github.com/paddockhq/paddock/api"
)

// Inspect detail keys a runtime reports about an executor's workspace
// (the standalone runtime does): its path, and whether it still exists.
const (
	detailWorkspace       = "workspace"
	detailWorkspaceExists = "workspace_exists"
)

// workspaceCheckTimeout bounds the question to the executor's plugin; a
// plugin that does not answer in time leaves the workspace's fate unknown.
const workspaceCheckTimeout = 2 * time.Second

// WorkspaceMissing reports the workspace path of a STOPPED or ERROR
// session whose workspace is gone, so that it is not offered for resume:
// a resume would find nothing to run in (the runtime refuses a launch of
// a session that ran before into a new, empty workspace).
//
// Where the check runs: a workspace of a node-local runtime lives on the
// executor's node, and only that node's plugin can tell whether it is
// there, so the question is its plugin's Inspect (through Nodes, as every
// other call about the executor), never a stat on this node. It is asked
// only for a session whose agent does not run (a running agent works in
// its workspace, and a status read of a running session costs nothing
// more), whose node answers (node_unavailable says more), and whose
// executor has a workspace recorded. A runtime that does not report
// "workspace_exists" (docker, remote), an error or no answer in time
// mean "not known to be missing": the status offers a resume as before,
// and the resume's launch reports what it finds.
func (m *Manager) WorkspaceMissing(ctx context.Context, sessionID string) (string, bool) {
	sess, ok := m.store.Session(sessionID)
	if !ok || (sess.State != api.SessionStopped && sess.State != api.SessionError) || m.IsRunning(sessionID) {
		return "", false
	}
	ex, ok := m.store.Executor(sess.ExecutorID)
	if !ok || len(ex.Handle) == 0 || ex.WorkspacePath == "" || (ex.Node != "" && !m.nodes.Available(ex.Node)) {
		return "", false
	}
	rt, err := m.nodes.Runtime(ex.Node, ex.Runtime)
	if err != nil {
		return "", false
	}
	ctx, cancel := context.WithTimeout(ctx, workspaceCheckTimeout)
	defer cancel()
	in, err := rt.Inspect(ctx, ex.Handle)
	if err != nil || in.Details[detailWorkspaceExists] != "false" {
		return "", false
	}
	path := in.Details[detailWorkspace]
	if path == "" {
		path = ex.WorkspacePath
	}
	return path, true
}
