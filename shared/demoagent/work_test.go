package demoagent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"
)

// testClient is an ACP client as Paddock's agentctl is one: it serves the
// fs methods inside its directory and terminals that run commands there,
// answers permission requests through answer, and records every update.
type testClient struct {
	dir    string
	answer func(ctx context.Context, req acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error)

	mu          sync.Mutex
	updates     []acp.SessionUpdate
	permissions []acp.RequestPermissionRequest
	terminals   map[string]*testTerminal
	released    []string
}

// testTerminal is one terminal/create of the test client.
type testTerminal struct {
	cmd  *exec.Cmd
	out  bytes.Buffer
	done chan struct{}
	err  error
}

func (c *testClient) inside(path string) (string, error) {
	if !filepath.IsAbs(path) {
		return "", acp.NewInvalidParams(map[string]any{"error": "path must be absolute: " + path})
	}
	rel, err := filepath.Rel(c.dir, path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", acp.NewInvalidParams(map[string]any{"error": "outside the workspace: " + path})
	}
	return path, nil
}

func (c *testClient) ReadTextFile(ctx context.Context, p acp.ReadTextFileRequest) (acp.ReadTextFileResponse, error) {
	path, err := c.inside(p.Path)
	if err != nil {
		return acp.ReadTextFileResponse{}, err
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) { // as agentctl answers: ACP's resource not found
		return acp.ReadTextFileResponse{}, &acp.RequestError{Code: codeResourceNotFound, Message: "Resource not found"}
	}
	if err != nil {
		return acp.ReadTextFileResponse{}, acp.NewInternalError(map[string]any{"error": err.Error()})
	}
	return acp.ReadTextFileResponse{Content: string(b)}, nil
}

func (c *testClient) WriteTextFile(ctx context.Context, p acp.WriteTextFileRequest) (acp.WriteTextFileResponse, error) {
	path, err := c.inside(p.Path)
	if err != nil {
		return acp.WriteTextFileResponse{}, err
	}
	if err := os.WriteFile(path, []byte(p.Content), 0o644); err != nil {
		return acp.WriteTextFileResponse{}, acp.NewInternalError(map[string]any{"error": err.Error()})
	}
	return acp.WriteTextFileResponse{}, nil
}

func (c *testClient) RequestPermission(ctx context.Context, p acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	c.mu.Lock()
	c.permissions = append(c.permissions, p)
	c.mu.Unlock()
	return c.answer(ctx, p)
}

func (c *testClient) SessionUpdate(ctx context.Context, n acp.SessionNotification) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.updates = append(c.updates, n.Update)
	return nil
}

func (c *testClient) CreateTerminal(ctx context.Context, p acp.CreateTerminalRequest) (acp.CreateTerminalResponse, error) {
	if p.Cwd == nil {
		return acp.CreateTerminalResponse{}, acp.NewInvalidParams(map[string]any{"error": "no cwd"})
	}
	if _, err := c.inside(*p.Cwd); err != nil {
		return acp.CreateTerminalResponse{}, err
	}
	t := &testTerminal{cmd: exec.Command(p.Command, p.Args...), done: make(chan struct{})}
	t.cmd.Dir = *p.Cwd
	t.cmd.Stdout, t.cmd.Stderr = &t.out, &t.out
	if err := t.cmd.Start(); err != nil {
		return acp.CreateTerminalResponse{}, acp.NewInternalError(map[string]any{"error": err.Error()})
	}
	go func() { t.err = t.cmd.Wait(); close(t.done) }()
	c.mu.Lock()
	defer c.mu.Unlock()
	id := fmt.Sprintf("cmd-%d", len(c.terminals)+1)
	c.terminals[id] = t
	return acp.CreateTerminalResponse{TerminalId: id}, nil
}

func (c *testClient) terminal(id string) (*testTerminal, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t := c.terminals[id]; t != nil {
		return t, nil
	}
	return nil, acp.NewInvalidParams(map[string]any{"error": "unknown terminal " + id})
}

func (c *testClient) WaitForTerminalExit(ctx context.Context, p acp.WaitForTerminalExitRequest) (acp.WaitForTerminalExitResponse, error) {
	t, err := c.terminal(p.TerminalId)
	if err != nil {
		return acp.WaitForTerminalExitResponse{}, err
	}
	select {
	case <-t.done:
	case <-ctx.Done():
		return acp.WaitForTerminalExitResponse{}, ctx.Err()
	}
	return acp.WaitForTerminalExitResponse{ExitCode: acp.Ptr(t.cmd.ProcessState.ExitCode())}, nil
}

func (c *testClient) TerminalOutput(ctx context.Context, p acp.TerminalOutputRequest) (acp.TerminalOutputResponse, error) {
	t, err := c.terminal(p.TerminalId)
	if err != nil {
		return acp.TerminalOutputResponse{}, err
	}
	select {
	case <-t.done:
		return acp.TerminalOutputResponse{Output: t.out.String(),
			ExitStatus: &acp.TerminalExitStatus{ExitCode: acp.Ptr(t.cmd.ProcessState.ExitCode())}}, nil
	default:
		return acp.TerminalOutputResponse{}, acp.NewInternalError(map[string]any{"error": "the test client reads output only after exit"})
	}
}

func (c *testClient) ReleaseTerminal(ctx context.Context, p acp.ReleaseTerminalRequest) (acp.ReleaseTerminalResponse, error) {
	t, err := c.terminal(p.TerminalId)
	if err != nil {
		return acp.ReleaseTerminalResponse{}, err
	}
	_ = t.cmd.Process.Kill()
	<-t.done
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.terminals, p.TerminalId)
	c.released = append(c.released, p.TerminalId)
	return acp.ReleaseTerminalResponse{}, nil
}

func (c *testClient) KillTerminal(ctx context.Context, p acp.KillTerminalRequest) (acp.KillTerminalResponse, error) {
	t, err := c.terminal(p.TerminalId)
	if err != nil {
		return acp.KillTerminalResponse{}, err
	}
	_ = t.cmd.Process.Kill()
	return acp.KillTerminalResponse{}, nil
}

// takeUpdates returns the updates received since the last call.
func (c *testClient) takeUpdates() []acp.SessionUpdate {
	c.mu.Lock()
	defer c.mu.Unlock()
	u := c.updates
	c.updates = nil
	return u
}

// allCaps is a client offering fs and terminals.
var allCaps = acp.ClientCapabilities{Fs: acp.FileSystemCapabilities{ReadTextFile: true, WriteTextFile: true}, Terminal: true}

// acpRig is a demo agent served over pipes to a testClient.
type acpRig struct {
	t      *testing.T
	dir    string
	client *testClient
	conn   *acp.ClientSideConnection
}

// newRig starts the demo agent and initializes it with caps; the client
// answers permission requests with answer.
func newRig(t *testing.T, caps acp.ClientCapabilities, answer func(context.Context, acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error), tune ...func(*Config)) *acpRig {
	t.Helper()
	dir := t.TempDir()
	toAgentR, toAgentW := io.Pipe()
	toClientR, toClientW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	cfg := Config{ChunkDelay: time.Microsecond}
	for _, f := range tune {
		f(&cfg)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	go func() {
		served <- ServeACP(ctx, cfg, toAgentR, toClientW, quiet)
	}()
	c := &testClient{dir: dir, answer: answer, terminals: map[string]*testTerminal{}}
	conn := acp.NewClientSideConnection(c, toAgentW, toClientR)
	conn.SetLogger(quiet)
	t.Cleanup(func() {
		cancel()
		_ = toAgentW.Close()
		_ = toClientW.Close()
		if err := <-served; err != nil {
			t.Errorf("ServeACP: %v", err)
		}
	})
	if _, err := conn.Initialize(context.Background(), acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber, ClientCapabilities: caps}); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	return &acpRig{t: t, dir: dir, client: c, conn: conn}
}

// newSession opens a session in the rig's directory.
func (r *acpRig) newSession() acp.NewSessionResponse {
	r.t.Helper()
	resp, err := r.conn.NewSession(context.Background(), acp.NewSessionRequest{Cwd: r.dir, McpServers: []acp.McpServer{}})
	if err != nil {
		r.t.Fatalf("session/new: %v", err)
	}
	return resp
}

// prompt runs one turn and returns its stop reason.
func (r *acpRig) prompt(sid acp.SessionId, text string) acp.StopReason {
	r.t.Helper()
	resp, err := r.conn.Prompt(context.Background(), acp.PromptRequest{SessionId: sid, Prompt: []acp.ContentBlock{acp.TextBlock(text)}})
	if err != nil {
		r.t.Fatalf("prompt %q: %v", text, err)
	}
	return resp.StopReason
}

// answerWith answers every permission request with option id.
func answerWith(id string) func(context.Context, acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	return func(context.Context, acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
		return acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeSelected(acp.PermissionOptionId(id))}, nil
	}
}

// describe is a one-line summary of an update, agent text chunks joined.
func describe(us []acp.SessionUpdate) []string {
	var out []string
	for _, u := range us {
		var d string
		switch {
		case u.AgentMessageChunk != nil:
			text := u.AgentMessageChunk.Content.Text.Text
			if n := len(out); n > 0 && strings.HasPrefix(out[n-1], "agent: ") {
				out[n-1] += text
				continue
			}
			d = "agent: " + text
		case u.UserMessageChunk != nil:
			d = "user: " + u.UserMessageChunk.Content.Text.Text
		case u.AgentThoughtChunk != nil:
			d = "thought"
		case u.Plan != nil:
			var st []string
			for _, e := range u.Plan.Entries {
				st = append(st, string(e.Status))
			}
			d = "plan " + strings.Join(st, ",")
		case u.ToolCall != nil:
			d = fmt.Sprintf("tool_call %s %s %s", u.ToolCall.ToolCallId, u.ToolCall.Kind, u.ToolCall.Status)
		case u.ToolCallUpdate != nil:
			d = "update " + string(u.ToolCallUpdate.ToolCallId)
			if s := u.ToolCallUpdate.Status; s != nil {
				d += " " + string(*s)
			}
			for _, c := range u.ToolCallUpdate.Content {
				switch {
				case c.Diff != nil:
					d += " +diff"
				case c.Terminal != nil:
					d += " +terminal"
				case c.Content != nil:
					d += " +text"
				}
			}
		case u.AvailableCommandsUpdate != nil:
			d = "commands"
		case u.CurrentModeUpdate != nil:
			d = "mode " + string(u.CurrentModeUpdate.CurrentModeId)
		default:
			d = "other"
		}
		out = append(out, d)
	}
	return out
}

func sameLines(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("%s:\n got  %s\n want %s", what, strings.Join(got, "\n      "), strings.Join(want, "\n      "))
	}
}

// The work turn a client allows: plan, thought, the read, the edit with
// its diff, the permission request, the command in a client terminal,
// and a reply naming the option chosen.
func TestWorkAllowedReadsEditsAndRunsTheCommand(t *testing.T) {
	r := newRig(t, allCaps, answerWith(OptionAllowOnce))
	if err := os.WriteFile(filepath.Join(r.dir, "notes.txt"), []byte("one\ntwo"), 0o644); err != nil {
		t.Fatal(err)
	}
	sid := r.newSession().SessionId
	r.client.takeUpdates()
	r.prompt(sid, "hello") // turn 1
	r.client.takeUpdates()

	if stop := r.prompt(sid, "work notes.txt"); stop != acp.StopReasonEndTurn {
		t.Fatalf("stop reason %s", stop)
	}
	updates := r.client.takeUpdates()
	sameLines(t, "updates", describe(updates), []string{
		"plan in_progress,pending,pending",
		"thought",
		"tool_call work-2-read read in_progress",
		"update work-2-read completed +text",
		"plan completed,in_progress,pending",
		"tool_call work-2-edit edit in_progress",
		"update work-2-edit completed +diff",
		"plan completed,completed,in_progress",
		"tool_call work-2-run execute pending",
		"update work-2-run in_progress",
		"update work-2-run +terminal",
		"update work-2-run completed +terminal",
		"plan completed,completed,completed",
		"agent: wc -l notes.txt: 3 notes.txt\nwork done: notes.txt edited; command allowed (allow_once)",
	})

	path := filepath.Join(r.dir, "notes.txt")
	want := "one\ntwo\n" + EditedLine(2) + "\n"
	if b, err := os.ReadFile(path); err != nil || string(b) != want {
		t.Fatalf("notes.txt is %q (%v), want %q", b, err, want)
	}
	for _, u := range updates {
		if tu := u.ToolCallUpdate; tu != nil && tu.ToolCallId == "work-2-edit" && len(tu.Content) > 0 {
			d := tu.Content[0].Diff
			if d == nil || d.Path != path || d.OldText == nil || *d.OldText != "one\ntwo" || d.NewText != want {
				t.Fatalf("edit diff %+v, want path %s old %q new %q", d, path, "one\ntwo", want)
			}
		}
		if tc := u.ToolCall; tc != nil && tc.ToolCallId == "work-2-read" {
			if len(tc.Locations) != 1 || tc.Locations[0].Path != path {
				t.Fatalf("read locations %+v, want %s", tc.Locations, path)
			}
		}
	}

	perms := r.client.permissions
	if len(perms) != 1 {
		t.Fatalf("%d permission requests, want 1", len(perms))
	}
	p := perms[0]
	if p.SessionId != sid || p.ToolCall.ToolCallId != "work-2-run" || p.ToolCall.Kind == nil || *p.ToolCall.Kind != acp.ToolKindExecute ||
		p.ToolCall.Title == nil || *p.ToolCall.Title != "Run: wc -l notes.txt" {
		t.Fatalf("permission request %+v", p)
	}
	var opts []string
	for _, o := range p.Options {
		opts = append(opts, fmt.Sprintf("%s/%s/%s", o.OptionId, o.Kind, o.Name))
	}
	sameLines(t, "options", opts, []string{"allow_once/allow_once/Allow once", "reject_once/reject_once/Reject"})
	if len(r.client.released) != 1 || len(r.client.terminals) != 0 {
		t.Fatalf("terminals released %v, still open %d", r.client.released, len(r.client.terminals))
	}
}

// Rejected, the command does not run and its tool call fails; the file
// is edited all the same.
func TestWorkRejectedDoesNotRunTheCommand(t *testing.T) {
	r := newRig(t, allCaps, answerWith(OptionRejectOnce))
	path := filepath.Join(r.dir, "a.txt")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	sid := r.newSession().SessionId
	r.client.takeUpdates()
	if stop := r.prompt(sid, "/work a.txt"); stop != acp.StopReasonEndTurn {
		t.Fatalf("stop reason %s", stop)
	}
	d := describe(r.client.takeUpdates())
	sameLines(t, "the end of the updates", d[len(d)-3:], []string{
		"tool_call work-1-run execute pending",
		"update work-1-run failed +text",
		"agent: work done: a.txt edited; command rejected (reject_once)",
	})
	if b, _ := os.ReadFile(path); string(b) != EditedLine(1)+"\n" {
		t.Fatalf("a.txt is %q", b)
	}
	if len(r.client.released) != 0 {
		t.Fatalf("a terminal was created: %v", r.client.released)
	}
}

// work on a file that does not exist creates it: the read says so, the
// edit's diff has no old text.
func TestWorkCreatesAMissingFile(t *testing.T) {
	r := newRig(t, allCaps, answerWith(OptionRejectOnce))
	sid := r.newSession().SessionId
	r.client.takeUpdates()
	if stop := r.prompt(sid, "work new.txt"); stop != acp.StopReasonEndTurn {
		t.Fatalf("stop reason %s", stop)
	}
	b, err := os.ReadFile(filepath.Join(r.dir, "new.txt"))
	if err != nil || string(b) != EditedLine(1)+"\n" {
		t.Fatalf("new.txt: %q, %v", b, err)
	}
	var diff *acp.ToolCallContentDiff
	for _, u := range r.client.takeUpdates() {
		if tc := u.ToolCallUpdate; tc != nil && string(tc.ToolCallId) == WorkToolCallID(1, "edit") {
			for _, c := range tc.Content {
				if c.Diff != nil {
					diff = c.Diff
				}
			}
		}
	}
	if diff == nil || diff.OldText != nil || diff.NewText != EditedLine(1)+"\n" {
		t.Fatalf("the edit's diff: %+v, want no old text (a new file)", diff)
	}
}

// session/cancel while the permission request waits: the client answers
// it cancelled, as ACP has it do, and the turn ends cancelled.
func TestWorkCancelledWhileWaitingForPermission(t *testing.T) {
	for _, clientAnswers := range []bool{true, false} {
		t.Run(fmt.Sprintf("client answers %v", clientAnswers), func(t *testing.T) {
			asked, cancelled := make(chan struct{}), make(chan struct{})
			r := newRig(t, allCaps, func(ctx context.Context, _ acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
				close(asked)
				if !clientAnswers {
					<-ctx.Done() // the agent's $/cancel_request
					return acp.RequestPermissionResponse{}, ctx.Err()
				}
				<-cancelled
				return acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeCancelled()}, nil
			}, func(c *Config) {
				if !clientAnswers { // the agent waits this long for the answer that does not come
					c.cancelGrace = 10 * time.Millisecond
				}
			})
			if err := os.WriteFile(filepath.Join(r.dir, "f"), []byte("x\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			sid := r.newSession().SessionId
			r.client.takeUpdates()
			stop := make(chan acp.StopReason, 1)
			go func() {
				resp, err := r.conn.Prompt(context.Background(), acp.PromptRequest{SessionId: sid, Prompt: []acp.ContentBlock{acp.TextBlock("work f")}})
				if err != nil {
					t.Errorf("prompt: %v", err)
				}
				stop <- resp.StopReason
			}()
			<-asked
			if err := r.conn.Cancel(context.Background(), acp.CancelNotification{SessionId: sid}); err != nil {
				t.Fatal(err)
			}
			close(cancelled)
			if s := <-stop; s != acp.StopReasonCancelled {
				t.Fatalf("stop reason %s, want cancelled", s)
			}
			d := describe(r.client.takeUpdates())
			sameLines(t, "the end of the updates", d[len(d)-2:], []string{
				"update work-1-run failed +text",
				"agent: work done: f edited; permission cancelled",
			})
			// The next turn runs as usual.
			if s := r.prompt(sid, "hello"); s != acp.StopReasonEndTurn {
				t.Fatalf("next turn: %s", s)
			}
		})
	}
}

// A client without fs methods is told so and nothing is read or run.
func TestWorkWithoutFsSaysSo(t *testing.T) {
	r := newRig(t, acp.ClientCapabilities{}, func(context.Context, acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
		return acp.RequestPermissionResponse{}, errors.New("no permission request expected")
	})
	sid := r.newSession().SessionId
	r.client.takeUpdates()
	if stop := r.prompt(sid, "work notes.txt"); stop != acp.StopReasonEndTurn {
		t.Fatalf("stop reason %s", stop)
	}
	sameLines(t, "updates", describe(r.client.takeUpdates()), []string{
		"plan in_progress,pending,pending",
		"thought",
		"agent: work: the client offers no fs/read_text_file, so notes.txt was left alone",
	})
	if len(r.client.permissions) != 0 {
		t.Fatal("permission asked")
	}
}

// Allowed, with fs but no terminal: the reply says the command was not run.
func TestWorkWithoutTerminalSaysSo(t *testing.T) {
	caps := allCaps
	caps.Terminal = false
	r := newRig(t, caps, answerWith(OptionAllowOnce))
	if err := os.WriteFile(filepath.Join(r.dir, "f"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	sid := r.newSession().SessionId
	r.prompt(sid, "work f")
	d := describe(r.client.takeUpdates())
	sameLines(t, "the end of the updates", d[len(d)-2:], []string{
		"update work-1-run failed +text",
		"agent: work done: f edited; command allowed (allow_once) but not run: the client offers no terminal",
	})
}

// A session advertises its commands and modes; in the plan mode work only
// reads.
func TestCommandsAndModes(t *testing.T) {
	r := newRig(t, allCaps, answerWith(OptionAllowOnce))
	if err := os.WriteFile(filepath.Join(r.dir, "f"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	resp := r.newSession()
	us := r.client.takeUpdates()
	if len(us) != 1 || us[0].AvailableCommandsUpdate == nil {
		t.Fatalf("session/new sent %v, want one available_commands_update", describe(us))
	}
	var names []string
	for _, c := range us[0].AvailableCommandsUpdate.AvailableCommands {
		names = append(names, c.Name)
	}
	sameLines(t, "commands", names, []string{"recall", "work"})
	if in := us[0].AvailableCommandsUpdate.AvailableCommands[1].Input; in == nil || in.Unstructured == nil || in.Unstructured.Hint == "" {
		t.Fatal("work has no input hint")
	}
	if resp.Modes == nil || resp.Modes.CurrentModeId != ModeDefault || len(resp.Modes.AvailableModes) != 2 ||
		resp.Modes.AvailableModes[1].Id != ModePlan {
		t.Fatalf("modes %+v", resp.Modes)
	}

	if _, err := r.conn.SetSessionMode(context.Background(), acp.SetSessionModeRequest{SessionId: resp.SessionId, ModeId: "nope"}); err == nil {
		t.Fatal("an unknown mode was accepted")
	}
	if _, err := r.conn.SetSessionMode(context.Background(), acp.SetSessionModeRequest{SessionId: resp.SessionId, ModeId: ModePlan}); err != nil {
		t.Fatal(err)
	}
	sameLines(t, "after set_mode", describe(r.client.takeUpdates()), []string{"mode plan"})
	r.prompt(resp.SessionId, "work f")
	d := describe(r.client.takeUpdates())
	sameLines(t, "the end of the updates", d[len(d)-2:], []string{
		"plan completed,in_progress,pending",
		"agent: plan mode: f read (1 lines); switch to the default mode to edit it and run wc -l",
	})
	if b, _ := os.ReadFile(filepath.Join(r.dir, "f")); string(b) != "a\n" {
		t.Fatalf("f edited in plan mode: %q", b)
	}
}

// session/load replays a work turn: the prompt, the plan, the thought,
// each tool call once in its last state under its id, the reply; then
// the commands. The conversation goes on counting turns.
func TestLoadReplaysWork(t *testing.T) {
	r := newRig(t, allCaps, answerWith(OptionAllowOnce))
	if err := os.WriteFile(filepath.Join(r.dir, "f"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sid := r.newSession().SessionId
	r.prompt(sid, "remember pears")
	r.prompt(sid, "work f")
	r.client.takeUpdates()

	r2 := newRig(t, allCaps, answerWith(OptionAllowOnce))
	r2.dir = r.dir
	r2.client.dir = r.dir
	if _, err := r2.conn.LoadSession(context.Background(), acp.LoadSessionRequest{SessionId: sid, Cwd: r.dir, McpServers: []acp.McpServer{}}); err != nil {
		t.Fatal(err)
	}
	replay := r2.client.takeUpdates()
	sameLines(t, "replay", describe(replay), []string{
		"user: remember pears",
		"agent: ok, remembering pears",
		"user: work f",
		"plan completed,completed,completed",
		"thought",
		"tool_call work-2-read read completed",
		"tool_call work-2-edit edit completed",
		"tool_call work-2-run execute completed",
		"agent: wc -l f: 2 f\nwork done: f edited; command allowed (allow_once)",
		"commands",
	})
	for _, u := range replay {
		if tc := u.ToolCall; tc != nil && tc.ToolCallId == "work-2-edit" {
			if len(tc.Content) != 1 || tc.Content[0].Diff == nil || tc.Content[0].Diff.NewText != "a\n"+EditedLine(2)+"\n" {
				t.Fatalf("replayed edit %+v", tc.Content)
			}
		}
		if tc := u.ToolCall; tc != nil && tc.ToolCallId == "work-2-run" {
			if len(tc.Content) != 1 || tc.Content[0].Terminal == nil || tc.Content[0].Terminal.TerminalId != "cmd-1" {
				t.Fatalf("replayed command %+v", tc.Content)
			}
		}
	}
	r2.prompt(sid, "work f")
	d := describe(r2.client.takeUpdates())
	if last := d[len(d)-1]; last != "agent: wc -l f: 3 f\nwork done: f edited; command allowed (allow_once)" {
		t.Fatalf("turn 3 replied %q", last)
	}
	r2.prompt(sid, "/recall")
	if d := describe(r2.client.takeUpdates()); len(d) != 1 || d[0] != "agent: you asked me to remember: pears" {
		t.Fatalf("recall: %v", d)
	}
}
