package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
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

// TestBuildsAgainstSharedOnly: of this module, the example links only
// shared/ (a third party's plugin needs nothing else).
func TestBuildsAgainstSharedOnly(t *testing.T) {
	const module = "github.com/paddockhq/paddock/"
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", module+"examples/runtime-subprocess").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	var shared int
	for _, dep := range strings.Fields(string(out)) {
		switch {
		case dep == module+"examples/runtime-subprocess":
		case strings.HasPrefix(dep, module+"shared/"):
			shared++
		case strings.HasPrefix(dep, module):
			t.Errorf("the example depends on %s; it may use only shared/ of this module", dep)
		}
	}
	if shared == 0 {
		t.Fatalf("go list -deps found no shared/ package: %s", out)
	}
}
