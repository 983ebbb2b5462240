package api

import (
	"context"
	"io"
	"net/http"
	"strconv"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/shared/agentctl"
	"github.com/paddockhq/paddock/supervisor/terminal"
)

// Workspace access is proxied to the session's agentctl, which confines every
// path to the workspace; it works whether or not the agent runs.

// workspaceClient returns the agentctl client of the session in the path.
func (s *Server) workspaceClient(r *http.Request) (*agentctl.Client, error) {
	sess, err := s.session(r)
	if err != nil {
		return nil, err
	}
	lc, err := s.lifecycle()
	if err != nil {
		return nil, err
	}
	return lc.Agentctl(sess.ID)
}

func (s *Server) listFiles(w http.ResponseWriter, r *http.Request) error {
	c, err := s.workspaceClient(r)
	if err != nil {
		return err
	}
	entries, err := c.ListFiles(r.Context(), r.URL.Query().Get("path"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"entries": entries})
	return nil
}

func (s *Server) readFile(w http.ResponseWriter, r *http.Request) error {
	c, err := s.workspaceClient(r)
	if err != nil {
		return err
	}
	data, err := c.ReadFile(r.Context(), r.URL.Query().Get("path"))
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	_, err = w.Write(data)
	return err
}

func (s *Server) writeFile(w http.ResponseWriter, r *http.Request) error {
	c, err := s.workspaceClient(r)
	if err != nil {
		return err
	}
	data, err := io.ReadAll(r.Body)
	if err != nil {
		return bodyError("file body", err)
	}
	path := r.URL.Query().Get("path")
	if err := c.WriteFile(r.Context(), path, data); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"path": path, "size": len(data)})
	return nil
}

func (s *Server) gitStatus(w http.ResponseWriter, r *http.Request) error {
	c, err := s.workspaceClient(r)
	if err != nil {
		return err
	}
	st, err := c.GitStatus(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, st)
	return nil
}

func (s *Server) gitDiff(w http.ResponseWriter, r *http.Request) error {
	c, err := s.workspaceClient(r)
	if err != nil {
		return err
	}
	staged, _ := strconv.ParseBool(r.URL.Query().Get("staged"))
	diff, err := c.GitDiff(r.Context(), staged)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"diff": diff})
	return nil
}

func (s *Server) listPlugins(w http.ResponseWriter, _ *http.Request) error {
	list := []any{}
	if s.plugins != nil {
		for _, p := range s.plugins.List() {
			list = append(list, p)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"plugins": list})
	return nil
}

// Close codes of a terminal refused after its hello: the session is unknown,
// or has no running executor (the 404 and 409 of a request with a token
// header).
const (
	closeTerminalNotFound = 4404
	closeTerminalConflict = 4409
)

// terminal relays a terminal WebSocket to the session's agentctl, where the
// shell lives (so it survives client reconnects and supervisor failover).
//
// A request with a token header has authenticated: an unknown session (404)
// or one without a running executor (409) is refused before the upgrade. A
// browser sends its token in the hello instead, and until the hello has
// authenticated the answer must not depend on the session: such a request is
// upgraded, its hello read and checked, and only then is the session looked
// up, a refusal being an error frame and a close code (4404, 4409).
func (s *Server) terminal(w http.ResponseWriter, r *http.Request) error {
	if !s.checkOrigin(r) {
		return errorf(http.StatusForbidden, CodeForbidden, "origin %q is not in api.allowed_origins", r.Header.Get("Origin"))
	}
	t := terminal.Target{Name: r.URL.Query().Get("name"), Logger: s.log.Named("terminal")}
	if _, present := requestToken(r); present || s.cfg.ACL.Token == "" {
		ex, err := s.terminalExecutor(r)
		if err != nil {
			return err
		}
		c := terminal.Accept(w, r, t)
		if c == nil {
			return nil
		}
		defer c.Close()
		c.Relay(r.Context(), withExecutor(t, ex))
		return nil
	}
	t.HelloToken, t.ReadOnlyToken, t.HelloTimeout = s.cfg.ACL.Token, s.cfg.ACL.ReadToken, s.socketAuthTimeout
	c := terminal.Accept(w, r, t)
	if c == nil {
		return nil
	}
	defer c.Close()
	if !socketSlotOf(r).admit() {
		c.Fail(CodeUnavailable, s.errTooManySockets().Error(), terminal.CloseUnavailable)
		return nil
	}
	ex, err := s.terminalExecutor(r)
	if err != nil {
		status, code := classify(err)
		closeCode := terminal.CloseUnavailable
		switch status {
		case http.StatusNotFound:
			closeCode = closeTerminalNotFound
		case http.StatusConflict:
			closeCode = closeTerminalConflict
		}
		c.Fail(code, err.Error(), closeCode)
		return nil
	}
	c.Relay(r.Context(), withExecutor(t, ex))
	return nil
}

// terminalExecutor is the running executor of the session in the path.
// A terminal is served from this node's own state (the route is not
// forwarded to the leader), so that state must be current: see caughtUpOnce.
func (s *Server) terminalExecutor(r *http.Request) (api.Executor, error) {
	if err := s.caughtUpOnce(r.Context()); err != nil {
		return api.Executor{}, err
	}
	sess, err := s.session(r)
	if err != nil {
		return api.Executor{}, err
	}
	ex, ok := s.store.Executor(sess.ExecutorID)
	if !ok || ex.AgentctlURL == "" || ex.Status == api.ExecutorStopped {
		return api.Executor{}, errorf(http.StatusConflict, CodeConflict, "session %q has no running executor; resume it first", sess.ID)
	}
	return ex, nil
}

// caughtUpOnce returns nil once this node's state has caught up with the
// cluster's log since the server started, catching up now (within
// leaderWait) if it has not.
//
// Right after a start the state is the latest snapshot and nothing more:
// raft applies the log after it only once a leader says what is
// committed. Served from it, a terminal would find no session (404) for
// one created after the snapshot, or the executor the snapshot recorded:
// stopped (409) or an agentctl that has since moved, for a session that
// runs. session() already catches up when a session is missing; this
// covers a session that is there but stale. Until the first catch-up
// succeeds the answer is 503 "starting" (a close with 1013 after a hello),
// which clients retry; afterwards a follower trails the leader by its
// replication lag only, and a missing session still catches up (session).
func (s *Server) caughtUpOnce(ctx context.Context) error {
	if s.caughtUp.Load() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.leaderWait)
	defer cancel()
	if err := s.cluster.CatchUp(ctx); err != nil {
		return errorf(http.StatusServiceUnavailable, CodeUnavailable,
			"this node is starting: it has not caught up with the cluster's log since it started (%v); retry", err)
	}
	s.caughtUp.Store(true)
	return nil
}

// withExecutor points a terminal at the executor's agentctl.
func withExecutor(t terminal.Target, ex api.Executor) terminal.Target {
	t.URL, t.Fingerprint, t.Secret = ex.AgentctlURL, ex.AgentctlFingerprint, ex.Secret
	return t
}
