package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/paddockhq/paddock/bench/harness"
	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/shared/runtime/runtimetest"
)

// binDir holds paddock, agentctl, paddock-demo-agent and plugins/.
var binDir string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	flag.Parse()
	if testing.Short() {
		return m.Run()
	}
	// Terminals run agentctl's $SHELL. The tests kill shells at any moment;
	// an interactive bash whose rc file runs a tool that takes a lock (pyenv
	// init rehashes under a lock file on the CI machines) and is killed
	// holding it leaves every later shell of the run waiting on it. The
	// tests need only a POSIX shell, so they get one that reads no rc file.
	os.Setenv("SHELL", "/bin/sh")
	binDir = os.Getenv("PADDOCK_BIN")
	if binDir == "" {
		dir, err := os.MkdirTemp("", "paddock-e2e-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		cmd := exec.Command("make", "-C", "..", "build", "BIN="+dir)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "build binaries:", err)
			return 1
		}
		binDir = dir
	}
	return m.Run()
}

// startCluster starts n server processes and stops them (printing their
// logs on failure) when the test ends.
func startCluster(t *testing.T, n int, separateIPs bool, extra string) *harness.Cluster {
	t.Helper()
	return startClusterWith(t, harness.Options{Size: n, SeparateIPs: separateIPs, Extra: extra})
}

// startClusterWith is startCluster with more of the harness's options (Bin
// and Dir are filled in).
func startClusterWith(t *testing.T, o harness.Options) *harness.Cluster {
	t.Helper()
	o.Bin, o.Dir = binDir, t.TempDir()
	// Plugins and agentctl outlive their supervisor by design; the test's
	// temporary root holds their data, workspaces and cwd.
	runtimetest.CleanupProcesses(t)
	c, err := harness.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Stop()
		if t.Failed() {
			for _, n := range c.Nodes {
				t.Logf("--- log of %s ---\n%s", n.Name, n.Log())
			}
		}
	})
	return c
}

// startNode runs one server process from a given config file; the test's
// cleanup kills it and every process it started (see startClusterWith).
func startNode(t *testing.T, name, dir, cfg, httpAddr string) *harness.Node {
	t.Helper()
	runtimetest.CleanupProcesses(t, dir)
	n := harness.NewNode(binDir, name, dir, cfg, httpAddr)
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		n.Kill()
		if t.Failed() {
			t.Logf("--- log of %s ---\n%s", n.Name, n.Log())
		}
	})
	return n
}

func leaderOf(t *testing.T, c *harness.Cluster) *harness.Node {
	t.Helper()
	l, err := c.Leader(20 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func apiClient(t *testing.T, n *harness.Node) *client.Client {
	t.Helper()
	c, err := client.New(n.URL(), "")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// repoFile is a path in the repository.
func repoFile(t *testing.T, rel string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", rel))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// testRoot is the directory under which all of t's TempDirs live.
func testRoot(t *testing.T) string {
	return filepath.Dir(t.TempDir())
}
