package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/client"
)

// The session group's lifecycle: create, list, status, resume, stop and
// delete a session.

// kvFlag collects repeated K=V flags.
type kvFlag map[string]string

func (k kvFlag) String() string { return "" }

func (k kvFlag) Set(s string) error {
	key, val, ok := strings.Cut(s, "=")
	if !ok || key == "" {
		return fmt.Errorf("want KEY=VALUE, got %q", s)
	}
	k[key] = val
	return nil
}

type sessionCreateOpts struct {
	task, agent, runtime *string
	options              kvFlag
	wait                 waitOpts
	quiet                *bool
}

func sessionCreateFlags(fs *flag.FlagSet) *sessionCreateOpts {
	o := &sessionCreateOpts{
		task:    fs.String("task", "", "task ID (required)"),
		agent:   fs.String("agent", "", "agent profile name (required)"),
		runtime: fs.String("runtime", "", "runtime plugin name (required)"),
		options: kvFlag{},
	}
	fs.Var(o.options, "option", "runtime option KEY=VALUE (repeatable)")
	o.wait = addWaitFlags(fs, lifecycleTimeout, "the agent to take prompts")
	o.quiet = fs.Bool("q", false, quietHelp+"; the wait still ends with exit 1 if the session fails")
	return o
}

func runSessionCreate(e *env, o *sessionCreateOpts, pos []string) error {
	if err := exactArgs(pos); err != nil {
		return err
	}
	var missing []string
	for _, f := range []struct{ name, val string }{{"-task", *o.task}, {"-agent", *o.agent}, {"-runtime", *o.runtime}} {
		if strings.TrimSpace(f.val) == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return &usageError{msg: "missing " + strings.Join(missing, ", ")}
	}
	taskID, err := e.resolveID(idTask, *o.task)
	if err != nil {
		return err
	}
	*o.task = taskID
	req := api.CreateSessionRequest{Agent: *o.agent, Runtime: *o.runtime}
	if len(o.options) > 0 {
		req.RuntimeOptions = o.options
	}
	c, err := e.client()
	if err != nil {
		return err
	}
	var raw []byte
	s, err := c.CreateSession(e.ctx(), *o.task, req, client.CaptureBody(&raw))
	if err != nil {
		return err
	}
	if *o.quiet && !e.g.json {
		if !*o.wait.detach {
			quiet := *e
			quiet.stdout = io.Discard
			if _, err := quiet.waitSession(c, s.ID, *o.wait.timeout, nil, untilReady("start")); err != nil {
				return err
			}
		}
		printIDs(e.stdout, s.ID)
		return nil
	}
	if *o.wait.detach {
		if e.g.json {
			return printJSON(e.stdout, raw)
		}
		fmt.Fprintf(e.stdout, "Created session %s (task %s, agent %s, runtime %s, state %s)\n",
			s.ID, cell(s.TaskID), cell(s.Agent), cell(s.Runtime), cell(string(s.State)))
		return nil
	}
	if !e.g.json {
		fmt.Fprintf(e.stdout, "Created session %s (task %s, agent %s, runtime %s); waiting for its agent\n",
			s.ID, cell(s.TaskID), cell(s.Agent), cell(s.Runtime))
	}
	return e.finishWait(c, s.ID, *o.wait.timeout, untilReady("start"))
}

// finishWait waits for a session's state and prints where it ended (its
// JSON with -json).
func (e *env) finishWait(c *client.Client, id string, timeout time.Duration, v verdict) error {
	var raw []byte
	s, err := e.waitSession(c, id, timeout, &raw, v)
	if err != nil {
		return err
	}
	if e.g.json {
		return printJSON(e.stdout, raw)
	}
	fmt.Fprintf(e.stdout, "Session %s is %s\n", s.ID, cell(string(s.State)))
	return nil
}

type sessionListOpts struct {
	task, state *string
	listOpts
}

func sessionListFlags(fs *flag.FlagSet) *sessionListOpts {
	return &sessionListOpts{
		task:     fs.String("task", "", "only sessions of this task"),
		state:    fs.String("state", "", "only sessions in this state (e.g. RUNNING)"),
		listOpts: addListFlags(fs),
	}
}

func runSessionList(e *env, o *sessionListOpts, pos []string) error {
	if err := exactArgs(pos); err != nil {
		return err
	}
	taskID, err := e.resolveID(idTask, *o.task)
	if err != nil {
		return err
	}
	*o.task = taskID
	titles := map[string]string{}
	nodes := map[string]string{}
	return show(e, func(c *client.Client, opts []client.CallOption) ([]api.Session, error) {
		if !e.g.json && !*o.quiet {
			// Titles and nodes make the table readable; without them it
			// still lists the sessions.
			if tasks, err := c.ListTasks(e.ctx()); err == nil {
				for _, t := range tasks {
					titles[t.ID] = t.Title
				}
			}
			if execs, err := c.Executors(e.ctx(), ""); err == nil {
				for _, x := range execs {
					nodes[x.ID] = x.Node
				}
			}
		}
		return c.ListSessions(e.ctx(), *o.task, strings.ToUpper(*o.state), opts...)
	}, func(sessions []api.Session) error {
		ids := make([]string, 0, len(sessions))
		taskIDs := make([]string, 0, len(sessions))
		for _, s := range sessions {
			ids = append(ids, s.ID)
			taskIDs = append(taskIDs, s.TaskID)
		}
		if *o.quiet {
			printIDs(e.stdout, ids...)
			return nil
		}
		if len(sessions) == 0 {
			fmt.Fprintln(e.stdout, "No sessions")
			return nil
		}
		short, shortTask := idColumn(ids, *o.verbose), idColumn(taskIDs, *o.verbose)
		now := time.Now()
		rows := make([][]string, 0, len(sessions))
		for _, s := range sessions {
			reason := s.ErrorMessage
			if reason == "" && (s.State == api.SessionError || s.State == api.SessionStopped) {
				reason = s.StateReason
			}
			rows = append(rows, []string{short(s.ID), shortTask(s.TaskID), titles[s.TaskID], string(s.State), s.Agent, s.Runtime, nodes[s.ExecutorID],
				yesNo(s.HasResumeToken), age(s.LastActivityAt, now), firstLineOf(reason, 60)})
		}
		return table(e.stdout, []string{"ID", "TASK", "TITLE", "STATE", "AGENT", "RUNTIME", "NODE", "RESUME TOKEN", "LAST ACTIVITY", "REASON"}, rows)
	})
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// firstLineOf is the first line of s, cut to n characters.
func firstLineOf(s string, n int) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	if r := []rune(l); len(r) > n {
		l = string(r[:n-1]) + "…"
	}
	return l
}

func runSessionStatus(e *env, pos []string) error {
	if err := exactArgs(pos, "session ID"); err != nil {
		return err
	}
	var errMsg string
	return show(e, func(c *client.Client, o []client.CallOption) (*api.Status, error) {
		if !e.g.json {
			// The status object has no error text: the session row has it.
			if s, gerr := c.GetSession(e.ctx(), pos[0]); gerr == nil {
				errMsg = s.ErrorMessage
			}
		}
		return c.SessionStatus(e.ctx(), pos[0], o...)
	}, func(st *api.Status) error {
		worktree := strOr(st.WorktreePath, "-")
		if st.WorktreeBranch != nil && *st.WorktreeBranch != "" {
			worktree += " (" + *st.WorktreeBranch + ")"
		}
		if err := kv(e.stdout, [][2]string{
			{"Session", st.SessionID},
			{"Task", st.TaskID},
			{"State", string(st.State)},
			{"Agent", strOr(st.AgentProfileID, "-")},
			{"Runtime", strOr(st.Runtime, "-")},
			{"Executor status", strOr(st.ExecutorStatus, "-")},
			{"Agent execution", strOr(st.AgentExecutionID, "-")},
			{"Agent running", strconv.FormatBool(st.IsAgentRunning)},
			{"Resumable", strconv.FormatBool(st.IsResumable)},
			{"Needs resume", strconv.FormatBool(st.NeedsResume)},
			{"Resume reason", strOr(st.ResumeReason, "-")},
			{"Node", strOr(st.Node, "-")},
			{"Last turn", strOr(st.LastTurnOutcome, "-")},
			{"Worktree", worktree},
		}); err != nil {
			return err
		}
		if errMsg != "" {
			fmt.Fprintf(e.stdout, "\nError: %s\n", cell(errMsg))
		}
		if msg := strOr(st.ResumeMessage, ""); msg != "" {
			fmt.Fprintf(e.stdout, "\n%s\n", cell(msg))
		}
		return nil
	})
}

// deleteOpts are session delete's flags.
type deleteOpts struct {
	waitOpts
	force *bool
}

func deleteFlags(fs *flag.FlagSet) *deleteOpts {
	return &deleteOpts{waitOpts: addWaitFlags(fs, lifecycleTimeout, "the session's state"), force: fs.Bool("force", false, forceHelp)}
}

func runSessionResume(e *env, o *waitOpts, pos []string) error {
	if err := exactArgs(pos, "session ID"); err != nil {
		return err
	}
	id := pos[0]
	c, err := e.client()
	if err != nil {
		return err
	}
	var raw []byte
	s, err := c.Resume(e.ctx(), id, client.CaptureBody(&raw))
	if err != nil {
		// Explain a refused resume with the status' sentence only when it
		// says why a resume cannot work (e.g. "This agent cannot resume
		// previous sessions. Create a new session."): the sentence of a
		// resumable session asks for a resume, which just failed.
		var ae *client.APIError
		if errors.As(err, &ae) && ae.Code != "not_found" && ae.Code != "unauthorized" {
			if st, serr := c.SessionStatus(e.ctx(), id); serr == nil && !st.IsResumable {
				if msg := strOr(st.ResumeMessage, ""); msg != "" {
					return fmt.Errorf("cannot resume session %s: %s (%s)", id, msg, ae.Code)
				}
			}
		}
		return err
	}
	if *o.detach {
		if e.g.json {
			return printJSON(e.stdout, raw)
		}
		fmt.Fprintf(e.stdout, "Resuming session %s (state %s)\n", s.ID, cell(string(s.State)))
		return nil
	}
	if !e.g.json {
		fmt.Fprintf(e.stdout, "Resuming session %s; waiting for its agent\n", s.ID)
	}
	return e.finishWait(c, id, *o.timeout, untilReady("resume"))
}

func runSessionStop(e *env, o *waitOpts, pos []string) error {
	if err := exactArgs(pos, "session ID"); err != nil {
		return err
	}
	id := pos[0]
	c, err := e.client()
	if err != nil {
		return err
	}
	var raw []byte
	s, err := c.Stop(e.ctx(), id, client.CaptureBody(&raw))
	if err != nil {
		return err
	}
	if *o.detach {
		if e.g.json {
			return printJSON(e.stdout, raw)
		}
		fmt.Fprintf(e.stdout, "Stopping session %s (state %s)\n", s.ID, cell(string(s.State)))
	} else {
		if !e.g.json {
			fmt.Fprintf(e.stdout, "Stopping session %s; waiting for its agent to drain\n", s.ID)
		}
		if err := e.finishWait(c, id, *o.timeout, untilStopped); err != nil {
			return err
		}
	}
	if e.g.json {
		return nil
	}
	// Warn now if this session will not be resumable later.
	if st, err := c.SessionStatus(e.ctx(), id); err == nil && !st.IsResumable {
		if msg := strOr(st.ResumeMessage, ""); msg != "" {
			fmt.Fprintln(e.stdout, cell(msg))
		}
	}
	return nil
}

func runSessionDelete(e *env, d *deleteOpts, pos []string) error {
	o := &d.waitOpts
	if err := exactArgs(pos, "session ID"); err != nil {
		return err
	}
	c, err := e.client()
	if err != nil {
		return err
	}
	var raw []byte
	s, err := c.DeleteSession(e.ctx(), pos[0], append(forceOption(*d.force), client.CaptureBody(&raw))...)
	if err != nil {
		return err
	}
	if *o.detach || s.State == api.SessionCompleted {
		if e.g.json {
			return printJSON(e.stdout, raw)
		}
		fmt.Fprintf(e.stdout, "Deleted session %s (state %s)\n", s.ID, cell(string(s.State)))
		return nil
	}
	return e.finishWait(c, s.ID, *o.timeout, untilCompleted)
}

func runSessionRename(e *env, pos []string) error {
	if len(pos) > 2 {
		pos = []string{pos[0], strings.Join(pos[1:], " ")}
	}
	if err := exactArgs(pos, "session ID", "NAME"); err != nil {
		return err
	}
	return show(e, func(c *client.Client, o []client.CallOption) (*api.Session, error) {
		return c.RenameSession(e.ctx(), pos[0], pos[1], o...)
	}, func(s *api.Session) error {
		fmt.Fprintf(e.stdout, "Session %s is named %q\n", s.ID, noControls(s.Name, ""))
		return nil
	})
}

func unpinFlags(fs *flag.FlagSet) *bool {
	return fs.Bool("unpin", false, "unpin the session instead")
}

func runSessionPin(e *env, unpin *bool, pos []string) error {
	if err := exactArgs(pos, "session ID"); err != nil {
		return err
	}
	return show(e, func(c *client.Client, o []client.CallOption) (*api.Session, error) {
		return c.PinSession(e.ctx(), pos[0], !*unpin, o...)
	}, func(s *api.Session) error {
		if s.Pinned {
			fmt.Fprintf(e.stdout, "Pinned session %s: paddock resume lists it first\n", s.ID)
		} else {
			fmt.Fprintf(e.stdout, "Unpinned session %s\n", s.ID)
		}
		return nil
	})
}
