package runtime

import (
	"time"

	"github.com/hashicorp/hcl/v2"

	runtimepb "github.com/paddockhq/paddock/shared/runtime/proto"
)

func posToPB(p hcl.Pos) *runtimepb.Pos {
	return &runtimepb.Pos{Line: int64(p.Line), Column: int64(p.Column), Byte: int64(p.Byte)}
}

func posFromPB(p *runtimepb.Pos) hcl.Pos {
	if p == nil {
		return hcl.Pos{Line: 1, Column: 1}
	}
	return hcl.Pos{Line: int(p.GetLine()), Column: int(p.GetColumn()), Byte: int(p.GetByte())}
}

func rangeToPB(r *hcl.Range) *runtimepb.Range {
	if r == nil {
		return nil
	}
	return &runtimepb.Range{Filename: r.Filename, Start: posToPB(r.Start), End: posToPB(r.End)}
}

func rangeFromPB(r *runtimepb.Range) *hcl.Range {
	if r == nil {
		return nil
	}
	return &hcl.Range{Filename: r.GetFilename(), Start: posFromPB(r.GetStart()), End: posFromPB(r.GetEnd())}
}

// DiagnosticsToProto encodes HCL diagnostics for the wire. Expression and
// evaluation context do not cross the boundary; ranges do.
func DiagnosticsToProto(diags hcl.Diagnostics) []*runtimepb.Diagnostic {
	out := make([]*runtimepb.Diagnostic, 0, len(diags))
	for _, d := range diags {
		if d == nil {
			continue
		}
		sev := runtimepb.Diagnostic_SEVERITY_ERROR
		if d.Severity == hcl.DiagWarning {
			sev = runtimepb.Diagnostic_SEVERITY_WARNING
		}
		out = append(out, &runtimepb.Diagnostic{
			Severity: sev,
			Summary:  d.Summary,
			Detail:   d.Detail,
			Subject:  rangeToPB(d.Subject),
			Context:  rangeToPB(d.Context),
		})
	}
	return out
}

// DiagnosticsFromProto decodes wire diagnostics. An unknown severity is
// treated as an error so a malformed reply never passes for a clean one.
func DiagnosticsFromProto(in []*runtimepb.Diagnostic) hcl.Diagnostics {
	var out hcl.Diagnostics
	for _, d := range in {
		if d == nil {
			continue
		}
		sev := hcl.DiagError
		if d.GetSeverity() == runtimepb.Diagnostic_SEVERITY_WARNING {
			sev = hcl.DiagWarning
		}
		out = append(out, &hcl.Diagnostic{
			Severity: sev,
			Summary:  d.GetSummary(),
			Detail:   d.GetDetail(),
			Subject:  rangeFromPB(d.GetSubject()),
			Context:  rangeFromPB(d.GetContext()),
		})
	}
	return out
}

func schemaToPB(s Schema) *runtimepb.Schema {
	out := &runtimepb.Schema{}
	for _, a := range s.Attributes {
		out.Attributes = append(out.Attributes, &runtimepb.AttributeSchema{Name: a.Name, Type: a.Type, Required: a.Required, Description: a.Description})
	}
	for _, b := range s.Blocks {
		out.Blocks = append(out.Blocks, &runtimepb.BlockSchema{Type: b.Type, LabelNames: b.LabelNames, Body: schemaToPB(b.Body), Description: b.Description})
	}
	return out
}

func schemaFromPB(s *runtimepb.Schema) Schema {
	var out Schema
	if s == nil {
		return out
	}
	for _, a := range s.GetAttributes() {
		out.Attributes = append(out.Attributes, AttributeSchema{Name: a.GetName(), Type: a.GetType(), Required: a.GetRequired(), Description: a.GetDescription()})
	}
	for _, b := range s.GetBlocks() {
		out.Blocks = append(out.Blocks, BlockSchema{Type: b.GetType(), LabelNames: b.GetLabelNames(), Body: schemaFromPB(b.GetBody()), Description: b.GetDescription()})
	}
	return out
}

func launchRequestToPB(r LaunchRequest) *runtimepb.LaunchRequest {
	return &runtimepb.LaunchRequest{
		SessionId:      r.SessionID,
		TaskId:         r.TaskID,
		ExecutorId:     r.ExecutorID,
		Cluster:        r.Cluster,
		Workspace:      &runtimepb.Workspace{Path: r.Workspace.Path, Branch: r.Workspace.Branch},
		AgentctlSecret: r.AgentctlSecret,
		FencingToken:   r.FencingToken,
		Env:            r.Env,
		Options:        r.Options,
		Terminal:       terminalToPB(r.Terminal),
	}
}

func terminalToPB(t Terminal) *runtimepb.TerminalSettings {
	if t.Shell == nil && t.ReplayBytes == 0 && t.IdleTimeout == 0 {
		return nil
	}
	ms := durationToMS(t.IdleTimeout)
	if t.IdleTimeout < 0 {
		ms = -1 // refused by Validate on the plugin side, never read as "default"
	} else if t.IdleTimeout > 0 && ms == 0 {
		ms = 1 // a set sub-millisecond timeout stays set
	}
	return &runtimepb.TerminalSettings{Shell: t.Shell, ReplayBytes: int64(t.ReplayBytes), IdleTimeoutMs: ms}
}

func terminalFromPB(t *runtimepb.TerminalSettings) Terminal {
	if t == nil {
		return Terminal{}
	}
	out := Terminal{Shell: t.GetShell(), IdleTimeout: durationFromMS(t.GetIdleTimeoutMs())}
	if t.GetIdleTimeoutMs() < 0 {
		out.IdleTimeout = -1 // refused by Validate, never read as "default"
	}
	out.ReplayBytes = int(t.GetReplayBytes())
	if rb := t.GetReplayBytes(); rb < 0 || int64(out.ReplayBytes) != rb {
		out.ReplayBytes = -1 // refused by Validate, never read as "default"
	}
	return out
}

func launchRequestFromPB(r *runtimepb.LaunchRequest) LaunchRequest {
	return LaunchRequest{
		SessionID:      r.GetSessionId(),
		TaskID:         r.GetTaskId(),
		ExecutorID:     r.GetExecutorId(),
		Cluster:        r.GetCluster(),
		Workspace:      Workspace{Path: r.GetWorkspace().GetPath(), Branch: r.GetWorkspace().GetBranch()},
		AgentctlSecret: r.GetAgentctlSecret(),
		FencingToken:   r.GetFencingToken(),
		Env:            r.GetEnv(),
		Options:        r.GetOptions(),
		Terminal:       terminalFromPB(r.GetTerminal()),
	}
}

func launchResponseToPB(r LaunchResponse) *runtimepb.LaunchResponse {
	return &runtimepb.LaunchResponse{
		Handle:         r.Handle,
		AgentctlUrl:    r.AgentctlURL,
		Pid:            int64(r.PID),
		Nonce:          r.Nonce,
		ContainerId:    r.ContainerID,
		WorkspacePath:  r.WorkspacePath,
		WorktreePath:   r.WorktreePath,
		WorktreeBranch: r.WorktreeBranch,

		AgentctlFingerprint: r.AgentctlFingerprint,
	}
}

func launchResponseFromPB(r *runtimepb.LaunchResponse) LaunchResponse {
	return LaunchResponse{
		Handle:         r.GetHandle(),
		AgentctlURL:    r.GetAgentctlUrl(),
		PID:            int(r.GetPid()),
		Nonce:          r.GetNonce(),
		ContainerID:    r.GetContainerId(),
		WorkspacePath:  r.GetWorkspacePath(),
		WorktreePath:   r.GetWorktreePath(),
		WorktreeBranch: r.GetWorktreeBranch(),

		AgentctlFingerprint: r.GetAgentctlFingerprint(),
	}
}

var stateToPB = map[ExecutorState]runtimepb.InspectResponse_State{
	StateUnknown: runtimepb.InspectResponse_STATE_UNKNOWN,
	StateRunning: runtimepb.InspectResponse_STATE_RUNNING,
	StateExited:  runtimepb.InspectResponse_STATE_EXITED,
}

func inspectToPB(r InspectResponse) *runtimepb.InspectResponse {
	return &runtimepb.InspectResponse{
		State:       stateToPB[r.State], // anything unknown encodes as STATE_UNKNOWN
		Pid:         int64(r.PID),
		AgentctlUrl: r.AgentctlURL,
		Message:     r.Message,
		Details:     r.Details,
	}
}

func inspectFromPB(r *runtimepb.InspectResponse) InspectResponse {
	st := StateUnknown
	switch r.GetState() {
	case runtimepb.InspectResponse_STATE_RUNNING:
		st = StateRunning
	case runtimepb.InspectResponse_STATE_EXITED:
		st = StateExited
	}
	return InspectResponse{State: st, PID: int(r.GetPid()), AgentctlURL: r.GetAgentctlUrl(), Message: r.GetMessage(), Details: r.GetDetails()}
}

func durationToMS(d time.Duration) int64 { return d.Milliseconds() }
func durationFromMS(ms int64) time.Duration {
	if ms < 0 {
		return 0
	}
	return time.Duration(ms) * time.Millisecond
}
