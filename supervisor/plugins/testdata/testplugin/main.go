// Command testplugin is a runtime plugin for supervisor/plugins tests. It is
// installed under several names, paddock-runtime-<mode>, and behaves by mode:
// "exitstart" exits before the handshake, "hang" never handshakes,
// "hanginfo" handshakes but never answers Info, "api99" reports plugin API
// version 99, "badcookie" uses another handshake cookie; any other name is a
// working plugin whose config accepts only `greeting = "…"`.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/go-plugin"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/paddockhq/paddock/shared/runtime"
)

func main() {
	mode := strings.TrimPrefix(filepath.Base(os.Args[0]), "paddock-runtime-")
	logger := runtime.PluginLogger(mode)
	impl := &testRuntime{name: mode, api: runtime.APIVersion}
	switch mode {
	case "exitstart":
		fmt.Fprintln(os.Stderr, "testplugin: cannot start: missing everything")
		os.Exit(3)
	case "hang":
		for {
			time.Sleep(time.Hour)
		}
	case "hanginfo":
		impl.hangInfo = true
	case "api99":
		impl.api = "99"
	case "badcookie":
		hs := runtime.Handshake
		hs.MagicCookieValue = "not-the-paddock-cookie"
		plugin.Serve(&plugin.ServeConfig{
			HandshakeConfig: hs,
			Plugins:         plugin.PluginSet{runtime.PluginName: &runtime.GRPCPlugin{Impl: impl}},
			GRPCServer:      plugin.DefaultGRPCServer,
		})
		return
	}
	impl.logger = logger
	runtime.ServeLogger(impl, logger)
}

type testRuntime struct {
	name     string
	api      string
	hangInfo bool
	logger   interface{ Info(string, ...any) }
}

func (r *testRuntime) Info(ctx context.Context) (runtime.Info, error) {
	if r.hangInfo {
		<-ctx.Done()
		return runtime.Info{}, ctx.Err()
	}
	return runtime.Info{Name: r.name, Version: "0.0.7", APIVersion: r.api}, nil
}

func (r *testRuntime) ConfigSchema(context.Context) (runtime.Schema, error) {
	return runtime.Schema{Attributes: []runtime.AttributeSchema{{Name: "greeting", Type: "string"}}}, nil
}

func (r *testRuntime) SetConfig(_ context.Context, src runtime.ConfigSource) (hcl.Diagnostics, error) {
	f, diags := hclsyntax.ParseConfig(src.Source, src.Filename, src.Start)
	if diags.HasErrors() {
		return diags, nil
	}
	_, cdiags := f.Body.Content(&hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "greeting"}}})
	diags = append(diags, cdiags...)
	if !diags.HasErrors() && r.logger != nil {
		r.logger.Info("testplugin configured", "pid", os.Getpid())
	}
	return diags, nil
}

func (r *testRuntime) Capabilities(context.Context) (runtime.Capabilities, error) {
	return runtime.Capabilities{NodeLocal: true, Extra: map[string]bool{"supports_gpu": true}}, nil
}

func (r *testRuntime) Launch(_ context.Context, req runtime.LaunchRequest) (runtime.LaunchResponse, error) {
	return runtime.LaunchResponse{Handle: []byte(req.SessionID), AgentctlURL: "http://127.0.0.1:1"}, nil
}

func (r *testRuntime) Recover(_ context.Context, handle []byte, _ string) (runtime.LaunchResponse, error) {
	return runtime.LaunchResponse{Handle: handle}, nil
}

func (r *testRuntime) Inspect(context.Context, []byte) (runtime.InspectResponse, error) {
	return runtime.InspectResponse{State: runtime.StateRunning}, nil
}

func (r *testRuntime) Stop(context.Context, []byte, time.Duration) error { return nil }

func (r *testRuntime) Destroy(context.Context, []byte) error { return nil }
