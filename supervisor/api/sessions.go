package api

import (
	"context"
	"errors"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/supervisor/cluster"
	"github.com/paddockhq/paddock/supervisor/config"
	"github.com/paddockhq/paddock/supervisor/sessions"
	"github.com/paddockhq/paddock/supervisor/state"
)

// optionKeyPattern bounds runtime_options keys.
var optionKeyPattern = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

func (s *Server) validateSession(req *api.CreateSessionRequest) error {
	if req.Agent == "" {
		return badRequest("agent is required (configured: %s)", strings.Join(s.agentNames(), ", "))
	}
	if s.cfg.Agent(req.Agent) == nil {
		return badRequest("unknown agent %q (configured: %s)", req.Agent, strings.Join(s.agentNames(), ", "))
	}
	if req.Runtime == "" {
		return badRequest("runtime is required (configured: %s)", strings.Join(s.runtimeNames(), ", "))
	}
	if s.cfg.Plugin(req.Runtime) == nil {
		return badRequest("unknown runtime %q (configured: %s)", req.Runtime, strings.Join(s.runtimeNames(), ", "))
	}
	if len(req.RuntimeOptions) > 32 {
		return badRequest("runtime_options has more than 32 entries")
	}
	for k, v := range req.RuntimeOptions {
		if !optionKeyPattern.MatchString(k) || len(v) > 1024 {
			return badRequest("runtime_options key %q is invalid (lower-case name, value at most 1024 bytes)", k)
		}
	}
	return nil
}

func (s *Server) agentNames() []string {
	var out []string
	for _, a := range s.cfg.Agents {
		out = append(out, a.Name)
	}
	return out
}

func (s *Server) runtimeNames() []string {
	var out []string
	for _, p := range s.cfg.Plugins {
		out = append(out, p.Name)
	}
	sort.Strings(out)
	return out
}

func (s *Server) createSession(w http.ResponseWriter, r *http.Request) error {
	taskID := r.PathValue("id")
	var req api.CreateSessionRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if err := s.validateSession(&req); err != nil {
		return err
	}
	task, ok := s.store.Task(taskID)
	if !ok {
		return errorf(http.StatusNotFound, CodeNotFound, "task %q not found", taskID)
	}
	if task.State == api.TaskDone {
		return errorf(http.StatusConflict, CodeConflict, "task %q is done; reopen it or create a new task", taskID)
	}
	if s.plugins != nil {
		// Refuse at once rather than leave a session that can never start.
		if _, err := s.plugins.Get(req.Runtime); err != nil {
			return err
		}
	}
	if err := s.checkPlacement(req.Runtime, req.RuntimeOptions[sessions.OptionNode]); err != nil {
		return err
	}
	sess := api.Session{ID: newID(), TaskID: taskID, Agent: req.Agent, Runtime: req.Runtime, RuntimeOptions: req.RuntimeOptions}
	if err := s.checkRoom(r, sess); err != nil {
		return err
	}
	if err := s.apply(r, state.CmdCreateSession, &state.CreateSessionBody{Session: sess}); err != nil {
		return err
	}
	if s.sessions != nil {
		err := s.sessions.Start(r.Context(), sess.ID)
		switch {
		case errors.Is(err, cluster.ErrNotLeader), errors.Is(err, sessions.ErrNotLeader):
			// Leadership moved between recording and starting: the session
			// is recorded, and the next leader's recovery starts it.
			s.log.Info("session recorded; its start is left to the next leader", "session", sess.ID)
		case err != nil:
			return err
		}
	}
	out, _ := s.store.Session(sess.ID)
	writeJSON(w, http.StatusCreated, out)
	return nil
}

var sessionStates = map[api.SessionState]bool{
	api.SessionCreated: true, api.SessionStarting: true, api.SessionWaitingForInput: true,
	api.SessionRunning: true, api.SessionStopped: true, api.SessionError: true, api.SessionCompleted: true,
}

func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	f := state.SessionFilter{TaskID: q.Get("task_id"), State: api.SessionState(strings.ToUpper(q.Get("state")))}
	if f.State != "" && !sessionStates[f.State] {
		return badRequest("unknown state %q", q.Get("state"))
	}
	if f.TaskID != "" {
		if _, ok := s.store.Task(f.TaskID); !ok {
			return errorf(http.StatusNotFound, CodeNotFound, "task %q not found", f.TaskID)
		}
	}
	summary, err := summaryParam(q)
	if err != nil {
		return err
	}
	if paged(q) { // a page always carries the summaries
		return s.searchSessions(w, r, f)
	}
	if summary {
		writeJSON(w, http.StatusOK, map[string]any{"sessions": s.store.SessionItems(f)})
		return nil
	}
	writeJSON(w, http.StatusOK, map[string]any{"sessions": s.store.Sessions(f)})
	return nil
}

// session loads the session named in the path.
func (s *Server) session(r *http.Request) (api.Session, error) {
	id := r.PathValue("id")
	sess, ok := s.store.Session(id)
	if !ok && !isStale(r) {
		// This node's state may trail the cluster's (a route it serves
		// itself, such as a terminal, on a follower that has just
		// restarted and not yet replayed its log): "not found" is answered
		// only once it has caught up. A ?stale=true read answers from this
		// node's state as it is.
		ctx, cancel := context.WithTimeout(r.Context(), s.leaderWait)
		err := s.cluster.CatchUp(ctx)
		cancel()
		if err != nil {
			return api.Session{}, errorf(http.StatusServiceUnavailable, CodeUnavailable, "session %q is not in this node's state, and it could not catch up with the cluster to be sure: %v; retry", id, err)
		}
		sess, ok = s.store.Session(id)
	}
	if !ok {
		return api.Session{}, errorf(http.StatusNotFound, CodeNotFound, "session %q not found", id)
	}
	return sess, nil
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request) error {
	sess, err := s.session(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sess)
	return nil
}

func (s *Server) sessionStatus(w http.ResponseWriter, r *http.Request) error {
	sess, err := s.session(r)
	if err != nil {
		return err
	}
	st := s.statusOf(r.Context(), sess)
	if st.IsAgentRunning {
		var facts reportedModel
		facts, st.Controller = s.runningAgentFacts(r.Context(), sess, strOr(st.AgentExecutionID))
		st.Model, st.Modes = nonEmpty(facts.model), facts.modes
		if facts.commands != nil {
			st.Commands = facts.commands
		}
	}
	// A terminal's controller comes first (see controller.go); a chat can
	// hold a session whose agent is not running, as long as its agentctl
	// runs.
	if st.Controller == nil && st.ExecutorStatus != nil && *st.ExecutorStatus == api.ExecutorReady {
		st.Controller = s.chatController(r.Context(), sess.ID)
	}
	writeJSON(w, http.StatusOK, st)
	return nil
}

// agentFactsTimeout bounds the status object's question to agentctl about
// the running agent; without an answer its fields are null.
const agentFactsTimeout = time.Second

// reportedModel is what an agent execution reported of itself: its model
// ("" for none), and the commands and modes it announced.
type reportedModel struct {
	execution, model string
	commands         []api.AgentCommand
	modes            *api.AgentModes
}

// announcedFacts is the session manager's record of what a live agent
// announced through its events (sessions.Manager.AgentFacts).
type announcedFacts interface {
	AgentFacts(sessionID string) (commands []api.AgentCommand, modes *api.AgentModes, ok bool)
}

// runningAgentFacts gives what only agentctl knows of the running agent: the
// model it reported and the commands and modes it announced, and who
// controls its terminal (only a pty agent has one; the chat registration
// the same answer carries is kept for chatController). agentctl is asked once
// per agent execution (the commands and modes the agent announces later
// reach the leader's pump, which keeps them); a pty agent's controller is
// asked every time. Nil for what is unknown.
func (s *Server) runningAgentFacts(ctx context.Context, sess api.Session, execution string) (reportedModel, *api.Controller) {
	a := s.cfg.Agent(sess.Agent)
	pty := a != nil && a.Protocol == config.ProtocolPTY
	facts := func(r reportedModel) reportedModel {
		if f, ok := s.sessions.(announcedFacts); ok {
			if cmds, modes, ok := f.AgentFacts(sess.ID); ok {
				r.commands, r.modes = cmds, modes
			}
		}
		return r
	}
	if m, ok := s.models.Load(sess.ID); ok && !pty && execution != "" && m.(reportedModel).execution == execution {
		return facts(m.(reportedModel)), nil
	}
	if s.sessions == nil {
		return reportedModel{}, nil
	}
	c, err := s.sessions.Agentctl(sess.ID)
	if err != nil {
		return reportedModel{}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, agentFactsTimeout)
	defer cancel()
	ag, err := c.AgentState(ctx)
	if err != nil {
		return reportedModel{}, nil
	}
	rep := reportedModel{execution: execution, model: ag.Model, commands: ag.Commands, modes: ag.Modes}
	s.sawChat(sess.ID, ag.ChatController)
	if execution != "" {
		s.models.Store(sess.ID, rep)
	}
	var ctl *api.Controller
	if pty && ag.Controller != nil {
		tc := ag.Controller
		ctl = &api.Controller{Host: tc.Host, PID: tc.PID, Nonce: tc.Nonce, Since: tc.Since, Via: api.ViaTerminal}
	}
	return facts(rep), ctl
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func strOr(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func (s *Server) statusOf(ctx context.Context, sess api.Session) api.Status {
	in := state.StatusInput{Session: sess}
	if e, ok := s.store.Executor(sess.ExecutorID); ok {
		in.Executor = &e
		if v, probed := e.ProbedResume(); probed {
			in.SupportsResume = &v
		}
		if s.sessions != nil && s.cluster.IsLeader() {
			in.AgentRunning = s.sessions.IsRunning(sess.ID)
		} else {
			in.AgentRunning = e.Status == api.ExecutorReady && (sess.State == api.SessionWaitingForInput || sess.State == api.SessionRunning)
		}
	}
	if in.SupportsResume == nil {
		if a := s.cfg.Agent(sess.Agent); a != nil {
			in.SupportsResume = a.SupportsSessionResume
		}
	}
	if s.sessions != nil && !in.AgentRunning {
		if node, down := s.sessions.NodeUnavailable(sess.ID); down {
			in.NodeUnavailable = node
		} else if path, missing := s.sessions.WorkspaceMissing(ctx, sess.ID); missing {
			// Only a stopped or failed session is asked about, by its
			// executor's own plugin (sessions.Manager.WorkspaceMissing).
			in.WorkspaceMissing = path
		}
	}
	in.PendingPermissions = s.store.PendingPermissions(sess.ID)
	return state.ComputeStatus(in)
}

func (s *Server) messages(w http.ResponseWriter, r *http.Request) error {
	sess, err := s.session(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"messages": s.store.Messages(sess.ID)})
	return nil
}

func (s *Server) lease(w http.ResponseWriter, r *http.Request) error {
	sess, err := s.session(r)
	if err != nil {
		return err
	}
	l, ok := s.store.Lease(sess.ID)
	if !ok {
		return errorf(http.StatusNotFound, CodeNotFound, "session %q has no lease", sess.ID)
	}
	if l.State == api.LeaseHeld && s.sessions != nil && s.cluster.IsLeader() {
		if t, ok := s.sessions.LeaseExpiry(sess.ID); ok {
			l.ExpiresAt = t
		}
	}
	writeJSON(w, http.StatusOK, l)
	return nil
}

func (s *Server) stopSession(w http.ResponseWriter, r *http.Request) error {
	sess, err := s.session(r)
	if err != nil {
		return err
	}
	if s.sessions != nil {
		err = s.sessions.Stop(r.Context(), sess.ID)
	} else {
		err = s.apply(r, state.CmdSetSessionState, &state.SetSessionStateBody{SessionID: sess.ID, State: api.SessionStopped,
			From: []api.SessionState{api.SessionCreated, api.SessionStarting, api.SessionWaitingForInput, api.SessionRunning}})
	}
	if err != nil {
		return err
	}
	out, _ := s.store.Session(sess.ID)
	writeJSON(w, http.StatusAccepted, out)
	return nil
}

// forceParam reads a delete's ?force: true completes a session whose
// node does not answer, its executor destroyed when the node answers again.
func forceParam(r *http.Request) (bool, error) {
	v := r.URL.Query().Get("force")
	if v == "" {
		return false, nil
	}
	force, err := strconv.ParseBool(v)
	if err != nil {
		return false, badRequest("force %q is not true or false", v)
	}
	return force, nil
}

func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request) error {
	sess, err := s.session(r)
	if err != nil {
		return err
	}
	force, err := forceParam(r)
	if err != nil {
		return err
	}
	if s.sessions != nil {
		err = s.sessions.Delete(r.Context(), sess.ID, force)
	} else {
		err = s.apply(r, state.CmdDeleteSession, &state.DeleteSessionBody{SessionID: sess.ID})
	}
	if err != nil {
		return err
	}
	out, _ := s.store.Session(sess.ID)
	writeJSON(w, http.StatusOK, out)
	return nil
}

// lifecycle returns the session manager or a clear error when this server
// runs without one.
func (s *Server) lifecycle() (Sessions, error) {
	if s.sessions == nil {
		return nil, errorf(http.StatusServiceUnavailable, CodeUnavailable, "session lifecycle is not available on this server")
	}
	return s.sessions, nil
}

func (s *Server) resumeSession(w http.ResponseWriter, r *http.Request) error {
	sess, err := s.session(r)
	if err != nil {
		return err
	}
	lc, err := s.lifecycle()
	if err != nil {
		return err
	}
	if !lc.IsRunning(sess.ID) {
		if err := s.checkRoom(r, sess); err != nil {
			return err
		}
	}
	if err := lc.Resume(r.Context(), sess.ID); err != nil {
		return err
	}
	out, _ := s.store.Session(sess.ID)
	writeJSON(w, http.StatusAccepted, out)
	return nil
}

type promptRequest struct {
	Text string `json:"text"`
}

func (s *Server) prompt(w http.ResponseWriter, r *http.Request) error {
	sess, err := s.session(r)
	if err != nil {
		return err
	}
	var req promptRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if strings.TrimSpace(req.Text) == "" {
		return badRequest("text is required")
	}
	lc, err := s.lifecycle()
	if err != nil {
		return err
	}
	if err := lc.Prompt(r.Context(), sess.ID, req.Text); err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, map[string]bool{"accepted": true})
	return nil
}

func (s *Server) cancel(w http.ResponseWriter, r *http.Request) error {
	sess, err := s.session(r)
	if err != nil {
		return err
	}
	lc, err := s.lifecycle()
	if err != nil {
		return err
	}
	if err := lc.Cancel(r.Context(), sess.ID); err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, map[string]bool{"accepted": true})
	return nil
}

func (s *Server) listExecutors(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, map[string]any{"executors": s.store.Executors(r.URL.Query().Get("session_id"))})
	return nil
}

func (s *Server) getExecutor(w http.ResponseWriter, r *http.Request) error {
	e, ok := s.store.Executor(r.PathValue("id"))
	if !ok {
		return errorf(http.StatusNotFound, CodeNotFound, "executor %q not found", r.PathValue("id"))
	}
	writeJSON(w, http.StatusOK, e)
	return nil
}

func (s *Server) agents(w http.ResponseWriter, _ *http.Request) error {
	probed := s.probedResume()
	out := []api.Agent{}
	for _, a := range s.cfg.Agents {
		info := api.Agent{Name: a.Name, Protocol: a.Protocol, Command: a.Command, SupportsSessionResume: a.SupportsSessionResume, ResumeSupport: "unknown"}
		if a.SupportsSessionResume != nil {
			info.ResumeSupport = "declared"
		}
		if v, ok := probed[a.Name]; ok && a.Protocol == config.ProtocolACP {
			// agentctl asked the agent itself (ACP loadSession): that
			// answer wins over a declaration.
			info.SupportsSessionResume, info.ResumeSupport = &v, "probed"
		}
		out = append(out, info)
	}
	writeJSON(w, http.StatusOK, map[string]any{"agents": out})
	return nil
}

// checkRoom refuses, with 503 and the reason, a session that would need a
// new executor on a node already at its limits.max_sessions_per_node (the
// leader places it as its launch will: on its node, on the node it names,
// or on the least loaded node with room).
func (s *Server) checkRoom(r *http.Request, sess api.Session) error {
	if s.sessions == nil {
		return nil
	}
	if err := s.sessions.CheckRoom(r.Context(), sess); err != nil {
		return errorf(http.StatusServiceUnavailable, CodeUnavailable, "%s", err.Error())
	}
	return nil
}

// checkPlacement refuses runtime_options.node naming a node that is not a
// server of the cluster (400) or cannot take the session now (503).
func (s *Server) checkPlacement(runtime, node string) error {
	if node == "" {
		return nil
	}
	if _, ok := s.store.Nodes()[node]; !ok {
		var names []string
		for id := range s.store.Nodes() {
			names = append(names, id)
		}
		sort.Strings(names)
		return badRequest("runtime_options.node %q is not a server of this cluster (servers: %s)", node, strings.Join(names, ", "))
	}
	if s.nodes != nil && !slices.Contains(s.nodes.Usable(runtime), node) {
		return errorf(http.StatusServiceUnavailable, CodeUnavailable, "node %q cannot take a %s session now: it does not answer, or its %s plugin is unhealthy", node, runtime, runtime)
	}
	return nil
}

// probedResume is, per agent profile, the resume support agentctl probed on
// the most recently seen executor of that agent (an executor is ready only
// after its probe; the session manager reads the same rows).
func (s *Server) probedResume() map[string]bool {
	out := map[string]bool{}
	seen := map[string]time.Time{}
	for _, e := range s.store.Executors("") {
		if _, probed := e.ProbedResume(); !probed {
			continue
		}
		sess, ok := s.store.Session(e.SessionID)
		if !ok {
			continue
		}
		if t, ok := seen[sess.Agent]; ok && !e.LastSeenAt.After(t) {
			continue
		}
		seen[sess.Agent], out[sess.Agent] = e.LastSeenAt, e.SupportsSessionResume
	}
	return out
}
