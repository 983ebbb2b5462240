package localexec_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"golang.org/x/sys/unix"

	"github.com/paddockhq/paddock/plugins/standalone/localexec"
	"github.com/paddockhq/paddock/shared/agentctl"
	"github.com/paddockhq/paddock/shared/nice"
	"github.com/paddockhq/paddock/shared/runtime"
	"github.com/paddockhq/paddock/shared/runtime/agentctlproc"
	"github.com/paddockhq/paddock/shared/runtime/conformance"
	"github.com/paddockhq/paddock/shared/runtime/runtimetest"
	"github.com/paddockhq/paddock/shared/testkit"
)

var bins runtimetest.Binaries

func TestMain(m *testing.M) {
	os.Exit(runtimetest.Main(m, "paddock-runtime-standalone", "github.com/paddockhq/paddock/plugins/standalone", &bins))
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func TestConformance(t *testing.T) {
	conformance.Run(t, conformance.Config{
		PluginPath:   bins.Plugin,
		AgentctlPath: bins.Agentctl,
		PluginConfig: `agentctl_path = "{{agentctl_path}}"
workspace_root = "{{temp_dir}}"`,
	})
}

func TestConformanceGitWorktree(t *testing.T) {
	repo := newGitRepo(t)
	conformance.Run(t, conformance.Config{
		PluginPath:   bins.Plugin,
		AgentctlPath: bins.Agentctl,
		PluginConfig: `agentctl_path = "{{agentctl_path}}"
workspace_root = "{{temp_dir}}"
task_workspace_root = "` + filepath.Dir(repo) + `"`,
		Workspace: runtime.Workspace{Path: repo},
		TaskRoot:  filepath.Dir(repo),
	})
}

func newGitRepo(t *testing.T) string { return runtimetest.GitRepo(t, t.TempDir()) }

// load starts the plugin binary and configures it with root as
// workspace_root; task workspaces may be anywhere in the temporary directory
// (the repositories newGitRepo makes).
func load(t *testing.T, root string) *runtime.Client {
	return runtimetest.Load(t, bins.Plugin, fmt.Sprintf("agentctl_path = %q\nworkspace_root = %q\ntask_workspace_root = %q\n", bins.Agentctl, root, os.TempDir()))
}

func TestGitWorktreeOnSessionBranch(t *testing.T) {
	repo := newGitRepo(t)
	root := t.TempDir()
	c := load(t, root)
	ctx := context.Background()
	for _, tc := range []struct{ name, branch, want string }{
		{"default_branch", "", "paddock/s-default"},
		{"requested_branch", "feature/x", "feature/x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sid := "s-" + strings.Split(tc.name, "_")[0]
			resp, err := c.Launch(ctx, runtime.LaunchRequest{SessionID: sid, AgentctlSecret: "sec", Workspace: runtime.Workspace{Path: repo, Branch: tc.branch}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Destroy(ctx, resp.Handle) })
			if resp.WorktreeBranch != tc.want {
				t.Errorf("worktree_branch = %q, want %q", resp.WorktreeBranch, tc.want)
			}
			if !strings.HasPrefix(resp.WorktreePath, root+string(filepath.Separator)) {
				t.Errorf("worktree_path %q not under workspace_root %q", resp.WorktreePath, root)
			}
			if got := runtimetest.Git(t, resp.WorktreePath, "rev-parse", "--abbrev-ref", "HEAD"); got != tc.want {
				t.Errorf("worktree HEAD = %q, want %q", got, tc.want)
			}
			if !fileExists(filepath.Join(resp.WorktreePath, "README")) {
				t.Error("worktree has no README")
			}
			if st := runtimetest.Git(t, resp.WorktreePath, "status", "--porcelain"); st != "" {
				t.Errorf("worktree is dirty after launch (state must live outside it): %q", st)
			}
			if err := c.Destroy(ctx, resp.Handle); err != nil {
				t.Fatal(err)
			}
			if fileExists(resp.WorktreePath) {
				t.Error("worktree still exists after Destroy")
			}
			if runtimetest.Git(t, repo, "branch", "--list", tc.want) == "" {
				t.Errorf("branch %s was deleted by Destroy; it holds the session's work", tc.want)
			}
		})
	}
}

func TestRecoverRestartsDeadAgentctlAndKeepsWorkspace(t *testing.T) {
	root := t.TempDir()
	c := load(t, root)
	ctx := context.Background()
	resp, err := c.Launch(ctx, runtime.LaunchRequest{SessionID: "s1", AgentctlSecret: "sec"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Destroy(ctx, resp.Handle) })
	marker := filepath.Join(resp.WorkspacePath, "work.txt")
	if err := os.WriteFile(marker, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	// agentctl dies (kill -9 of its process group).
	if err := killGroup(resp.PID); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "agentctl to die", testkit.Cond(func() bool { return !agentctlproc.Alive(resp.PID) }))
	if ins, err := c.Inspect(ctx, resp.Handle); err != nil || ins.State != runtime.StateExited {
		t.Fatalf("Inspect after kill = %+v, %v; want exited", ins, err)
	}
	rec, err := c.Recover(ctx, resp.Handle, "sec")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Nonce == resp.Nonce || rec.PID == resp.PID {
		t.Errorf("Recover did not start a new agentctl: %+v", rec)
	}
	if h, err := agentctlproc.CheckHealth(ctx, rec.AgentctlURL, "sec"); err != nil || h.Nonce != rec.Nonce {
		t.Fatalf("health after restart: %+v %v", h, err)
	}
	if !fileExists(marker) {
		t.Error("workspace content lost across recover")
	}
	logData, err := os.ReadFile(filepath.Join(root, "s1", "state", "agentctl.log"))
	if err != nil {
		t.Fatalf("agentctl log file: %v", err)
	}
	if strings.Contains(string(logData), "sec\n") {
		t.Error("secret appears in the agentctl log")
	}
	// The workspace is removed: Recover reports not-found.
	if err := c.Stop(ctx, rec.Handle, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(rec.WorkspacePath); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Recover(ctx, rec.Handle, "sec"); !errors.Is(err, runtime.ErrNotFound) {
		t.Fatalf("Recover without workspace: %v, want ErrNotFound", err)
	}
	// Nor does a launch for the session that ran there start it afresh in an
	// empty workspace (the supervisor sets the option when resuming).
	_, err = c.Launch(ctx, runtime.LaunchRequest{SessionID: "s1", AgentctlSecret: "sec",
		Options: map[string]string{runtime.OptionExistingWorkspace: "true"}})
	if !errors.Is(err, runtime.ErrNotFound) || !strings.Contains(err.Error(), "workspace") {
		t.Fatalf("Launch of a session whose workspace is gone: %v, want ErrNotFound naming the workspace", err)
	}
	if fileExists(rec.WorkspacePath) {
		t.Fatal("the refused launch created an empty workspace")
	}
}

func TestHandleOutsideWorkspaceRootIsNotFound(t *testing.T) {
	root := t.TempDir()
	c := load(t, root)
	ctx := context.Background()
	victim := t.TempDir()
	forged := fmt.Sprintf(`{"v":1,"session_id":"s1","session_dir":%q,"workspace":%q,"owns_workspace":true,"state_dir":%q}`,
		victim, victim, filepath.Join(victim, "state"))
	if err := c.Destroy(ctx, []byte(forged)); !errors.Is(err, runtime.ErrNotFound) {
		t.Fatalf("Destroy(forged handle) = %v, want ErrNotFound", err)
	}
	if !fileExists(victim) {
		t.Fatal("Destroy removed a directory outside workspace_root")
	}
}

func TestInvalidWorkspaceRequests(t *testing.T) {
	root := t.TempDir()
	c := load(t, root)
	for name, ws := range map[string]runtime.Workspace{
		"missing_path":      {Path: filepath.Join(root, "does-not-exist")},
		"relative_escape":   {Path: "../../etc"},
		"option_as_branch":  {Path: newGitRepo(t), Branch: "-D"},
		"invalid_ref_chars": {Path: newGitRepo(t), Branch: "a..b"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := c.Launch(context.Background(), runtime.LaunchRequest{SessionID: "bad-" + strings.ReplaceAll(name, "_", "-"), AgentctlSecret: "s", Workspace: ws})
			if !errors.Is(err, runtime.ErrInvalidRequest) {
				t.Fatalf("Launch = %v, want ErrInvalidRequest", err)
			}
		})
	}
}

// TestCheckTaskWorkspace: the host asks, over gRPC, whether a task's
// workspace lies in task_workspace_root before any launch; a path not made
// yet inside it is fine.
func TestCheckTaskWorkspace(t *testing.T) {
	root := t.TempDir()
	c := runtimetest.Load(t, bins.Plugin, fmt.Sprintf("agentctl_path = %q\nworkspace_root = %q\ntask_workspace_root = %q\n", bins.Agentctl, t.TempDir(), root))
	wc, ok := c.Runtime.(runtime.WorkspaceChecker)
	if !ok {
		t.Fatalf("the host's runtime %T has no CheckTaskWorkspace", c.Runtime)
	}
	ctx := context.Background()
	for _, p := range []string{root, filepath.Join(root, "proj"), filepath.Join(root, "not", "made", "yet")} {
		if err := wc.CheckTaskWorkspace(ctx, p); err != nil {
			t.Errorf("CheckTaskWorkspace(%s) = %v; want nil", p, err)
		}
	}
	outside := t.TempDir()
	if err := wc.CheckTaskWorkspace(ctx, outside); !errors.Is(err, runtime.ErrInvalidRequest) || !strings.Contains(err.Error(), "task_workspace_root "+root) {
		t.Fatalf("CheckTaskWorkspace(%s) = %v; want ErrInvalidRequest naming task_workspace_root %s", outside, err, root)
	}
}

func TestConfigDiagnostics(t *testing.T) {
	c, err := runtime.NewClient(context.Background(), runtime.ClientConfig{Path: bins.Plugin})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Kill)
	for _, tc := range []struct {
		name, src, summary string
		line               int
	}{
		{"bad_timeout", "\nstart_timeout = \"soon\"\n", "Invalid start_timeout", 11},
		{"not_a_string", "workspace_root = 42\n", "Invalid workspace_root", 10},
		{"missing_agentctl", "agentctl_path = \"/nonexistent/agentctl\"\n", "Invalid agentctl_path", 10},
		{"unknown", "nope = 1\n", "Unsupported argument", 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			diags, err := c.SetConfig(context.Background(), runtime.ConfigSource{Filename: "paddock.hcl", Source: []byte(tc.src), Start: hcl.Pos{Line: 10, Column: 5, Byte: 100}})
			if err != nil {
				t.Fatal(err)
			}
			if !diags.HasErrors() || diags[0].Summary != tc.summary {
				t.Fatalf("diags = %v, want %q", diags, tc.summary)
			}
			if s := diags[0].Subject; s == nil || s.Filename != "paddock.hcl" || s.Start.Line != tc.line {
				t.Fatalf("subject = %v, want paddock.hcl line %d", s, tc.line)
			}
		})
	}
}

func killGroup(pid int) error {
	p, err := os.FindProcess(-pid)
	if err != nil {
		return err
	}
	_ = p
	return exec.Command("kill", "-9", fmt.Sprint(pid)).Run()
}

// FuzzParseConfig: any config body yields a config or diagnostics, never a
// panic, and error diagnostics carry a range in the given file.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte("workspace_root = \"/tmp/x\"\nstart_timeout = \"3s\"\n"))
	f.Add([]byte("listen = 5\n"))
	f.Add([]byte("a = = {"))
	f.Fuzz(func(t *testing.T, src []byte) {
		_, diags := localexec.ParseConfig(runtime.ConfigSource{Filename: "f.hcl", Source: src, Start: hcl.Pos{Line: 1, Column: 1}})
		for _, d := range diags {
			if d.Severity == hcl.DiagError && d.Subject != nil && d.Subject.Filename != "f.hcl" {
				t.Fatalf("diagnostic range in %q", d.Subject.Filename)
			}
		}
	})
}

// The request's terminal settings become agentctl's flags, and a restart by
// Recover passes the same ones (they live in the handle).
func TestTerminalSettingsReachAgentctlAndSurviveRecover(t *testing.T) {
	root := t.TempDir()
	c := load(t, root)
	ctx := context.Background()
	term := runtime.Terminal{Shell: []string{"/bin/sh", "-c", "echo from config; exec /bin/sh"}, ReplayBytes: 65536, IdleTimeout: 90 * time.Second}
	resp, err := c.Launch(ctx, runtime.LaunchRequest{SessionID: "s1", AgentctlSecret: "sec", Terminal: term})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Destroy(ctx, resp.Handle) })
	want := []string{"-shell", `["/bin/sh","-c","echo from config; exec /bin/sh"]`, "-replay-bytes", "65536", "-idle-timeout", "1m30s"}
	assertArgs(t, resp.PID, want)

	if err := killGroup(resp.PID); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "agentctl to die", testkit.Cond(func() bool { return !agentctlproc.Alive(resp.PID) }))
	rec, err := c.Recover(ctx, resp.Handle, "sec")
	if err != nil {
		t.Fatal(err)
	}
	if rec.PID == resp.PID {
		t.Fatalf("Recover did not restart agentctl: %+v", rec)
	}
	assertArgs(t, rec.PID, want)

	// Without settings agentctl gets none of the flags (its defaults apply).
	plain, err := c.Launch(ctx, runtime.LaunchRequest{SessionID: "s2", AgentctlSecret: "sec"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Destroy(ctx, plain.Handle) })
	for _, a := range cmdline(t, plain.PID) {
		if a == "-shell" || a == "-replay-bytes" || a == "-idle-timeout" {
			t.Fatalf("agentctl without terminal settings got %s: %q", a, cmdline(t, plain.PID))
		}
	}

	if _, err := c.Launch(ctx, runtime.LaunchRequest{SessionID: "s3", AgentctlSecret: "sec", Terminal: runtime.Terminal{Shell: []string{""}}}); !errors.Is(err, runtime.ErrInvalidRequest) {
		t.Fatalf("Launch with an empty shell program = %v, want ErrInvalidRequest", err)
	}
}

// A handle whose stored terminal settings are malformed is not a usable handle.
func TestHandleWithInvalidTerminalIsNotFound(t *testing.T) {
	root := t.TempDir()
	c := load(t, root)
	dir := filepath.Join(root, "s1")
	for _, term := range []string{`{"shell":[""]}`, `{"replay_bytes":-1}`, `{"idle_timeout_ms":-1}`, `{"idle_timeout_ms":9223372036854775807}`} {
		forged := fmt.Sprintf(`{"v":1,"session_id":"s1","session_dir":%q,"workspace":%q,"owns_workspace":true,"state_dir":%q,"terminal":%s}`,
			dir, filepath.Join(dir, "workspace"), filepath.Join(dir, "state"), term)
		if _, err := c.Inspect(context.Background(), []byte(forged)); !errors.Is(err, runtime.ErrNotFound) {
			t.Errorf("Inspect(handle with terminal %s) = %v, want ErrNotFound", term, err)
		}
	}
}

// cmdline is pid's argv from /proc.
func cmdline(t *testing.T, pid int) []string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		t.Fatalf("agentctl %d command line: %v", pid, err)
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

// assertArgs fails unless pid's argv holds want as one contiguous run.
func assertArgs(t *testing.T, pid int, want []string) {
	t.Helper()
	got := cmdline(t, pid)
	if !strings.Contains("\x00"+strings.Join(got, "\x00")+"\x00", "\x00"+strings.Join(want, "\x00")+"\x00") {
		t.Fatalf("agentctl argv %q lacks %q", got, want)
	}
}

// TestWorkspaceIsPrivateToItsOwner: workspace_root, the session directory and
// the workspace the runtime creates are 0700, so other local users cannot
// read a session's files.
func TestWorkspaceIsPrivateToItsOwner(t *testing.T) {
	root := filepath.Join(t.TempDir(), "workspaces") // created by the runtime
	c := load(t, root)
	ctx := context.Background()
	resp, err := c.Launch(ctx, runtime.LaunchRequest{SessionID: "s1", AgentctlSecret: "sec"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Destroy(ctx, resp.Handle) })
	for _, dir := range []string{root, filepath.Join(root, "s1"), resp.WorkspacePath, filepath.Join(root, "s1", "state")} {
		st, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Mode().Perm(); got != 0o700 {
			t.Errorf("%s has mode %v, want 0700", dir, got)
		}
	}
}

// TestRunAsUserIsolatesTheAgentFromAgentctl: with run_as_user the pty agent
// runs as that user (here nobody, 65534, which Debian has) in a workspace
// given to it, while agentctl stays root: the agent can read neither
// agentctl's info file nor its state dir nor its memory's environment, and
// the secret file agentctl was started with is gone.
func TestRunAsUserIsolatesTheAgentFromAgentctl(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("run_as_user needs root (CI runs as root)")
	}
	nobody, err := agentctlproc.LookupUser("nobody")
	if err != nil {
		t.Skipf("no user nobody: %v", err)
	}
	base := t.TempDir()
	// The agent must reach its workspace: the test's temporary directories
	// are 0700, workspace_root's parents on a real host are not.
	for d := base; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	root := filepath.Join(base, "workspaces")
	c := runtimetest.Load(t, bins.Plugin, fmt.Sprintf("agentctl_path = %q\nworkspace_root = %q\nrun_as_user = \"nobody\"\n", bins.Agentctl, root))
	ctx := context.Background()
	resp, err := c.Launch(ctx, runtime.LaunchRequest{SessionID: "iso", AgentctlSecret: "sec-iso"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Destroy(ctx, resp.Handle) })
	assertArgs(t, resp.PID, []string{"-agent-user", nobody.Arg()})
	if st, err := os.Stat(resp.WorkspacePath); err != nil || st.Sys().(*syscall.Stat_t).Uid != uint32(nobody.UID) {
		t.Fatalf("workspace %s is not nobody's: %v", resp.WorkspacePath, err)
	}
	if st, err := os.Stat(filepath.Join(root, "iso", "state")); err != nil || st.Mode().Perm() != 0o700 || st.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Fatalf("state dir is not root's 0700: %v %v", st.Mode(), err)
	}
	stateDir := filepath.Join(root, "iso", "state")
	script := fmt.Sprintf(`id -u > uid; id -g > gid
cat %[1]s/agentctl.json > info 2> info.err; echo $? > info.rc
ls %[1]s > ls 2> ls.err; echo $? > ls.rc
cat /proc/%[2]d/environ > environ 2> environ.err; echo $? > environ.rc
printf 'demo> '; exec sleep 600`, stateDir, resp.PID)
	cl := agentctl.NewClient(resp.AgentctlURL, "sec-iso", 10*time.Second)
	if _, err := cl.StartAgent(ctx, agentctl.Profile{Protocol: agentctl.ProtocolPTY, Command: []string{"/bin/sh", "-c", script}}, ""); err != nil {
		t.Fatal(err)
	}
	read := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(resp.WorkspacePath, name))
		return strings.TrimSpace(string(b))
	}
	testkit.WaitFor(t, 10*time.Second, "the agent's probes", testkit.Cond(func() bool { return read("environ.rc") != "" }))
	if got := read("uid"); got != strconv.Itoa(nobody.UID) {
		t.Fatalf("agent runs as uid %q, want %d", got, nobody.UID)
	}
	if got := read("gid"); got != strconv.Itoa(nobody.GID) {
		t.Fatalf("agent runs as gid %q, want %d", got, nobody.GID)
	}
	for _, probe := range []string{"info", "ls", "environ"} {
		if read(probe+".rc") == "0" || read(probe) != "" || !strings.Contains(read(probe+".err"), "Permission denied") {
			t.Fatalf("agent's %s probe: rc %s, read %q, stderr %q; want permission denied", probe, read(probe+".rc"), read(probe), read(probe+".err"))
		}
	}
	entries, err := os.ReadDir(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".agentctl-secret-") {
			t.Fatalf("secret file %s is still in the state dir", e.Name())
		}
	}
	// agentctl itself still writes the workspace (the file goes to the
	// agent's user, so the agent can change it).
	if err := cl.WriteFile(ctx, "from-api.txt", []byte("hi")); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(resp.WorkspacePath, "from-api.txt")); err != nil || st.Sys().(*syscall.Stat_t).Uid != uint32(nobody.UID) {
		t.Fatalf("a file written through agentctl is not the agent's: %v", err)
	}
}

// By default a session's agent runs below the server's CPU priority:
// agentctl is started with -nice 19, and its agent runs at nice 19 in a
// scheduling group (Linux autogroup) of its own at nice 19, while agentctl
// keeps the plugin's priority and a group at nice 0. nice = 0 leaves every
// priority alone.
func TestSessionsRunBelowTheServersPriority(t *testing.T) {
	own, err := nice.Of(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if own >= localexec.DefaultNice {
		t.Skipf("the test already runs at nice %d", own)
	}
	ctx := context.Background()
	agentNice := func(t *testing.T, c *runtime.Client, id string) (resp runtime.LaunchResponse, agent int) {
		t.Helper()
		resp, err := c.Launch(ctx, runtime.LaunchRequest{SessionID: id, AgentctlSecret: "sec-" + id})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Destroy(ctx, resp.Handle) })
		cl := agentctl.NewClient(resp.AgentctlURL, "sec-"+id, 10*time.Second)
		st, err := cl.StartAgent(ctx, agentctl.Profile{Protocol: agentctl.ProtocolPTY, Command: []string{"/bin/sh", "-c", "printf 'demo> '; exec sleep 600"}}, "")
		if err != nil {
			t.Fatal(err)
		}
		n, err := nice.Of(st.PID)
		if err != nil {
			t.Fatal(err)
		}
		if g, ok, _ := nice.GroupOf(st.PID); ok {
			testkit.WaitFor(t, 5*time.Second, "the agent's scheduling group at its nice value", testkit.Cond(func() bool {
				g, _, _ = nice.GroupOf(st.PID)
				return g == n
			}))
		}
		return resp, n
	}

	c := load(t, t.TempDir())
	resp, got := agentNice(t, c, "low")
	assertArgs(t, resp.PID, []string{"-nice", strconv.Itoa(localexec.DefaultNice)})
	if got != localexec.DefaultNice {
		t.Fatalf("agent runs at nice %d, want %d", got, localexec.DefaultNice)
	}
	if n, _ := nice.Of(resp.PID); n != own {
		t.Fatalf("agentctl runs at nice %d, want the plugin's %d", n, own)
	}
	if n, ok, err := nice.GroupOf(resp.PID); err != nil || (ok && n != 0) {
		t.Fatalf("agentctl's scheduling group is at nice %d (%v), want 0", n, err)
	}

	same := runtimetest.Load(t, bins.Plugin, fmt.Sprintf("agentctl_path = %q\nworkspace_root = %q\nnice = 0\n", bins.Agentctl, t.TempDir()))
	resp, got = agentNice(t, same, "same")
	if slices.Contains(cmdline(t, resp.PID), "-nice") {
		t.Fatalf("nice = 0: agentctl argv %q has -nice", cmdline(t, resp.PID))
	}
	if got != own {
		t.Fatalf("nice = 0: agent runs at nice %d, want %d", got, own)
	}

}

// The agentctls one plugin starts share one scheduling group: the
// plugin leads a session of its own and each agentctl stays in it, in a
// process group of its own. Where Linux groups by session (autogroup), the
// node's relays then weigh as one against the server: with a session each,
// 200 streaming relays starved the servers until raft leaders stepped
// down. Each agentctl still dies alone when its process group is killed
// (that it outlives the plugin, the conformance suite checks).
func TestAgentctlsShareOneSchedulingGroup(t *testing.T) {
	ctx := context.Background()
	c := load(t, t.TempDir())
	var pids []int
	for _, id := range []string{"g1", "g2"} {
		resp, err := c.Launch(ctx, runtime.LaunchRequest{SessionID: id, AgentctlSecret: "sec-" + id})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Destroy(ctx, resp.Handle) })
		pids = append(pids, resp.PID)
	}
	sid := func(pid int) int {
		t.Helper()
		s, err := unix.Getsid(pid)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	plugin := sid(pids[0])
	if plugin == sid(os.Getpid()) {
		t.Fatalf("agentctl %d is in the test's (the server's) session %d, want the plugin's own", pids[0], plugin)
	}
	if plugin == pids[0] || sid(pids[1]) != plugin {
		t.Fatalf("agentctls %v are in sessions %d and %d, want both in the plugin's", pids, plugin, sid(pids[1]))
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", plugin)); err != nil || !strings.Contains(string(b), "paddock-runtime-standalone") {
		t.Fatalf("session %d is led by %q (%v), want the plugin", plugin, b, err)
	}
	for _, pid := range pids {
		if pg, err := syscall.Getpgid(pid); err != nil || pg != pid {
			t.Fatalf("agentctl %d is in process group %d (%v), want one of its own", pid, pg, err)
		}
	}
	if g0, err0 := os.ReadFile(fmt.Sprintf("/proc/%d/autogroup", pids[0])); err0 == nil {
		g1, _ := os.ReadFile(fmt.Sprintf("/proc/%d/autogroup", pids[1]))
		own, _ := os.ReadFile("/proc/self/autogroup")
		if string(g0) != string(g1) || string(g0) == string(own) {
			t.Fatalf("scheduling groups: agentctls %q and %q, the test %q; want the agentctls' shared and apart", g0, g1, own)
		}
	}
	// One agentctl's process group killed: the other runs on.
	if err := syscall.Kill(-pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "the killed agentctl to be gone", testkit.Cond(func() bool {
		return syscall.Kill(pids[0], 0) != nil || isZombie(pids[0])
	}))
	if err := syscall.Kill(pids[1], 0); err != nil || isZombie(pids[1]) {
		t.Fatalf("the other agentctl %d went with the first's process group: %v", pids[1], err)
	}
}

// isZombie reports whether pid has exited and waits to be reaped.
func isZombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] == "Z"
}

// nice must be a whole number from 0 to 19.
func TestNiceDiagnostics(t *testing.T) {
	for _, body := range []string{`nice = -1`, `nice = 20`, `nice = 2.5`, `nice = "low"`} {
		_, diags := localexec.ParseConfig(runtime.ConfigSource{Filename: "c.hcl", Source: []byte(body)})
		if !diags.HasErrors() || !strings.Contains(diags.Error(), "nice") || !strings.Contains(diags.Error(), "c.hcl:1") {
			t.Errorf("%s: diagnostics %v, want an error naming nice at c.hcl:1", body, diags)
		}
	}
}

// run_as_user must name an existing user other than root.
func TestRunAsUserDiagnostics(t *testing.T) {
	for body, want := range map[string]string{
		`run_as_user = "no-such-user-here"`: "no-such-user-here",
		`run_as_user = "root"`:              "root",
		`run_as_user = "0"`:                 "root",
	} {
		_, diags := localexec.ParseConfig(runtime.ConfigSource{Filename: "c.hcl", Source: []byte(body)})
		if !diags.HasErrors() || !strings.Contains(diags.Error(), want) {
			t.Errorf("%s: diagnostics %v, want an error naming %q", body, diags, want)
		}
	}
}

// The conformance kit over TLS: with agentctl_tls agentctl serves HTTPS and
// every health check of the kit pins the fingerprint Launch and Recover
// report.
func TestConformanceAgentctlTLS(t *testing.T) {
	conformance.Run(t, conformance.Config{
		PluginPath:   bins.Plugin,
		AgentctlPath: bins.Agentctl,
		PluginConfig: `agentctl_path = "{{agentctl_path}}"
workspace_root = "{{temp_dir}}"
agentctl_tls = true`,
	})
}
