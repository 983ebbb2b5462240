package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/client"
)

// The session group's conversation: prompt the agent and print its
// messages.

type promptOpts struct {
	file *string
	wait waitOpts
}

func promptFlags(fs *flag.FlagSet) *promptOpts {
	return &promptOpts{
		file: fs.String("file", "", "read the prompt from file F"),
		wait: addWaitFlags(fs, turnTimeout, "the turn to end"),
	}
}

// promptText is the prompt of `session prompt`: the words after the id, all
// of stdin for "-", or the file of -file.
func promptText(e *env, pos []string, file string) (string, error) {
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
		b, err := e.readStdin()
		if err != nil {
			return "", fmt.Errorf("read prompt from stdin: %w", err)
		}
		return string(b), nil
	case len(pos) == 1:
		return "", &usageError{msg: "missing prompt text"}
	}
	return strings.Join(pos[1:], " "), nil
}

func runSessionPrompt(e *env, o *promptOpts, pos []string) error {
	if len(pos) == 0 {
		return &usageError{msg: "missing session ID and prompt text"}
	}
	id := pos[0]
	text, err := promptText(e, pos, *o.file)
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

func runSessionMessages(e *env, follow *bool, pos []string) error {
	if err := exactArgs(pos, "session ID"); err != nil {
		return err
	}
	if *follow {
		c, err := e.client()
		if err != nil {
			return err
		}
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		err = followMessages(ctx, e, c, pos[0], map[string]string{})
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
// lines indented under it, a tool call as one line, a plan as a checklist
// and a thought dim and indented (or its JSON line with -json).
func (e *env) printMessage(m api.Message) {
	if e.g.json {
		if b, err := json.Marshal(m); err == nil {
			fmt.Fprintf(e.stdout, "%s\n", b)
		}
		return
	}
	if isWorkEntry(m) {
		for _, l := range workLines(m) {
			fmt.Fprintln(e.stdout, l)
		}
		return
	}
	// Agent and user text: controls go as in tables, lines and tabs stay.
	text := noControls(strings.TrimRight(m.Text, "\n"), "\n\t")
	if !m.Complete {
		text += " …"
	}
	if m.Role == api.RoleThought {
		fmt.Fprintln(e.stdout, thoughtText(text, isTerminal(e.stdout)))
		return
	}
	prefix := "[" + cell(string(m.Role)) + "] "
	lines := strings.Split(text, "\n")
	fmt.Fprintf(e.stdout, "%s%s\n", prefix, lines[0])
	for _, l := range lines[1:] {
		fmt.Fprintf(e.stdout, "%s%s\n", strings.Repeat(" ", len(prefix)), l)
	}
}
