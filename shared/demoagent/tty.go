package demoagent

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// TTY markers (see the package comment).
const (
	TTYPrompt      = "demo> "
	TTYReplyPrefix = "agent: "
	TTYCancelled   = "[turn cancelled]"
)

// ServeTTY runs the line-oriented terminal mode on in/out. id is the
// conversation id; resume=true requires it to exist. It returns at EOF or
// when ctx ends. SIGINT cancels the running turn.
func ServeTTY(ctx context.Context, cfg Config, id string, resume bool, in io.Reader, out io.Writer) error {
	if resume && cfg.NoResume {
		return errors.New("this agent was started with --no-resume and cannot resume conversations")
	}
	if id == "" {
		id = NewID()
	}
	c, err := Open(cfg.Workspace, id, resume)
	if err != nil {
		return err
	}
	mode := "new"
	if resume {
		mode = "resumed"
	}
	fmt.Fprintf(out, "paddock-demo-agent: session %s (%s) turn %d\n", c.SessionID, mode, c.Turns)

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT)
	defer signal.Stop(sigs)

	lines := make(chan string)
	readErr := make(chan error, 1)
	go func() { // ends when in reaches EOF (the pty closes with the process)
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
		readErr <- sc.Err()
	}()
	for {
		fmt.Fprint(out, TTYPrompt)
		var line string
	wait:
		for {
			select {
			case <-ctx.Done():
				return nil
			case err := <-readErr:
				fmt.Fprintln(out)
				return err
			case <-sigs: // Ctrl-C with no turn running: a fresh prompt
				fmt.Fprint(out, "\n"+TTYPrompt)
			case line = <-lines:
				break wait
			}
		}
		text := strings.TrimSpace(strings.TrimRight(line, "\r"))
		if text == "" {
			continue
		}
		turnCtx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			select {
			case <-sigs:
				cancel()
			case <-done:
			}
		}()
		// The reply prefix is printed when the turn starts (before any wait),
		// so a driver can see the turn has begun before it interrupts it.
		fmt.Fprint(out, TTYReplyPrefix)
		err := c.Turn(turnCtx, cfg, text, func(chunk string) error {
			// A chunk that ends a line (stream N) starts the next one as a
			// reply line of its own.
			_, err := fmt.Fprint(out, strings.ReplaceAll(chunk, "\n", "\n"+TTYReplyPrefix))
			return err
		})
		close(done)
		cancel()
		fmt.Fprint(out, "\n")
		if errors.Is(err, context.Canceled) && ctx.Err() == nil {
			fmt.Fprintln(out, TTYCancelled)
		} else if err != nil {
			return err
		}
	}
}
