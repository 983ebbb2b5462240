package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	xterm "golang.org/x/term"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/client"
)

// Default bounds of the commands that wait (-timeout overrides them).
const (
	lifecycleTimeout = 2 * time.Minute
	turnTimeout      = 10 * time.Minute
)

// recheckEvery re-reads the session while waiting even when no event comes
// (the event stream may open just after a change, or not at all).
const recheckEvery = 500 * time.Millisecond

// waitOpts are the flags of a command that waits for a session's state, as
// `nomad job run` monitors its deployment.
type waitOpts struct {
	detach  *bool
	timeout *time.Duration
}

func addWaitFlags(fs *flag.FlagSet, timeout time.Duration, what string) waitOpts {
	return waitOpts{
		detach:  fs.Bool("detach", false, "return at once instead of waiting for "+what),
		timeout: fs.Duration("timeout", timeout, "how long to wait for "+what),
	}
}

func waitFlags(fs *flag.FlagSet) *waitOpts {
	o := addWaitFlags(fs, lifecycleTimeout, "the session's state")
	return &o
}

// isTerminal reports whether w is a terminal: progress is shown only there.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && xterm.IsTerminal(int(f.Fd()))
}

// progress prints a monitor line on a terminal only.
func (e *env) progress(format string, args ...any) {
	if isTerminal(e.stdout) {
		fmt.Fprintf(e.stdout, "    %s %s\n", time.Now().Format("15:04:05"), cell(fmt.Sprintf(format, args...)))
	}
}

// verdict says whether a waited-for session is where the command wants it
// (done), or failed to get there (err).
type verdict func(s *api.Session) (done bool, err error)

// waitSession waits until the session satisfies v, up to timeout. It watches
// the session's event stream (progress on a terminal) and re-reads the
// session on every event and every recheckEvery. With -json it leaves the
// last read's raw body in raw.
func (e *env) waitSession(c *client.Client, id string, timeout time.Duration, raw *[]byte, v verdict) (*api.Session, error) {
	ctx, cancel := context.WithTimeout(e.ctx(), timeout)
	defer cancel()
	events := make(chan api.Event, 64)
	var wg sync.WaitGroup
	if stream, err := c.Events(ctx, client.EventFilter{SessionID: id}, 0); err == nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(events)
			for {
				ev, err := stream.Next()
				if err != nil {
					return
				}
				select {
				case events <- ev:
				case <-ctx.Done():
					return
				}
			}
		}()
		defer func() {
			stream.Close()
			wg.Wait()
		}()
	} else {
		close(events) // no stream (an old server, a proxy): poll only
	}
	tick := time.NewTicker(recheckEvery)
	defer tick.Stop()
	var last api.SessionState
	for {
		var opts []client.CallOption
		if raw != nil {
			opts = append(opts, client.CaptureBody(raw))
		}
		s, err := c.GetSession(ctx, id, opts...)
		switch {
		case err == nil:
			if last != "" && s.State != last {
				e.progress("session %s: %s → %s", shortID(id), last, s.State)
			}
			last = s.State
			if done, verr := v(s); done || verr != nil {
				return s, verr
			}
		case ctx.Err() == nil:
			return nil, err
		}
		select {
		case <-ctx.Done():
			if last == "" {
				return nil, fmt.Errorf("could not read session %s within %s", id, timeout)
			}
			return nil, fmt.Errorf("session %s is still %s after %s; the server carries on in the background (\"paddock session status %s\" shows where it is)", id, last, timeout, id)
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			e.showEvent(ev)
		case <-tick.C:
		}
	}
}

// showEvent prints the lifecycle events worth a progress line.
func (e *env) showEvent(ev api.Event) {
	str := func(k string) string { s, _ := ev.Data[k].(string); return s }
	switch ev.Type {
	case api.EventAgentctlStarting:
		e.progress("agentctl starting on runtime %s (executor %s)", str("runtime"), str("executor_id"))
	case api.EventAgentctlReady:
		e.progress("agentctl ready at %s", str("agentctl_url"))
	case api.EventAgentctlError:
		e.progress("agentctl error: %s", str("message"))
	}
}

func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// untilReady is the verdict of create and resume: the agent takes prompts
// (WAITING_FOR_INPUT, or RUNNING when a prompt came first); ERROR, STOPPED
// and COMPLETED end the wait with the reason.
func untilReady(verb string) verdict {
	return func(s *api.Session) (bool, error) {
		switch s.State {
		case api.SessionWaitingForInput, api.SessionRunning:
			return true, nil
		case api.SessionError:
			return false, fmt.Errorf("session %s failed to %s: %s", s.ID, verb, strings.TrimSpace(orDefault(s.ErrorMessage, "no error message")))
		case api.SessionStopped:
			return false, fmt.Errorf("session %s was stopped before its agent was ready", s.ID)
		case api.SessionCompleted:
			return false, fmt.Errorf("session %s was deleted before its agent was ready", s.ID)
		}
		return false, nil
	}
}

// untilStopped is the verdict of stop: STOPPED once the agent has drained.
func untilStopped(s *api.Session) (bool, error) {
	switch s.State {
	case api.SessionStopped:
		return true, nil
	case api.SessionError:
		return false, fmt.Errorf("stopping session %s failed: %s", s.ID, orDefault(s.ErrorMessage, "no error message"))
	case api.SessionCompleted:
		return false, fmt.Errorf("session %s was deleted while it stopped", s.ID)
	}
	return false, nil
}

// untilCompleted is the verdict of delete.
func untilCompleted(s *api.Session) (bool, error) {
	return s.State == api.SessionCompleted, nil
}

func orDefault(s, def string) string {
	if strings.TrimSpace(s) == "" {
		return def
	}
	return s
}

// errTurnTimeout marks a turn that outlived the wait.
var errTurnTimeout = errors.New("turn still running")

// streamTurn prints the reply of the turn that a prompt just started, as
// the agent streams it, and returns once the session leaves RUNNING. The
// stream must have been opened, before the prompt was sent, with a since
// index taken before it too, so the turn's start is in it. With no stream
// (nil) it polls the session and prints the reply once the turn is over.
func (e *env) streamTurn(ctx context.Context, c *client.Client, id string, stream *client.EventStream) error {
	printed := map[string]int{}  // message id → runes printed
	shown := map[string]string{} // tool or plan entry id → entryKey printed
	dim := isTerminal(e.stdout)
	inTurn, lineOpen := false, false
	show := func(m api.Message) {
		if m.Role == api.RoleUser {
			return
		}
		if isWorkEntry(m) {
			// Whole, and again as a new line when it changes.
			printed[m.ID] = 0
			if key := entryKey(m); shown[m.ID] != key {
				shown[m.ID] = key
				if lineOpen {
					fmt.Fprintln(e.stdout)
					lineOpen = false
				}
				fmt.Fprintln(e.stdout, key)
			}
			return
		}
		text := []rune(noControls(m.Text, "\n\t"))
		n, seen := printed[m.ID]
		if !seen {
			if lineOpen {
				fmt.Fprintln(e.stdout)
				lineOpen = false
			}
			switch m.Role {
			case api.RoleAgent:
			case api.RoleThought:
				fmt.Fprint(e.stdout, thoughtText("", dim))
			default:
				fmt.Fprintf(e.stdout, "[%s] ", cell(string(m.Role)))
			}
		}
		if n < len(text) {
			chunk := string(text[n:])
			if m.Role == api.RoleThought {
				chunk = strings.ReplaceAll(chunk, "\n", "\n"+strings.Repeat(" ", len(thoughtPrefix)))
				if dim {
					chunk = dimOn + chunk + dimOff
				}
			}
			fmt.Fprint(e.stdout, chunk)
			lineOpen = !strings.HasSuffix(string(text), "\n")
			printed[m.ID] = len(text)
		}
	}
	finish := func(s *api.Session) error {
		// The reply as stored: whatever the stream did not carry.
		if msgs, err := c.Messages(ctx, id); err == nil {
			for _, m := range turnMessages(msgs, printed) {
				show(m)
			}
		}
		if lineOpen {
			fmt.Fprintln(e.stdout)
		}
		switch s.State {
		case api.SessionError:
			return fmt.Errorf("the turn ended with session %s in ERROR: %s", id, orDefault(s.ErrorMessage, "no error message"))
		case api.SessionStopped:
			return fmt.Errorf("the turn ended when session %s was stopped", id)
		case api.SessionCompleted:
			return fmt.Errorf("the turn ended when session %s was deleted", id)
		}
		return nil
	}
	events := make(chan api.Event, 64)
	if stream != nil {
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer close(events)
			for {
				ev, err := stream.Next()
				if err != nil {
					return
				}
				select {
				case events <- ev:
				case <-ctx.Done():
					return
				}
			}
		}()
		defer func() {
			stream.Close()
			<-done
		}()
	} else {
		close(events)
	}
	tick := time.NewTicker(recheckEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			if lineOpen {
				fmt.Fprintln(e.stdout)
			}
			return errTurnTimeout
		case ev, ok := <-events:
			if !ok {
				events = nil // the stream ended: the ticks carry on
				continue
			}
			switch ev.Type {
			case api.EventStateChanged:
				to, _ := ev.Data["to"].(string)
				from, _ := ev.Data["from"].(string)
				if to == string(api.SessionRunning) {
					inTurn = true
				} else if inTurn && from == string(api.SessionRunning) {
					s, err := c.GetSession(ctx, id)
					if err != nil {
						return err
					}
					if s.State != api.SessionRunning {
						return finish(s)
					}
				}
			case api.EventMessageAdded, api.EventMessageUpdated:
				if m, ok := eventMessage(ev); ok && inTurn {
					show(m)
				}
			case api.EventPermissionRequested:
				if p, ok := eventPermission(ev); ok && inTurn && p.State == api.PermissionPending {
					if lineOpen {
						fmt.Fprintln(e.stdout)
						lineOpen = false
					}
					fmt.Fprintln(e.stdout, permissionHint(p, id))
				}
			}
		case <-tick.C:
			if events != nil && inTurn {
				continue // the stream speaks for the turn
			}
			s, err := c.GetSession(ctx, id)
			if err != nil {
				return err
			}
			if s.State != api.SessionRunning {
				return finish(s)
			}
		}
	}
}

// turnMessages returns the messages of the last turn (after the last user
// message) and any already printed ones, in order.
func turnMessages(msgs []api.Message, printed map[string]int) []api.Message {
	start := 0
	for i, m := range msgs {
		if m.Role == api.RoleUser {
			start = i + 1
		}
	}
	var out []api.Message
	for i, m := range msgs {
		if _, ok := printed[m.ID]; ok || i >= start {
			out = append(out, m)
		}
	}
	return out
}

// eventMessage decodes the message of a message event.
func eventMessage(ev api.Event) (api.Message, bool) {
	raw, err := json.Marshal(ev.Data["message"])
	if err != nil {
		return api.Message{}, false
	}
	var m api.Message
	if json.Unmarshal(raw, &m) != nil || m.ID == "" {
		return api.Message{}, false
	}
	return m, true
}
