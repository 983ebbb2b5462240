package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/shared/agentctl"
)

// A session's conversation controller is the `paddock chat` holding it: a
// registration (lease) the chat renews while it runs, kept by the session's
// agentctl — the one place every node of the cluster reaches for the
// session, so whichever node relays a chat's renewal, all agree on who
// holds it. The status object shows it in "controller" with via "chat".
//
// Precedence: when a client is attached to a pty agent's own terminal and a
// chat is registered too, the status names the terminal's client: it owns
// the agent's keystrokes, so it is the one a newcomer would take over.

// chatFresh is how long the status object reuses what agentctl last said
// of a session's chat registration before asking again: a status read
// costs at most one agentctl call a second per session, and a change made
// through another node (or a lapse) shows within that.
const chatFresh = time.Second

// chatSeen is what agentctl last said of a session's chat registration
// (nil: none), and when.
type chatSeen struct {
	ctl *api.Controller
	at  time.Time
}

// chatController returns the chat holding a session's conversation (nil
// when none does or agentctl does not answer), from the recent answer or
// by asking agentctl.
func (s *Server) chatController(ctx context.Context, sessionID string) *api.Controller {
	if v, ok := s.chats.Load(sessionID); ok && time.Since(v.(chatSeen).at) < chatFresh {
		return v.(chatSeen).ctl
	}
	if s.sessions == nil {
		return nil
	}
	c, err := s.sessions.Agentctl(sessionID)
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, agentFactsTimeout)
	defer cancel()
	got, err := c.ChatController(ctx)
	if err != nil {
		return nil
	}
	return s.sawChat(sessionID, got)
}

// sawChat records agentctl's answer about a session's chat registration
// and returns it as the status object's controller.
func (s *Server) sawChat(sessionID string, got *agentctl.ChatController) *api.Controller {
	var ctl *api.Controller
	if got != nil {
		ctl = &api.Controller{Host: got.Host, PID: got.PID, Nonce: got.Nonce, Since: got.Since, Via: api.ViaChat}
	}
	s.chats.Store(sessionID, chatSeen{ctl: ctl, at: time.Now()})
	return ctl
}

// putController answers PUT /v1/sessions/{id}/controller: a chat registers
// (or renews) itself as the session's conversation controller. 409 when
// another client holds it and the request does not take it over.
func (s *Server) putController(w http.ResponseWriter, r *http.Request) error {
	sess, err := s.session(r)
	if err != nil {
		return err
	}
	var req api.ControllerRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if err := req.Client.CheckComplete(); err != nil {
		return badRequest("%v", err)
	}
	if sess.State == api.SessionCompleted {
		return errorf(http.StatusConflict, CodeConflict, "session %s was deleted", sess.ID)
	}
	c, err := s.controllerAgentctl(sess.ID)
	if err != nil {
		return err
	}
	got, err := c.ClaimChatController(r.Context(), req.Client, req.Takeover)
	if err != nil {
		return heldError(sess.ID, err, `; "takeover": true takes it over`)
	}
	writeJSON(w, http.StatusOK, s.sawChat(sess.ID, &got))
	return nil
}

// deleteController answers DELETE /v1/sessions/{id}/controller?nonce=: the
// chat with that nonce releases the conversation. 204 also when nobody
// held it (a registration that lapsed); 409 when another client holds it.
func (s *Server) deleteController(w http.ResponseWriter, r *http.Request) error {
	sess, err := s.session(r)
	if err != nil {
		return err
	}
	nonce := r.URL.Query().Get("nonce")
	if nonce == "" {
		return badRequest("nonce is required: the releasing chat's client nonce")
	}
	c, err := s.controllerAgentctl(sess.ID)
	if err != nil {
		return err
	}
	if err := c.ReleaseChatController(r.Context(), nonce); err != nil {
		return heldError(sess.ID, err, "")
	}
	s.chats.Delete(sess.ID)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// controllerAgentctl is the agentctl of a session, for its controller.
func (s *Server) controllerAgentctl(id string) (*agentctl.Client, error) {
	lc, err := s.lifecycle()
	if err != nil {
		return nil, err
	}
	return lc.Agentctl(id)
}

// heldError turns agentctl's refusal (another client holds the session) into
// this API's conflict, without agentctl's own prefix.
func heldError(id string, err error, hint string) error {
	var ae *agentctl.APIError
	if errors.As(err, &ae) && ae.Status == http.StatusConflict {
		return errorf(http.StatusConflict, CodeConflict, "session %s: %s%s", id, ae.Message, hint)
	}
	return err
}
