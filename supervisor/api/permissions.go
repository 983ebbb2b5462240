package api

import (
	"context"
	"net/http"
	"slices"
	"strings"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/supervisor/state"
)

// The agent's work: permission requests that people answer, the agent's
// modes, and its terminals. Requests are replicated state (any node lists
// them); an answer goes to the session's agentctl through the leader, fenced
// with the session's lease token, and the answered request is recorded
// before it is returned.

// answeredByUser is Permission.AnsweredBy for an answer through the API:
// only acl.token (or an open API) may write, the read-only token never.
const answeredByUser = "user"

func (s *Server) listPermissions(w http.ResponseWriter, r *http.Request) error {
	sess, err := s.session(r)
	if err != nil {
		return err
	}
	list := s.store.Permissions(sess.ID)
	writeJSON(w, http.StatusOK, api.Permissions{Permissions: list})
	return nil
}

// pendingPermission returns the session's request id as this leader's state
// holds it once every write committed before the call is applied (a new
// leader may still be applying its predecessor's), refusing one that is
// unknown (404) or no longer pending (409).
func (s *Server) pendingPermission(r *http.Request, sessionID, id string) (api.Permission, error) {
	p, ok := s.store.Permission(sessionID, id)
	if !ok || p.State != api.PermissionPending {
		ctx, cancel := context.WithTimeout(r.Context(), s.leaderWait)
		err := s.cluster.ConfirmRead(ctx)
		cancel()
		if err == nil {
			p, ok = s.store.Permission(sessionID, id)
		}
	}
	switch {
	case !ok:
		return p, errorf(http.StatusNotFound, CodeNotFound, "session %q has no permission request %q", sessionID, id)
	case p.State != api.PermissionPending:
		return p, errorf(http.StatusConflict, CodeConflict, "permission request %q is %s, not pending", id, p.State)
	}
	return p, nil
}

func (s *Server) answerPermission(w http.ResponseWriter, r *http.Request) error {
	sess, err := s.session(r)
	if err != nil {
		return err
	}
	var req api.AnswerPermissionRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if strings.TrimSpace(req.OptionID) == "" {
		return badRequest("option_id is required")
	}
	id := r.PathValue("pid")
	p, err := s.pendingPermission(r, sess.ID, id)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(p.Options, func(o api.PermissionOption) bool { return o.OptionID == req.OptionID }) {
		offered := make([]string, len(p.Options))
		for i, o := range p.Options {
			offered[i] = o.OptionID
		}
		return badRequest("permission request %q offers no option %q (offered: %s)", id, req.OptionID, strings.Join(offered, ", "))
	}
	lc, err := s.lifecycle()
	if err != nil {
		return err
	}
	c, err := lc.Agentctl(sess.ID)
	if err != nil {
		return err
	}
	answered, err := c.AnswerPermission(r.Context(), id, req.OptionID, answeredByUser)
	if err != nil {
		return err
	}
	answered.SessionID = sess.ID
	if err := s.apply(r, state.CmdUpsertPermission, &state.UpsertPermissionBody{SessionID: sess.ID, Permission: answered}); err != nil {
		return err
	}
	if rec, ok := s.store.Permission(sess.ID, id); ok {
		answered = rec
	}
	writeJSON(w, http.StatusOK, answered)
	return nil
}

func (s *Server) setMode(w http.ResponseWriter, r *http.Request) error {
	sess, err := s.session(r)
	if err != nil {
		return err
	}
	var req api.SetModeRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if strings.TrimSpace(req.ModeID) == "" {
		return badRequest("mode_id is required")
	}
	lc, err := s.lifecycle()
	if err != nil {
		return err
	}
	c, err := lc.Agentctl(sess.ID)
	if err != nil {
		return err
	}
	st, err := c.SetMode(r.Context(), req.ModeID)
	if err != nil {
		return err
	}
	modes := api.AgentModes{CurrentModeID: req.ModeID, Available: []api.AgentMode{}}
	if st.Modes != nil {
		modes = *st.Modes
	}
	writeJSON(w, http.StatusOK, modes)
	return nil
}

func (s *Server) listTerminals(w http.ResponseWriter, r *http.Request) error {
	c, err := s.workspaceClient(r)
	if err != nil {
		return err
	}
	list, err := c.Terminals(r.Context())
	if err != nil {
		return err
	}
	if list.Terminals == nil {
		list.Terminals = []api.Terminal{}
	}
	writeJSON(w, http.StatusOK, list)
	return nil
}
