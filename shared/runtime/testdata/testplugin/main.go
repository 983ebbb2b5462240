// Command testplugin is a runtime plugin for the SDK's own tests. Its
// behaviour is chosen by TESTPLUGIN_MODE: "" (normal), "api99" (reports API
// version 99), "badcookie" (a different handshake cookie), "protocol9" (a
// different go-plugin protocol version), "noreconcile" (serves only the
// Runtime methods, without the optional Reconciler).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/go-plugin"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/paddockhq/paddock/shared/runtime"
)

func main() {
	impl := &testRuntime{api: runtime.APIVersion}
	switch os.Getenv("TESTPLUGIN_MODE") {
	case "api99":
		impl.api = "99"
	case "badcookie", "protocol9":
		hs := runtime.Handshake
		if os.Getenv("TESTPLUGIN_MODE") == "badcookie" {
			hs.MagicCookieValue = "not-the-paddock-cookie"
		} else {
			hs.ProtocolVersion = 9
		}
		plugin.Serve(&plugin.ServeConfig{
			HandshakeConfig: hs,
			Plugins:         plugin.PluginSet{runtime.PluginName: &runtime.GRPCPlugin{Impl: impl}},
			GRPCServer:      plugin.DefaultGRPCServer,
		})
		return
	case "noreconcile":
		runtime.Serve(struct{ runtime.Runtime }{impl})
		return
	}
	runtime.Serve(impl)
}

type testRuntime struct{ api string }

func (r *testRuntime) Info(context.Context) (runtime.Info, error) {
	return runtime.Info{Name: "testplugin", Version: "0.0.1", APIVersion: r.api}, nil
}

func (r *testRuntime) ConfigSchema(context.Context) (runtime.Schema, error) {
	return runtime.Schema{Attributes: []runtime.AttributeSchema{{Name: "name", Type: "string", Required: true}},
		Blocks: []runtime.BlockSchema{{Type: "host", LabelNames: []string{"name"}, Body: runtime.Schema{Attributes: []runtime.AttributeSchema{{Name: "url", Type: "string"}}}}}}, nil
}

func (r *testRuntime) SetConfig(_ context.Context, src runtime.ConfigSource) (hcl.Diagnostics, error) {
	f, diags := hclsyntax.ParseConfig(src.Source, src.Filename, src.Start)
	if diags.HasErrors() {
		return diags, nil
	}
	_, cdiags := f.Body.Content(&hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "name", Required: true}}})
	diags = append(diags, cdiags...)
	diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: "Test warning", Detail: "always here"})
	return diags, nil
}

func (r *testRuntime) Capabilities(context.Context) (runtime.Capabilities, error) {
	return runtime.Capabilities{NodeLocal: true, Extra: map[string]bool{"supports_gpu": true}}, nil
}

func (r *testRuntime) Launch(_ context.Context, req runtime.LaunchRequest) (runtime.LaunchResponse, error) {
	return runtime.LaunchResponse{Handle: []byte(req.SessionID), AgentctlURL: "http://127.0.0.1:1", PID: 1, Nonce: "n",
		WorktreeBranch: req.Workspace.Branch, WorkspacePath: req.Env["WS"] + req.Options["opt"],
		ContainerID: strings.Join(req.Terminal.Args(), " ")}, nil
}

// errorFor maps a handle to the error the SDK tests expect to see typed.
func errorFor(handle []byte) error {
	switch string(handle) {
	case "notfound":
		return fmt.Errorf("executor x: %w", runtime.ErrNotFound)
	case "invalidconfig":
		return fmt.Errorf("no image: %w", runtime.ErrInvalidConfig)
	case "unavailable":
		return fmt.Errorf("daemon down: %w", runtime.ErrUnavailable)
	case "invalidrequest":
		return fmt.Errorf("bad field: %w", runtime.ErrInvalidRequest)
	case "plain":
		return errors.New("something else broke")
	case "slow":
		time.Sleep(5 * time.Second)
	}
	return nil
}

func (r *testRuntime) Recover(_ context.Context, handle []byte, _ string) (runtime.LaunchResponse, error) {
	if err := errorFor(handle); err != nil {
		return runtime.LaunchResponse{}, err
	}
	return runtime.LaunchResponse{Handle: handle}, nil
}

func (r *testRuntime) Inspect(ctx context.Context, handle []byte) (runtime.InspectResponse, error) {
	if string(handle) == "slow" {
		select {
		case <-ctx.Done():
			return runtime.InspectResponse{}, ctx.Err()
		case <-time.After(5 * time.Second):
		}
	}
	if err := errorFor(handle); err != nil {
		return runtime.InspectResponse{}, err
	}
	return runtime.InspectResponse{State: runtime.StateRunning, PID: 42, Details: map[string]string{"k": "v"}}, nil
}

func (r *testRuntime) Stop(_ context.Context, handle []byte, timeout time.Duration) error {
	if timeout != 1500*time.Millisecond {
		return fmt.Errorf("timeout %s did not cross intact: %w", timeout, runtime.ErrInvalidRequest)
	}
	return errorFor(handle)
}

func (r *testRuntime) Destroy(_ context.Context, handle []byte) error { return errorFor(handle) }

// testExecutors are the executors the test runtime pretends to find.
var testExecutors = []string{"ex-a", "ex-b", "ex-c"}

// Reconcile "removes" the test executors not owned, naming each with the
// cluster and grace it was given so the tests see every field cross. The
// clusters "unavailable" and "unsupported" return those typed errors.
func (r *testRuntime) Reconcile(_ context.Context, req runtime.ReconcileRequest) ([]string, error) {
	switch req.Cluster {
	case "unavailable":
		return nil, fmt.Errorf("daemon down: %w", runtime.ErrUnavailable)
	case "unsupported":
		return nil, fmt.Errorf("no engine to list: %w", runtime.ErrUnsupported)
	}
	owned := req.OwnedSet()
	removed := []string{}
	for _, id := range testExecutors {
		if !owned(id) {
			removed = append(removed, id+"@"+req.Cluster+"/"+req.Grace.String())
		}
	}
	return removed, nil
}
