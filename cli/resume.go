package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
	xterm "golang.org/x/term"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/client"
)

// EnvSessionID is set by agentctl in a session's terminals: the picker will
// not offer the session it runs in.
const EnvSessionID = "PADDOCK_SESSION_ID"

var resumeCommand = command{
	path:    "resume",
	args:    "[-task ID] [-all]",
	summary: "pick a session of this workspace to resume and attach to (interactive)",
	bind:    withFlags(resumeFlags, runResumePicker),
}

type resumeOpts struct {
	task *string
	all  *bool
}

func resumeFlags(fs *flag.FlagSet) *resumeOpts {
	return &resumeOpts{
		task: fs.String("task", "", "only the sessions of this task"),
		all:  fs.Bool("all", false, "every session, whatever its workspace"),
	}
}

// exitError ends a command with a specific exit code after its message.
type exitError struct {
	code int
	err  error
}

func (x *exitError) Error() string { return x.err.Error() }
func (x *exitError) Unwrap() error { return x.err }

// errCancelled is the picker's Esc.
var errCancelled = errors.New("cancelled; nothing was changed")

// pickerScope says which sessions the picker lists.
type pickerScope struct {
	taskID string
	all    bool
	dirs   []string // workspace paths that count as "here"
}

func runResumePicker(e *env, o *resumeOpts, pos []string) error {
	if err := exactArgs(pos); err != nil {
		return err
	}
	c, err := e.client()
	if err != nil {
		return err
	}
	scope := pickerScope{all: *o.all}
	if *o.task != "" {
		id, err := resolveTaskID(e.ctx(), c, *o.task)
		if err != nil {
			return err
		}
		scope.taskID = id
	} else if !scope.all {
		scope.dirs = workspaceDirs()
	}
	l, err := newRowLoader(e.ctx(), c, os.Getenv(EnvSessionID), scope)
	if err != nil {
		return err
	}
	first, err := l.page(e.ctx(), "", "")
	if err != nil {
		return err
	}
	if len(first.rows) == 0 && first.next != "" {
		// The first page held none of this scope's sessions: look further
		// before saying there are none.
		if first.rows, err = l.all(e.ctx(), first.next); err != nil {
			return err
		}
		first.next = ""
	}
	if len(first.rows) == 0 && !e.g.json {
		// Nothing to pick: say so and where else to look, rather than open
		// an empty full-screen picker.
		switch {
		case scope.all:
			fmt.Fprintln(e.stdout, "No sessions to resume in this cluster.")
		case scope.taskID != "":
			fmt.Fprintf(e.stdout, "Task %s has no sessions to resume; \"paddock resume -all\" lists every task's.\n", shortID(scope.taskID))
		default:
			fmt.Fprintf(e.stdout, "No sessions of tasks in this directory (%s); \"paddock resume -all\" lists every task's.\n", strings.Join(scope.dirs, ", "))
		}
		return nil
	}
	if !xterm.IsTerminal(int(os.Stdin.Fd())) || !isTerminal(e.stdout) {
		// A table is never cut short: every page.
		rows := first.rows
		if first.next != "" {
			more, err := l.all(e.ctx(), first.next)
			if err != nil {
				return err
			}
			rows = append(rows, more...)
		}
		if err := printPickRows(e, rows); err != nil {
			return err
		}
		return &exitError{code: 2, err: errors.New(`"paddock resume" is interactive and needs a terminal; resume one of these with "paddock session resume ID" and attach with "paddock attach ID"`)}
	}
	src := pickerSource{
		search: l.page,
		messages: func(ctx context.Context, id string) ([]api.Message, error) {
			return l.c.Messages(ctx, id)
		},
		check: l.check,
		resume: func(ctx context.Context, id string) error {
			return l.resume(ctx, e, id)
		},
	}
	m := newPicker(first, src, time.Now)
	final, err := tea.NewProgram(m, tea.WithOutput(e.stdout)).Run()
	if err != nil {
		return fmt.Errorf("picker: %w", err)
	}
	p := final.(*picker)
	if p.cancelled || p.chosen == nil {
		return errCancelled
	}
	return handoff(e, *p.chosen)
}

// handoff replaces this process with the chosen session's client:
// `paddock attach ID -name agent` (the agent's own terminal) for a pty agent,
// `paddock chat ID` for an ACP agent. Only argv is used, with the id the
// server just validated.
func handoff(e *env, r pickRow) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find the paddock binary: %w", err)
	}
	argv := []string{"paddock", "chat", r.ID}
	if r.Protocol == "pty" {
		argv = []string{"paddock", "attach", r.ID, "-name", "agent"}
		fmt.Fprintf(e.stdout, "Attaching to session %s (detach with ctrl-])\n", r.ID)
	}
	env := withEnv(os.Environ(), EnvAddress+"="+e.g.address, EnvToken+"="+e.g.token, envControllerNonce+"="+self().Nonce)
	if err := syscall.Exec(exe, argv, env); err != nil {
		return fmt.Errorf("exec %s: %w", exe, err)
	}
	return nil
}

// withEnv returns env with the KEY=VALUE pairs of set in place of the same
// keys' (the first of duplicate keys is the one a program reads).
func withEnv(env []string, set ...string) []string {
	out := make([]string, 0, len(env)+len(set))
	replaced := map[string]bool{}
	for _, kv := range set {
		k, _, _ := strings.Cut(kv, "=")
		replaced[k] = true
	}
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); !replaced[k] {
			out = append(out, kv)
		}
	}
	return append(out, set...)
}

// workspaceDirs are the current directory and its git top level, with
// symlinks resolved.
func workspaceDirs() []string {
	var dirs []string
	add := func(d string) {
		if d == "" {
			return
		}
		if r, err := filepath.EvalSymlinks(d); err == nil {
			d = r
		}
		d = filepath.Clean(d)
		for _, x := range dirs {
			if x == d {
				return
			}
		}
		dirs = append(dirs, d)
	}
	wd, err := os.Getwd()
	if err == nil {
		add(wd)
	}
	if out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output(); err == nil {
		add(strings.TrimSpace(string(out)))
	}
	return dirs
}

// inScope reports whether a task is listed by the picker.
func (s pickerScope) inScope(t api.Task) bool {
	switch {
	case s.taskID != "":
		return t.ID == s.taskID
	case s.all:
		return true
	}
	p := t.Workspace.Path
	if p == "" {
		return false
	}
	if r, err := filepath.EvalSymlinks(p); err == nil {
		p = r
	}
	p = filepath.Clean(p)
	for _, d := range s.dirs {
		if d == p {
			return true
		}
	}
	return false
}

// rowLoader reads picker rows from the server: pages of its session
// search (GET /v1/sessions?q=&cursor=), cluster-wide, narrowed to the
// picker's scope, each row with its status.
type rowLoader struct {
	c      *client.Client
	self   string // the caller's own session (PADDOCK_SESSION_ID)
	scope  pickerScope
	titles map[string]string // the titles of the tasks in scope (every task's with -all)
	// task, when the scope is one task, is asked of the server, which then
	// pages that task's sessions only.
	task   string
	agents map[string]api.Agent

	mu       sync.Mutex
	statuses map[string]cachedStatus // by session id
}

// cachedStatus is a session's status as last read, with the session's
// updated_at then: a session that has not changed is not asked again on
// every keystroke's search. (Enter reads it again whatever the cache says.)
type cachedStatus struct {
	updated time.Time
	state   api.SessionState
	st      *api.Status
	err     error
}

// pickerPageSize is how many sessions the picker asks the server for at
// a time.
const pickerPageSize = 50

// newRowLoader reads the tasks in scope and the agent profiles, once.
func newRowLoader(ctx context.Context, c *client.Client, self string, scope pickerScope) (*rowLoader, error) {
	tasks, err := c.ListTasks(ctx)
	if err != nil {
		return nil, err
	}
	l := &rowLoader{c: c, self: self, scope: scope, titles: map[string]string{}, statuses: map[string]cachedStatus{}}
	for _, t := range tasks {
		if scope.inScope(t) {
			l.titles[t.ID] = t.Title
		}
	}
	switch {
	case scope.taskID != "":
		l.task = scope.taskID
	case !scope.all && len(l.titles) == 1:
		for id := range l.titles {
			l.task = id
		}
	}
	l.agents = l.loadAgents(ctx)
	return l, nil
}

// page returns the sessions in scope of the server's page of q after
// cursor, in the server's order (pinned first, then newest activity).
// Completed sessions are left out: they cannot be resumed.
func (l *rowLoader) page(ctx context.Context, q, cursor string) (pickPage, error) {
	if !l.scope.all && len(l.titles) == 0 {
		return pickPage{}, nil // no task here: nothing to ask
	}
	pg, err := l.c.SearchSessionsPage(ctx, client.SessionSearch{Query: strings.TrimSpace(q), Cursor: cursor, Limit: pickerPageSize, TaskID: l.task})
	if err != nil {
		return pickPage{}, err
	}
	var items []api.SessionItem
	for _, it := range pg.Sessions {
		if _, ok := l.titles[it.TaskID]; (ok || l.scope.all) && it.State != api.SessionCompleted {
			items = append(items, it)
		}
	}
	rows := make([]pickRow, len(items))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i, it := range items {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			st, err := l.status(ctx, it.Session)
			rows[i] = classify(it, l.titles[it.TaskID], st, l.agents, l.self, err)
		}()
	}
	wg.Wait()
	return pickPage{rows: rows, next: pg.NextCursor}, nil
}

// all returns the rows of every page from cursor on.
func (l *rowLoader) all(ctx context.Context, cursor string) ([]pickRow, error) {
	var rows []pickRow
	for cursor != "" {
		pg, err := l.page(ctx, "", cursor)
		if err != nil {
			return nil, err
		}
		rows = append(rows, pg.rows...)
		cursor = pg.next
	}
	return rows, nil
}

// status reads a session's status, or the cached one while the session is
// unchanged.
func (l *rowLoader) status(ctx context.Context, s api.Session) (*api.Status, error) {
	l.mu.Lock()
	c, ok := l.statuses[s.ID]
	l.mu.Unlock()
	if ok && c.updated.Equal(s.UpdatedAt) && c.state == s.State && c.err == nil {
		return c.st, nil
	}
	st, err := l.c.SessionStatus(ctx, s.ID)
	l.mu.Lock()
	l.statuses[s.ID] = cachedStatus{updated: s.UpdatedAt, state: s.State, st: st, err: err}
	l.mu.Unlock()
	return st, err
}

// loadAgents maps profile names to profiles; nil when the server would not
// say (then no row is marked "agent not configured").
func (l *rowLoader) loadAgents(ctx context.Context) map[string]api.Agent {
	list, err := l.c.Agents(ctx)
	if err != nil {
		return nil
	}
	m := make(map[string]api.Agent, len(list))
	for _, a := range list {
		m[a.Name] = a
	}
	return m
}

// check re-reads one row with every check, for a selection.
func (l *rowLoader) check(ctx context.Context, id string) (pickRow, error) {
	s, err := l.c.GetSession(ctx, id)
	if err != nil {
		return pickRow{}, err
	}
	title := ""
	if t, err := l.c.GetTask(ctx, s.TaskID); err == nil {
		title = t.Title
	}
	st, err := l.c.SessionStatus(ctx, s.ID)
	return classify(api.SessionItem{Session: *s}, title, st, l.loadAgents(ctx), l.self, err), nil
}

// resume resumes a session and waits until its agent takes prompts. The
// server re-checks the session (a refused resume is an error on the row).
func (l *rowLoader) resume(ctx context.Context, e *env, id string) error {
	if _, err := l.c.Resume(ctx, id); err != nil {
		return err
	}
	quiet := *e
	quiet.stdout = io.Discard
	_, err := quiet.waitSession(l.c, id, lifecycleTimeout, nil, untilReady("resume"))
	return err
}

// classify turns a session and its status into a picker row: its state in
// words and, when it cannot be selected, why.
func classify(it api.SessionItem, title string, st *api.Status, agents map[string]api.Agent, self string, loadErr error) pickRow {
	s := it.Session
	r := pickRow{
		ID: s.ID, TaskID: s.TaskID, Title: title, Name: s.Name, Pinned: s.Pinned, Agent: s.Agent, State: s.State,
		LastActivity: s.LastActivityAt, Outcome: string(s.LastTurnOutcome), Detail: s.ErrorMessage,
		conversation: conversation{FirstPrompt: it.FirstPrompt, LastReply: it.LastReply, Messages: it.MessageCount,
			Match: it.Match, MatchField: it.MatchField},
	}
	if title == "" {
		r.Title = s.TaskID
	}
	a, known := agents[s.Agent]
	if known {
		r.Protocol = a.Protocol
	}
	if loadErr != nil || st == nil {
		r.Word = wordUnknown
		r.Failure = "could not load its status: " + errString(loadErr)
		return r
	}
	if st.LastTurnOutcome != nil {
		r.Outcome = string(*st.LastTurnOutcome)
	}
	r.Model = strOr(st.Model, "")
	r.Branch = strOr(st.WorktreeBranch, "")
	reason := strOr(st.ResumeReason, "")
	msg := strOr(st.ResumeMessage, "")
	r.Running = st.IsAgentRunning
	r.NeedsResume = st.NeedsResume
	switch {
	case reason == api.ReasonNodeUnavailable:
		r.Word = wordNodeUnavailable
	case st.PendingPermissions > 0:
		r.Word = wordNeedsApproval
	case st.IsAgentRunning:
		r.Word = wordLive
	case st.State == api.SessionCreated || st.State == api.SessionStarting:
		r.Word = wordStarting
	case st.State == api.SessionError:
		r.Word = wordError
	case st.IsResumable:
		r.Word = wordResumable
	default:
		r.Word = wordNotResumable
	}
	if r.Detail == "" || (msg != "" && st.State != api.SessionError) {
		r.Detail = firstOf(r.Detail, msg)
	} else if msg != "" && msg != r.Detail {
		r.Detail += " — " + msg
	}
	if r.Word == wordNeedsApproval {
		n := st.PendingPermissions
		asks := fmt.Sprintf("The agent waits for an answer to %d permission request", n)
		if n > 1 {
			asks += "s"
		}
		asks += ": select it to answer."
		if r.Detail == "" {
			r.Detail = asks
		} else {
			r.Detail += " — " + asks
		}
	}
	switch {
	case self != "" && s.ID == self:
		r.Disabled = "this is your own session (this terminal runs inside it)"
	case ownerOf(st.Controller) == ownerOther && st.Controller.Via == api.ViaChat:
		r.Disabled = "it is " + controllerWords(st.Controller)
	case ownerOf(st.Controller) == ownerOther:
		ctrl := st.Controller
		who := "a client that did not say who it is"
		if ctrl.Host != "" {
			who = fmt.Sprintf("%s, pid %d", ctrl.Host, ctrl.PID)
		}
		r.Disabled = fmt.Sprintf("its agent terminal is controlled by another client (%s, since %s)",
			who, ctrl.Since.Local().Format("15:04:05"))
	case reason == api.ReasonNodeUnavailable:
		r.Disabled = "its node does not answer"
	case agents != nil && !known && !st.IsAgentRunning:
		r.Disabled = fmt.Sprintf("agent not configured: the profile %q is no longer in the server's configuration (the session is intact)", s.Agent)
	case r.Word == wordStarting:
		r.Disabled = "it is still starting"
	case !st.IsAgentRunning && !st.IsResumable:
		r.Disabled = "not resumable: " + orDefault(msg, orDefault(reason, "the server refuses to resume it"))
	}
	if msg != "" && strings.Contains(r.Disabled, msg) {
		// Said once: the reason the row cannot be selected carries it.
		r.Detail = strings.TrimSuffix(strings.TrimSuffix(r.Detail, msg), " — ")
	}
	return r
}

func errString(err error) string {
	if err == nil {
		return "no status"
	}
	return err.Error()
}

// printPickRows prints the rows as a table (or JSON with -json), for a
// caller without a terminal.
func printPickRows(e *env, rows []pickRow) error {
	if e.g.json {
		type jsonRow struct {
			SessionID    string    `json:"session_id"`
			TaskID       string    `json:"task_id"`
			Title        string    `json:"title"`
			Name         string    `json:"name"`
			Pinned       bool      `json:"pinned"`
			FirstPrompt  string    `json:"first_prompt"`
			LastReply    string    `json:"last_reply"`
			MessageCount int       `json:"message_count"`
			Branch       string    `json:"worktree_branch,omitempty"`
			State        string    `json:"state"`
			Status       string    `json:"status"`
			LastTurn     string    `json:"last_turn_outcome"`
			Agent        string    `json:"agent"`
			Model        string    `json:"model,omitempty"`
			LastActivity time.Time `json:"last_activity_at"`
			Selectable   bool      `json:"selectable"`
			Reason       string    `json:"reason,omitempty"`
			Detail       string    `json:"detail,omitempty"`
		}
		out := make([]jsonRow, 0, len(rows))
		for _, r := range rows {
			out = append(out, jsonRow{r.ID, r.TaskID, r.Title, r.Name, r.Pinned, r.FirstPrompt, r.LastReply, r.Messages, r.Branch,
				string(r.State), r.Word, r.Outcome, r.Agent, r.Model, r.LastActivity, r.selectable(), firstOf(r.Disabled, r.Failure), r.Detail})
		}
		b, err := json.Marshal(map[string]any{"sessions": out})
		if err != nil {
			return err
		}
		return printJSON(e.stdout, b)
	}
	if len(rows) == 0 {
		fmt.Fprintln(e.stdout, "No sessions here")
		return nil
	}
	now := time.Now()
	tr := make([][]string, 0, len(rows))
	for _, r := range rows {
		agent := r.Agent
		if r.Model != "" {
			agent += " (" + r.Model + ")"
		}
		conv := ansi.Truncate(oneLine(r.label()), 40, "…")
		if r.Pinned {
			conv = "★ " + conv
		}
		tr = append(tr, []string{r.ID, conv, r.Title, r.Word, r.Outcome, fmt.Sprint(r.Messages), agent, age(r.LastActivity, now), firstOf(r.Disabled, r.Failure)})
	}
	return table(e.stdout, []string{"SESSION", "CONVERSATION", "TASK", "STATUS", "LAST TURN", "MSGS", "AGENT", "LAST ACTIVITY", "NOT SELECTABLE"}, tr)
}
