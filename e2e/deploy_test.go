package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	wire "github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/shared/testkit"
)

// requireTool returns the path of a command the test needs; without it the
// test is skipped, except under CI (.ci/run installs it), where it fails.
func requireTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not installed; .ci/run installs it", name)
		}
		t.Skipf("%s is not installed", name)
	}
	return p
}

// TestSystemdUnitVerifies checks deploy/systemd/paddock.service with
// systemd's own tools: `systemd-analyze verify` reports nothing (no unknown
// key, no bad value, the binary it starts exists and is executable), the
// hardening the unit promises is there, and `systemd-analyze security`
// rates its exposure at most 2.5 of 10.
func TestSystemdUnitVerifies(t *testing.T) {
	if testing.Short() {
		t.Skip("needs systemd-analyze and the built binary")
	}
	analyze := requireTool(t, "systemd-analyze")
	src, err := os.ReadFile(repoFile(t, "deploy/systemd/paddock.service"))
	if err != nil {
		t.Fatal(err)
	}
	unit := string(src)
	for _, want := range []string{"\nUser=paddock\n", "\nNoNewPrivileges=yes\n", "\nProtectSystem=strict\n", "\nRestart=on-failure\n",
		"\nStateDirectory=paddock\n", "\nKillMode=process\n", "\nExecStart=/usr/local/bin/paddock server -config /etc/paddock/paddock.hcl\n"} {
		if !strings.Contains(unit, want) {
			t.Errorf("paddock.service lacks %q", strings.TrimSpace(want))
		}
	}
	// Verify the unit as installed, with the binary where this build has it.
	dir := t.TempDir()
	path := filepath.Join(dir, "paddock.service")
	local := strings.ReplaceAll(unit, "/usr/local/bin/paddock ", filepath.Join(binDir, "paddock")+" ")
	if err := os.WriteFile(path, []byte(local), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", path).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	out, err = exec.Command(analyze, "security", "--offline=yes", "--threshold=25", path).CombinedOutput()
	if err != nil {
		t.Errorf("systemd-analyze security: exposure above 2.5 (%v):\n%s", err, out)
	}
	// The check can fail: a misspelt key is reported.
	bad := filepath.Join(dir, "bad.service")
	if err := os.WriteFile(bad, []byte(strings.Replace(local, "ProtectSystem=", "ProtectSystm=", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, _ := exec.Command(analyze, "verify", bad).CombinedOutput(); !strings.Contains(string(out), "ProtectSystm") {
		t.Errorf("systemd-analyze verify did not report a misspelt key: %s", out)
	}
}

// composeCommand returns the argv prefix of a Compose implementation:
// `docker compose` (v2) when the docker CLI has it, else Debian's
// docker-compose. Without one the test is skipped, except under CI.
func composeCommand(t *testing.T) []string {
	t.Helper()
	if exec.Command("docker", "compose", "version").Run() == nil {
		return []string{"docker", "compose"}
	}
	return []string{requireTool(t, "docker-compose")}
}

// composeAddrs are the HTTP addresses deploy/compose's nodes serve on.
var composeAddrs = []string{"127.0.0.11:7700", "127.0.0.12:7700", "127.0.0.13:7700"}

// TestComposeCluster brings up deploy/compose/docker-compose.yml as it is
// shipped — three supervisor containers of the image `make image` builds,
// the docker runtime on the host engine — and runs a session through it: a
// leader is elected with every node healthy, a session on the docker
// runtime starts in an executor container, and its agent answers a prompt.
func TestComposeCluster(t *testing.T) {
	needDocker(t)
	compose := composeCommand(t)
	for _, addr := range composeAddrs {
		for _, port := range []string{"7700", "7701"} {
			a := strings.Replace(addr, ":7700", ":"+port, 1)
			ln, err := net.Listen("tcp", a)
			if err != nil {
				t.Fatalf("%s is taken; the compose cluster needs it: %v", a, err)
			}
			ln.Close()
		}
	}
	// The images the compose file names, from this build.
	for _, script := range []string{"build.sh", "build-supervisor.sh"} {
		if out, err := exec.Command(repoFile(t, "deploy/image/"+script), "-b", binDir).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", script, err, out)
		}
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	project := "paddock-e2e-" + hex.EncodeToString(b)
	file := repoFile(t, "deploy/compose/docker-compose.yml")
	run := func(args ...string) (string, error) {
		argv := append(append(append([]string{}, compose...), "-f", file, "-p", project), args...)
		out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
		return string(out), err
	}
	var sessions []string
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := run("logs", "--no-color", "--tail", "60")
			t.Logf("compose logs:\n%s", out)
		}
		if out, err := run("down", "-v", "--remove-orphans"); err != nil {
			t.Logf("compose down: %v\n%s", err, out)
		}
		for _, s := range sessions {
			for _, id := range strings.Fields(docker(t, "ps", "-aq", "--filter", "label=paddock.session_id="+s)) {
				_ = exec.Command("docker", "rm", "-f", id).Run()
			}
		}
	})
	if out, err := run("up", "-d"); err != nil {
		t.Fatalf("compose up: %v\n%s", err, out)
	}

	api, err := client.New("http://"+composeAddrs[0], "paddock-compose-token")
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 90*time.Second, "a leader with every node healthy", testkit.Cond(func() bool {
		st, err := api.Status(testCtx(t))
		if err != nil || st.LeaderID == "" || len(st.Nodes) != 3 {
			return false
		}
		for _, n := range st.Nodes {
			if !n.Leader && (n.Healthy == nil || !*n.Healthy) {
				return false
			}
		}
		return true
	}))
	task, err := api.CreateTask(testCtx(t), wire.CreateTaskRequest{Title: "compose"})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := api.CreateSession(testCtx(t), task.ID, wire.CreateSessionRequest{Agent: "demo", Runtime: "docker"})
	if err != nil {
		t.Fatal(err)
	}
	sessions = append(sessions, sess.ID)
	waitState(t, api, sess.ID, wire.SessionWaitingForInput)
	if got := promptAndWait(t, api, sess.ID, "remember plums"); got != "ok, remembering plums" {
		t.Fatalf("reply %q", got)
	}
	ex := dockerExecutor(t, api, sess.ID)
	if ex.Runtime != "docker" || ex.ContainerID == "" {
		t.Fatalf("executor %+v", ex)
	}
	if img := docker(t, "inspect", "-f", "{{.Config.Image}}", ex.ContainerID); img != "paddock-executor:dev" {
		t.Errorf("executor container runs %s", img)
	}
	// Any node answers for the cluster.
	other, err := client.New("http://"+composeAddrs[2], "paddock-compose-token")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := other.GetSession(testCtx(t), sess.ID); err != nil || got.State != wire.SessionWaitingForInput {
		t.Errorf("session from n3: %+v %v", got, err)
	}
}
