package acpagent

import (
	"context"

	acp "github.com/coder/acp-go-sdk"
)

// Terminals serves an agent's terminal/* methods (agentctl: named
// terminals of the session, cmd-1, cmd-2, …). The terminal id the agent
// gets is the terminal's name.
type Terminals interface {
	// Create starts req's command and returns its id.
	Create(ctx context.Context, req TerminalRequest) (string, error)
	// Output is what the command printed so far and, once it exited, how.
	Output(id string) (TerminalOutput, error)
	// WaitForExit waits until the command exited (or ctx ends).
	WaitForExit(ctx context.Context, id string) (TerminalExit, error)
	// Kill ends the command; the id stays usable.
	Kill(id string) error
	// Release kills the command if it still runs and forgets the id.
	Release(id string) error
}

// TerminalRequest is a terminal/create request.
type TerminalRequest struct {
	Command string
	Args    []string
	// Cwd is the agent's working directory for the command ("" when it
	// named none).
	Cwd string
	// Env is the variables the agent asked for, as NAME=VALUE.
	Env []string
	// OutputByteLimit bounds the output kept (0: the terminal's own bound).
	OutputByteLimit int
}

// TerminalExit is how a command ended: its exit code, or the signal that
// ended it.
type TerminalExit struct {
	ExitCode *int
	Signal   *string
}

// TerminalOutput answers terminal/output.
type TerminalOutput struct {
	Output    string
	Truncated bool
	// Exit is nil while the command runs.
	Exit *TerminalExit
}

func (c *client) terminals(method string) (Terminals, error) {
	if c.a.cfg.Terminals == nil {
		return nil, acp.NewMethodNotFound(method)
	}
	return c.a.cfg.Terminals, nil
}

func (c *client) CreateTerminal(ctx context.Context, p acp.CreateTerminalRequest) (acp.CreateTerminalResponse, error) {
	ts, err := c.terminals(acp.ClientMethodTerminalCreate)
	if err != nil {
		return acp.CreateTerminalResponse{}, err
	}
	req := TerminalRequest{Command: p.Command, Args: p.Args}
	if p.Cwd != nil {
		req.Cwd = *p.Cwd
	}
	for _, e := range p.Env {
		req.Env = append(req.Env, e.Name+"="+e.Value)
	}
	if p.OutputByteLimit != nil && *p.OutputByteLimit > 0 {
		req.OutputByteLimit = *p.OutputByteLimit
	}
	id, err := ts.Create(ctx, req)
	if err != nil {
		return acp.CreateTerminalResponse{}, requestError(err)
	}
	return acp.CreateTerminalResponse{TerminalId: id}, nil
}

func (c *client) TerminalOutput(ctx context.Context, p acp.TerminalOutputRequest) (acp.TerminalOutputResponse, error) {
	ts, err := c.terminals(acp.ClientMethodTerminalOutput)
	if err != nil {
		return acp.TerminalOutputResponse{}, err
	}
	out, err := ts.Output(p.TerminalId)
	if err != nil {
		return acp.TerminalOutputResponse{}, requestError(err)
	}
	resp := acp.TerminalOutputResponse{Output: out.Output, Truncated: out.Truncated}
	if out.Exit != nil {
		resp.ExitStatus = &acp.TerminalExitStatus{ExitCode: out.Exit.ExitCode, Signal: out.Exit.Signal}
	}
	return resp, nil
}

func (c *client) WaitForTerminalExit(ctx context.Context, p acp.WaitForTerminalExitRequest) (acp.WaitForTerminalExitResponse, error) {
	ts, err := c.terminals(acp.ClientMethodTerminalWaitForExit)
	if err != nil {
		return acp.WaitForTerminalExitResponse{}, err
	}
	ex, err := ts.WaitForExit(ctx, p.TerminalId)
	if err != nil {
		return acp.WaitForTerminalExitResponse{}, requestError(err)
	}
	return acp.WaitForTerminalExitResponse{ExitCode: ex.ExitCode, Signal: ex.Signal}, nil
}

func (c *client) KillTerminal(ctx context.Context, p acp.KillTerminalRequest) (acp.KillTerminalResponse, error) {
	ts, err := c.terminals(acp.ClientMethodTerminalKill)
	if err != nil {
		return acp.KillTerminalResponse{}, err
	}
	if err := ts.Kill(p.TerminalId); err != nil {
		return acp.KillTerminalResponse{}, requestError(err)
	}
	return acp.KillTerminalResponse{}, nil
}

func (c *client) ReleaseTerminal(ctx context.Context, p acp.ReleaseTerminalRequest) (acp.ReleaseTerminalResponse, error) {
	ts, err := c.terminals(acp.ClientMethodTerminalRelease)
	if err != nil {
		return acp.ReleaseTerminalResponse{}, err
	}
	if err := ts.Release(p.TerminalId); err != nil {
		return acp.ReleaseTerminalResponse{}, requestError(err)
	}
	return acp.ReleaseTerminalResponse{}, nil
}
