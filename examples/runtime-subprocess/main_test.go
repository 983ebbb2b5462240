package main

import (
	"fmt"
	"os"
	"testing"

	"github.com/paddockhq/paddock/shared/runtime/conformance"
	"github.com/paddockhq/paddock/shared/runtime/runtimetest"
)

var pluginPath, agentctlPath string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "runtime-subprocess")
	if err == nil {
		pluginPath, err = runtimetest.GoBuild(dir, "runtime-subprocess", "github.com/paddockhq/paddock/examples/runtime-subprocess")
	}
	if err == nil {
		agentctlPath, _, err = runtimetest.Agentctl(dir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// TestConformance is the one line a plugin author needs.
func TestConformance(t *testing.T) {
	conformance.Run(t, conformance.Config{PluginPath: pluginPath, AgentctlPath: agentctlPath,
		PluginConfig: `workspace_root = "{{temp_dir}}"
agentctl_path = "{{agentctl_path}}"`})
}
