package api

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/shared/runtime"
	"github.com/paddockhq/paddock/supervisor/state"
)

// newID returns a random UUID-formatted id (version 4).
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var out [36]byte
	hex.Encode(out[0:8], b[0:4])
	out[8] = '-'
	hex.Encode(out[9:13], b[4:6])
	out[13] = '-'
	hex.Encode(out[14:18], b[6:8])
	out[18] = '-'
	hex.Encode(out[19:23], b[8:10])
	out[23] = '-'
	hex.Encode(out[24:], b[10:])
	return string(out[:])
}

// branchPattern accepts ordinary git branch names.
var branchPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/-]{0,199}$`)

// createTaskRequest is the wire body (api.CreateTaskRequest) with the
// server's reading of it: a defined type over the api struct rather than the
// api type itself, since the methods (decodeCompact, validate) cannot be
// declared on another package's type.
type createTaskRequest api.CreateTaskRequest

// decodeCompact implements compactRequest: {"title":"…"}, or with the
// workspace as json.Marshal writes it,
// {"title":"…","workspace":{"path":"…","branch":"…"}}, then only
// whitespace.
func (req *createTaskRequest) decodeCompact(body []byte) bool {
	var out createTaskRequest
	rest, ok := bytes.CutPrefix(bytes.TrimRight(body, " \t\r\n"), []byte(`{"title":`))
	if ok {
		out.Title, rest, ok = cutPlainString(rest)
	}
	if ok && string(rest) != "}" {
		rest, ok = bytes.CutPrefix(rest, []byte(`,"workspace":{"path":`))
		if ok {
			out.Workspace.Path, rest, ok = cutPlainString(rest)
		}
		if ok {
			rest, ok = bytes.CutPrefix(rest, []byte(`,"branch":`))
		}
		if ok {
			out.Workspace.Branch, rest, ok = cutPlainString(rest)
		}
		ok = ok && string(rest) == "}}"
	}
	if ok {
		*req = out
	}
	return ok
}

func (req *createTaskRequest) validate() error {
	req.Title = strings.TrimSpace(req.Title)
	switch {
	case req.Title == "":
		return badRequest("title is required")
	case utf8.RuneCountInString(req.Title) > 200:
		return badRequest("title is longer than 200 characters")
	case req.Workspace.Path != "" && !filepath.IsAbs(req.Workspace.Path):
		return badRequest("workspace.path %q must be an absolute path", req.Workspace.Path)
	case req.Workspace.Branch != "" && (!branchPattern.MatchString(req.Workspace.Branch) || strings.Contains(req.Workspace.Branch, "..")):
		return badRequest("workspace.branch %q is not a valid branch name", req.Workspace.Branch)
	}
	if req.Workspace.Path != "" {
		req.Workspace.Path = filepath.Clean(req.Workspace.Path)
	}
	return nil
}

func (s *Server) createTask(w http.ResponseWriter, r *http.Request) error {
	var req createTaskRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if err := req.validate(); err != nil {
		return err
	}
	if err := s.checkTaskWorkspace(r.Context(), req.Workspace.Path); err != nil {
		return err
	}
	task := api.Task{ID: newID(), Title: req.Title, Workspace: req.Workspace}
	if err := s.apply(r, state.CmdCreateTask, &state.CreateTaskBody{Task: task}); err != nil {
		return err
	}
	t, _ := s.store.Task(task.ID)
	writeTask(w, http.StatusCreated, t)
	return nil
}

// taskWorkspaceTimeout bounds each plugin's answer about a task's workspace.
const taskWorkspaceTimeout = 5 * time.Second

// checkTaskWorkspace refuses a task whose workspace no runtime would launch
// a session in, so that the task is refused when it is created rather than
// its first session failing at launch.
//
// Only a runtime plugin knows its confining root (the standalone runtime's
// task_workspace_root is part of its own config block, which the server
// does not read), so each plugin of this node (the leader: task creates
// are forwarded to it) is asked (runtime.WorkspaceChecker); every node is
// configured alike. A task names no runtime, so the path is refused only
// when every plugin refuses it: one that accepts it, does not check (the
// docker and remote runtimes), is unhealthy or does not answer may still
// run the task's sessions, which then meet the launch's own check. The
// path need not exist on this node: a node-local runtime may find it on
// another.
func (s *Server) checkTaskWorkspace(ctx context.Context, path string) error {
	if path == "" || s.plugins == nil {
		return nil
	}
	var refusals []string
	for _, p := range s.plugins.List() {
		rt, err := s.plugins.Get(p.Name)
		if err != nil {
			return nil
		}
		wc, ok := rt.(runtime.WorkspaceChecker)
		if !ok {
			return nil
		}
		cctx, cancel := context.WithTimeout(ctx, taskWorkspaceTimeout)
		err = wc.CheckTaskWorkspace(cctx, path)
		cancel()
		if !errors.Is(err, runtime.ErrInvalidRequest) {
			return nil
		}
		// "runtime check task workspace: workspace path P is outside
		// task_workspace_root R: invalid request" says, once the path is
		// named: runtime "standalone" says it is outside task_workspace_root R.
		msg := strings.TrimSuffix(strings.TrimPrefix(err.Error(), "runtime check task workspace: "), ": "+runtime.ErrInvalidRequest.Error())
		if rest, ok := strings.CutPrefix(msg, "workspace path "+path+" "); ok {
			msg = "it " + rest
		}
		refusals = append(refusals, fmt.Sprintf("runtime %q says %s", p.Name, msg))
	}
	if len(refusals) == 0 {
		return nil
	}
	return badRequest("workspace.path %q is refused: %s", path, strings.Join(refusals, "; "))
}

func (s *Server) listTasks(w http.ResponseWriter, _ *http.Request) error {
	writeJSON(w, http.StatusOK, map[string]any{"tasks": s.store.Tasks()})
	return nil
}

func (s *Server) getTask(w http.ResponseWriter, r *http.Request) error {
	t, ok := s.store.Task(r.PathValue("id"))
	if !ok {
		return errorf(http.StatusNotFound, CodeNotFound, "task %q not found", r.PathValue("id"))
	}
	writeTask(w, http.StatusOK, t)
	return nil
}

// apply commits a command and waits until this node's store has applied it,
// so the handler can read its own write.
func (s *Server) apply(r *http.Request, typ state.CommandType, body any) error {
	res, err := s.cluster.Apply(r.Context(), typ, body)
	if err != nil {
		return err
	}
	if res.Err != nil {
		return res.Err
	}
	return s.cluster.WaitApplied(r.Context(), res.Index)
}

// closeTask marks a task DONE. Its sessions are left as they are: a running
// agent keeps running and can still be prompted, stopped or deleted; a
// closed task only refuses new sessions until it is reopened.
func (s *Server) closeTask(w http.ResponseWriter, r *http.Request) error {
	return s.setTaskState(w, r, api.TaskDone)
}

// reopenTask makes a DONE task follow its sessions again (OPEN, IN_PROGRESS
// or REVIEW); a task that is not done is returned unchanged.
func (s *Server) reopenTask(w http.ResponseWriter, r *http.Request) error {
	return s.setTaskState(w, r, api.TaskOpen)
}

func (s *Server) setTaskState(w http.ResponseWriter, r *http.Request, to api.TaskState) error {
	id := r.PathValue("id")
	if _, ok := s.store.Task(id); !ok {
		return errorf(http.StatusNotFound, CodeNotFound, "task %q not found", id)
	}
	if err := s.apply(r, state.CmdSetTaskState, &state.SetTaskStateBody{TaskID: id, State: to}); err != nil {
		return err
	}
	t, _ := s.store.Task(id)
	writeTask(w, http.StatusOK, t)
	return nil
}

// deleteTask stops and deletes the task's sessions (each as DELETE
// /v1/sessions/{id} does: agent stopped, executor destroyed; ?force=true as
// there), then removes the task with them. It answers the task as it was.
func (s *Server) deleteTask(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	t, ok := s.store.Task(id)
	if !ok {
		return errorf(http.StatusNotFound, CodeNotFound, "task %q not found", id)
	}
	force, err := forceParam(r)
	if err != nil {
		return err
	}
	for _, sess := range s.store.Sessions(state.SessionFilter{TaskID: id}) {
		if sess.State == api.SessionCompleted {
			continue
		}
		var err error
		if s.sessions != nil {
			err = s.sessions.Delete(r.Context(), sess.ID, force)
		} else {
			err = s.apply(r, state.CmdDeleteSession, &state.DeleteSessionBody{SessionID: sess.ID})
		}
		if err != nil {
			return fmt.Errorf("delete session %s of task %s: %w", sess.ID, id, err)
		}
	}
	if err := s.apply(r, state.CmdDeleteTask, &state.DeleteTaskBody{TaskID: id}); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, t)
	return nil
}
