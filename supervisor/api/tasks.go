package api

import (
	"crypto/rand"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/paddockhq/paddock/supervisor/state"
)

// newID returns a random UUID-formatted id.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// branchPattern accepts ordinary git branch names.
var branchPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/-]{0,199}$`)

type createTaskRequest struct {
	Title     string          `json:"title"`
	Workspace state.Workspace `json:"workspace"`
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
	task := state.Task{ID: newID(), Title: req.Title, Workspace: req.Workspace}
	if err := s.apply(r, state.CmdCreateTask, &state.CreateTaskBody{Task: task}); err != nil {
		return err
	}
	t, _ := s.store.Task(task.ID)
	writeJSON(w, http.StatusCreated, t)
	return nil
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
	writeJSON(w, http.StatusOK, t)
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
