package cli

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/paddockhq/paddock/client"
)

// minPrefix is the shortest id prefix the CLI expands, as Docker and Nomad do.
const minPrefix = 4

// Kinds of id a command's first argument can be.
const (
	idSession = "session"
	idTask    = "task"
)

// resolveSessionID returns the session whose id is id or starts with id.
func resolveSessionID(ctx context.Context, c *client.Client, id string) (string, error) {
	if _, err := c.GetSession(ctx, id); err == nil || !client.IsCode(err, "not_found") || len(id) < minPrefix {
		return id, nil // found, or an error the command's own call reports
	}
	return sessionWithPrefix(ctx, c, id)
}

// sessionWithPrefix returns the one session id that starts with prefix.
func sessionWithPrefix(ctx context.Context, c *client.Client, prefix string) (string, error) {
	sessions, err := c.ListSessions(ctx, "", "")
	if err != nil {
		return "", err
	}
	ids := make([]string, 0, len(sessions))
	for _, s := range sessions {
		ids = append(ids, s.ID)
	}
	return matchPrefix(idSession, prefix, ids)
}

// resolveTaskID returns the task whose id is id or starts with id.
func resolveTaskID(ctx context.Context, c *client.Client, id string) (string, error) {
	if _, err := c.GetTask(ctx, id); err == nil || !client.IsCode(err, "not_found") || len(id) < minPrefix {
		return id, nil
	}
	return taskWithPrefix(ctx, c, id)
}

// taskWithPrefix returns the one task id that starts with prefix.
func taskWithPrefix(ctx context.Context, c *client.Client, prefix string) (string, error) {
	tasks, err := c.ListTasks(ctx)
	if err != nil {
		return "", err
	}
	ids := make([]string, 0, len(tasks))
	for _, t := range tasks {
		ids = append(ids, t.ID)
	}
	return matchPrefix(idTask, prefix, ids)
}

// matchPrefix picks the one id that starts with prefix. No match leaves the
// prefix as it is (the command's call then reports not_found); several are
// an error that lists them.
func matchPrefix(kind, prefix string, ids []string) (string, error) {
	var hits []string
	for _, id := range ids {
		if strings.HasPrefix(id, prefix) {
			hits = append(hits, id)
		}
	}
	switch len(hits) {
	case 0:
		return prefix, nil
	case 1:
		return hits[0], nil
	}
	sort.Strings(hits)
	return "", fmt.Errorf("%s id prefix %q is ambiguous: it matches %s", kind, prefix, strings.Join(hits, ", "))
}

// resolveID expands an id prefix of the given kind ("" when id is empty).
func (e *env) resolveID(kind, id string) (string, error) {
	if strings.TrimSpace(id) == "" {
		return id, nil
	}
	c, err := e.client()
	if err != nil {
		return "", err
	}
	if kind == idTask {
		return resolveTaskID(e.ctx(), c, id)
	}
	return resolveSessionID(e.ctx(), c, id)
}

// expandPrefix returns the id of the given kind that starts with prefix
// (the prefix itself when none does), without first trying it as a whole id.
func (e *env) expandPrefix(kind, prefix string) (string, error) {
	c, err := e.client()
	if err != nil {
		return "", err
	}
	if kind == idTask {
		return taskWithPrefix(e.ctx(), c, prefix)
	}
	return sessionWithPrefix(e.ctx(), c, prefix)
}

// shortLen is how many characters of an id a table shows (-verbose shows
// them whole); as short ids they are a prefix the commands expand.
const shortLen = 8

// idColumn returns how a table shows the ids of ids: whole with verbose,
// else cut to shortLen characters, or to more where shortLen would not tell
// two of them apart.
func idColumn(ids []string, verbose bool) func(string) string {
	if verbose {
		return func(id string) string { return id }
	}
	n := shortLen
	for {
		seen := map[string]string{} // prefix → the id it came from
		clash := false
		for _, id := range ids {
			if len(id) <= n {
				continue
			}
			if other, ok := seen[id[:n]]; ok && other != id {
				clash = true
				break
			}
			seen[id[:n]] = id
		}
		if !clash {
			break
		}
		n += 4
	}
	return func(id string) string {
		if len(id) > n {
			return id[:n]
		}
		return id
	}
}

// printIDs prints one id a line: the output of -q.
func printIDs(w io.Writer, ids ...string) {
	for _, id := range ids {
		fmt.Fprintln(w, id)
	}
}

// quietHelp and verboseHelp are the help of -q and -verbose.
const (
	quietHelp   = "print only ids, one a line (for scripts: ID=$(paddock … -q))"
	verboseHelp = "print whole ids (the table shows their first 8 characters, a prefix every command takes)"
)
