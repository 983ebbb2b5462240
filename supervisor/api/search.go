package api

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/supervisor/state"
)

// Finding a conversation again: a session's name and pin, and the paged
// search of GET /v1/sessions (docs/API.md, "Sessions").

type renameRequest struct {
	// Name is required; "" clears the name.
	Name *string `json:"name"`
}

type pinRequest struct {
	Pinned *bool `json:"pinned"`
}

// renameSession names a session (POST /v1/sessions/{id}/rename): the name
// is trimmed of surrounding spaces; "" clears it.
func (s *Server) renameSession(w http.ResponseWriter, r *http.Request) error {
	sess, err := s.session(r)
	if err != nil {
		return err
	}
	var req renameRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if req.Name == nil {
		return badRequest(`name is required ("" clears the session's name)`)
	}
	name := strings.TrimSpace(*req.Name)
	if err := state.CheckSessionName(name); err != nil {
		return badRequest("%s", strings.TrimPrefix(err.Error(), state.ErrInvalid.Error()+": "))
	}
	return s.setSessionMeta(w, r, &state.SetSessionMetaBody{SessionID: sess.ID, Name: &name})
}

// pinSession pins or unpins a session (POST /v1/sessions/{id}/pin).
func (s *Server) pinSession(w http.ResponseWriter, r *http.Request) error {
	sess, err := s.session(r)
	if err != nil {
		return err
	}
	var req pinRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if req.Pinned == nil {
		return badRequest("pinned is required (true or false)")
	}
	return s.setSessionMeta(w, r, &state.SetSessionMetaBody{SessionID: sess.ID, Pinned: req.Pinned})
}

func (s *Server) setSessionMeta(w http.ResponseWriter, r *http.Request, body *state.SetSessionMetaBody) error {
	if err := s.apply(r, state.CmdSetSessionMeta, body); err != nil {
		return err
	}
	out, _ := s.store.Session(body.SessionID)
	writeJSON(w, http.StatusOK, out)
	return nil
}

// paged reports whether GET /v1/sessions asks for a page: q, cursor or
// limit given (even empty).
func paged(q url.Values) bool {
	return q.Has("q") || q.Has("cursor") || q.Has("limit")
}

// summaryParam reads GET /v1/sessions' ?summary.
func summaryParam(q url.Values) (bool, error) {
	v := q.Get("summary")
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, badRequest("summary %q is not true or false", v)
	}
	return b, nil
}

// searchSessions answers a page of GET /v1/sessions: the sessions f and
// ?q select, from after ?cursor, at most ?limit of them, as items
// (api.SessionPage).
func (s *Server) searchSessions(w http.ResponseWriter, r *http.Request, f state.SessionFilter) error {
	q := r.URL.Query()
	sq := state.SearchQuery{Text: strings.TrimSpace(q.Get("q")), TaskID: f.TaskID, State: f.State, Limit: state.DefaultSearchLimit}
	if n := utf8.RuneCountInString(sq.Text); n > state.MaxSearchQueryLen || !utf8.ValidString(sq.Text) {
		return badRequest("q is at most %d characters of UTF-8 text", state.MaxSearchQueryLen)
	}
	if v := q.Get("limit"); v != "" || q.Has("limit") {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > state.MaxSearchLimit {
			return badRequest("limit %q is not a number from 1 to %d", v, state.MaxSearchLimit)
		}
		sq.Limit = n
	}
	if c := q.Get("cursor"); c != "" {
		k, err := state.ParseCursor(c)
		if err != nil {
			return badRequest("cursor %q is not a next_cursor of GET /v1/sessions; start again without one", c)
		}
		sq.After = &k
	}
	res := s.store.SearchSessions(sq)
	page := api.SessionPage{Sessions: res.Items}
	if page.Sessions == nil {
		page.Sessions = []api.SessionItem{}
	}
	if res.Next != nil {
		page.NextCursor = res.Next.Cursor()
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}
