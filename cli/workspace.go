package cli

import (
	"fmt"
	"strconv"
	"time"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/client"
)

func runSessionCancel(e *env, pos []string) error {
	if err := exactArgs(pos, "session ID"); err != nil {
		return err
	}
	return e.call(func(c *client.Client, o []client.CallOption) error {
		return c.Cancel(e.ctx(), pos[0], o...)
	}, func() error {
		fmt.Fprintf(e.stdout, "Cancelled the running turn of session %s\n", pos[0])
		return nil
	})
}

func runSessionFiles(e *env, pos []string) error {
	switch {
	case len(pos) == 0:
		return &usageError{msg: "missing session ID"}
	case len(pos) > 2:
		return &usageError{msg: fmt.Sprintf("unexpected argument %q", pos[2])}
	}
	dir := ""
	if len(pos) == 2 {
		dir = pos[1]
	}
	return show(e, func(c *client.Client, o []client.CallOption) ([]api.FileEntry, error) {
		return c.Files(e.ctx(), pos[0], dir, o...)
	}, func(entries []api.FileEntry) error {
		if len(entries) == 0 {
			fmt.Fprintln(e.stdout, "No files")
			return nil
		}
		rows := make([][]string, 0, len(entries))
		for _, f := range entries {
			name, size := f.Name, strconv.FormatInt(f.Size, 10)
			if f.Type == "dir" {
				name, size = name+"/", "-"
			}
			mod := "-"
			if !f.ModTime.IsZero() {
				mod = f.ModTime.Local().Format(time.DateTime)
			}
			rows = append(rows, []string{name, size, f.Mode, mod})
		}
		return table(e.stdout, []string{"NAME", "SIZE", "MODE", "MODIFIED"}, rows)
	})
}

func runSessionCat(e *env, pos []string) error {
	if err := exactArgs(pos, "session ID", "PATH"); err != nil {
		return err
	}
	c, err := e.client()
	if err != nil {
		return err
	}
	b, err := c.ReadFile(e.ctx(), pos[0], pos[1])
	if err != nil {
		return err
	}
	_, err = e.stdout.Write(b)
	return err
}

func runSessionDiff(e *env, pos []string) error {
	if err := exactArgs(pos, "session ID"); err != nil {
		return err
	}
	c, err := e.client()
	if err != nil {
		return err
	}
	diff, err := c.GitDiff(e.ctx(), pos[0])
	if err != nil {
		return err
	}
	if diff == "" {
		if isTerminal(e.stdout) {
			fmt.Fprintln(e.stdout, "No changes")
		}
		return nil
	}
	_, err = fmt.Fprint(e.stdout, diff)
	return err
}
