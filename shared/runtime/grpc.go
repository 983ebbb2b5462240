package runtime

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/go-plugin"
	"github.com/hashicorp/hcl/v2"
	"google.golang.org/grpc"

	runtimepb "github.com/paddockhq/paddock/shared/runtime/proto"
)

// GRPCPlugin is the go-plugin glue for the runtime plugin: on the plugin side
// it serves Impl, on the host side it dispenses a Runtime backed by gRPC.
type GRPCPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	// Impl is the plugin's implementation; nil on the host side.
	Impl Runtime
}

// GRPCServer registers the runtime service (plugin side).
func (p *GRPCPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	runtimepb.RegisterRuntimeServer(s, &grpcServer{impl: p.Impl})
	return nil
}

// GRPCClient returns a Runtime that calls the plugin over conn (host side).
func (p *GRPCPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, conn *grpc.ClientConn) (interface{}, error) {
	return &grpcClient{c: runtimepb.NewRuntimeClient(conn)}, nil
}

// PluginMap is the go-plugin plugin set a host passes in plugin.ClientConfig.
func PluginMap() plugin.PluginSet {
	return plugin.PluginSet{PluginName: &GRPCPlugin{}}
}

// grpcServer adapts a Runtime to the generated gRPC server interface.
type grpcServer struct {
	runtimepb.UnimplementedRuntimeServer
	impl Runtime
}

func (s *grpcServer) Info(ctx context.Context, _ *runtimepb.InfoRequest) (*runtimepb.InfoResponse, error) {
	info, err := s.impl.Info(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	return &runtimepb.InfoResponse{Name: info.Name, Version: info.Version, ApiVersion: info.APIVersion}, nil
}

func (s *grpcServer) ConfigSchema(ctx context.Context, _ *runtimepb.ConfigSchemaRequest) (*runtimepb.ConfigSchemaResponse, error) {
	schema, err := s.impl.ConfigSchema(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	return &runtimepb.ConfigSchemaResponse{Schema: schemaToPB(schema)}, nil
}

func (s *grpcServer) SetConfig(ctx context.Context, req *runtimepb.SetConfigRequest) (*runtimepb.SetConfigResponse, error) {
	diags, err := s.impl.SetConfig(ctx, ConfigSource{Filename: req.GetFilename(), Source: req.GetSource(), Start: posFromPB(req.GetStart())})
	if err != nil {
		return nil, toStatus(err)
	}
	return &runtimepb.SetConfigResponse{Diagnostics: DiagnosticsToProto(diags)}, nil
}

func (s *grpcServer) Capabilities(ctx context.Context, _ *runtimepb.CapabilitiesRequest) (*runtimepb.CapabilitiesResponse, error) {
	c, err := s.impl.Capabilities(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	return &runtimepb.CapabilitiesResponse{
		SupportsWorkspaceOnly:     c.SupportsWorkspaceOnly,
		SurvivesSupervisorRestart: c.SurvivesSupervisorRestart,
		NodeLocal:                 c.NodeLocal,
		Extra:                     c.Extra,
	}, nil
}

func (s *grpcServer) Launch(ctx context.Context, req *runtimepb.LaunchRequest) (*runtimepb.LaunchResponse, error) {
	r := launchRequestFromPB(req)
	if err := r.Validate(); err != nil {
		return nil, toStatus(err)
	}
	resp, err := s.impl.Launch(ctx, r)
	if err != nil {
		return nil, toStatus(err)
	}
	return launchResponseToPB(resp), nil
}

func (s *grpcServer) Recover(ctx context.Context, req *runtimepb.RecoverRequest) (*runtimepb.LaunchResponse, error) {
	if len(req.GetHandle()) == 0 {
		return nil, toStatus(errEmptyHandle)
	}
	resp, err := s.impl.Recover(ctx, req.GetHandle(), req.GetAgentctlSecret())
	if err != nil {
		return nil, toStatus(err)
	}
	return launchResponseToPB(resp), nil
}

func (s *grpcServer) Inspect(ctx context.Context, req *runtimepb.InspectRequest) (*runtimepb.InspectResponse, error) {
	if len(req.GetHandle()) == 0 {
		return nil, toStatus(errEmptyHandle)
	}
	resp, err := s.impl.Inspect(ctx, req.GetHandle())
	if err != nil {
		return nil, toStatus(err)
	}
	return inspectToPB(resp), nil
}

func (s *grpcServer) Stop(ctx context.Context, req *runtimepb.StopRequest) (*runtimepb.StopResponse, error) {
	if len(req.GetHandle()) == 0 {
		return nil, toStatus(errEmptyHandle)
	}
	if err := s.impl.Stop(ctx, req.GetHandle(), durationFromMS(req.GetTimeoutMs())); err != nil {
		return nil, toStatus(err)
	}
	return &runtimepb.StopResponse{}, nil
}

func (s *grpcServer) Destroy(ctx context.Context, req *runtimepb.DestroyRequest) (*runtimepb.DestroyResponse, error) {
	if len(req.GetHandle()) == 0 {
		return nil, toStatus(errEmptyHandle)
	}
	if err := s.impl.Destroy(ctx, req.GetHandle()); err != nil {
		return nil, toStatus(err)
	}
	return &runtimepb.DestroyResponse{}, nil
}

// Reconcile serves the optional Reconciler capability: a plugin whose
// implementation lacks it answers ErrUnsupported (UNIMPLEMENTED).
func (s *grpcServer) Reconcile(ctx context.Context, req *runtimepb.ReconcileRequest) (*runtimepb.ReconcileResponse, error) {
	rc, ok := s.impl.(Reconciler)
	if !ok {
		return nil, toStatus(fmt.Errorf("reconcile: %w", ErrUnsupported))
	}
	r := ReconcileRequest{Cluster: req.GetCluster(), Owned: req.GetOwnedExecutorIds(), Grace: durationFromMS(req.GetGraceMs())}
	if req.GetGraceMs() < 0 {
		r.Grace = -1 // refused by Validate, never read as "no grace"
	}
	if err := r.Validate(); err != nil {
		return nil, toStatus(err)
	}
	removed, err := rc.Reconcile(ctx, r)
	if err != nil {
		return nil, toStatus(err)
	}
	return &runtimepb.ReconcileResponse{Removed: removed}, nil
}

// CheckTaskWorkspace serves the optional WorkspaceChecker capability: a
// plugin whose implementation lacks it answers ErrUnsupported
// (UNIMPLEMENTED).
func (s *grpcServer) CheckTaskWorkspace(ctx context.Context, req *runtimepb.CheckTaskWorkspaceRequest) (*runtimepb.CheckTaskWorkspaceResponse, error) {
	wc, ok := s.impl.(WorkspaceChecker)
	if !ok {
		return nil, toStatus(fmt.Errorf("check task workspace: %w", ErrUnsupported))
	}
	if err := wc.CheckTaskWorkspace(ctx, req.GetPath()); err != nil {
		return nil, toStatus(err)
	}
	return &runtimepb.CheckTaskWorkspaceResponse{}, nil
}

// grpcClient is the host side's Runtime: every call is one gRPC round trip
// and every error is rebuilt into the plugin's sentinel.
type grpcClient struct {
	c runtimepb.RuntimeClient
	// offered is sent in InfoRequest so the plugin sees what the host supports.
	offered []string
}

var _ Runtime = (*grpcClient)(nil)

func (c *grpcClient) Info(ctx context.Context) (Info, error) {
	resp, err := c.c.Info(ctx, &runtimepb.InfoRequest{HostApiVersions: c.offered})
	if err != nil {
		return Info{}, fromStatus("info", err)
	}
	return Info{Name: resp.GetName(), Version: resp.GetVersion(), APIVersion: resp.GetApiVersion()}, nil
}

func (c *grpcClient) ConfigSchema(ctx context.Context) (Schema, error) {
	resp, err := c.c.ConfigSchema(ctx, &runtimepb.ConfigSchemaRequest{})
	if err != nil {
		return Schema{}, fromStatus("config schema", err)
	}
	return schemaFromPB(resp.GetSchema()), nil
}

func (c *grpcClient) SetConfig(ctx context.Context, src ConfigSource) (hcl.Diagnostics, error) {
	resp, err := c.c.SetConfig(ctx, &runtimepb.SetConfigRequest{Filename: src.Filename, Source: src.Source, Start: posToPB(src.Start)})
	if err != nil {
		return nil, fromStatus("set config", err)
	}
	return DiagnosticsFromProto(resp.GetDiagnostics()), nil
}

func (c *grpcClient) Capabilities(ctx context.Context) (Capabilities, error) {
	resp, err := c.c.Capabilities(ctx, &runtimepb.CapabilitiesRequest{})
	if err != nil {
		return Capabilities{}, fromStatus("capabilities", err)
	}
	return Capabilities{
		SupportsWorkspaceOnly:     resp.GetSupportsWorkspaceOnly(),
		SurvivesSupervisorRestart: resp.GetSurvivesSupervisorRestart(),
		NodeLocal:                 resp.GetNodeLocal(),
		Extra:                     resp.GetExtra(),
	}, nil
}

func (c *grpcClient) Launch(ctx context.Context, req LaunchRequest) (LaunchResponse, error) {
	resp, err := c.c.Launch(ctx, launchRequestToPB(req))
	if err != nil {
		return LaunchResponse{}, fromStatus("launch", err)
	}
	return launchResponseFromPB(resp), nil
}

func (c *grpcClient) Recover(ctx context.Context, handle []byte, secret string) (LaunchResponse, error) {
	resp, err := c.c.Recover(ctx, &runtimepb.RecoverRequest{Handle: handle, AgentctlSecret: secret})
	if err != nil {
		return LaunchResponse{}, fromStatus("recover", err)
	}
	return launchResponseFromPB(resp), nil
}

func (c *grpcClient) Inspect(ctx context.Context, handle []byte) (InspectResponse, error) {
	resp, err := c.c.Inspect(ctx, &runtimepb.InspectRequest{Handle: handle})
	if err != nil {
		return InspectResponse{}, fromStatus("inspect", err)
	}
	return inspectFromPB(resp), nil
}

func (c *grpcClient) Stop(ctx context.Context, handle []byte, timeout time.Duration) error {
	_, err := c.c.Stop(ctx, &runtimepb.StopRequest{Handle: handle, TimeoutMs: durationToMS(timeout)})
	return fromStatus("stop", err)
}

func (c *grpcClient) Destroy(ctx context.Context, handle []byte) error {
	_, err := c.c.Destroy(ctx, &runtimepb.DestroyRequest{Handle: handle})
	return fromStatus("destroy", err)
}

var (
	_ Reconciler       = (*grpcClient)(nil)
	_ WorkspaceChecker = (*grpcClient)(nil)
)

// CheckTaskWorkspace calls the plugin's optional WorkspaceChecker; a
// plugin without it (including one built with an SDK older than the
// method) gives ErrUnsupported.
func (c *grpcClient) CheckTaskWorkspace(ctx context.Context, path string) error {
	if _, err := c.c.CheckTaskWorkspace(ctx, &runtimepb.CheckTaskWorkspaceRequest{Path: path}); err != nil {
		return fromStatus("check task workspace", err)
	}
	return nil
}

// Reconcile calls the plugin's optional Reconciler; a plugin without it
// (including one built with an SDK older than the method) gives
// ErrUnsupported.
func (c *grpcClient) Reconcile(ctx context.Context, req ReconcileRequest) ([]string, error) {
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("runtime reconcile: %w", err)
	}
	resp, err := c.c.Reconcile(ctx, &runtimepb.ReconcileRequest{Cluster: req.Cluster, OwnedExecutorIds: req.Owned, GraceMs: durationToMS(req.Grace)})
	if err != nil {
		return nil, fromStatus("reconcile", err)
	}
	return resp.GetRemoved(), nil
}
