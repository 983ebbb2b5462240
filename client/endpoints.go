package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/paddockhq/paddock/api"
)

// seg escapes one path segment (an id) for a URL path.
func seg(id string) string { return url.PathEscape(id) }

// requireID refuses an empty identifier before any request is sent.
func requireID(what, id string) error {
	if strings.TrimSpace(id) == "" {
		return fmt.Errorf("%s id is empty", what)
	}
	return nil
}

// Health returns this node's health.
func (c *Client) Health(ctx context.Context, opts ...CallOption) (*api.Health, error) {
	var out api.Health
	if err := c.do(ctx, http.MethodGet, "/v1/health", nil, nil, &out, opts); err != nil {
		return nil, err
	}
	return &out, nil
}

// Status returns the cluster's leader, term, indexes and nodes.
func (c *Client) Status(ctx context.Context, opts ...CallOption) (*api.ClusterStatus, error) {
	var out api.ClusterStatus
	if err := c.do(ctx, http.MethodGet, "/v1/status", nil, nil, &out, opts); err != nil {
		return nil, err
	}
	return &out, nil
}

// RaftPeers lists the raft servers of the cluster.
func (c *Client) RaftPeers(ctx context.Context, opts ...CallOption) ([]api.Peer, error) {
	var out struct {
		Peers []api.Peer `json:"peers"`
	}
	if err := c.do(ctx, http.MethodGet, "/v1/operator/raft/peers", nil, nil, &out, opts); err != nil {
		return nil, err
	}
	return out.Peers, nil
}

// RemovePeer removes the raft server with the given id from the cluster.
func (c *Client) RemovePeer(ctx context.Context, id string, opts ...CallOption) error {
	if err := requireID("peer", id); err != nil {
		return err
	}
	return c.do(ctx, http.MethodDelete, "/v1/operator/raft/peers/"+seg(id), nil, nil, nil, opts)
}

// AddPeer asks the leader to add the server answering at httpAddr (host:port)
// as a voter and returns its id.
func (c *Client) AddPeer(ctx context.Context, httpAddr string, opts ...CallOption) (string, error) {
	if httpAddr == "" {
		return "", fmt.Errorf("add peer: missing the server's HTTP address (host:port)")
	}
	var out struct {
		Added string `json:"added"`
	}
	if err := c.do(ctx, http.MethodPost, "/v1/operator/raft/peers", nil, map[string]string{"address": httpAddr}, &out, opts); err != nil {
		return "", err
	}
	return out.Added, nil
}

// TransferLeadership asks the leader to hand leadership to the server id (any
// voter when id is empty) and returns the new leader's id.
func (c *Client) TransferLeadership(ctx context.Context, id string, opts ...CallOption) (string, error) {
	var in any
	if id != "" {
		in = map[string]string{"id": id}
	}
	var out struct {
		LeaderID string `json:"leader_id"`
	}
	if err := c.do(ctx, http.MethodPost, "/v1/operator/raft/transfer-leadership", nil, in, &out, opts); err != nil {
		return "", err
	}
	return out.LeaderID, nil
}

// SnapshotSave streams the cluster's state snapshot into w and returns the
// number of bytes written.
func (c *Client) SnapshotSave(ctx context.Context, w io.Writer, opts ...CallOption) (int64, error) {
	cc := c.callConfig(opts)
	req := request{method: http.MethodGet, path: "/v1/operator/snapshot", read: true, accept: "application/octet-stream"}
	resp, cancel, err := c.send(ctx, req, cc)
	if err != nil {
		return 0, err
	}
	defer cancel()
	defer resp.Body.Close()
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return n, fmt.Errorf("save snapshot: %w", err)
	}
	return n, nil
}

// SnapshotRestore replaces the cluster's state with the snapshot read from r.
func (c *Client) SnapshotRestore(ctx context.Context, r io.Reader, opts ...CallOption) (*api.SnapshotRestoreResult, error) {
	cc := c.callConfig(opts)
	req := request{method: http.MethodPut, path: "/v1/operator/snapshot", body: r, contentType: "application/octet-stream"}
	resp, cancel, err := c.send(ctx, req, cc)
	if err != nil {
		return nil, err
	}
	defer cancel()
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("restore snapshot: read response: %w", err)
	}
	if cc.capture != nil {
		*cc.capture = body
	}
	var out api.SnapshotRestoreResult
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, fmt.Errorf("PUT /v1/operator/snapshot: malformed response from server: %w", err)
	}
	return &out, nil
}

// CreateTask creates a task.
func (c *Client) CreateTask(ctx context.Context, req api.CreateTaskRequest, opts ...CallOption) (*api.Task, error) {
	if strings.TrimSpace(req.Title) == "" {
		return nil, fmt.Errorf("task title is empty")
	}
	var out api.Task
	if err := c.do(ctx, http.MethodPost, "/v1/tasks", nil, req, &out, opts); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListTasks lists every task.
func (c *Client) ListTasks(ctx context.Context, opts ...CallOption) ([]api.Task, error) {
	var out struct {
		Tasks []api.Task `json:"tasks"`
	}
	if err := c.do(ctx, http.MethodGet, "/v1/tasks", nil, nil, &out, opts); err != nil {
		return nil, err
	}
	return out.Tasks, nil
}

// GetTask returns one task.
func (c *Client) GetTask(ctx context.Context, id string, opts ...CallOption) (*api.Task, error) {
	if err := requireID("task", id); err != nil {
		return nil, err
	}
	var out api.Task
	if err := c.do(ctx, http.MethodGet, "/v1/tasks/"+seg(id), nil, nil, &out, opts); err != nil {
		return nil, err
	}
	return &out, nil
}

// CloseTask marks the task DONE; its sessions are left as they are, and it
// takes no new sessions until it is reopened.
func (c *Client) CloseTask(ctx context.Context, id string, opts ...CallOption) (*api.Task, error) {
	return c.taskCall(ctx, http.MethodPost, id, "/close", opts)
}

// ReopenTask makes a DONE task follow its sessions' states again.
func (c *Client) ReopenTask(ctx context.Context, id string, opts ...CallOption) (*api.Task, error) {
	return c.taskCall(ctx, http.MethodPost, id, "/reopen", opts)
}

// DeleteTask stops and deletes the task's sessions, then removes the task;
// it returns the task as it was.
func (c *Client) DeleteTask(ctx context.Context, id string, opts ...CallOption) (*api.Task, error) {
	return c.taskCall(ctx, http.MethodDelete, id, "", opts)
}

func (c *Client) taskCall(ctx context.Context, method, id, suffix string, opts []CallOption) (*api.Task, error) {
	if err := requireID("task", id); err != nil {
		return nil, err
	}
	var out api.Task
	if err := c.do(ctx, method, "/v1/tasks/"+seg(id)+suffix, nil, nil, &out, opts); err != nil {
		return nil, err
	}
	return &out, nil
}

// CreateSession creates and starts a session of the task taskID.
func (c *Client) CreateSession(ctx context.Context, taskID string, req api.CreateSessionRequest, opts ...CallOption) (*api.Session, error) {
	if err := requireID("task", taskID); err != nil {
		return nil, err
	}
	var out api.Session
	if err := c.do(ctx, http.MethodPost, "/v1/tasks/"+seg(taskID)+"/sessions", nil, req, &out, opts); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListSessions lists sessions, optionally only those of taskID and/or in
// sessionState (empty strings match all).
func (c *Client) ListSessions(ctx context.Context, taskID, sessionState string, opts ...CallOption) ([]api.Session, error) {
	q := url.Values{}
	if taskID != "" {
		q.Set("task_id", taskID)
	}
	if sessionState != "" {
		q.Set("state", sessionState)
	}
	var out struct {
		Sessions []api.Session `json:"sessions"`
	}
	if err := c.do(ctx, http.MethodGet, "/v1/sessions", q, nil, &out, opts); err != nil {
		return nil, err
	}
	return out.Sessions, nil
}

// GetSession returns one session.
func (c *Client) GetSession(ctx context.Context, id string, opts ...CallOption) (*api.Session, error) {
	return c.sessionCall(ctx, http.MethodGet, id, "", opts)
}

// SessionStatus returns the session's status object (docs/API.md, "Status object").
func (c *Client) SessionStatus(ctx context.Context, id string, opts ...CallOption) (*api.Status, error) {
	if err := requireID("session", id); err != nil {
		return nil, err
	}
	var out api.Status
	if err := c.do(ctx, http.MethodGet, "/v1/sessions/"+seg(id)+"/status", nil, nil, &out, opts); err != nil {
		return nil, err
	}
	return &out, nil
}

// Prompt sends a prompt to the session's agent. A prompt while a turn runs is
// refused with code "conflict".
func (c *Client) Prompt(ctx context.Context, id, text string, opts ...CallOption) error {
	if err := requireID("session", id); err != nil {
		return err
	}
	if strings.TrimSpace(text) == "" {
		return fmt.Errorf("prompt text is empty")
	}
	in := map[string]string{"text": text}
	return c.do(ctx, http.MethodPost, "/v1/sessions/"+seg(id)+"/prompt", nil, in, nil, opts)
}

// Cancel cancels the session's running turn.
func (c *Client) Cancel(ctx context.Context, id string, opts ...CallOption) error {
	if err := requireID("session", id); err != nil {
		return err
	}
	return c.do(ctx, http.MethodPost, "/v1/sessions/"+seg(id)+"/cancel", nil, nil, nil, opts)
}

// Messages returns the session's conversation, one entry per message.
func (c *Client) Messages(ctx context.Context, id string, opts ...CallOption) ([]api.Message, error) {
	if err := requireID("session", id); err != nil {
		return nil, err
	}
	var out struct {
		Messages []api.Message `json:"messages"`
	}
	if err := c.do(ctx, http.MethodGet, "/v1/sessions/"+seg(id)+"/messages", nil, nil, &out, opts); err != nil {
		return nil, err
	}
	return out.Messages, nil
}

// Resume resumes a STOPPED or ERROR session. A session with a live owner is
// refused with code "conflict".
func (c *Client) Resume(ctx context.Context, id string, opts ...CallOption) (*api.Session, error) {
	return c.sessionCall(ctx, http.MethodPost, id, "/resume", opts)
}

// Stop stops the session; STOPPED is written once the agent has drained.
func (c *Client) Stop(ctx context.Context, id string, opts ...CallOption) (*api.Session, error) {
	return c.sessionCall(ctx, http.MethodPost, id, "/stop", opts)
}

// DeleteSession ends the session for good (COMPLETED).
func (c *Client) DeleteSession(ctx context.Context, id string, opts ...CallOption) (*api.Session, error) {
	return c.sessionCall(ctx, http.MethodDelete, id, "", opts)
}

func (c *Client) sessionCall(ctx context.Context, method, id, suffix string, opts []CallOption) (*api.Session, error) {
	if err := requireID("session", id); err != nil {
		return nil, err
	}
	var out api.Session
	if err := c.do(ctx, method, "/v1/sessions/"+seg(id)+suffix, nil, nil, &out, opts); err != nil {
		return nil, err
	}
	return &out, nil
}

// Permissions returns the permission requests of the session's agent,
// oldest first: those waiting for an answer (state "pending") and those
// that ended (answered, timed_out, cancelled).
func (c *Client) Permissions(ctx context.Context, id string, opts ...CallOption) ([]api.Permission, error) {
	if err := requireID("session", id); err != nil {
		return nil, err
	}
	var out api.Permissions
	if err := c.do(ctx, http.MethodGet, "/v1/sessions/"+seg(id)+"/permissions", nil, nil, &out, opts); err != nil {
		return nil, err
	}
	return out.Permissions, nil
}

// AnswerPermission answers a pending permission request with one of the
// options it offers and returns the request as answered. An option it does
// not offer is refused with code "bad_request", a request already ended
// with "conflict", an unknown one with "not_found".
func (c *Client) AnswerPermission(ctx context.Context, id, permissionID, optionID string, opts ...CallOption) (*api.Permission, error) {
	if err := requireID("session", id); err != nil {
		return nil, err
	}
	if err := requireID("permission", permissionID); err != nil {
		return nil, err
	}
	if strings.TrimSpace(optionID) == "" {
		return nil, fmt.Errorf("answer permission: option id is empty")
	}
	var out api.Permission
	in := api.AnswerPermissionRequest{OptionID: optionID}
	if err := c.do(ctx, http.MethodPost, "/v1/sessions/"+seg(id)+"/permissions/"+seg(permissionID), nil, in, &out, opts); err != nil {
		return nil, err
	}
	return &out, nil
}

// SetMode switches the session's agent to one of the modes it offers
// (the status object's modes) and returns its modes afterwards.
func (c *Client) SetMode(ctx context.Context, id, modeID string, opts ...CallOption) (*api.AgentModes, error) {
	if err := requireID("session", id); err != nil {
		return nil, err
	}
	if strings.TrimSpace(modeID) == "" {
		return nil, fmt.Errorf("set mode: mode id is empty")
	}
	var out api.AgentModes
	if err := c.do(ctx, http.MethodPost, "/v1/sessions/"+seg(id)+"/mode", nil, api.SetModeRequest{ModeID: modeID}, &out, opts); err != nil {
		return nil, err
	}
	return &out, nil
}

// Terminals lists the session's named terminals, the agent's commands
// among them.
func (c *Client) Terminals(ctx context.Context, id string, opts ...CallOption) ([]api.Terminal, error) {
	if err := requireID("session", id); err != nil {
		return nil, err
	}
	var out struct {
		Terminals []api.Terminal `json:"terminals"`
	}
	if err := c.do(ctx, http.MethodGet, "/v1/sessions/"+seg(id)+"/terminals", nil, nil, &out, opts); err != nil {
		return nil, err
	}
	return out.Terminals, nil
}

// Lease returns the session's lease.
func (c *Client) Lease(ctx context.Context, id string, opts ...CallOption) (*api.Lease, error) {
	if err := requireID("session", id); err != nil {
		return nil, err
	}
	var out api.Lease
	if err := c.do(ctx, http.MethodGet, "/v1/sessions/"+seg(id)+"/lease", nil, nil, &out, opts); err != nil {
		return nil, err
	}
	return &out, nil
}

// Files lists the workspace directory path ("" for the root) of the session.
// The server may answer {"files":[…]} or {"entries":[…]}.
func (c *Client) Files(ctx context.Context, id, path string, opts ...CallOption) ([]api.FileEntry, error) {
	if err := requireID("session", id); err != nil {
		return nil, err
	}
	q := url.Values{}
	if path != "" {
		q.Set("path", path)
	}
	var out struct {
		Files   []api.FileEntry `json:"files"`
		Entries []api.FileEntry `json:"entries"`
	}
	if err := c.do(ctx, http.MethodGet, "/v1/sessions/"+seg(id)+"/files", q, nil, &out, opts); err != nil {
		return nil, err
	}
	if out.Files != nil {
		return out.Files, nil
	}
	return out.Entries, nil
}

// ReadFile returns the contents of the workspace file path of the session.
func (c *Client) ReadFile(ctx context.Context, id, path string, opts ...CallOption) ([]byte, error) {
	if err := requireID("session", id); err != nil {
		return nil, err
	}
	cc := c.callConfig(opts)
	req := request{
		method: http.MethodGet, path: "/v1/sessions/" + seg(id) + "/files/content",
		query: url.Values{"path": {path}}, read: true, accept: "application/octet-stream",
	}
	resp, cancel, err := c.send(ctx, req, cc)
	if err != nil {
		return nil, err
	}
	defer cancel()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("read file %q: %w", path, err)
	}
	return b, nil
}

// WriteFile replaces the workspace file path of the session with the bytes of r.
func (c *Client) WriteFile(ctx context.Context, id, path string, r io.Reader, opts ...CallOption) error {
	if err := requireID("session", id); err != nil {
		return err
	}
	if path == "" {
		return fmt.Errorf("file path is empty")
	}
	cc := c.callConfig(opts)
	req := request{
		method: http.MethodPut, path: "/v1/sessions/" + seg(id) + "/files/content",
		query: url.Values{"path": {path}}, body: r, contentType: "application/octet-stream",
	}
	resp, cancel, err := c.send(ctx, req, cc)
	if err != nil {
		return err
	}
	defer cancel()
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return nil
}

// GitStatus returns the git status of the session's worktree as the server's
// JSON (its shape is not yet fixed by the contract).
func (c *Client) GitStatus(ctx context.Context, id string, opts ...CallOption) (json.RawMessage, error) {
	if err := requireID("session", id); err != nil {
		return nil, err
	}
	var out json.RawMessage
	if err := c.do(ctx, http.MethodGet, "/v1/sessions/"+seg(id)+"/git/status", nil, nil, &out, opts); err != nil {
		return nil, err
	}
	return out, nil
}

// GitDiff returns the diff of the session's worktree. A JSON answer of the form
// {"diff":"…"} is unwrapped; any other body is returned as text.
func (c *Client) GitDiff(ctx context.Context, id string, opts ...CallOption) (string, error) {
	if err := requireID("session", id); err != nil {
		return "", err
	}
	cc := c.callConfig(opts)
	req := request{method: http.MethodGet, path: "/v1/sessions/" + seg(id) + "/git/diff", read: true, accept: "text/plain, application/json"}
	resp, cancel, err := c.send(ctx, req, cc)
	if err != nil {
		return "", err
	}
	defer cancel()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", fmt.Errorf("git diff: %w", err)
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		var out struct {
			Diff *string `json:"diff"`
		}
		if err := json.Unmarshal(b, &out); err != nil {
			return "", fmt.Errorf("GET /v1/sessions/%s/git/diff: malformed response from server: %w", id, err)
		}
		if out.Diff != nil {
			return *out.Diff, nil
		}
	}
	return string(b), nil
}

// Executors lists executor rows, only those of sessionID when it is not empty.
func (c *Client) Executors(ctx context.Context, sessionID string, opts ...CallOption) ([]api.Executor, error) {
	q := url.Values{}
	if sessionID != "" {
		q.Set("session_id", sessionID)
	}
	var out struct {
		Executors []api.Executor `json:"executors"`
	}
	if err := c.do(ctx, http.MethodGet, "/v1/executors", q, nil, &out, opts); err != nil {
		return nil, err
	}
	return out.Executors, nil
}

// Executor returns one executor row.
func (c *Client) Executor(ctx context.Context, id string, opts ...CallOption) (*api.Executor, error) {
	if err := requireID("executor", id); err != nil {
		return nil, err
	}
	var out api.Executor
	if err := c.do(ctx, http.MethodGet, "/v1/executors/"+seg(id), nil, nil, &out, opts); err != nil {
		return nil, err
	}
	return &out, nil
}

// Plugins lists the loaded runtime plugins.
func (c *Client) Plugins(ctx context.Context, opts ...CallOption) ([]api.Plugin, error) {
	var out struct {
		Plugins []api.Plugin `json:"plugins"`
	}
	if err := c.do(ctx, http.MethodGet, "/v1/plugins", nil, nil, &out, opts); err != nil {
		return nil, err
	}
	return out.Plugins, nil
}

// Agents lists the configured agent profiles.
func (c *Client) Agents(ctx context.Context, opts ...CallOption) ([]api.Agent, error) {
	var out struct {
		Agents []api.Agent `json:"agents"`
	}
	if err := c.do(ctx, http.MethodGet, "/v1/agents", nil, nil, &out, opts); err != nil {
		return nil, err
	}
	return out.Agents, nil
}
