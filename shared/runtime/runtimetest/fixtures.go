package runtimetest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/paddockhq/paddock/shared/runtime"
	"github.com/paddockhq/paddock/shared/testkit"
)

// Plugin returns the plugin binary name: $PADDOCK_BIN/plugins/name when that
// exists (make build made it), else pkg built into dir.
func Plugin(dir, name, pkg string) (string, error) {
	if bin := os.Getenv("PADDOCK_BIN"); bin != "" {
		p := filepath.Join(bin, "plugins", name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	return GoBuild(dir, name, pkg)
}

// Binaries are what a plugin's TestMain needs: the plugin and agentctl.
type Binaries struct {
	Plugin, Agentctl string
	// FakeAgentctl: the module has no agentctl command; the fake one stands in.
	FakeAgentctl bool
}

// Build returns the plugin (see Plugin) and agentctl (see Agentctl), both
// made in dir when they must be built.
func Build(dir, name, pkg string) (Binaries, error) {
	var b Binaries
	var err error
	if b.Agentctl, b.FakeAgentctl, err = Agentctl(dir); err != nil {
		return b, err
	}
	if b.Plugin, err = Plugin(dir, name, pkg); err != nil {
		return b, err
	}
	return b, nil
}

// Main runs a plugin package's tests with its binaries built into a
// temporary directory (removed afterwards) and returns the exit code for
// os.Exit: a TestMain is os.Exit(runtimetest.Main(m, name, pkg, &bins)).
func Main(m *testing.M, name, pkg string, bins *Binaries) int {
	dir, err := os.MkdirTemp("", name+"-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if *bins, err = Build(dir, name, pkg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if bins.FakeAgentctl {
		fmt.Fprintln(os.Stderr, "NOTE: cmd/agentctl does not exist; using the fake agentctl")
	}
	return m.Run()
}

// GitRepo makes dir a git repository on branch main with one commit (a
// README) and returns dir.
func GitRepo(t testing.TB, dir string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	Git(t, dir, "init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	Git(t, dir, "add", "README")
	Git(t, dir, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "-m", "init")
	return dir
}

// Git runs git in dir (argv, no shell) and returns its trimmed output; a
// failure fails the test.
func Git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v: %s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// WaitFor polls cond until it holds, failing the test after timeout: the
// conformance kit's form of testkit.WaitFor, for plugin authors' tests
// (whose conditions give no reason).
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	testkit.WaitFor(t, timeout, what, testkit.Cond(cond))
}

// Load starts the plugin binary as a real go-plugin subprocess (killed when
// the test ends, with the agentctls it started in t's TempDirs: see
// CleanupProcesses) and configures it with the config body src; a refused
// config fails the test.
func Load(t testing.TB, pluginPath, src string) *runtime.Client {
	t.Helper()
	CleanupProcesses(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := runtime.NewClient(ctx, runtime.ClientConfig{Path: pluginPath})
	if err != nil {
		t.Fatalf("load plugin %s: %v", pluginPath, err)
	}
	t.Cleanup(c.Kill)
	diags, err := c.SetConfig(ctx, runtime.ConfigSource{Filename: "test.hcl", Source: []byte(src), Start: hcl.Pos{Line: 1, Column: 1}})
	if err != nil || diags.HasErrors() {
		t.Fatalf("SetConfig: %v %s", err, diags.Error())
	}
	return c
}
