package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/client"
)

// snapshotTimeout bounds a snapshot save or restore.
const snapshotTimeout = 10 * time.Minute

// commandTable is every leaf subcommand, in the order help lists them.
func commandTable() []command {
	return []command{
		{path: "status", summary: "show the cluster's leader, term, indexes and nodes", run: runStatus},
		{path: "operator raft list-peers", summary: "list the raft peers", run: runListPeers},
		{path: "operator raft add-peer", args: "ADDRESS", summary: "add the server answering at ADDRESS (its HTTP host:port) as a voter", run: runAddPeer},
		{path: "operator raft remove-peer", args: "ID", summary: "remove a raft peer", run: runRemovePeer},
		{path: "operator raft transfer-leadership", args: "[-id ID]", summary: "hand leadership to another voter", flags: transferFlags, run: runTransferLeadership},
		{path: "operator snapshot save", args: "FILE", summary: "save the cluster state to FILE", run: runSnapshotSave},
		{path: "operator snapshot restore", args: "FILE", summary: "restore the cluster state from FILE", run: runSnapshotRestore},
		{path: "task create", args: "-title T [-workspace PATH] [-branch B]", summary: "create a task", flags: taskCreateFlags, run: runTaskCreate},
		{path: "task list", summary: "list tasks", run: runTaskList},
		{path: "task close", args: "ID", summary: "mark a task DONE (its sessions are left as they are)", run: runTaskClose, id: idTask},
		{path: "task reopen", args: "ID", summary: "reopen a DONE task", run: runTaskReopen, id: idTask},
		{path: "task delete", args: "ID [-force]", summary: "stop and delete a task's sessions, then the task", flags: forceFlags, run: runTaskDelete, id: idTask},
		{path: "session create", args: "-task ID -agent NAME -runtime NAME [-option K=V]… [-detach] [-timeout D]", summary: "create a session and wait until its agent takes prompts", flags: sessionCreateFlags, run: runSessionCreate},
		{path: "session list", args: "[-task ID] [-state S]", summary: "list sessions", flags: sessionListFlags, run: runSessionList},
		{path: "session status", args: "ID", summary: "show a session's status", run: runSessionStatus, id: idSession},
		{path: "session prompt", args: "ID [-file F] [-detach] [-timeout D] [--] TEXT…|-", summary: "send a prompt and print the agent's reply as it streams", flags: promptFlags, run: runSessionPrompt, id: idSession},
		{path: "session messages", args: "ID [-f]", summary: "print the session's conversation (-f follows it)", flags: followFlags, run: runSessionMessages, id: idSession},
		{path: "session resume", args: "ID [-detach] [-timeout D]", summary: "resume a stopped or failed session and wait until its agent takes prompts", flags: waitFlags, run: runSessionResume, id: idSession},
		{path: "session stop", args: "ID [-detach] [-timeout D]", summary: "stop a session and wait until it is STOPPED", flags: waitFlags, run: runSessionStop, id: idSession},
		{path: "session delete", args: "ID [-force] [-detach] [-timeout D]", summary: "end a session for good", flags: deleteFlags, run: runSessionDelete, id: idSession},
		{path: "session cancel", args: "ID", summary: "cancel the running turn (the session stays)", run: runSessionCancel, id: idSession},
		{path: "session files", args: "ID [PATH]", summary: "list a directory of the session's workspace", run: runSessionFiles, id: idSession},
		{path: "session cat", args: "ID PATH", summary: "print a file of the session's workspace", run: runSessionCat, id: idSession},
		{path: "session diff", args: "ID", summary: "print the workspace's git diff", run: runSessionDiff, id: idSession},
		{path: "plugin list", summary: "list runtime plugins", run: runPluginList},
		pluginSchemaCommand,
		{path: "executor list", args: "[-session ID]", summary: "list executors", flags: executorListFlags, run: runExecutorList},
		{path: "agent list", summary: "list agent profiles", run: runAgentList},
		attachCommand,
		chatCommand,
		resumeCommand,
		{path: "events", args: "[-task ID] [-session ID]", summary: "stream the cluster's events (JSON lines with -json)", flags: eventsFlags, run: runEvents},
		monitorCommand,
		{path: "version", summary: "print the version, commit and Go version (also -version)", run: runVersion},
		{path: "completion", args: "bash|zsh|fish", summary: "print a shell completion script", run: runCompletion},
		tlsCACreateCommand,
		tlsCertCreateCommand,
	}
}

// exactArgs checks the number of positional arguments, naming what is missing.
func exactArgs(pos []string, names ...string) error {
	if len(pos) < len(names) {
		return &usageError{msg: "missing " + strings.Join(names[len(pos):], " and ")}
	}
	if len(pos) > len(names) {
		return &usageError{msg: fmt.Sprintf("unexpected argument %q", pos[len(names)])}
	}
	for i, p := range pos {
		if strings.TrimSpace(p) == "" {
			return &usageError{msg: "empty " + names[i]}
		}
	}
	return nil
}

// call runs fn with a client, capturing the raw body when -json is set. When
// -json is set the raw body is printed and human is skipped.
func (e *env) call(fn func(c *client.Client, opts []client.CallOption) error, human func() error) error {
	c, err := e.client()
	if err != nil {
		return err
	}
	var raw []byte
	var opts []client.CallOption
	if e.g.json {
		opts = append(opts, client.CaptureBody(&raw))
	}
	if err := fn(c, opts); err != nil {
		return err
	}
	if e.g.json {
		return printJSON(e.stdout, raw)
	}
	return human()
}

// show is the call-then-print pattern of most commands: get makes the API
// call (passing opts on), then the server's JSON is printed as it came with
// -json, else human renders the decoded answer.
func show[T any](e *env, get func(c *client.Client, opts []client.CallOption) (T, error), human func(T) error) error {
	var v T
	return e.call(func(c *client.Client, opts []client.CallOption) (err error) {
		v, err = get(c, opts)
		return err
	}, func() error { return human(v) })
}

func runStatus(e *env, _ any, pos []string) error {
	if err := exactArgs(pos); err != nil {
		return err
	}
	return show(e, func(c *client.Client, o []client.CallOption) (*client.ClusterStatus, error) {
		return c.Status(e.ctx(), o...)
	}, func(st *client.ClusterStatus) error {
		leader := st.LeaderID
		if leader == "" {
			leader = "(none)"
		} else if st.LeaderAddress != "" || st.LeaderHTTP != "" {
			leader = fmt.Sprintf("%s (raft %s, http %s)", st.LeaderID, cell(st.LeaderAddress), cell(st.LeaderHTTP))
		}
		if err := kv(e.stdout, [][2]string{
			{"Leader", leader},
			{"Term", strconv.FormatUint(st.Term, 10)},
			{"Commit index", strconv.FormatUint(st.CommitIndex, 10)},
			{"Applied index", strconv.FormatUint(st.AppliedIndex, 10)},
		}); err != nil {
			return err
		}
		fmt.Fprintln(e.stdout)
		return peerTable(e, st.Nodes)
	})
}

func peerTable(e *env, peers []client.Peer) error {
	rows := make([][]string, 0, len(peers))
	for _, p := range peers {
		health, contact := "-", "-"
		if p.Healthy != nil {
			health = map[bool]string{true: "healthy", false: "failed"}[*p.Healthy]
		}
		if p.LastContact != nil && !p.Leader {
			contact = time.Since(*p.LastContact).Round(time.Millisecond).String() + " ago"
		}
		rows = append(rows, []string{p.ID, p.Address, p.Suffrage, strconv.FormatBool(p.Leader), health, contact})
	}
	return table(e.stdout, []string{"ID", "ADDRESS", "SUFFRAGE", "LEADER", "HEALTH", "LAST CONTACT"}, rows)
}

func runListPeers(e *env, _ any, pos []string) error {
	if err := exactArgs(pos); err != nil {
		return err
	}
	return show(e, func(c *client.Client, o []client.CallOption) ([]client.Peer, error) {
		return c.RaftPeers(e.ctx(), o...)
	}, func(peers []client.Peer) error { return peerTable(e, peers) })
}

func runAddPeer(e *env, _ any, pos []string) error {
	if err := exactArgs(pos, "server address"); err != nil {
		return err
	}
	return show(e, func(c *client.Client, o []client.CallOption) (string, error) {
		return c.AddPeer(e.ctx(), pos[0], o...)
	}, func(id string) error {
		fmt.Fprintf(e.stdout, "Added peer %s at %s\n", id, pos[0])
		return nil
	})
}

func runRemovePeer(e *env, _ any, pos []string) error {
	if err := exactArgs(pos, "peer ID"); err != nil {
		return err
	}
	return e.call(func(c *client.Client, o []client.CallOption) error {
		return c.RemovePeer(e.ctx(), pos[0], o...)
	}, func() error {
		fmt.Fprintf(e.stdout, "Removed peer %s\n", pos[0])
		return nil
	})
}

func transferFlags(fs *flag.FlagSet) any {
	return fs.String("id", "", "the voter to hand leadership to (default: any)")
}

func runTransferLeadership(e *env, fl any, pos []string) error {
	if err := exactArgs(pos); err != nil {
		return err
	}
	target := *fl.(*string)
	return show(e, func(c *client.Client, o []client.CallOption) (string, error) {
		return c.TransferLeadership(e.ctx(), target, o...)
	}, func(leader string) error {
		fmt.Fprintf(e.stdout, "Leadership transferred to %s\n", cell(leader))
		return nil
	})
}

func runSnapshotSave(e *env, _ any, pos []string) error {
	if err := exactArgs(pos, "FILE"); err != nil {
		return err
	}
	path := pos[0]
	c, err := e.client()
	if err != nil {
		return err
	}
	// Write next to the destination and rename, so a failed save never leaves
	// a truncated snapshot under the requested name.
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("save snapshot: %w", err)
	}
	defer os.Remove(tmp.Name())
	ctx, cancel := contextWithTimeout(e, snapshotTimeout)
	defer cancel()
	n, err := c.SnapshotSave(ctx, tmp)
	if cerr := tmp.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("save snapshot: %w", cerr)
	}
	if err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("save snapshot: %w", err)
	}
	if e.g.json {
		return printJSON(e.stdout, fmt.Appendf(nil, `{"file":%q,"bytes":%d}`, path, n))
	}
	fmt.Fprintf(e.stdout, "Saved snapshot to %s (%d bytes)\n", path, n)
	return nil
}

func runSnapshotRestore(e *env, _ any, pos []string) error {
	if err := exactArgs(pos, "FILE"); err != nil {
		return err
	}
	f, err := os.Open(pos[0])
	if err != nil {
		return fmt.Errorf("restore snapshot: %w", err)
	}
	defer f.Close()
	c, err := e.client()
	if err != nil {
		return err
	}
	ctx, cancel := contextWithTimeout(e, snapshotTimeout)
	defer cancel()
	var raw []byte
	res, err := c.SnapshotRestore(ctx, f, client.CaptureBody(&raw))
	if err != nil {
		return err
	}
	if e.g.json {
		return printJSON(e.stdout, raw)
	}
	fmt.Fprintf(e.stdout, "Restored snapshot %s (index %d)\n", pos[0], res.Index)
	return nil
}

type taskCreateOpts struct{ title, workspace, branch *string }

func taskCreateFlags(fs *flag.FlagSet) any {
	return &taskCreateOpts{
		title:     fs.String("title", "", "task title (required)"),
		workspace: fs.String("workspace", "", "workspace directory or repository path; the runtime refuses one outside its root (standalone's task_workspace_root, docker's workspace_root)"),
		branch:    fs.String("branch", "", "git branch to work on"),
	}
}

func runTaskCreate(e *env, fl any, pos []string) error {
	o := fl.(*taskCreateOpts)
	if err := exactArgs(pos); err != nil {
		return err
	}
	if strings.TrimSpace(*o.title) == "" {
		return &usageError{msg: "missing -title"}
	}
	ws := *o.workspace
	if ws != "" && !filepath.IsAbs(ws) {
		abs, err := filepath.Abs(ws)
		if err != nil {
			return fmt.Errorf("workspace %q: %w", ws, err)
		}
		ws = abs
	}
	req := client.CreateTaskRequest{Title: *o.title, Workspace: api.Workspace{Path: ws, Branch: *o.branch}}
	return show(e, func(c *client.Client, opts []client.CallOption) (*api.Task, error) {
		return c.CreateTask(e.ctx(), req, opts...)
	}, func(task *api.Task) error {
		fmt.Fprintf(e.stdout, "Created task %s (%s)\n", task.ID, cell(string(task.State)))
		return nil
	})
}

func runTaskList(e *env, _ any, pos []string) error {
	if err := exactArgs(pos); err != nil {
		return err
	}
	return show(e, func(c *client.Client, o []client.CallOption) ([]api.Task, error) {
		return c.ListTasks(e.ctx(), o...)
	}, func(tasks []api.Task) error {
		if len(tasks) == 0 {
			fmt.Fprintln(e.stdout, "No tasks")
			return nil
		}
		now := time.Now()
		rows := make([][]string, 0, len(tasks))
		for _, t := range tasks {
			rows = append(rows, []string{t.ID, t.Title, string(t.State), t.Workspace.Path, t.Workspace.Branch, age(t.CreatedAt, now)})
		}
		return table(e.stdout, []string{"ID", "TITLE", "STATE", "WORKSPACE", "BRANCH", "CREATED"}, rows)
	})
}

func runTaskClose(e *env, _ any, pos []string) error {
	if err := exactArgs(pos, "task ID"); err != nil {
		return err
	}
	var live []api.Session
	return show(e, func(c *client.Client, o []client.CallOption) (*api.Task, error) {
		t, err := c.CloseTask(e.ctx(), pos[0], o...)
		if err != nil || e.g.json {
			return t, err
		}
		if sessions, lerr := c.ListSessions(e.ctx(), t.ID, ""); lerr == nil {
			for _, s := range sessions {
				if s.State.Active() {
					live = append(live, s)
				}
			}
		}
		return t, nil
	}, func(t *api.Task) error {
		fmt.Fprintf(e.stdout, "Closed task %s (%s)\n", t.ID, cell(string(t.State)))
		if len(live) > 0 {
			fmt.Fprintf(e.stdout, "%d of its sessions still run; \"paddock session stop ID\" stops one, \"paddock task delete %s\" ends them all with the task\n", len(live), t.ID)
		}
		return nil
	})
}

func runTaskReopen(e *env, _ any, pos []string) error {
	if err := exactArgs(pos, "task ID"); err != nil {
		return err
	}
	return show(e, func(c *client.Client, o []client.CallOption) (*api.Task, error) {
		return c.ReopenTask(e.ctx(), pos[0], o...)
	}, func(t *api.Task) error {
		fmt.Fprintf(e.stdout, "Reopened task %s (%s)\n", t.ID, cell(string(t.State)))
		return nil
	})
}

// forceHelp is what -force of a delete does.
const forceHelp = "delete even while a session's node does not answer: the session is COMPLETED now, and its executor and workspace are removed when the node answers again"

func forceFlags(fs *flag.FlagSet) any { return fs.Bool("force", false, forceHelp) }

// deleteOpts are session delete's flags.
type deleteOpts struct {
	waitOpts
	force *bool
}

func deleteFlags(fs *flag.FlagSet) any {
	return &deleteOpts{waitOpts: addWaitFlags(fs, lifecycleTimeout, "the session's state"), force: fs.Bool("force", false, forceHelp)}
}

// forceOption is client.Force when force is set.
func forceOption(force bool) []client.CallOption {
	if force {
		return []client.CallOption{client.Force()}
	}
	return nil
}

func runTaskDelete(e *env, fl any, pos []string) error {
	if err := exactArgs(pos, "task ID"); err != nil {
		return err
	}
	force := *fl.(*bool)
	// Each session's agent is stopped and its executor destroyed first.
	ctx, cancel := contextWithTimeout(e, lifecycleTimeout)
	defer cancel()
	return show(e, func(c *client.Client, o []client.CallOption) (*api.Task, error) {
		return c.DeleteTask(ctx, pos[0], append(o, forceOption(force)...)...)
	}, func(t *api.Task) error {
		fmt.Fprintf(e.stdout, "Deleted task %s and its sessions\n", t.ID)
		return nil
	})
}

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
}

func sessionCreateFlags(fs *flag.FlagSet) any {
	o := &sessionCreateOpts{
		task:    fs.String("task", "", "task ID (required)"),
		agent:   fs.String("agent", "", "agent profile name (required)"),
		runtime: fs.String("runtime", "", "runtime plugin name (required)"),
		options: kvFlag{},
	}
	fs.Var(o.options, "option", "runtime option KEY=VALUE (repeatable)")
	o.wait = addWaitFlags(fs, lifecycleTimeout, "the agent to take prompts")
	return o
}

func runSessionCreate(e *env, fl any, pos []string) error {
	o := fl.(*sessionCreateOpts)
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
	req := client.CreateSessionRequest{Agent: *o.agent, Runtime: *o.runtime}
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

type sessionListOpts struct{ task, state *string }

func sessionListFlags(fs *flag.FlagSet) any {
	return &sessionListOpts{
		task:  fs.String("task", "", "only sessions of this task"),
		state: fs.String("state", "", "only sessions in this state (e.g. RUNNING)"),
	}
}

func runSessionList(e *env, fl any, pos []string) error {
	o := fl.(*sessionListOpts)
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
		if !e.g.json {
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
		if len(sessions) == 0 {
			fmt.Fprintln(e.stdout, "No sessions")
			return nil
		}
		now := time.Now()
		rows := make([][]string, 0, len(sessions))
		for _, s := range sessions {
			reason := s.ErrorMessage
			if reason == "" && (s.State == api.SessionError || s.State == api.SessionStopped) {
				reason = s.StateReason
			}
			rows = append(rows, []string{s.ID, s.TaskID, titles[s.TaskID], string(s.State), s.Agent, s.Runtime, nodes[s.ExecutorID],
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

func runSessionStatus(e *env, _ any, pos []string) error {
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

type promptOpts struct {
	file *string
	wait waitOpts
}

func promptFlags(fs *flag.FlagSet) any {
	return &promptOpts{
		file: fs.String("file", "", "read the prompt from file F"),
		wait: addWaitFlags(fs, turnTimeout, "the turn to end"),
	}
}

// promptText is the prompt of `session prompt`: the words after the id, all
// of stdin for "-", or the file of -file.
func promptText(pos []string, file string) (string, error) {
	switch {
	case file != "" && len(pos) > 1:
		return "", &usageError{msg: "give the prompt as text or with -file, not both"}
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("read prompt: %w", err)
		}
		return string(b), nil
	case len(pos) == 2 && pos[1] == "-":
		b, err := io.ReadAll(os.Stdin)
		if err != nil {
			return "", fmt.Errorf("read prompt from stdin: %w", err)
		}
		return string(b), nil
	case len(pos) == 1:
		return "", &usageError{msg: "missing prompt text"}
	}
	return strings.Join(pos[1:], " "), nil
}

func runSessionPrompt(e *env, fl any, pos []string) error {
	o := fl.(*promptOpts)
	if len(pos) == 0 {
		return &usageError{msg: "missing session ID and prompt text"}
	}
	id := pos[0]
	text, err := promptText(pos, *o.file)
	if err != nil {
		return err
	}
	if strings.TrimSpace(text) == "" {
		return &usageError{msg: "empty prompt text"}
	}
	c, err := e.client()
	if err != nil {
		return err
	}
	// The server waits (bounded) for a session that is still starting.
	ctx, cancel := contextWithTimeout(e, *o.wait.timeout)
	defer cancel()
	var stream *client.EventStream
	if !*o.wait.detach && !e.g.json {
		// Listen before prompting, from this node's applied index, so the
		// stream holds the turn from its start.
		if st, err := c.Status(ctx, client.Stale()); err == nil {
			stream, _ = c.Events(ctx, client.EventFilter{SessionID: id}, st.AppliedIndex)
		}
	}
	var raw []byte
	if err := c.Prompt(ctx, id, text, client.CaptureBody(&raw)); err != nil {
		if stream != nil {
			stream.Close()
		}
		return err
	}
	if e.g.json {
		return printJSON(e.stdout, raw)
	}
	if *o.wait.detach {
		fmt.Fprintf(e.stdout, "Prompt sent to session %s\n", id)
		return nil
	}
	err = e.streamTurn(ctx, c, id, stream)
	if errors.Is(err, errTurnTimeout) {
		return fmt.Errorf("the turn is still running after %s; the agent carries on (\"paddock session messages %s\" shows the reply so far)", *o.wait.timeout, id)
	}
	return err
}

func runSessionMessages(e *env, fl any, pos []string) error {
	if err := exactArgs(pos, "session ID"); err != nil {
		return err
	}
	if *fl.(*bool) {
		c, err := e.client()
		if err != nil {
			return err
		}
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		err = followMessages(ctx, e, c, pos[0], map[string]bool{})
		if errors.Is(err, errSessionEnded) {
			fmt.Fprintf(e.stdout, "Session %s was deleted\n", pos[0])
			return nil
		}
		return err
	}
	return show(e, func(c *client.Client, o []client.CallOption) ([]api.Message, error) {
		return c.Messages(e.ctx(), pos[0], o...)
	}, func(msgs []api.Message) error {
		if len(msgs) == 0 {
			fmt.Fprintln(e.stdout, "No messages")
			return nil
		}
		for _, m := range msgs {
			e.printMessage(m)
		}
		return nil
	})
}

// printMessage prints one message of a conversation, its role first and its
// lines indented under it (or its JSON line with -json).
func (e *env) printMessage(m api.Message) {
	if e.g.json {
		if b, err := json.Marshal(m); err == nil {
			fmt.Fprintf(e.stdout, "%s\n", b)
		}
		return
	}
	// Agent and user text: controls go as in tables, lines and tabs stay.
	text := noControls(strings.TrimRight(m.Text, "\n"), "\n\t")
	if !m.Complete {
		text += " …"
	}
	prefix := "[" + cell(string(m.Role)) + "] "
	lines := strings.Split(text, "\n")
	fmt.Fprintf(e.stdout, "%s%s\n", prefix, lines[0])
	for _, l := range lines[1:] {
		fmt.Fprintf(e.stdout, "%s%s\n", strings.Repeat(" ", len(prefix)), l)
	}
}

func runSessionResume(e *env, fl any, pos []string) error {
	o := fl.(*waitOpts)
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

func runSessionStop(e *env, fl any, pos []string) error {
	o := fl.(*waitOpts)
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

func runSessionDelete(e *env, fl any, pos []string) error {
	d := fl.(*deleteOpts)
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

func runPluginList(e *env, _ any, pos []string) error {
	if err := exactArgs(pos); err != nil {
		return err
	}
	return show(e, func(c *client.Client, o []client.CallOption) ([]client.Plugin, error) {
		return c.Plugins(e.ctx(), o...)
	}, func(plugins []client.Plugin) error {
		if len(plugins) == 0 {
			fmt.Fprintln(e.stdout, "No plugins")
			return nil
		}
		rows := make([][]string, 0, len(plugins))
		for _, p := range plugins {
			rows = append(rows, []string{p.Name, p.Version, p.APIVersion, strconv.FormatBool(p.Healthy),
				strings.Join(sortedTrueKeys(p.Capabilities), ","), p.Error})
		}
		return table(e.stdout, []string{"NAME", "VERSION", "API", "HEALTHY", "CAPABILITIES", "ERROR"}, rows)
	})
}

func executorListFlags(fs *flag.FlagSet) any {
	return fs.String("session", "", "only executors of this session")
}

func runExecutorList(e *env, fl any, pos []string) error {
	if err := exactArgs(pos); err != nil {
		return err
	}
	session, err := e.resolveID(idSession, *fl.(*string))
	if err != nil {
		return err
	}
	return show(e, func(c *client.Client, o []client.CallOption) ([]api.Executor, error) {
		return c.Executors(e.ctx(), session, o...)
	}, func(execs []api.Executor) error {
		if len(execs) == 0 {
			fmt.Fprintln(e.stdout, "No executors")
			return nil
		}
		now := time.Now()
		rows := make([][]string, 0, len(execs))
		for _, x := range execs {
			pid := "-"
			if x.PID > 0 {
				pid = strconv.Itoa(x.PID)
			}
			rows = append(rows, []string{x.ID, x.SessionID, x.Runtime, x.Node, string(x.Status), pid,
				age(x.LastSeenAt, now), x.ErrorMessage})
		}
		return table(e.stdout, []string{"ID", "SESSION", "RUNTIME", "NODE", "STATUS", "PID", "LAST SEEN", "ERROR"}, rows)
	})
}

func runAgentList(e *env, _ any, pos []string) error {
	if err := exactArgs(pos); err != nil {
		return err
	}
	return show(e, func(c *client.Client, o []client.CallOption) ([]client.Agent, error) {
		return c.Agents(e.ctx(), o...)
	}, func(agents []client.Agent) error {
		if len(agents) == 0 {
			fmt.Fprintln(e.stdout, "No agents")
			return nil
		}
		rows := make([][]string, 0, len(agents))
		for _, a := range agents {
			resume := "unknown"
			if a.SupportsSessionResume != nil {
				resume = map[bool]string{true: "yes", false: "no"}[*a.SupportsSessionResume]
			}
			rows = append(rows, []string{a.Name, a.Protocol, resume, a.ResumeSupport, strings.Join(a.Command, " ")})
		}
		return table(e.stdout, []string{"NAME", "PROTOCOL", "RESUME", "SOURCE", "COMMAND"}, rows)
	})
}
