// Package runtimetest finds or builds the binaries that runtime plugin tests
// need (agentctl, plugin binaries), makes their fixtures (git repositories)
// and waits on conditions. It is for tests only and must not import
// supervisor/.
package runtimetest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// AgentctlPackage is the import path of the real agentctl command.
const AgentctlPackage = "github.com/paddockhq/paddock/cmd/agentctl"

// FakeAgentctlPackage is a stand-in that implements only the launch interface
// and /v1/health; used when this module has no agentctl command yet.
const FakeAgentctlPackage = "github.com/paddockhq/paddock/shared/runtime/runtimetest/testdata/fakeagentctl"

// GoBuild builds pkg (an import path or ./relative path, resolved from the
// current directory) statically into dir/name and returns the binary's path.
func GoBuild(dir, name, pkg string) (string, error) {
	out := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build %s: %w: %s", pkg, err, stderr.String())
	}
	return out, nil
}

// Agentctl returns an agentctl binary for tests: $PADDOCK_BIN/agentctl when
// that exists, else the real command built into dir, else (only when this
// module has no agentctl command at all) the fake one; fake says which.
// A real command that fails to build is an error, never silently faked.
func Agentctl(dir string) (path string, fake bool, err error) {
	if bin := os.Getenv("PADDOCK_BIN"); bin != "" {
		p := filepath.Join(bin, "agentctl")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, false, nil
		}
	}
	if exec.Command("go", "list", AgentctlPackage).Run() == nil {
		p, err := GoBuild(dir, "agentctl", AgentctlPackage)
		return p, false, err
	}
	p, err := GoBuild(dir, "agentctl", FakeAgentctlPackage)
	return p, true, err
}
