package agentctl

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/shared/agentctl/ptyagent"
	"github.com/paddockhq/paddock/shared/agentctl/workspace"
)

// errBadRequest marks errors caused by the request (HTTP 400).
var errBadRequest = errors.New("bad request")

// maxBody bounds JSON request bodies.
const maxBody = 1 << 20

// leftoverWait bounds NewServer's wait for the agents an earlier agentctl
// on its state dir left running to be gone after SIGKILL (endLeftovers).
const leftoverWait = 5 * time.Second

// Terminals serves terminal WebSockets and says who controls one; implemented by
// shared/term (cmd/agentctl adapts its Manager).
type Terminals interface {
	ServeTerminal(w http.ResponseWriter, r *http.Request, name string)
	// ControllerOf reports the connection controlling the named terminal; false
	// when none does.
	ControllerOf(name string) (TerminalController, bool)
}

// TerminalLister is implemented by Terminals that can list the terminals
// they run themselves (people's shells, and "agent" while attached), for
// GET /v1/terminals; agentctl adds the agent's command terminals.
type TerminalLister interface {
	ListTerminals() []api.Terminal
}

// AgentTerminal is the name of the terminal that shows a pty agent's own PTY.
const AgentTerminalName = "agent"

// Options configure a Server.
type Options struct {
	SessionID string
	Workspace string
	StateDir  string // default WORKSPACE/.paddock
	Secret    string
	Logger    hclog.Logger
	// InitTimeout bounds ACP initialize/session setup and the pty prompt wait (default 10s).
	InitTimeout time.Duration
	// Env is the environment agents inherit (default os.Environ()); PATH in it resolves commands.
	Env []string
	// Terminals, when set, is mounted at GET /v1/terminals/{name}.
	Terminals Terminals
	// AgentCredential, when set, is the user and group the agent runs as
	// (agentctl's -agent-user), so that it cannot read agentctl's state.
	AgentCredential *syscall.Credential
	// AgentNice, when not 0, is the nice value the agent runs at
	// (agentctl's -nice; see shared/nice).
	AgentNice int
	// ChatControllerTTL is how long a chat's registration as the
	// conversation's controller lasts unrenewed (default
	// DefaultChatControllerTTL).
	ChatControllerTTL time.Duration
}

// Server is one session's agentctl daemon.
type Server struct {
	opts    Options
	log     hclog.Logger
	nonce   string
	started time.Time
	fence   *fence
	ws      *workspace.Workspace
	mgr     *manager
	events  *eventLog
	mux     *http.ServeMux
	lease   *leaseWatch
	chat    *chatLease
}

// NewServer validates opts, prepares the state dir and loads durable state.
func NewServer(opts Options) (*Server, error) {
	if opts.Secret == "" {
		return nil, errors.New("agentctl: secret is empty")
	}
	if err := CheckToken("session id", opts.SessionID); err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	if opts.InitTimeout <= 0 {
		opts.InitTimeout = 10 * time.Second
	}
	if opts.Env == nil {
		opts.Env = os.Environ()
	}
	if opts.ChatControllerTTL <= 0 {
		opts.ChatControllerTTL = DefaultChatControllerTTL
	}
	ws, err := workspace.New(opts.Workspace)
	if err != nil {
		return nil, err
	}
	opts.Workspace = ws.Dir()
	if opts.StateDir == "" {
		opts.StateDir = filepath.Join(opts.Workspace, ".paddock")
		ws, err = workspace.New(opts.Workspace, ".paddock")
		if err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(opts.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("state dir: %w", err)
	}
	f, err := loadFence(opts.StateDir)
	if err != nil {
		return nil, err
	}
	if err := endLeftovers(opts.StateDir, leftoverWait, opts.Logger); err != nil {
		return nil, err
	}
	var nb [16]byte
	if _, err := rand.Read(nb[:]); err != nil {
		return nil, fmt.Errorf("nonce: %w", err)
	}
	ev := newEventLog()
	s := &Server{opts: opts, log: opts.Logger, nonce: hex.EncodeToString(nb[:]), started: time.Now().UTC(), fence: f, ws: ws, events: ev}
	s.mgr = &manager{log: opts.Logger.Named("agent"), workspace: opts.Workspace, sessionID: opts.SessionID, stateDir: opts.StateDir,
		initTimeout: opts.InitTimeout, credential: opts.AgentCredential, nice: opts.AgentNice, events: ev, env: opts.Env, status: StatusNone,
		ws: ws, terms: &commandTerminals{}}
	s.mgr.loadResume()
	s.lease = &leaseWatch{expire: s.selfFence}
	s.chat = &chatLease{ttl: opts.ChatControllerTTL}
	s.routes()
	return s, nil
}

// Nonce is this boot's random nonce.
func (s *Server) Nonce() string { return s.nonce }

// AgentTerminal returns the PTY of the running pty-protocol agent (nil when
// none): the terminal named "agent".
func (s *Server) AgentTerminal() *ptyagent.Agent {
	s.mgr.mu.Lock()
	defer s.mgr.mu.Unlock()
	return s.mgr.pty
}

// CommandTerminal returns the agent's command terminal of that name
// (cmd-N), released or not; false when there is none. cmd/agentctl serves
// it through shared/term as an External.
func (s *Server) CommandTerminal(name string) (*CommandTerminal, bool) {
	return s.mgr.terms.get(name)
}

// Handler returns the authenticated HTTP handler.
func (s *Server) Handler() http.Handler { return s.auth(s.mux) }

// Close stops the agent and waits for background work.
func (s *Server) Close() {
	s.lease.stop()
	s.mgr.shutdown()
}

// Serve serves on l until ctx ends, then shuts down gracefully.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	hs := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(l) }()
	select {
	case <-ctx.Done():
	case err := <-errc:
		s.Close()
		return err
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = hs.Shutdown(sctx)
	s.Close()
	return nil
}

func (s *Server) routes() {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/health", s.health)
	mux.HandleFunc("GET /v1/capabilities", s.capabilities)
	mux.HandleFunc("POST /v1/probe", s.handleProbe)
	mux.HandleFunc("GET /v1/agent", func(w http.ResponseWriter, r *http.Request) {
		st := s.mgr.state()
		if s.opts.Terminals != nil {
			if c, ok := s.opts.Terminals.ControllerOf(AgentTerminalName); ok {
				st.Controller = &c
			}
		}
		st.ChatController = s.chat.get()
		writeJSON(w, 200, st)
	})
	mux.HandleFunc("POST /v1/agent/start", s.fenced(s.start))
	mux.HandleFunc("POST /v1/agent/prompt", s.fenced(s.prompt))
	mux.HandleFunc("POST /v1/agent/cancel", s.fenced(s.cancel))
	mux.HandleFunc("POST /v1/agent/stop", s.fenced(s.stop))
	mux.HandleFunc("POST /v1/lease", s.fenced(s.renewLease))
	mux.HandleFunc("GET /v1/agent/permissions", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, s.mgr.permissions())
	})
	mux.HandleFunc("POST /v1/agent/permissions/{id}", s.fenced(s.answerPermission))
	mux.HandleFunc("POST /v1/agent/mode", s.fenced(s.setMode))
	mux.HandleFunc("GET /v1/terminals", s.listTerminals)
	mux.HandleFunc("GET /v1/controller/chat", s.getChatController)
	mux.HandleFunc("PUT /v1/controller/chat", s.putChatController)
	mux.HandleFunc("DELETE /v1/controller/chat", s.deleteChatController)
	mux.HandleFunc("GET /v1/messages", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, MessagesResponse{Messages: s.mgr.messages()})
	})
	mux.HandleFunc("GET /v1/events", s.eventsHandler)
	mux.HandleFunc("GET /v1/events/stream", s.streamEvents)
	mux.HandleFunc("GET /v1/files", s.listFiles)
	mux.HandleFunc("GET /v1/files/content", s.readFile)
	mux.HandleFunc("PUT /v1/files/content", s.fenced(s.writeFile))
	mux.HandleFunc("GET /v1/git/status", s.gitStatus)
	mux.HandleFunc("GET /v1/git/diff", s.gitDiff)
	mux.HandleFunc("POST /v1/fencing", s.fenced(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]uint64{"fencing_token": s.fence.Highest()})
	}))
	mux.HandleFunc("GET /v1/terminals/{name}", func(w http.ResponseWriter, r *http.Request) {
		if s.opts.Terminals == nil {
			writeError(w, 404, CodeNotFound, "terminals are not available in this agentctl")
			return
		}
		s.opts.Terminals.ServeTerminal(w, r, r.PathValue("name"))
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, 404, CodeNotFound, fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path))
	})
	s.mux = mux
}

func (s *Server) auth(next http.Handler) http.Handler {
	want := []byte("Bearer " + s.opts.Secret)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			writeError(w, 401, CodeUnauthorized, "missing or wrong Authorization: Bearer secret")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// ParseFencingToken parses the X-Paddock-Fencing-Token header value.
func ParseFencingToken(v string) (uint64, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, fmt.Errorf("missing %s header", FencingHeader)
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s %q is not a non-negative integer", FencingHeader, v)
	}
	return n, nil
}

// fenced checks the fencing token before a mutating handler.
func (s *Server) fenced(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.admitToken(w, r) {
			h(w, r)
		}
	}
}

// admitToken checks a request's fencing token, answering it (400 without
// one, 409 when stale) and returning false when it is not admitted.
func (s *Server) admitToken(w http.ResponseWriter, r *http.Request) bool {
	tok, err := ParseFencingToken(r.Header.Get(FencingHeader))
	if err != nil {
		writeError(w, 400, CodeBadRequest, err.Error())
		return false
	}
	if err := s.fence.Check(tok); err != nil {
		if errors.Is(err, ErrStaleFencingToken) {
			writeError(w, 409, CodeConflict, strings.TrimSuffix(err.Error(), ": "+ErrStaleFencingToken.Error()))
			return false
		}
		writeError(w, 500, CodeInternal, err.Error())
		return false
	}
	return true
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	agent := s.mgr.state()
	writeJSON(w, 200, Health{Status: "ok", SessionID: s.opts.SessionID, Nonce: s.nonce, PID: os.Getpid(), Workspace: s.opts.Workspace,
		AgentStatus: agent.Status, Fencing: s.fence.Highest(), StartedAt: s.started.Format(time.RFC3339), Agent: &agent})
}

func (s *Server) capabilities(w http.ResponseWriter, r *http.Request) {
	s.mgr.mu.Lock()
	p := s.mgr.probed
	s.mgr.mu.Unlock()
	writeJSON(w, 200, Capabilities{SupportsSessionResume: p, SupportsWorkspaceOnly: true})
}

func (s *Server) handleProbe(w http.ResponseWriter, r *http.Request) {
	var req ProbeRequest
	if !decodeJSON(w, r, &req) {
		return
	}
	ok, err := s.mgr.probe(r.Context(), req.Profile)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, 200, Capabilities{SupportsSessionResume: &ok, SupportsWorkspaceOnly: true})
}

func (s *Server) start(w http.ResponseWriter, r *http.Request) {
	var req StartRequest
	if !decodeJSON(w, r, &req) {
		return
	}
	st, err := s.mgr.start(r.Context(), req)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, 200, st)
}

func (s *Server) prompt(w http.ResponseWriter, r *http.Request) {
	var req PromptRequest
	if !decodeJSON(w, r, &req) {
		return
	}
	if strings.TrimSpace(req.Text) == "" {
		writeError(w, 400, CodeBadRequest, "prompt text is empty")
		return
	}
	resp, err := s.mgr.prompt(req.Text)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, 202, resp)
}

func (s *Server) cancel(w http.ResponseWriter, r *http.Request) {
	if err := s.mgr.cancel(r.Context()); err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, 202, map[string]bool{"cancelling": true})
}

func (s *Server) stop(w http.ResponseWriter, r *http.Request) {
	code, err := s.mgr.stop()
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, 200, AgentStoppedData{ExitCode: code})
}

func (s *Server) answerPermission(w http.ResponseWriter, r *http.Request) {
	var req AnswerPermissionRequest
	if !decodeJSON(w, r, &req) {
		return
	}
	rec, err := s.mgr.answerPermission(r.PathValue("id"), req.OptionID, req.AnsweredBy)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, 200, rec)
}

func (s *Server) setMode(w http.ResponseWriter, r *http.Request) {
	var req SetModeRequest
	if !decodeJSON(w, r, &req) {
		return
	}
	st, err := s.mgr.setMode(r.Context(), req.ModeID)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, 200, st)
}

// listTerminals answers GET /v1/terminals: the agent's command terminals,
// then the ones Options.Terminals runs (when it can list them).
func (s *Server) listTerminals(w http.ResponseWriter, r *http.Request) {
	list := s.mgr.terms.list()
	if tl, ok := s.opts.Terminals.(TerminalLister); ok {
		for _, ti := range tl.ListTerminals() {
			if !strings.HasPrefix(ti.Name, CommandTerminalPrefix) {
				list = append(list, ti)
			}
		}
	}
	writeJSON(w, 200, TerminalList{Terminals: list})
}

func (s *Server) eventsHandler(w http.ResponseWriter, r *http.Request) {
	q, err := parseEventsQuery(r.URL.Query())
	if err != nil {
		writeError(w, 400, CodeBadRequest, err.Error())
		return
	}
	// A poll that renews the lease does so when it arrives, before it
	// waits, and only with an admitted token, as POST /v1/lease.
	var renewed *time.Time
	if q.Lease > 0 {
		if !s.admitToken(w, r) {
			return
		}
		d := s.lease.renew(q.Lease)
		renewed = &d
	}
	evs, next := s.events.since(r.Context(), q)
	resp := EventsResponse{Nonce: s.nonce, Events: evs, Next: next, LeaseDeadline: renewed}
	if q.Permissions {
		// After the events: a request the list misses is published
		// after them, so the caller's next read has it.
		list := s.mgr.permissions()
		resp.Permissions = &list
	}
	if q.Gather > 0 {
		resp.Gather = q.Gather.String()
	}
	writeJSON(w, 200, resp)
}

// parseEventsQuery reads GET /v1/events' parameters: since (default 1),
// wait (at most 60 s), compact, gather (at most 10 s), lease (100 ms to 1 h),
// permissions.
func parseEventsQuery(v url.Values) (EventsQuery, error) {
	q := EventsQuery{Since: 1}
	if s := v.Get("since"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return q, fmt.Errorf("since=%q is not a non-negative integer", s)
		}
		q.Since = n
	}
	if s := v.Get("compact"); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return q, fmt.Errorf("compact=%q is not true or false", s)
		}
		q.Compact = b
	}
	var err error
	if q.Wait, err = durationParam(v, "wait", 60*time.Second); err != nil {
		return q, err
	}
	if q.Gather, err = durationParam(v, "gather", 10*time.Second); err != nil {
		return q, err
	}
	if s := v.Get("permissions"); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return q, fmt.Errorf("permissions=%q is not true or false", s)
		}
		q.Permissions = b
	}
	if v.Get("lease") != "" {
		if q.Lease, err = time.ParseDuration(v.Get("lease")); err != nil || !leaseTTLInRange(q.Lease) {
			return q, fmt.Errorf("lease=%q is not a duration between 100ms and 1h", v.Get("lease"))
		}
	}
	return q, nil
}

// durationParam reads a non-negative duration parameter, capped at most
// (zero when absent).
func durationParam(v url.Values, name string, most time.Duration) (time.Duration, error) {
	s := v.Get(name)
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%s=%q is not a duration", name, s)
	}
	return min(d, most), nil
}

func (s *Server) listFiles(w http.ResponseWriter, r *http.Request) {
	entries, err := s.ws.List(r.URL.Query().Get("path"))
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, 200, map[string]any{"entries": entries})
}

func (s *Server) readFile(w http.ResponseWriter, r *http.Request) {
	b, err := s.ws.ReadFile(r.URL.Query().Get("path"))
	if err != nil {
		writeErr(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.WriteHeader(200)
	_, _ = w.Write(b)
}

func (s *Server) writeFile(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(io.LimitReader(r.Body, workspace.MaxFileSize+1))
	if err != nil {
		writeError(w, 400, CodeBadRequest, "read body: "+err.Error())
		return
	}
	if len(b) > workspace.MaxFileSize {
		writeErr(w, workspace.ErrTooLarge)
		return
	}
	if err := s.ws.WriteFile(r.URL.Query().Get("path"), b); err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, 200, map[string]any{"path": r.URL.Query().Get("path"), "size": len(b)})
}

func (s *Server) gitStatus(w http.ResponseWriter, r *http.Request) {
	st, err := s.ws.Status(r.Context())
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, 200, st)
}

func (s *Server) gitDiff(w http.ResponseWriter, r *http.Request) {
	d, err := s.ws.Diff(r.Context(), r.URL.Query().Get("staged") == "true")
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, 200, map[string]string{"diff": d})
}

func decodeJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := DecodeJSON(io.LimitReader(r.Body, maxBody+1), v); err != nil {
		writeError(w, 400, CodeBadRequest, err.Error())
		return false
	}
	return true
}

// DecodeJSON decodes exactly one JSON value into v, refusing unknown fields
// and trailing data.
func DecodeJSON(r io.Reader, v any) error {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("malformed JSON body: %w", err)
	}
	if dec.More() {
		return errors.New("malformed JSON body: trailing data after the JSON value")
	}
	var extra json.RawMessage
	if err := dec.Decode(&extra); err != io.EOF {
		return errors.New("malformed JSON body: trailing data after the JSON value")
	}
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	var b ErrorBody
	b.Error.Code, b.Error.Message = code, msg
	writeJSON(w, status, b)
}

// writeErr maps an error to its HTTP status and code.
func writeErr(w http.ResponseWriter, err error) {
	status, code := 500, CodeInternal
	switch {
	case errors.Is(err, errBadRequest), errors.Is(err, ErrBadToken), errors.Is(err, workspace.ErrEscape),
		errors.Is(err, workspace.ErrIsDir), errors.Is(err, workspace.ErrTooLarge), errors.Is(err, workspace.ErrNotRegular):
		status, code = 400, CodeBadRequest
	case errors.Is(err, workspace.ErrProtected), errors.Is(err, workspace.ErrGitDir):
		status, code = 403, "forbidden"
	case errors.Is(err, workspace.ErrNotFound), errors.Is(err, ErrNoInstance), errors.Is(err, ErrPermissionNotFound):
		status, code = 404, CodeNotFound
	case errors.Is(err, ErrAgentRunning), errors.Is(err, ErrTurnRunning), errors.Is(err, ErrNoAgent),
		errors.Is(err, ErrNoTurn), errors.Is(err, ErrNotResumable), errors.Is(err, ErrAgentNotReady), errors.Is(err, workspace.ErrNotGit),
		errors.Is(err, ErrPermissionNotPending), errors.Is(err, ErrChatHeld):
		status, code = 409, CodeConflict
	case errors.Is(err, ErrCommandNotFound):
		status, code = 422, CodeBadRequest
	case strings.HasPrefix(err.Error(), "start "), strings.HasPrefix(err.Error(), "probe "):
		status, code = 502, CodeUnavailable
	}
	msg := err.Error()
	msg = strings.ReplaceAll(msg, ": "+errBadRequest.Error(), "")
	msg = strings.TrimPrefix(msg, errBadRequest.Error()+": ")
	writeError(w, status, code, msg)
}
