package cli

import (
	"flag"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/client"
)

// The task group: create, list, close, reopen and delete tasks.

type taskCreateOpts struct {
	title, workspace, branch *string
	quiet                    *bool
}

func taskCreateFlags(fs *flag.FlagSet) *taskCreateOpts {
	return &taskCreateOpts{
		title:     fs.String("title", "", "task title (required)"),
		workspace: fs.String("workspace", "", "workspace directory or repository path; the runtime refuses one outside its root (standalone's task_workspace_root, docker's workspace_root)"),
		branch:    fs.String("branch", "", "git branch to work on"),
		quiet:     fs.Bool("q", false, quietHelp),
	}
}

// listOpts are the flags of task list and session list's own.
type listOpts struct{ quiet, verbose *bool }

func addListFlags(fs *flag.FlagSet) listOpts {
	return listOpts{quiet: fs.Bool("q", false, quietHelp), verbose: fs.Bool("verbose", false, verboseHelp)}
}

func taskListFlags(fs *flag.FlagSet) *listOpts {
	o := addListFlags(fs)
	return &o
}

func runTaskCreate(e *env, o *taskCreateOpts, pos []string) error {
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
	req := api.CreateTaskRequest{Title: *o.title, Workspace: api.Workspace{Path: ws, Branch: *o.branch}}
	return show(e, func(c *client.Client, opts []client.CallOption) (*api.Task, error) {
		return c.CreateTask(e.ctx(), req, opts...)
	}, func(task *api.Task) error {
		if *o.quiet {
			printIDs(e.stdout, task.ID)
			return nil
		}
		fmt.Fprintf(e.stdout, "Created task %s (%s)\n", task.ID, cell(string(task.State)))
		return nil
	})
}

func runTaskList(e *env, o *listOpts, pos []string) error {
	if err := exactArgs(pos); err != nil {
		return err
	}
	return show(e, func(c *client.Client, o []client.CallOption) ([]api.Task, error) {
		return c.ListTasks(e.ctx(), o...)
	}, func(tasks []api.Task) error {
		ids := make([]string, 0, len(tasks))
		for _, t := range tasks {
			ids = append(ids, t.ID)
		}
		if *o.quiet {
			printIDs(e.stdout, ids...)
			return nil
		}
		if len(tasks) == 0 {
			fmt.Fprintln(e.stdout, "No tasks")
			return nil
		}
		short := idColumn(ids, *o.verbose)
		now := time.Now()
		rows := make([][]string, 0, len(tasks))
		for _, t := range tasks {
			rows = append(rows, []string{short(t.ID), t.Title, string(t.State), t.Workspace.Path, t.Workspace.Branch, age(t.CreatedAt, now)})
		}
		return table(e.stdout, []string{"ID", "TITLE", "STATE", "WORKSPACE", "BRANCH", "CREATED"}, rows)
	})
}

func runTaskClose(e *env, pos []string) error {
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

func runTaskReopen(e *env, pos []string) error {
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

func forceFlags(fs *flag.FlagSet) *bool { return fs.Bool("force", false, forceHelp) }

// forceOption is client.Force when force is set.
func forceOption(force bool) []client.CallOption {
	if force {
		return []client.CallOption{client.Force()}
	}
	return nil
}

func runTaskDelete(e *env, forceFlag *bool, pos []string) error {
	if err := exactArgs(pos, "task ID"); err != nil {
		return err
	}
	force := *forceFlag
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
