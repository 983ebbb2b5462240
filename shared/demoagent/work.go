package demoagent

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	acp "github.com/coder/acp-go-sdk"
)

// The "work FILE" turn (ACP mode only) does what a coding agent does, so
// a client sees every kind of update an agent sends:
//
//  1. a plan of three steps (read, edit, run), updated as each step is done;
//  2. an agent thought;
//  3. tool call work-K-read (kind read): FILE through fs/read_text_file;
//  4. tool call work-K-edit (kind edit): FILE through fs/write_text_file
//     with EditedLine(K) appended, its update carrying the diff;
//  5. tool call work-K-run (kind execute): a session/request_permission to
//     run "wc -l FILE"; when allowed, the command runs in a terminal of the
//     client (terminal/create with the session's cwd), which the tool call
//     embeds, and the reply quotes its output.
//
// K is the turn's number. The last line of the reply names the outcome,
// e.g. "work done: FILE edited; command allowed (allow_once)". A client
// without fs.readTextFile (or fs.writeTextFile, or terminal) is told so in
// the reply and the steps needing it are skipped. In the "plan" mode the
// turn stops after reading. A session/cancel ends the turn with stop
// reason cancelled; one while the permission request waits makes the last
// line "work done: FILE edited; permission cancelled".

// Permission options the work turn offers for its command.
const (
	OptionAllowOnce  = "allow_once"
	OptionRejectOnce = "reject_once"
)

// workOptions are the answers the work turn offers for its command.
var workOptions = []acp.PermissionOption{
	{OptionId: OptionAllowOnce, Name: "Allow once", Kind: acp.PermissionOptionKindAllowOnce},
	{OptionId: OptionRejectOnce, Name: "Reject", Kind: acp.PermissionOptionKindRejectOnce},
}

// EditedLine is the line a work turn appends to its file in turn K.
func EditedLine(turn int) string {
	return fmt.Sprintf("edited by paddock-demo-agent (turn %d)", turn)
}

// WorkToolCallID is the id of a work turn's tool call: step is "read",
// "edit" or "run".
func WorkToolCallID(turn int, step string) string {
	return fmt.Sprintf("work-%d-%s", turn, step)
}

// permissionCancelGrace bounds how long a cancelled turn still waits for
// the client's answer to its pending permission request: ACP has the
// client answer every pending request "cancelled" after session/cancel,
// and the turn takes that answer rather than abandon the request; a client
// that never answers is not waited for longer than this.
const permissionCancelGrace = 5 * time.Second

func (c Config) permissionCancelGrace() time.Duration {
	if c.cancelGrace > 0 {
		return c.cancelGrace
	}
	return permissionCancelGrace
}

// terminalOutputLimit is the outputByteLimit of the work turn's command.
const terminalOutputLimit = 4096

// workFile is the FILE of a "work FILE" prompt (with or without the slash
// of a command); ok is false for any other prompt. A "work" prompt without
// exactly one FILE has ok true and file "".
func workFile(text string) (file string, ok bool) {
	f := strings.Fields(text)
	if len(f) == 0 || (f[0] != "work" && f[0] != "/work") {
		return "", false
	}
	if len(f) != 2 {
		return "", true
	}
	return f[1], true
}

// workTurn is one running "work FILE" turn.
type workTurn struct {
	a    *acpAgent
	ctx  context.Context // the prompt's: ends with session/cancel
	sid  acp.SessionId
	sess *acpSession
	caps acp.ClientCapabilities
	mode string
	turn int
	file string // as the prompt names it
	path string // absolute, for the fs methods

	plan    []acp.PlanEntry
	entries []Entry // what the turn adds to the history, after the prompt
	planAt  int     // index of the plan in entries, -1 before it is sent
	tools   map[acp.ToolCallId]int
	reply   strings.Builder
}

// errNotCapable marks a step the client cannot serve.
var errNotCapable = errors.New("not offered by the client")

// runWork runs a "work FILE" prompt as turn c.Turns+1 of the session and
// records it in the conversation.
func (a *acpAgent) runWork(ctx context.Context, sid acp.SessionId, sess *acpSession, text, file string) (acp.StopReason, error) {
	a.mu.Lock()
	caps, mode := a.caps, sess.mode
	a.mu.Unlock()
	c := sess.conv
	c.Turns++
	c.History = append(c.History, Entry{Role: "user", Text: text})
	w := &workTurn{a: a, ctx: ctx, sid: sid, sess: sess, caps: caps, mode: mode, turn: c.Turns, file: file,
		planAt: -1, tools: map[acp.ToolCallId]int{}}
	w.path = file
	if !filepath.IsAbs(file) {
		w.path = filepath.Join(sess.cwd, file)
	}
	stop, err := w.run()
	if w.reply.Len() > 0 {
		w.entries = append(w.entries, Entry{Role: "agent", Text: w.reply.String()})
	}
	c.History = append(c.History, w.entries...)
	if serr := c.Save(sess.store); serr != nil && err == nil {
		err = serr
	}
	return stop, err
}

// run does the turn's steps; an error is a failure to talk to the client.
func (w *workTurn) run() (acp.StopReason, error) {
	if w.file == "" {
		return w.end("usage: work FILE (a path relative to the session's directory)")
	}
	read, edit, runStep := "Read "+w.file, "Append a line to "+w.file, "Run wc -l "+w.file+" (asks permission)"
	w.plan = []acp.PlanEntry{
		{Content: read, Priority: acp.PlanEntryPriorityHigh, Status: acp.PlanEntryStatusInProgress},
		{Content: edit, Priority: acp.PlanEntryPriorityHigh, Status: acp.PlanEntryStatusPending},
		{Content: runStep, Priority: acp.PlanEntryPriorityMedium, Status: acp.PlanEntryStatusPending},
	}
	if err := w.sendPlan(); err != nil {
		return "", err
	}
	if err := w.thought(fmt.Sprintf("%s is in the session's directory: read it, append a line, then count its lines with wc -l.", w.file)); err != nil {
		return "", err
	}

	old, err := w.readFile()
	created := errors.Is(err, errNewFile)
	switch {
	case created:
		err = nil
	case errors.Is(err, errNotCapable):
		return w.end("work: the client offers no fs/read_text_file, so " + w.file + " was left alone")
	case w.cancelled():
		return w.endCancelled("work cancelled")
	case err != nil:
		return w.end(fmt.Sprintf("work failed: cannot read %s: %v", w.file, err))
	}
	if err := w.progress(0); err != nil {
		return "", err
	}
	if w.mode == ModePlan {
		return w.end(fmt.Sprintf("plan mode: %s read (%d lines); switch to the default mode to edit it and run wc -l", w.file, lineCount(old)))
	}

	err = w.editFile(old, created)
	switch {
	case errors.Is(err, errNotCapable):
		return w.end("work: the client offers no fs/write_text_file, so " + w.file + " was read but not edited")
	case w.cancelled():
		return w.endCancelled("work cancelled")
	case err != nil:
		return w.end(fmt.Sprintf("work failed: cannot write %s: %v", w.file, err))
	}
	if err := w.progress(1); err != nil {
		return "", err
	}
	return w.command()
}

// codeResourceNotFound is ACP's JSON-RPC error code for a file that does
// not exist (fs/read_text_file of a new file).
const codeResourceNotFound = -32002

// errNewFile: FILE does not exist yet, so work creates it.
var errNewFile = errors.New("the file does not exist yet")

// readFile is the read tool call: FILE's content through fs/read_text_file.
func (w *workTurn) readFile() (string, error) {
	if !w.caps.Fs.ReadTextFile {
		return "", errNotCapable
	}
	id := acp.ToolCallId(WorkToolCallID(w.turn, "read"))
	if err := w.startTool(acp.StartReadToolCall(id, "Read "+w.file, w.path,
		acp.WithStartStatus(acp.ToolCallStatusInProgress)).ToolCall); err != nil {
		return "", err
	}
	resp, err := w.a.peer().ReadTextFile(w.ctx, acp.ReadTextFileRequest{SessionId: w.sid, Path: w.path})
	var re *acp.RequestError
	if errors.As(err, &re) && re.Code == codeResourceNotFound {
		// No such file yet: the edit creates it.
		return "", errors.Join(errNewFile, w.updateTool(id, acp.WithUpdateStatus(acp.ToolCallStatusCompleted),
			acp.WithUpdateContent([]acp.ToolCallContent{acp.ToolContent(acp.TextBlock(w.file + " does not exist yet: the edit creates it"))})))
	}
	if err != nil {
		return "", w.failTool(id, fmt.Errorf("fs/read_text_file %s: %w", w.path, err))
	}
	return resp.Content, w.updateTool(id, acp.WithUpdateStatus(acp.ToolCallStatusCompleted),
		acp.WithUpdateContent([]acp.ToolCallContent{acp.ToolContent(acp.TextBlock(fmt.Sprintf("%d lines", lineCount(resp.Content))))}))
}

// editFile is the edit tool call: FILE with EditedLine appended, through
// fs/write_text_file, the diff in the call's content (with no old text
// when created: the file is new).
func (w *workTurn) editFile(old string, created bool) error {
	if !w.caps.Fs.WriteTextFile {
		return errNotCapable
	}
	id := acp.ToolCallId(WorkToolCallID(w.turn, "edit"))
	line := EditedLine(w.turn)
	if err := w.startTool(acp.StartEditToolCall(id, "Edit "+w.file, w.path, line+"\n",
		acp.WithStartStatus(acp.ToolCallStatusInProgress)).ToolCall); err != nil {
		return err
	}
	edited := old
	if edited != "" && !strings.HasSuffix(edited, "\n") {
		edited += "\n"
	}
	edited += line + "\n"
	if _, err := w.a.peer().WriteTextFile(w.ctx, acp.WriteTextFileRequest{SessionId: w.sid, Path: w.path, Content: edited}); err != nil {
		return w.failTool(id, fmt.Errorf("fs/write_text_file %s: %w", w.path, err))
	}
	diff := acp.ToolDiffContent(w.path, edited, old)
	if created {
		diff = acp.ToolDiffContent(w.path, edited)
	}
	return w.updateTool(id, acp.WithUpdateStatus(acp.ToolCallStatusCompleted),
		acp.WithUpdateContent([]acp.ToolCallContent{diff}))
}

// command is the execute tool call: it asks permission to run wc -l FILE,
// runs it when allowed and ends the turn with the outcome.
func (w *workTurn) command() (acp.StopReason, error) {
	id := acp.ToolCallId(WorkToolCallID(w.turn, "run"))
	title := "Run: wc -l " + w.file
	arg := w.file
	if strings.HasPrefix(arg, "-") {
		arg = "./" + arg // a file name, not an option
	}
	input := map[string]any{"command": "wc", "args": []string{"-l", arg}, "cwd": w.sess.cwd}
	if err := w.startTool(acp.StartToolCall(id, title, acp.WithStartKind(acp.ToolKindExecute),
		acp.WithStartStatus(acp.ToolCallStatusPending), acp.WithStartRawInput(input)).ToolCall); err != nil {
		return "", err
	}
	done := "work done: " + w.file + " edited; "
	resp, perr := w.askPermission(acp.RequestPermissionRequest{
		SessionId: w.sid,
		Options:   workOptions,
		ToolCall: acp.ToolCallUpdate{ToolCallId: id, Title: acp.Ptr(title), Kind: acp.Ptr(acp.ToolKindExecute),
			Status: acp.Ptr(acp.ToolCallStatusPending), RawInput: input},
	})
	switch {
	case w.cancelled() || perr == nil && resp.Outcome.Cancelled != nil:
		if err := w.markFailed(id, "permission cancelled"); err != nil {
			return "", err
		}
		return w.endCancelled(done + "permission cancelled")
	case perr != nil:
		if err := w.markFailed(id, perr.Error()); err != nil {
			return "", err
		}
		return w.end(done + "permission request failed: " + perr.Error())
	case resp.Outcome.Selected == nil:
		return "", fmt.Errorf("session/request_permission: an answer with no outcome")
	}
	opt := string(resp.Outcome.Selected.OptionId)
	kind, known := optionKind(opt)
	switch {
	case !known:
		if err := w.markFailed(id, fmt.Sprintf("unknown option %q", opt)); err != nil {
			return "", err
		}
		return w.end(fmt.Sprintf("%scommand not run: unknown option %q", done, opt))
	case kind != acp.PermissionOptionKindAllowOnce && kind != acp.PermissionOptionKindAllowAlways:
		if err := w.markFailed(id, fmt.Sprintf("rejected (%s)", opt)); err != nil {
			return "", err
		}
		return w.end(fmt.Sprintf("%scommand rejected (%s)", done, opt))
	case !w.caps.Terminal:
		if err := w.markFailed(id, "the client offers no terminal"); err != nil {
			return "", err
		}
		return w.end(fmt.Sprintf("%scommand allowed (%s) but not run: the client offers no terminal", done, opt))
	}
	output, err := w.runTerminal(id, []string{"-l", arg})
	switch {
	case w.cancelled():
		return w.endCancelled(fmt.Sprintf("%scommand allowed (%s), then the turn was cancelled", done, opt))
	case err != nil:
		return w.end(fmt.Sprintf("%scommand allowed (%s) but failed: %v", done, opt, err))
	}
	if err := w.progress(2); err != nil {
		return "", err
	}
	if err := w.say("wc -l " + w.file + ": " + strings.TrimSpace(output) + "\n"); err != nil {
		return "", err
	}
	return w.end(fmt.Sprintf("%scommand allowed (%s)", done, opt))
}

// optionKind is the kind of one of workOptions.
func optionKind(id string) (acp.PermissionOptionKind, bool) {
	for _, o := range workOptions {
		if string(o.OptionId) == id {
			return o.Kind, true
		}
	}
	return "", false
}

// askPermission sends the request and waits for its answer. A cancelled
// turn goes on waiting, for permissionCancelGrace at most, for the
// "cancelled" answer ACP has the client send.
func (w *workTurn) askPermission(req acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	ctx, stop := context.WithCancel(context.WithoutCancel(w.ctx))
	defer stop()
	context.AfterFunc(w.ctx, func() {
		t := time.NewTimer(w.a.cfg.permissionCancelGrace())
		defer t.Stop()
		select {
		case <-t.C:
			stop()
		case <-ctx.Done():
		}
	})
	resp, err := w.a.peer().RequestPermission(ctx, req)
	if err != nil {
		return resp, fmt.Errorf("session/request_permission: %w", err)
	}
	return resp, nil
}

// runTerminal runs wc with args in a terminal of the client, in the
// session's cwd, embeds the terminal in tool call id, waits for the
// command's exit and returns its output. The terminal is released.
func (w *workTurn) runTerminal(id acp.ToolCallId, args []string) (string, error) {
	if err := w.updateTool(id, acp.WithUpdateStatus(acp.ToolCallStatusInProgress)); err != nil {
		return "", err
	}
	cwd := w.sess.cwd
	term, err := w.a.peer().CreateTerminal(w.ctx, acp.CreateTerminalRequest{SessionId: w.sid, Command: "wc", Args: args,
		Cwd: &cwd, OutputByteLimit: acp.Ptr(terminalOutputLimit)})
	if err != nil {
		return "", w.failTool(id, fmt.Errorf("terminal/create: %w", err))
	}
	tid := term.TerminalId
	// Released whatever happens, also after a cancel.
	defer func() {
		_, _ = w.a.peer().ReleaseTerminal(context.WithoutCancel(w.ctx), acp.ReleaseTerminalRequest{SessionId: w.sid, TerminalId: tid})
	}()
	ref := []acp.ToolCallContent{acp.ToolTerminalRef(tid)}
	if err := w.updateTool(id, acp.WithUpdateContent(ref)); err != nil {
		return "", err
	}
	if _, err := w.a.peer().WaitForTerminalExit(w.ctx, acp.WaitForTerminalExitRequest{SessionId: w.sid, TerminalId: tid}); err != nil {
		if w.cancelled() {
			_, _ = w.a.peer().KillTerminal(context.WithoutCancel(w.ctx), acp.KillTerminalRequest{SessionId: w.sid, TerminalId: tid})
		}
		return "", w.failTool(id, fmt.Errorf("terminal/wait_for_exit %s: %w", tid, err))
	}
	out, err := w.a.peer().TerminalOutput(w.ctx, acp.TerminalOutputRequest{SessionId: w.sid, TerminalId: tid})
	if err != nil {
		return "", w.failTool(id, fmt.Errorf("terminal/output %s: %w", tid, err))
	}
	raw := map[string]any{"output": out.Output, "truncated": out.Truncated}
	status := acp.ToolCallStatusCompleted
	if out.ExitStatus != nil {
		raw["exitCode"] = out.ExitStatus.ExitCode
		if out.ExitStatus.ExitCode == nil || *out.ExitStatus.ExitCode != 0 {
			status = acp.ToolCallStatusFailed
		}
	}
	if err := w.updateTool(id, acp.WithUpdateStatus(status), acp.WithUpdateContent(ref), acp.WithUpdateRawOutput(raw)); err != nil {
		return "", err
	}
	if status == acp.ToolCallStatusFailed {
		return out.Output, fmt.Errorf("wc exited with %s", exitText(out.ExitStatus))
	}
	return out.Output, nil
}

// exitText describes a terminal's exit status.
func exitText(s *acp.TerminalExitStatus) string {
	switch {
	case s == nil:
		return "an unknown status"
	case s.ExitCode != nil:
		return fmt.Sprintf("status %d", *s.ExitCode)
	case s.Signal != nil:
		return "signal " + *s.Signal
	}
	return "an unknown status"
}

// cancelled reports whether session/cancel ended the turn.
func (w *workTurn) cancelled() bool { return w.ctx.Err() != nil }

// notify sends one session/update. It is sent also after session/cancel:
// ACP lets an agent report until it answers the prompt.
func (w *workTurn) notify(u acp.SessionUpdate) error {
	if err := w.a.peer().SessionUpdate(context.WithoutCancel(w.ctx), acp.SessionNotification{SessionId: w.sid, Update: u}); err != nil {
		return fmt.Errorf("session/update: %w", err)
	}
	return nil
}

// sendPlan sends the plan as it is now and records it (the turn's one
// plan entry, replaced by each update).
func (w *workTurn) sendPlan() error {
	entries := append([]acp.PlanEntry(nil), w.plan...)
	if w.planAt < 0 {
		w.planAt = len(w.entries)
		w.entries = append(w.entries, Entry{Role: "plan"})
	}
	w.entries[w.planAt].Plan = entries
	return w.notify(acp.UpdatePlan(entries...))
}

// progress marks plan step i completed and the next one in progress.
func (w *workTurn) progress(i int) error {
	w.plan[i].Status = acp.PlanEntryStatusCompleted
	if i+1 < len(w.plan) {
		w.plan[i+1].Status = acp.PlanEntryStatusInProgress
	}
	return w.sendPlan()
}

// thought sends and records an agent thought.
func (w *workTurn) thought(text string) error {
	w.entries = append(w.entries, Entry{Role: "thought", Text: text})
	return w.notify(acp.UpdateAgentThoughtText(text))
}

// say sends text as agent message chunks; it is the turn's reply.
func (w *workTurn) say(text string) error {
	for _, ch := range Chunks(text) {
		if err := w.notify(acp.UpdateAgentMessageText(ch)); err != nil {
			return err
		}
		w.reply.WriteString(ch)
	}
	return nil
}

// end sends the reply's last line and ends the turn.
func (w *workTurn) end(line string) (acp.StopReason, error) {
	return acp.StopReasonEndTurn, w.say(line)
}

// endCancelled sends the reply's last line and ends the turn as cancelled.
func (w *workTurn) endCancelled(line string) (acp.StopReason, error) {
	return acp.StopReasonCancelled, w.say(line)
}

// startTool sends a tool_call and records it.
func (w *workTurn) startTool(tc *acp.SessionUpdateToolCall) error {
	rec := *tc
	w.tools[tc.ToolCallId] = len(w.entries)
	w.entries = append(w.entries, Entry{Role: "tool", ToolCall: &rec})
	return w.notify(acp.SessionUpdate{ToolCall: tc})
}

// updateTool sends a tool_call_update and merges it into the call's
// record, which a session/load replays as one tool_call.
func (w *workTurn) updateTool(id acp.ToolCallId, opts ...acp.ToolCallUpdateOpt) error {
	u := acp.UpdateToolCall(id, opts...)
	if i, ok := w.tools[id]; ok {
		rec, up := w.entries[i].ToolCall, u.ToolCallUpdate
		if up.Status != nil {
			rec.Status = *up.Status
		}
		if up.Content != nil {
			rec.Content = up.Content
		}
		if up.RawOutput != nil {
			rec.RawOutput = up.RawOutput
		}
	}
	return w.notify(u)
}

// failTool marks tool call id failed with cause as its content and
// returns cause, or the failure to report it.
func (w *workTurn) failTool(id acp.ToolCallId, cause error) error {
	if err := w.markFailed(id, cause.Error()); err != nil {
		return err
	}
	return cause
}

// markFailed marks tool call id failed with why as its content.
func (w *workTurn) markFailed(id acp.ToolCallId, why string) error {
	return w.updateTool(id, acp.WithUpdateStatus(acp.ToolCallStatusFailed),
		acp.WithUpdateContent([]acp.ToolCallContent{acp.ToolContent(acp.TextBlock(why))}))
}

// lineCount is the number of lines of a text (a last line without its
// newline counts).
func lineCount(s string) int {
	n := strings.Count(s, "\n")
	if s != "" && !strings.HasSuffix(s, "\n") {
		n++
	}
	return n
}
