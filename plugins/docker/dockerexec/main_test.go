package dockerexec_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/moby/moby/client"

	"github.com/paddockhq/paddock/plugins/docker/dockerexec"
	"github.com/paddockhq/paddock/shared/runtime"
	"github.com/paddockhq/paddock/shared/runtime/runtimetest"
)

// RequireDockerEnv set to 1 turns a missing engine into a failure (CI).
const RequireDockerEnv = "PADDOCK_REQUIRE_DOCKER"

// Test images, built in TestMain FROM scratch (nothing is pulled).
const (
	testImage        = "paddock-executor:dockerexec-test" // agentctl + demo agent + busybox
	testBusyboxImage = "paddock-busybox:dockerexec-test"  // busybox only: agentctl is bind-mounted
)

var (
	dockerErr    error // why the engine is unusable; nil when it answers
	pluginPath   string
	agentctlPath string
	buildDir     string
)

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	flag.Parse()
	dir, err := os.MkdirTemp("", "dockerexec-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	buildDir = dir
	dockerErr = pingEngine()
	if dockerErr == nil && !testing.Short() {
		if err := buildFixtures(dir); err != nil {
			fmt.Fprintln(os.Stderr, "dockerexec tests:", err)
			return 1
		}
	}
	return m.Run()
}

func pingEngine() error {
	cli, err := client.New(client.WithHostFromEnv())
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true})
	return err
}

// buildFixtures builds agentctl, the demo agent and the plugin (or takes them
// from $PADDOCK_BIN) and the two test images.
func buildFixtures(dir string) error {
	var err error
	var fake bool
	if agentctlPath, fake, err = runtimetest.Agentctl(dir); err != nil {
		return err
	}
	if fake {
		return errors.New("cmd/agentctl is missing; the docker tests need the real agentctl")
	}
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return err
	}
	if err := copyFile(agentctlPath, filepath.Join(bin, "agentctl")); err != nil {
		return err
	}
	demo := ""
	if b := os.Getenv("PADDOCK_BIN"); b != "" && fileExists(filepath.Join(b, "paddock-demo-agent")) {
		demo = filepath.Join(b, "paddock-demo-agent")
	} else if demo, err = runtimetest.GoBuild(dir, "paddock-demo-agent", "github.com/paddockhq/paddock/cmd/paddock-demo-agent"); err != nil {
		return err
	}
	if err := copyFile(demo, filepath.Join(bin, "paddock-demo-agent")); err != nil {
		return err
	}
	if b := os.Getenv("PADDOCK_BIN"); b != "" && fileExists(filepath.Join(b, "plugins", "paddock-runtime-docker")) {
		pluginPath = filepath.Join(b, "plugins", "paddock-runtime-docker")
	} else if pluginPath, err = runtimetest.GoBuild(dir, "paddock-runtime-docker", "github.com/paddockhq/paddock/plugins/docker"); err != nil {
		return err
	}
	script, err := filepath.Abs("../../../deploy/image/build.sh")
	if err != nil {
		return err
	}
	if out, err := exec.Command(script, "-t", testImage, "-b", bin).CombinedOutput(); err != nil {
		return fmt.Errorf("build %s: %v: %s", testImage, err, out)
	}
	// An image with nothing but busybox: agentctl comes from the host.
	ctxDir := filepath.Join(dir, "busybox-image")
	if err := os.MkdirAll(filepath.Join(ctxDir, "bin"), 0o755); err != nil {
		return err
	}
	if err := copyFile("/bin/busybox", filepath.Join(ctxDir, "bin", "busybox")); err != nil {
		return fmt.Errorf("busybox-static is needed: %w", err)
	}
	for _, a := range []string{"sh", "cat", "hostname", "sleep", "ls", "echo"} {
		if err := os.Symlink("busybox", filepath.Join(ctxDir, "bin", a)); err != nil {
			return err
		}
	}
	df := "FROM scratch\nCOPY bin/ /bin/\nENV PATH=/bin\n"
	if err := os.WriteFile(filepath.Join(ctxDir, "Dockerfile"), []byte(df), 0o644); err != nil {
		return err
	}
	cmd := exec.Command("docker", "build", "-q", "-t", testBusyboxImage, ctxDir)
	cmd.Env = append(os.Environ(), "DOCKER_BUILDKIT=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s: %v: %s", testBusyboxImage, err, out)
	}
	return nil
}

// needDocker skips (or, with PADDOCK_REQUIRE_DOCKER=1, fails) without an engine.
func needDocker(tb testing.TB) {
	tb.Helper()
	if testing.Short() {
		tb.Skip("docker tests are not short")
	}
	if dockerErr != nil {
		if os.Getenv(RequireDockerEnv) == "1" {
			tb.Fatalf("%s=1 but the Docker engine does not answer: %v (run .ci/install-docker.sh)", RequireDockerEnv, dockerErr)
		}
		tb.Skipf("no Docker engine (%v); run .ci/install-docker.sh, set %s=1 to make this a failure", dockerErr, RequireDockerEnv)
	}
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o755)
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// newRuntime returns an in-process runtime configured with body (HCL).
func newRuntime(t testing.TB, body string) *dockerexec.Runtime {
	t.Helper()
	r := dockerexec.New(nil)
	t.Cleanup(func() { _ = r.Close() })
	diags, err := r.SetConfig(context.Background(), runtime.ConfigSource{Filename: "t.hcl", Source: []byte(body), Start: hcl.Pos{Line: 1, Column: 1}})
	if err != nil || diags.HasErrors() {
		t.Fatalf("SetConfig(%s): %v %s", body, err, diags.Error())
	}
	return r
}

// baseConfig is an HCL body for the test image under root.
func baseConfig(root string, extra ...string) string {
	return fmt.Sprintf("image = %q\nworkspace_root = %q\ncluster = \"dockerexec-test\"\nstart_timeout = \"30s\"\n%s\n", testImage, root, strings.Join(extra, "\n"))
}

func request(session string) runtime.LaunchRequest {
	return runtime.LaunchRequest{
		SessionID:      session,
		TaskID:         "task-1",
		ExecutorID:     "exec-" + session,
		Cluster:        "ignored-when-configured",
		AgentctlSecret: randHex(16),
		FencingToken:   1,
	}
}

func newSession(prefix string) string { return prefix + "-" + randHex(4) }

// engine is a raw client for checks behind the plugin's back.
func engine(t testing.TB) *client.Client {
	t.Helper()
	cli, err := client.New(client.WithHostFromEnv())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// sessionContainers lists every container (any state) labelled with session.
func sessionContainers(t testing.TB, session string) []string {
	t.Helper()
	res, err := engine(t).ContainerList(context.Background(), client.ContainerListOptions{All: true,
		Filters: client.Filters{}.Add("label", dockerexec.LabelSession+"="+session)})
	if err != nil {
		t.Fatalf("list containers: %v", err)
	}
	var ids []string
	for _, c := range res.Items {
		ids = append(ids, c.ID)
	}
	return ids
}

// cleanupSession force-removes whatever a test left for session.
func cleanupSession(t testing.TB, session string) {
	t.Cleanup(func() {
		for _, id := range sessionContainers(t, session) {
			_, _ = engine(t).ContainerRemove(context.Background(), id, client.ContainerRemoveOptions{Force: true})
		}
	})
}

func dockerCLI(t testing.TB, args ...string) string {
	t.Helper()
	out, err := exec.Command("docker", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("docker %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
