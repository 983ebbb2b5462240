package agentctl_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	acp "github.com/coder/acp-go-sdk"
)

// workAgentEnv makes the test binary the ACP test agent (TestMain): an
// agent built on acp-go-sdk's agent side that reports its work as real
// agents do, driven by its prompts:
//
//	work PATH            thought, plan, tool call t1 reading PATH through fs (updates, a diff), the plan's
//	                     update, a malformed tool call, t1 sent again; replies "done"
//	ask KIND             tool call t2 of KIND and a permission request for it; replies "chose OPTION" or "cancelled"
//	read PATH [LINE N]   fs/read_text_file; replies the content or "error: …"
//	write PATH TEXT      fs/write_text_file; replies "ok" or "error: …"
//	term CWD ARGV…       terminal/create (CWD "-": none), wait, output; replies "id=… exit=… out=…" or "error: …"
//	bg ARGV…             terminal/create, left running; replies its id
//	long LIMIT           terminal/create of a command that prints and sleeps, output (limit LIMIT), kill, wait,
//	                     release, output again; replies what it saw
//
// It offers modes "default" and "plan" and announces commands "recall" and
// "work" at session start.
const workAgentEnv = "PADDOCK_TEST_WORKAGENT"

// lockedWriter serializes the SDK's writes with the agent's raw lines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

type workAgent struct {
	conn *acp.AgentSideConnection
	out  *lockedWriter
	cwd  string
	caps acp.ClientCapabilities
}

func runWorkAgent() int {
	a := &workAgent{out: &lockedWriter{w: os.Stdout}}
	a.conn = acp.NewAgentSideConnection(a, a.out, os.Stdin)
	<-a.conn.Done()
	return 0
}

func (a *workAgent) Authenticate(ctx context.Context, p acp.AuthenticateRequest) (acp.AuthenticateResponse, error) {
	return acp.AuthenticateResponse{}, nil
}

func (a *workAgent) Initialize(ctx context.Context, p acp.InitializeRequest) (acp.InitializeResponse, error) {
	a.caps = p.ClientCapabilities
	return acp.InitializeResponse{ProtocolVersion: acp.ProtocolVersionNumber}, nil
}

func (a *workAgent) Cancel(ctx context.Context, p acp.CancelNotification) error { return nil }

func (a *workAgent) CloseSession(ctx context.Context, p acp.CloseSessionRequest) (acp.CloseSessionResponse, error) {
	return acp.CloseSessionResponse{}, nil
}

func (a *workAgent) ListSessions(ctx context.Context, p acp.ListSessionsRequest) (acp.ListSessionsResponse, error) {
	return acp.ListSessionsResponse{}, nil
}

func (a *workAgent) ResumeSession(ctx context.Context, p acp.ResumeSessionRequest) (acp.ResumeSessionResponse, error) {
	return acp.ResumeSessionResponse{}, acp.NewMethodNotFound("session/resume")
}

func (a *workAgent) SetSessionConfigOption(ctx context.Context, p acp.SetSessionConfigOptionRequest) (acp.SetSessionConfigOptionResponse, error) {
	return acp.SetSessionConfigOptionResponse{}, nil
}

func (a *workAgent) SetSessionMode(ctx context.Context, p acp.SetSessionModeRequest) (acp.SetSessionModeResponse, error) {
	return acp.SetSessionModeResponse{}, nil
}

func (a *workAgent) NewSession(ctx context.Context, p acp.NewSessionRequest) (acp.NewSessionResponse, error) {
	a.cwd = p.Cwd
	desc := "think first"
	// Sent before the answer: agentctl takes them while the agent starts.
	a.raw(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s-1","update":{"sessionUpdate":"available_commands_update","availableCommands":[{"name":"recall","description":"say what you remember"},{"name":"work","description":"work on a file","input":{"hint":"FILE"}}]}}}`)
	return acp.NewSessionResponse{SessionId: "s-1", Modes: &acp.SessionModeState{CurrentModeId: "default",
		AvailableModes: []acp.SessionMode{{Id: "default", Name: "Default"}, {Id: "plan", Name: "Plan", Description: &desc}}}}, nil
}

// raw writes one line as it is (for what the SDK's types would not send).
func (a *workAgent) raw(line string) {
	_, _ = a.out.Write([]byte(line + "\n"))
}

func (a *workAgent) update(ctx context.Context, u acp.SessionUpdate) {
	_ = a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: "s-1", Update: u})
}

func (a *workAgent) say(ctx context.Context, text string) {
	a.update(ctx, acp.UpdateAgentMessageText(text))
}

func (a *workAgent) Prompt(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
	text := ""
	for _, b := range p.Prompt {
		if b.Text != nil {
			text += b.Text.Text
		}
	}
	f := strings.Fields(text)
	if len(f) == 0 {
		return acp.PromptResponse{StopReason: acp.StopReasonEndTurn}, nil
	}
	reply := a.run(ctx, f)
	// Said even when the turn was cancelled (its ctx ended): the reply
	// tells what the agent was answered.
	a.say(context.Background(), reply)
	return acp.PromptResponse{StopReason: acp.StopReasonEndTurn}, nil
}

func (a *workAgent) run(ctx context.Context, f []string) string {
	switch f[0] {
	case "work":
		return a.work(ctx, f[1])
	case "ask":
		return a.ask(ctx, f[1])
	case "read":
		req := acp.ReadTextFileRequest{SessionId: "s-1", Path: f[1]}
		if len(f) == 4 {
			var line, n int
			fmt.Sscan(f[2], &line)
			fmt.Sscan(f[3], &n)
			req.Line, req.Limit = &line, &n
		}
		r, err := a.conn.ReadTextFile(ctx, req)
		if err != nil {
			return "error: " + err.Error()
		}
		return r.Content
	case "write":
		if _, err := a.conn.WriteTextFile(ctx, acp.WriteTextFileRequest{SessionId: "s-1", Path: f[1], Content: strings.Join(f[2:], " ")}); err != nil {
			return "error: " + err.Error()
		}
		return "ok"
	case "term":
		return a.term(ctx, f[1], f[2], f[3:])
	case "long":
		return a.long(ctx, f[1])
	case "bg":
		t, err := a.conn.CreateTerminal(ctx, acp.CreateTerminalRequest{SessionId: "s-1", Command: f[1], Args: f[2:]})
		if err != nil {
			return "error: " + err.Error()
		}
		return t.TerminalId
	}
	return "unknown command " + f[0]
}

func (a *workAgent) work(ctx context.Context, path string) string {
	a.update(ctx, acp.UpdateAgentThoughtText("let me look "))
	a.update(ctx, acp.UpdateAgentThoughtText("at the file"))
	plan := func(st acp.PlanEntryStatus) {
		a.update(ctx, acp.SessionUpdate{Plan: &acp.SessionUpdatePlan{Entries: []acp.PlanEntry{
			{Content: "read the file", Priority: acp.PlanEntryPriorityHigh, Status: st},
			{Content: "report", Priority: acp.PlanEntryPriorityLow, Status: acp.PlanEntryStatusPending}}}})
	}
	plan(acp.PlanEntryStatusPending)
	line := 1
	a.update(ctx, acp.StartToolCall("t1", "Read "+path, acp.WithStartKind(acp.ToolKindRead), acp.WithStartStatus(acp.ToolCallStatusPending),
		acp.WithStartLocations([]acp.ToolCallLocation{{Path: path, Line: &line}}), acp.WithStartRawInput(map[string]any{"path": path})))
	a.update(ctx, acp.UpdateToolCall("t1", acp.WithUpdateStatus(acp.ToolCallStatusInProgress)))
	r, err := a.conn.ReadTextFile(ctx, acp.ReadTextFileRequest{SessionId: "s-1", Path: path})
	if err != nil {
		return "error: " + err.Error()
	}
	old := r.Content
	a.update(ctx, acp.UpdateToolCall("t1", acp.WithUpdateStatus(acp.ToolCallStatusCompleted),
		acp.WithUpdateContent([]acp.ToolCallContent{acp.ToolContent(acp.TextBlock("read " + path)), acp.ToolDiffContent(path, "new\n", old)})))
	plan(acp.PlanEntryStatusCompleted)
	// Malformed: no title, an unknown kind and status, content items of an
	// unknown type and of a bad shape beside a good one.
	a.raw(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s-1","update":{"sessionUpdate":"tool_call","toolCallId":"t-bad","kind":"teleport","status":"exploded","content":[{"type":"hologram"},{"type":"diff","path":7},{"type":"content","content":{"type":"text","text":"kept"}}],"locations":"nowhere"}}}`)
	a.raw(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s-1","update":{"sessionUpdate":"tool_call_update","status":"completed"}}}`)
	// t1 again, as a replay would send it: merged, not a second entry.
	a.update(ctx, acp.StartToolCall("t1", "Read "+path, acp.WithStartKind(acp.ToolKindRead), acp.WithStartStatus(acp.ToolCallStatusCompleted)))
	return "done"
}

func (a *workAgent) ask(ctx context.Context, kind string) string {
	title := "Run make"
	k := acp.ToolKind(kind)
	a.update(ctx, acp.StartToolCall("t2", title, acp.WithStartKind(k), acp.WithStartStatus(acp.ToolCallStatusPending)))
	// Not cut by the turn's cancellation: the client's answer (cancelled)
	// is what the test looks for.
	resp, err := a.conn.RequestPermission(context.WithoutCancel(ctx), acp.RequestPermissionRequest{SessionId: "s-1", ToolCall: acp.ToolCallUpdate{ToolCallId: "t2", Title: &title, Kind: &k},
		Options: []acp.PermissionOption{{OptionId: "allow", Name: "Allow", Kind: acp.PermissionOptionKindAllowOnce},
			{OptionId: "reject", Name: "Reject", Kind: acp.PermissionOptionKindRejectOnce}}})
	if err != nil {
		return "error: " + err.Error()
	}
	if resp.Outcome.Selected != nil {
		return "chose " + string(resp.Outcome.Selected.OptionId)
	}
	return "cancelled"
}

func (a *workAgent) term(ctx context.Context, cwd, cmd string, args []string) string {
	req := acp.CreateTerminalRequest{SessionId: "s-1", Command: cmd, Args: args, Env: []acp.EnvVariable{{Name: "GREETING", Value: "hello"}}}
	if cwd != "-" {
		req.Cwd = &cwd
	}
	t, err := a.conn.CreateTerminal(ctx, req)
	if err != nil {
		return "error: " + err.Error()
	}
	w, err := a.conn.WaitForTerminalExit(ctx, acp.WaitForTerminalExitRequest{SessionId: "s-1", TerminalId: t.TerminalId})
	if err != nil || w.ExitCode == nil {
		return fmt.Sprintf("error: wait: %v %+v", err, w)
	}
	o, err := a.conn.TerminalOutput(ctx, acp.TerminalOutputRequest{SessionId: "s-1", TerminalId: t.TerminalId})
	if err != nil {
		return "error: output: " + err.Error()
	}
	exit := "running"
	if o.ExitStatus != nil && o.ExitStatus.ExitCode != nil {
		exit = fmt.Sprint(*o.ExitStatus.ExitCode)
	}
	b, _ := json.Marshal(o.Output)
	return fmt.Sprintf("id=%s exit=%s out=%s", t.TerminalId, exit, b)
}

func (a *workAgent) long(ctx context.Context, limit string) string {
	var n int
	fmt.Sscan(limit, &n)
	// Prints 300 "é" then a marker, and sleeps until killed.
	t, err := a.conn.CreateTerminal(ctx, acp.CreateTerminalRequest{SessionId: "s-1", Command: "sh", Args: []string{"-c", `i=0; while [ $i -lt 300 ]; do printf 'é'; i=$((i+1)); done; echo; echo READY; exec sleep 60`}, OutputByteLimit: &n})
	if err != nil {
		return "error: " + err.Error()
	}
	id := t.TerminalId
	var o acp.TerminalOutputResponse
	for !strings.Contains(o.Output, "READY") { // the command prints at once; the agent polls as agents do
		if o, err = a.conn.TerminalOutput(ctx, acp.TerminalOutputRequest{SessionId: "s-1", TerminalId: id}); err != nil {
			return "error: output: " + err.Error()
		}
	}
	running := o.ExitStatus == nil
	if _, err := a.conn.KillTerminal(ctx, acp.KillTerminalRequest{SessionId: "s-1", TerminalId: id}); err != nil {
		return "error: kill: " + err.Error()
	}
	w, err := a.conn.WaitForTerminalExit(ctx, acp.WaitForTerminalExitRequest{SessionId: "s-1", TerminalId: id})
	if err != nil {
		return "error: wait: " + err.Error()
	}
	sig := ""
	if w.Signal != nil {
		sig = *w.Signal
	}
	if _, err := a.conn.ReleaseTerminal(ctx, acp.ReleaseTerminalRequest{SessionId: "s-1", TerminalId: id}); err != nil {
		return "error: release: " + err.Error()
	}
	_, afterErr := a.conn.TerminalOutput(ctx, acp.TerminalOutputRequest{SessionId: "s-1", TerminalId: id})
	b, _ := json.Marshal(o.Output)
	return fmt.Sprintf("id=%s running=%v truncated=%v len=%d valid=%v signal=%s released_output_error=%v out=%s", id, running, o.Truncated, len(o.Output),
		json.Valid(b) && !strings.ContainsRune(o.Output, '\uFFFD'), sig, afterErr != nil, b)
}
