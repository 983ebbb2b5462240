package api

import (
	"io"
	"net/http"
	"strconv"

	"github.com/paddockhq/paddock/shared/agentctl"
	"github.com/paddockhq/paddock/supervisor/state"
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

// terminal relays a terminal WebSocket to the session's agentctl, where the
// shell lives (so it survives client reconnects and supervisor failover).
// A client that sent no token header authenticates in its hello frame.
func (s *Server) terminal(w http.ResponseWriter, r *http.Request) error {
	sess, err := s.session(r)
	if err != nil {
		return err
	}
	ex, ok := s.store.Executor(sess.ExecutorID)
	if !ok || ex.AgentctlURL == "" || ex.Status == state.ExecutorStopped {
		return errorf(http.StatusConflict, CodeConflict, "session %q has no running executor; resume it first", sess.ID)
	}
	if !s.checkOrigin(r) {
		return errorf(http.StatusForbidden, CodeForbidden, "origin %q is not in api.allowed_origins", r.Header.Get("Origin"))
	}
	var helloToken, readToken string
	if _, present := requestToken(r); !present {
		helloToken, readToken = s.cfg.ACL.Token, s.cfg.ACL.ReadToken
	}
	terminal.Serve(w, r, terminal.Target{URL: ex.AgentctlURL, Fingerprint: ex.AgentctlFingerprint, Secret: ex.Secret, Name: r.URL.Query().Get("name"),
		HelloToken: helloToken, ReadOnlyToken: readToken, Logger: s.log.Named("terminal")})
	return nil
}
