package demoagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"

	acp "github.com/coder/acp-go-sdk"
)

// Session modes the ACP agent offers: in ModePlan a work turn reads its
// file and stops there.
const (
	ModeDefault = "default"
	ModePlan    = "plan"
)

// sessionModes is the mode state of a session in mode current.
func sessionModes(current string) *acp.SessionModeState {
	return &acp.SessionModeState{
		CurrentModeId: acp.SessionModeId(current),
		AvailableModes: []acp.SessionMode{
			{Id: ModeDefault, Name: "Default", Description: acp.Ptr("work reads, edits and asks to run a command")},
			{Id: ModePlan, Name: "Plan", Description: acp.Ptr("work only reads: nothing is edited or run")},
		},
	}
}

// Commands are the commands the agent advertises at session/new and
// session/load (available_commands_update).
var Commands = []acp.AvailableCommand{
	{Name: "recall", Description: "List every word you asked me to remember in this conversation"},
	{Name: "work", Description: "Read FILE, append a line to it, and ask permission to run wc -l on it",
		Input: &acp.AvailableCommandInput{Unstructured: &acp.UnstructuredCommandInput{Hint: "FILE, a path relative to the session's directory"}}},
}

// acpAgent implements acp.Agent (and acp.AgentLoader unless NoResume).
type acpAgent struct {
	cfg   Config
	conn  *acp.AgentSideConnection // read through peer
	ready chan struct{}            // closed once conn is set
	out   *lineWriter              // the connection's output, shared with sendChunk

	mu       sync.Mutex
	caps     acp.ClientCapabilities // from initialize
	sessions map[string]*acpSession
}

// acpSession is one open session. conv is used by one turn at a time.
type acpSession struct {
	conv  *Conversation
	store string // the workspace conv is kept in
	cwd   string // the session's cwd, which work's FILE is relative to
	mode  string // guarded by acpAgent.mu; a loaded session starts in ModeDefault
}

// ServeACP runs the demo agent as an ACP agent over r/w until the peer disconnects.
func ServeACP(ctx context.Context, cfg Config, r io.Reader, w io.Writer, log *slog.Logger) error {
	a := &acpAgent{cfg: cfg, sessions: map[string]*acpSession{}, out: &lineWriter{w: w}, ready: make(chan struct{})}
	conn := acp.NewAgentSideConnection(a, a.out, r)
	if log != nil {
		conn.SetLogger(log)
	}
	a.conn = conn
	close(a.ready)
	select {
	case <-conn.Done():
	case <-ctx.Done():
	}
	return nil
}

// peer is the connection to the client. The connection reads (and so
// calls the handlers) as soon as it exists, before ServeACP has it.
func (a *acpAgent) peer() *acp.AgentSideConnection {
	<-a.ready
	return a.conn
}

func (a *acpAgent) workspace(cwd string) string {
	if a.cfg.Workspace != "" {
		return a.cfg.Workspace
	}
	return cwd
}

func (a *acpAgent) Initialize(ctx context.Context, p acp.InitializeRequest) (acp.InitializeResponse, error) {
	a.mu.Lock()
	a.caps = p.ClientCapabilities
	a.mu.Unlock()
	return acp.InitializeResponse{
		ProtocolVersion:   acp.ProtocolVersionNumber,
		AgentCapabilities: acp.AgentCapabilities{LoadSession: !a.cfg.NoResume},
		AgentInfo:         &acp.Implementation{Name: "paddock-demo-agent", Version: "1"},
	}, nil
}

func (a *acpAgent) Authenticate(ctx context.Context, _ acp.AuthenticateRequest) (acp.AuthenticateResponse, error) {
	return acp.AuthenticateResponse{}, nil
}

func (a *acpAgent) NewSession(ctx context.Context, p acp.NewSessionRequest) (acp.NewSessionResponse, error) {
	ws := a.workspace(p.Cwd)
	c, err := Open(ws, NewID(), false)
	if err != nil {
		return acp.NewSessionResponse{}, err
	}
	a.mu.Lock()
	a.sessions[c.SessionID] = &acpSession{conv: c, store: ws, cwd: p.Cwd, mode: ModeDefault}
	a.mu.Unlock()
	sid := acp.SessionId(c.SessionID)
	if err := a.sendCommands(ctx, sid); err != nil {
		return acp.NewSessionResponse{}, err
	}
	return acp.NewSessionResponse{SessionId: sid, Models: a.models(), Modes: sessionModes(ModeDefault)}, nil
}

// sendCommands advertises Commands for session sid.
func (a *acpAgent) sendCommands(ctx context.Context, sid acp.SessionId) error {
	u := acp.SessionUpdate{AvailableCommandsUpdate: &acp.SessionAvailableCommandsUpdate{AvailableCommands: Commands}}
	if err := a.peer().SessionUpdate(ctx, acp.SessionNotification{SessionId: sid, Update: u}); err != nil {
		return fmt.Errorf("session/update available_commands_update: %w", err)
	}
	return nil
}

func (a *acpAgent) LoadSession(ctx context.Context, p acp.LoadSessionRequest) (acp.LoadSessionResponse, error) {
	if a.cfg.NoResume {
		return acp.LoadSessionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionLoad)
	}
	ws := a.workspace(p.Cwd)
	c, err := Load(ws, string(p.SessionId))
	if err != nil {
		return acp.LoadSessionResponse{}, acp.NewInvalidParams(map[string]any{"error": err.Error()})
	}
	// Replay the conversation, as session/load requires: text, plans and
	// each tool call in its last state, under the id it had.
	for _, e := range c.History {
		if err := a.peer().SessionUpdate(ctx, acp.SessionNotification{SessionId: p.SessionId, Update: e.Update()}); err != nil {
			return acp.LoadSessionResponse{}, fmt.Errorf("replay session %s: %w", p.SessionId, err)
		}
	}
	a.mu.Lock()
	a.sessions[c.SessionID] = &acpSession{conv: c, store: ws, cwd: p.Cwd, mode: ModeDefault}
	a.mu.Unlock()
	if err := a.sendCommands(ctx, p.SessionId); err != nil {
		return acp.LoadSessionResponse{}, err
	}
	return acp.LoadSessionResponse{Models: a.models(), Modes: sessionModes(ModeDefault)}, nil
}

// models is the model state of every session: one model, the configured one.
func (a *acpAgent) models() *acp.SessionModelState {
	m := acp.ModelId(a.cfg.model())
	return &acp.SessionModelState{CurrentModelId: m, AvailableModels: []acp.ModelInfo{{ModelId: m, Name: string(m)}}}
}

func (a *acpAgent) Cancel(ctx context.Context, p acp.CancelNotification) error { return nil }

func (a *acpAgent) Prompt(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
	sess := a.session(p.SessionId)
	if sess == nil {
		return acp.PromptResponse{}, acp.NewInvalidParams(map[string]any{"error": fmt.Sprintf("unknown session %s", p.SessionId)})
	}
	var parts []string
	for _, b := range p.Prompt {
		if b.Text != nil {
			parts = append(parts, b.Text.Text)
		}
	}
	text := strings.Join(parts, "\n")
	if file, ok := workFile(text); ok {
		stop, err := a.runWork(ctx, p.SessionId, sess, text, file)
		if err != nil {
			return acp.PromptResponse{}, err
		}
		return acp.PromptResponse{StopReason: stop}, nil
	}
	if strings.TrimSpace(text) == "/recall" { // the advertised command
		text = "recall"
	}
	cfg := a.cfg
	cfg.Workspace = sess.store
	var line []byte
	err := sess.conv.Turn(ctx, cfg, text, func(chunk string) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		line = chunkLine(line[:0], string(p.SessionId), chunk)
		_, err := a.out.Write(line)
		return err
	})
	switch {
	case err == nil:
		return acp.PromptResponse{StopReason: acp.StopReasonEndTurn}, nil
	case errors.Is(err, context.Canceled):
		return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
	}
	return acp.PromptResponse{}, err
}

func (a *acpAgent) CloseSession(ctx context.Context, p acp.CloseSessionRequest) (acp.CloseSessionResponse, error) {
	return acp.CloseSessionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionClose)
}

func (a *acpAgent) ListSessions(ctx context.Context, p acp.ListSessionsRequest) (acp.ListSessionsResponse, error) {
	return acp.ListSessionsResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionList)
}

func (a *acpAgent) ResumeSession(ctx context.Context, p acp.ResumeSessionRequest) (acp.ResumeSessionResponse, error) {
	return acp.ResumeSessionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionResume)
}

func (a *acpAgent) SetSessionConfigOption(ctx context.Context, p acp.SetSessionConfigOptionRequest) (acp.SetSessionConfigOptionResponse, error) {
	return acp.SetSessionConfigOptionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionSetConfigOption)
}

// SetSessionMode switches a session to ModeDefault or ModePlan and reports
// it with a current_mode_update.
func (a *acpAgent) SetSessionMode(ctx context.Context, p acp.SetSessionModeRequest) (acp.SetSessionModeResponse, error) {
	if p.ModeId != ModeDefault && p.ModeId != ModePlan {
		return acp.SetSessionModeResponse{}, acp.NewInvalidParams(map[string]any{"error": fmt.Sprintf("unknown mode %q", p.ModeId)})
	}
	a.mu.Lock()
	sess := a.sessions[string(p.SessionId)]
	if sess != nil {
		sess.mode = string(p.ModeId)
	}
	a.mu.Unlock()
	if sess == nil {
		return acp.SetSessionModeResponse{}, acp.NewInvalidParams(map[string]any{"error": fmt.Sprintf("unknown session %s", p.SessionId)})
	}
	u := acp.SessionUpdate{CurrentModeUpdate: &acp.SessionCurrentModeUpdate{CurrentModeId: p.ModeId}}
	if err := a.peer().SessionUpdate(ctx, acp.SessionNotification{SessionId: p.SessionId, Update: u}); err != nil {
		return acp.SetSessionModeResponse{}, fmt.Errorf("session/update current_mode_update: %w", err)
	}
	return acp.SetSessionModeResponse{}, nil
}

// session is the open session sid, nil when unknown.
func (a *acpAgent) session(sid acp.SessionId) *acpSession {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.sessions[string(sid)]
}

// lineWriter is the agent's output: the ACP connection writes each message
// as one Write, and so does sendChunk, so whole lines never interleave.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// chunkLine appends to b the session/update notification of one agent
// message chunk, as the SDK's SessionUpdate would send it: a reply of
// many chunks is the load the demo agent generates, and the SDK's generic
// encoding (a map built and encoded per message) was most of the agent's
// own CPU per chunk.
func chunkLine(b []byte, sessionID, text string) []byte {
	b = append(b, `{"jsonrpc":"2.0","method":"`+acp.ClientMethodSessionUpdate+`","params":{"sessionId":`...)
	b = appendJSONString(b, sessionID)
	b = append(b, `,"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":`...)
	b = appendJSONString(b, text)
	return append(b, "}}}}\n"...)
}

// appendJSONString appends s as a JSON string.
func appendJSONString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always encodes
	return append(b, q...)
}
