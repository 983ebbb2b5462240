package agentctl

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/paddockhq/paddock/api"
)

// DefaultChatControllerTTL is how long a chat's registration as the
// session's conversation controller lasts without a renewal. `paddock chat`
// renews every 5 s, so a chat that lost a renewal or two keeps it, and one
// that crashed (or lost its network) is gone within 15 s.
const DefaultChatControllerTTL = 15 * time.Second

// ChatController is the client holding a session's conversation: the
// identity it registered, when it first did, and when its registration
// lapses unless renewed.
type ChatController struct {
	Host    string    `json:"host"`
	PID     int       `json:"pid"`
	Nonce   string    `json:"nonce"`
	Since   time.Time `json:"since"`
	Expires time.Time `json:"expires"`
}

// ChatControllerState answers GET /v1/controller/chat: the registered chat,
// nil when none holds the conversation.
type ChatControllerState struct {
	Controller *ChatController `json:"controller"`
}

// ErrChatHeld: another client (another nonce) holds the conversation.
var ErrChatHeld = errors.New("another client holds the session's conversation")

// chatLease is the registration of the chat holding the conversation. It
// lives in agentctl, the one place every supervisor node reaches for the
// session, and in memory only: a restarted agentctl forgets it, and the
// chat's next renewal registers it again.
type chatLease struct {
	mu  sync.Mutex
	ttl time.Duration
	cur *ChatController
}

// live returns the current registration, dropping one that has lapsed.
// Called with mu held.
func (l *chatLease) live(now time.Time) *ChatController {
	if l.cur != nil && !now.Before(l.cur.Expires) {
		l.cur = nil
	}
	return l.cur
}

// get returns a copy of the current registration (nil when none).
func (l *chatLease) get() *ChatController {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c := l.live(time.Now()); c != nil {
		cp := *c
		return &cp
	}
	return nil
}

// claim registers id, or renews its registration (same nonce: Since is
// kept). Another live client's registration is replaced only with
// takeover; otherwise the answer is ErrChatHeld with the holder.
func (l *chatLease) claim(id api.ClientID, takeover bool) (ChatController, error) {
	if err := id.CheckComplete(); err != nil {
		return ChatController{}, fmt.Errorf("%w: %v", errBadRequest, err)
	}
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	cur := l.live(now)
	switch {
	case cur != nil && cur.Nonce == id.Nonce:
		// A renewal. Host and pid come from the same client: a nonce
		// is made once per process.
		cur.Host, cur.PID = id.Host, id.PID
	case cur != nil && !takeover:
		return *cur, fmt.Errorf("%w: in chat on %s (pid %d) since %s", ErrChatHeld, cur.Host, cur.PID, cur.Since.UTC().Format(time.RFC3339))
	default:
		cur = &ChatController{Host: id.Host, PID: id.PID, Nonce: id.Nonce, Since: now.UTC()}
		l.cur = cur
	}
	cur.Expires = now.Add(l.ttl).UTC()
	return *cur, nil
}

// release ends the registration of the client with that nonce. Releasing
// when nobody holds it is a no-op (the registration may have lapsed); a
// nonce that is not the holder's is refused with ErrChatHeld.
func (l *chatLease) release(nonce string) error {
	if nonce == "" {
		return fmt.Errorf("%w: nonce is required", errBadRequest)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	cur := l.live(time.Now())
	switch {
	case cur == nil:
		return nil
	case cur.Nonce != nonce:
		return fmt.Errorf("%w: in chat on %s (pid %d); a release must give the holder's nonce", ErrChatHeld, cur.Host, cur.PID)
	}
	l.cur = nil
	return nil
}

// getChatController answers GET /v1/controller/chat.
func (s *Server) getChatController(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, 200, ChatControllerState{Controller: s.chat.get()})
}

// putChatController answers PUT /v1/controller/chat (body
// api.ControllerRequest): 200 with the registration, 409 when another
// client holds it and takeover was not asked. Not fenced: the registration
// is the chat's, not the session lease holder's, and any supervisor node
// may relay it.
func (s *Server) putChatController(w http.ResponseWriter, r *http.Request) {
	var req api.ControllerRequest
	if !decodeJSON(w, r, &req) {
		return
	}
	c, err := s.chat.claim(req.Client, req.Takeover)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, 200, c)
}

// deleteChatController answers DELETE /v1/controller/chat?nonce=: 204 when
// the nonce's registration is gone (or none was held), 409 when another
// client holds it.
func (s *Server) deleteChatController(w http.ResponseWriter, r *http.Request) {
	if err := s.chat.release(r.URL.Query().Get("nonce")); err != nil {
		writeErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// ChatController calls GET /v1/controller/chat: the chat holding the
// conversation, nil when none does.
func (c *Client) ChatController(ctx context.Context) (*ChatController, error) {
	var v ChatControllerState
	return v.Controller, c.doJSON(ctx, "GET", "/v1/controller/chat", nil, &v)
}

// ClaimChatController calls PUT /v1/controller/chat: registers or renews
// id as the conversation's controller. An *APIError with status 409 says
// another client holds it.
func (c *Client) ClaimChatController(ctx context.Context, id api.ClientID, takeover bool) (ChatController, error) {
	var v ChatController
	return v, c.doJSON(ctx, "PUT", "/v1/controller/chat", api.ControllerRequest{Client: id, Takeover: takeover}, &v)
}

// ReleaseChatController calls DELETE /v1/controller/chat?nonce=.
func (c *Client) ReleaseChatController(ctx context.Context, nonce string) error {
	return c.doJSON(ctx, "DELETE", "/v1/controller/chat?"+url.Values{"nonce": {nonce}}.Encode(), nil, nil)
}
