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

// acpAgent implements acp.Agent (and acp.AgentLoader unless NoResume).
type acpAgent struct {
	cfg  Config
	conn *acp.AgentSideConnection
	out  *lineWriter // the connection's output, shared with sendChunk

	mu    sync.Mutex
	convs map[string]*Conversation
	cwds  map[string]string
}

// ServeACP runs the demo agent as an ACP agent over r/w until the peer disconnects.
func ServeACP(ctx context.Context, cfg Config, r io.Reader, w io.Writer, log *slog.Logger) error {
	a := &acpAgent{cfg: cfg, convs: map[string]*Conversation{}, cwds: map[string]string{}, out: &lineWriter{w: w}}
	conn := acp.NewAgentSideConnection(a, a.out, r)
	if log != nil {
		conn.SetLogger(log)
	}
	a.conn = conn
	select {
	case <-conn.Done():
	case <-ctx.Done():
	}
	return nil
}

func (a *acpAgent) workspace(cwd string) string {
	if a.cfg.Workspace != "" {
		return a.cfg.Workspace
	}
	return cwd
}

func (a *acpAgent) Initialize(ctx context.Context, p acp.InitializeRequest) (acp.InitializeResponse, error) {
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
	a.convs[c.SessionID] = c
	a.cwds[c.SessionID] = ws
	a.mu.Unlock()
	return acp.NewSessionResponse{SessionId: acp.SessionId(c.SessionID), Models: a.models()}, nil
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
	// Replay the conversation, as session/load requires.
	for _, e := range c.History {
		u := acp.UpdateAgentMessageText(e.Text)
		if e.Role == "user" {
			u = acp.UpdateUserMessageText(e.Text)
		}
		if err := a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: p.SessionId, Update: u}); err != nil {
			return acp.LoadSessionResponse{}, err
		}
	}
	a.mu.Lock()
	a.convs[c.SessionID] = c
	a.cwds[c.SessionID] = ws
	a.mu.Unlock()
	return acp.LoadSessionResponse{Models: a.models()}, nil
}

// models is the model state of every session: one model, the configured one.
func (a *acpAgent) models() *acp.SessionModelState {
	m := acp.ModelId(a.cfg.model())
	return &acp.SessionModelState{CurrentModelId: m, AvailableModels: []acp.ModelInfo{{ModelId: m, Name: string(m)}}}
}

func (a *acpAgent) Cancel(ctx context.Context, p acp.CancelNotification) error { return nil }

func (a *acpAgent) Prompt(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
	a.mu.Lock()
	c := a.convs[string(p.SessionId)]
	ws := a.cwds[string(p.SessionId)]
	a.mu.Unlock()
	if c == nil {
		return acp.PromptResponse{}, acp.NewInvalidParams(map[string]any{"error": fmt.Sprintf("unknown session %s", p.SessionId)})
	}
	var parts []string
	for _, b := range p.Prompt {
		if b.Text != nil {
			parts = append(parts, b.Text.Text)
		}
	}
	cfg := a.cfg
	cfg.Workspace = ws
	var line []byte
	err := c.Turn(ctx, cfg, strings.Join(parts, "\n"), func(chunk string) error {
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

func (a *acpAgent) SetSessionMode(ctx context.Context, p acp.SetSessionModeRequest) (acp.SetSessionModeResponse, error) {
	return acp.SetSessionModeResponse{}, nil
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
