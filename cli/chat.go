package cli

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	xterm "golang.org/x/term"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/client"
)

var chatCommand = command{
	path:    "chat",
	args:    "SESSION [-force]",
	summary: "talk with a session's ACP agent line by line, answering its permission requests (↑/↓ recall this chat's prompts, ctrl-r searches them, ctrl-c cancels the running turn, ctrl-d leaves; /help lists the agent's commands); a session another chat holds is taken over after a question, or with -force",
	bind:    withFlags(chatFlags, runChat),
	id:      idSession,
}

// Bracketed paste: a terminal asked with pasteOn wraps pasted text in
// pasteStart and pasteEnd, so a multi-line paste is one prompt.
const (
	pasteOn    = "\x1b[?2004h"
	pasteOff   = "\x1b[?2004l"
	pasteStart = "\x1b[200~"
	pasteEnd   = "\x1b[201~"
)

// chatPollEvery re-reads a session with a running turn even when no event
// comes, so a turn whose end event was missed still ends.
const chatPollEvery = time.Second

// chatFlags are chat's flags: whether to take over a session another
// client holds without asking.
func chatFlags(fs *flag.FlagSet) *bool {
	return fs.Bool("force", false, "take the session over from another chat without asking")
}

func runChat(e *env, force *bool, pos []string) error {
	if err := exactArgs(pos, "SESSION"); err != nil {
		return err
	}
	c, err := e.client()
	if err != nil {
		return err
	}
	s, err := c.GetSession(e.ctx(), pos[0])
	if err != nil {
		return err
	}
	if agents, err := c.Agents(e.ctx()); err == nil {
		for _, a := range agents {
			if a.Name == s.Agent && a.Protocol == "pty" {
				return fmt.Errorf("session %s runs the pty agent %q, which has a terminal of its own: \"paddock attach %s -name agent\"", s.ID, s.Agent, s.ID)
			}
		}
	}
	if s.State == api.SessionCompleted {
		return fmt.Errorf("session %s was deleted; create a new session", s.ID)
	}
	tty := xterm.IsTerminal(int(os.Stdin.Fd()))
	// Asked before the line editor takes the terminal.
	if err := e.claimChat(e.ctx(), c, s.ID, *force, tty); err != nil {
		return err
	}
	ch := &chat{
		e: e, c: c, id: s.ID, agent: s.Agent, in: os.Stdin, out: e.stdout,
		tty:     tty,
		dim:     isTerminal(e.stdout),
		printed: map[string]int{}, echo: map[string]int{}, shown: map[string]string{}, answered: map[string]bool{},
	}
	if ch.tty && ch.dim {
		// A terminal both ways: lines are typed in the chat's own editor.
		ch.ed = startLineEditor(os.Stdin, e.stdout)
		ch.out = ch.ed
		defer ch.ed.close()
	}
	defer ch.releaseController()
	return ch.run()
}

// chat is one `paddock chat`: a line-mode conversation with a session's
// agent. One goroutine (run's loop) prints; the event stream and the
// stdin reader feed it through channels.
type chat struct {
	e     *env
	c     *client.Client
	id    string
	agent string
	in    io.Reader
	out   io.Writer
	tty   bool        // stdin is a terminal: ctrl-d leaves at once, pastes are bracketed
	dim   bool        // stdout is a terminal: thoughts are faint
	ed    *lineEditor // the line editor (stdin and stdout are a terminal), else nil

	printed  map[string]int // message id → runes shown
	echo     map[string]int // prompts sent from here whose user message is not seen yet
	lineOpen bool           // the last output did not end its line
	running  bool           // a turn runs
	marker   bool           // the prompt marker is showing
	queue    []string       // prompts typed while a turn ran
	resend   string         // an interrupted turn's prompt, sent again only if the user says so

	shown    map[string]string // tool or plan entry id → the entryKey shown
	pending  []api.Permission  // permission requests waiting for an answer, oldest first
	asked    string            // the pending request whose question was printed last
	answered map[string]bool   // requests answered from here
}

func (ch *chat) run() error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	interrupts := make(chan os.Signal, 1)
	signal.Notify(interrupts, os.Interrupt)
	defer signal.Stop(interrupts)
	if ch.tty && ch.ed == nil {
		defer ch.lineMode()()
	}

	// The events after this index are the chat's; the transcript is read
	// after taking it, so nothing falls between the two.
	st, err := ch.c.Status(ctx, client.Stale())
	if err != nil {
		return err
	}
	msgs, err := ch.c.Messages(ctx, ch.id)
	if err != nil {
		return err
	}
	sess, err := ch.c.GetSession(ctx, ch.id)
	if err != nil {
		return err
	}
	fmt.Fprintf(ch.out, "Chat with session %s (agent %s, %s). Enter sends a prompt; ctrl-c cancels a running turn; ctrl-d leaves, and the session keeps running.\n",
		ch.id, cell(ch.agent), sess.State)
	for _, m := range msgs {
		ch.show(m)
	}
	ch.closeLine()
	ch.running = sess.State == api.SessionRunning
	ch.stateNotice(sess)
	ch.loadPermissions(ctx)
	if last := lastUserText(msgs); sess.LastTurnOutcome == api.TurnInterrupted && !ch.running && last != "" {
		// Never sent again by itself: the agent may have acted on it.
		ch.resend = last
		ch.notice("the last turn was interrupted before the agent finished. Send %q again? [y/N]", firstLineOf(last, 60))
		if ch.ed != nil {
			ch.notice("answer y to send it again; Enter or n leaves it; a prompt typed instead is sent as itself")
		}
	}

	ctlNotes := make(chan string)
	go ch.holdController(ctx, ctlNotes)

	events := make(chan api.Event, 256)
	links := make(chan bool, 4)
	go func() {
		_ = watchEvents(ctx, ch.c, client.EventFilter{SessionID: ch.id}, st.AppliedIndex,
			func(ev api.Event) error {
				select {
				case events <- ev:
				case <-ctx.Done():
				}
				return nil
			},
			func(up bool) {
				select {
				case links <- up:
				case <-ctx.Done():
				}
			})
	}()
	var prompts <-chan typedLine
	var edIntr <-chan struct{}
	if ch.ed != nil {
		prompts, edIntr = ch.ed.lines, ch.ed.intr
	} else {
		prompts = pipeLines(ch.in)
	}
	poll := time.NewTicker(chatPollEvery)
	defer poll.Stop()

	eof := false
	for {
		if !ch.running && len(ch.queue) > 0 {
			p := ch.queue[0]
			ch.queue = ch.queue[1:]
			ch.send(ctx, p, true)
			continue
		}
		if !ch.running && eof {
			return ch.leave()
		}
		if len(ch.pending) > 0 && ch.asked != ch.pending[0].ID {
			ch.ask(ch.pending[0])
		}
		if ch.ed != nil {
			ch.ed.setLabel(ch.label())
			ch.ed.setRunning(ch.running && len(ch.pending) == 0)
		} else if !ch.marker && ch.tty {
			switch {
			case len(ch.pending) > 0:
				ch.closeLine()
				fmt.Fprintf(ch.out, "answer 1-%d> ", len(ch.pending[0].Options))
				ch.marker = true
			case !ch.running:
				ch.closeLine()
				fmt.Fprint(ch.out, "> ")
				ch.marker = true
			}
		}
		select {
		case <-ctx.Done():
			return ch.leave()
		case line, ok := <-prompts:
			p := line.text
			if ok && ch.ed != nil {
				ch.closeLine()
				fmt.Fprintf(ch.out, "%s%s\n", line.label, strings.ReplaceAll(noControls(p, "\n\t"), "\n", "\n  "))
			}
			switch {
			case !ok && ch.tty:
				return ch.leave() // ctrl-d: the turn, if any, carries on
			case !ok:
				eof = true // piped: the queued prompts are answered first
				prompts = nil
			case len(ch.pending) > 0:
				// The agent waits for this answer: the line is one, never a prompt.
				ch.marker = false
				ch.answer(ctx, p)
			case ch.resend != "":
				ch.marker = false
				again := ch.resend
				ch.resend = ""
				switch a := strings.ToLower(strings.TrimSpace(p)); {
				case isYes(a):
					ch.send(ctx, again, false)
				case a == "" || a == "n" || a == "no":
					ch.notice("not sent again")
				default:
					// Not an answer: a new prompt, which the user meant to send.
					ch.notice("not sent again; sending the line you typed")
					ch.typed(ctx, p)
				}
			default:
				ch.marker = false
				ch.typed(ctx, p)
			}
		case <-interrupts:
			ch.interrupt(ctx)
		case <-edIntr:
			ch.interrupt(ctx)
		case ev := <-events:
			ch.event(ctx, ev)
		case n := <-ctlNotes:
			ch.notice("%s", n)
		case up := <-links:
			if up {
				ch.notice("reconnected")
				ch.resync(ctx)
			} else {
				ch.notice("connection lost; reconnecting…")
			}
		case <-poll.C:
			if ch.running {
				if s, err := ch.c.GetSession(ctx, ch.id); err == nil && s.State != api.SessionRunning {
					ch.turnEnded(ctx, s)
				}
			}
		}
	}
}

// typed handles a line typed as a prompt: a slash command of the chat's,
// or a prompt sent now or queued behind the running turn.
func (ch *chat) typed(ctx context.Context, p string) {
	text, isPrompt := ch.slash(ctx, p)
	switch {
	case !isPrompt:
	case ch.running:
		ch.queue = append(ch.queue, text)
		ch.notice("queued: it is sent when the running turn ends")
	default:
		ch.send(ctx, text, true)
	}
}

// label is the editor's prompt: what the next line answers.
func (ch *chat) label() string {
	switch {
	case len(ch.pending) > 0:
		return fmt.Sprintf("answer 1-%d> ", len(ch.pending[0].Options))
	case ch.resend != "":
		return "send it again? [y/N] "
	}
	return promptLabel
}

// pipeLines reads prompts from r (not a terminal's editor) as typed lines.
func pipeLines(r io.Reader) <-chan typedLine {
	prompts := make(chan string)
	lines := make(chan typedLine)
	go readPrompts(r, prompts)
	go func() {
		defer close(lines)
		for p := range prompts {
			lines <- typedLine{text: p}
		}
	}()
	return lines
}

// lineMode prepares the terminal for the chat and returns the undo: the
// line discipline edits lines, control characters are not echoed as ^X (so
// the paste brackets stay invisible), and pastes are bracketed.
func (ch *chat) lineMode() func() {
	fd := int(os.Stdin.Fd())
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return func() {}
	}
	t := *old
	t.Lflag &^= unix.ECHOCTL
	_ = unix.IoctlSetTermios(fd, unix.TCSETS, &t)
	if isTerminal(ch.out) {
		fmt.Fprint(ch.out, pasteOn)
	}
	return func() {
		if isTerminal(ch.out) {
			fmt.Fprint(ch.out, pasteOff)
		}
		_ = unix.IoctlSetTermios(fd, unix.TCSETS, old)
	}
}

// readPrompts sends each prompt read from r: a line, or a bracketed paste
// with the rest of the line it ends on. It closes prompts at EOF.
func readPrompts(r io.Reader, prompts chan<- string) {
	defer close(prompts)
	br := bufio.NewReader(r)
	var lines []string
	pasting := false
	flush := func() {
		text := strings.TrimRight(strings.Join(lines, "\n"), " \t\r\n")
		lines = nil
		if strings.TrimSpace(text) != "" {
			prompts <- text
		}
	}
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			complete := strings.HasSuffix(line, "\n")
			l := strings.TrimRight(line, "\r\n")
			if strings.Contains(l, pasteStart) {
				pasting = true
				l = strings.ReplaceAll(l, pasteStart, "")
			}
			if strings.Contains(l, pasteEnd) {
				pasting = false
				l = strings.ReplaceAll(l, pasteEnd, "")
			}
			lines = append(lines, l)
			if complete && !pasting {
				flush()
			}
		}
		if err != nil {
			flush()
			return
		}
	}
}

// lastUserText is the text of the conversation's last prompt ("" if none).
func lastUserText(msgs []api.Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == api.RoleUser {
			return msgs[i].Text
		}
	}
	return ""
}

// isYes reports whether an answer is yes.
func isYes(s string) bool {
	s = strings.ToLower(strings.TrimSpace(s))
	return s == "y" || s == "yes"
}

// send prompts the agent; the reply streams through the events. typed says
// the terminal showed the text as the user typed it.
func (ch *chat) send(ctx context.Context, text string, typed bool) {
	ch.marker = false
	if err := ch.c.Prompt(ctx, ch.id, text); err != nil {
		ch.notice("the prompt was not sent: %s", noControls(err.Error(), ""))
		return
	}
	if typed && ch.tty {
		ch.echo[text]++ // the terminal has shown it
	}
	ch.running = true
}

// interrupt is ctrl-c: it cancels the running turn, never the chat.
func (ch *chat) interrupt(ctx context.Context) {
	if !ch.running {
		ch.notice("no turn is running; ctrl-d leaves the chat (the session keeps running)")
		return
	}
	ch.queue = nil
	if err := ch.c.Cancel(ctx, ch.id); err != nil {
		ch.notice("could not cancel the turn: %s", noControls(err.Error(), ""))
		return
	}
	ch.notice("cancelling the turn…")
}

// event shows one session event.
func (ch *chat) event(ctx context.Context, ev api.Event) {
	switch ev.Type {
	case api.EventMessageAdded, api.EventMessageUpdated:
		if m, ok := eventMessage(ev); ok {
			ch.show(m)
		}
	case api.EventPermissionRequested, api.EventPermissionAnswered:
		if p, ok := eventPermission(ev); ok {
			ch.permission(p)
		}
	case api.EventStateChanged:
		to, _ := ev.Data["to"].(string)
		from, _ := ev.Data["from"].(string)
		switch {
		case to == string(api.SessionRunning):
			// A prompt from another client, if the session still runs it
			// (a server that restarted may replay old turns' changes).
			if !ch.running {
				if s, err := ch.c.GetSession(ctx, ch.id); err == nil && s.State == api.SessionRunning {
					ch.closeLine()
					ch.running = true
				}
			}
		case from == string(api.SessionRunning) && ch.running:
			if s, err := ch.c.GetSession(ctx, ch.id); err == nil && s.State != api.SessionRunning {
				ch.turnEnded(ctx, s)
			}
		default:
			if s, err := ch.c.GetSession(ctx, ch.id); err == nil {
				ch.stateNotice(s)
			}
		}
	}
}

// turnEnded prints whatever of the reply the stream did not carry and how
// the turn ended.
func (ch *chat) turnEnded(ctx context.Context, s *api.Session) {
	ch.running = false
	ch.resync(ctx)
	ch.closeLine()
	switch s.LastTurnOutcome {
	case api.TurnCancelled:
		ch.notice("turn cancelled")
	case api.TurnFailed:
		ch.notice("the turn failed: %s", cell(s.ErrorMessage))
	case api.TurnInterrupted:
		ch.notice("the turn was interrupted; it is not sent again")
	}
	ch.stateNotice(s)
}

// resync shows the stored messages the stream did not carry (after a
// reconnect, or a turn whose events came late).
func (ch *chat) resync(ctx context.Context) {
	msgs, err := ch.c.Messages(ctx, ch.id)
	if err != nil {
		return
	}
	for _, m := range msgs {
		ch.show(m)
	}
	ch.loadPermissions(ctx)
}

// stateNotice says when the session cannot take prompts.
func (ch *chat) stateNotice(s *api.Session) {
	switch s.State {
	case api.SessionStopped, api.SessionError:
		ch.running = false
		ch.notice("session %s is %s: %s. Resume it with \"paddock session resume %s\"; this chat carries on.",
			s.ID, s.State, cell(orDefault(s.ErrorMessage, "its agent is not running")), s.ID)
	case api.SessionCompleted:
		ch.running = false
		ch.notice("session %s was deleted", s.ID)
	}
}

// show prints the part of a message not shown yet: the user's prompts as
// "> text" (except those typed here, which the terminal echoed), the
// agent's text and thoughts as they stream, system messages tagged, and a
// tool call or plan whole, again on a new line whenever it changes.
func (ch *chat) show(m api.Message) {
	if isWorkEntry(m) {
		if key := entryKey(m); ch.shown[m.ID] != key {
			ch.shown[m.ID] = key
			ch.closeLine()
			fmt.Fprintln(ch.out, key)
		}
		return
	}
	text := []rune(noControls(m.Text, "\n\t"))
	n, seen := ch.printed[m.ID]
	if !seen && m.Role == api.RoleUser && ch.echo[m.Text] > 0 {
		ch.echo[m.Text]--
		ch.printed[m.ID] = len(text)
		return
	}
	if n >= len(text) {
		if m.Complete && seen && ch.lineOpen {
			ch.closeLine()
		}
		return
	}
	if !seen {
		ch.closeLine()
		ch.marker = false
		switch m.Role {
		case api.RoleUser:
			fmt.Fprint(ch.out, "> ")
		case api.RoleAgent:
		case api.RoleThought:
			fmt.Fprint(ch.out, thoughtText("", ch.dim))
		default:
			fmt.Fprintf(ch.out, "[%s] ", cell(string(m.Role)))
		}
	}
	rest := string(text[n:])
	out := rest
	switch m.Role {
	case api.RoleUser:
		out = strings.ReplaceAll(rest, "\n", "\n  ")
	case api.RoleThought:
		out = strings.ReplaceAll(rest, "\n", "\n"+strings.Repeat(" ", len(thoughtPrefix)))
		if ch.dim {
			out = dimOn + out + dimOff
		}
	}
	fmt.Fprint(ch.out, out)
	ch.lineOpen = !strings.HasSuffix(rest, "\n")
	ch.printed[m.ID] = len(text)
	if m.Complete {
		ch.closeLine()
	}
}

func (ch *chat) closeLine() {
	if ch.lineOpen || ch.marker {
		fmt.Fprintln(ch.out)
		ch.lineOpen, ch.marker = false, false
	}
}

// notice prints a line of the chat's own.
func (ch *chat) notice(format string, args ...any) {
	ch.closeLine()
	fmt.Fprintf(ch.out, "[paddock] "+format+"\n", args...)
}

func (ch *chat) leave() error {
	ch.closeLine()
	fmt.Fprintf(ch.out, "Left the chat; session %s keeps running (\"paddock chat %s\" comes back).\n", ch.id, ch.id)
	return nil
}
