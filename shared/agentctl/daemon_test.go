package agentctl_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddockhq/paddock/shared/agentctl"
	"github.com/paddockhq/paddock/shared/nice"
	"github.com/paddockhq/paddock/shared/testkit"
)

func TestFencingRejectsLowerTokenAcrossRestart(t *testing.T) {
	ws := t.TempDir()
	p := startServe(t, ws)
	p.c.SetFencingToken(5)
	if got, err := p.c.Fence(ctx(t)); err != nil || got != 5 {
		t.Fatalf("fence 5: %d %v", got, err)
	}
	old := agentctl.NewClient(p.info.URL, testSecret, 5*time.Second)
	old.SetFencingToken(3)
	check := func(c *agentctl.Client) {
		t.Helper()
		for name, call := range map[string]func() error{
			"fence":  func() error { _, err := c.Fence(ctx(t)); return err },
			"write":  func() error { return c.WriteFile(ctx(t), "x.txt", []byte("x")) },
			"start":  func() error { _, err := c.StartAgent(ctx(t), acpProfile, ""); return err },
			"prompt": func() error { _, err := c.Prompt(ctx(t), "hi"); return err },
		} {
			ae := apiErr(t, call())
			if ae.Status != 409 || ae.Code != "conflict" || ae.Message != "fencing token 3 is lower than 5 already seen" {
				t.Fatalf("%s with a stale token: %+v", name, ae)
			}
		}
	}
	check(old)
	if _, err := os.Stat(filepath.Join(ws, "x.txt")); !os.IsNotExist(err) {
		t.Fatal("a fenced-off write reached the workspace")
	}
	p.kill()
	p2 := startServe(t, ws)
	old2 := agentctl.NewClient(p2.info.URL, testSecret, 5*time.Second)
	old2.SetFencingToken(3)
	check(old2)
	// The current holder (equal token) and a newer one are admitted.
	p2.c.SetFencingToken(5)
	if err := p2.c.WriteFile(ctx(t), "x.txt", []byte("x")); err != nil {
		t.Fatal(err)
	}
	p2.c.SetFencingToken(6)
	if got, err := p2.c.Fence(ctx(t)); err != nil || got != 6 {
		t.Fatalf("fence 6: %d %v", got, err)
	}
	// A request without the header is refused.
	req, _ := http.NewRequest("POST", p2.info.URL+"/v1/agent/cancel", nil)
	req.Header.Set("Authorization", "Bearer "+testSecret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Fatalf("missing fencing header: %d", resp.StatusCode)
	}
}

func TestWorkspaceAccessWithoutAgent(t *testing.T) {
	ws := t.TempDir()
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("outside"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(ws, "out")); err != nil {
		t.Fatal(err)
	}
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", ws, "-c", "user.email=t@t", "-c", "user.name=t"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q", "-b", "main")
	p := startServe(t, ws)
	c := p.c
	c.SetFencingToken(1)

	st, err := c.GitStatus(ctx(t))
	if err != nil || !st.IsRepo {
		t.Fatalf("git status: %+v %v", st, err)
	}
	if err := c.WriteFile(ctx(t), "src/hello.txt", []byte("hello\n")); err != nil {
		t.Fatalf("write: %v", err)
	}
	b, err := c.ReadFile(ctx(t), "src/hello.txt")
	if err != nil || string(b) != "hello\n" {
		t.Fatalf("read: %q %v", b, err)
	}
	entries, err := c.ListFiles(ctx(t), "src")
	if err != nil || len(entries) != 1 || entries[0].Name != "hello.txt" || entries[0].Type != "file" {
		t.Fatalf("list: %+v %v", entries, err)
	}
	root, err := c.ListFiles(ctx(t), "")
	if err != nil || len(root) < 2 {
		t.Fatalf("list root: %+v %v", root, err)
	}
	st, _ = c.GitStatus(ctx(t))
	found := false
	for _, e := range st.Entries {
		if e.Path == "src/hello.txt" && e.Status == "??" {
			found = true
		}
	}
	if !found || st.Branch != "main" {
		t.Fatalf("git status after write: %+v", st)
	}
	git("add", "src/hello.txt")
	git("commit", "-q", "-m", "init")
	if err := c.WriteFile(ctx(t), "src/hello.txt", []byte("hello world\n")); err != nil {
		t.Fatal(err)
	}
	diff, err := c.GitDiff(ctx(t), false)
	if err != nil || !strings.Contains(diff, "+hello world") || !strings.Contains(diff, "-hello") {
		t.Fatalf("diff: %q %v", diff, err)
	}

	escapes := []struct {
		name string
		path string
		want int
	}{
		{"dotdot", "../x", 400},
		{"dotdot nested", "src/../../x", 400},
		{"absolute", "/etc/passwd", 400},
		{"symlink out", "out/secret.txt", 400},
		{"symlink dir", "out", 400},
	}
	for _, tc := range escapes {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := c.ReadFile(ctx(t), tc.path); apiErr(t, err).Status != tc.want {
				t.Fatalf("read %s: %v", tc.path, err)
			}
			if err := c.WriteFile(ctx(t), tc.path, []byte("pwned")); apiErr(t, err).Status != tc.want {
				t.Fatalf("write %s: %v", tc.path, err)
			}
			if tc.path != "out" {
				if _, err := c.ListFiles(ctx(t), tc.path); apiErr(t, err).Status != tc.want {
					t.Fatalf("list %s: %v", tc.path, err)
				}
			}
		})
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "secret.txt")); string(b) != "outside" {
		t.Fatal("a write escaped the workspace")
	}
	if err := c.WriteFile(ctx(t), ".paddock/fencing.json", []byte(`{"highest":0}`)); apiErr(t, err).Status != 403 {
		t.Fatalf("write into the state dir: %v", err)
	}
	if err := c.WriteFile(ctx(t), ".git/config", []byte("[core]\n\tfsmonitor = /bin/false\n")); apiErr(t, err).Status != 403 {
		t.Fatalf("write into .git: %v", err)
	}
	if _, err := c.ReadFile(ctx(t), "nope.txt"); apiErr(t, err).Status != 404 {
		t.Fatalf("read missing: %v", err)
	}
	// A workspace that is not a git repository.
	p2 := startServe(t, t.TempDir())
	st2, err := p2.c.GitStatus(ctx(t))
	if err != nil || st2.IsRepo {
		t.Fatalf("non-git status: %+v %v", st2, err)
	}
	if _, err := p2.c.GitDiff(ctx(t), false); apiErr(t, err).Status != 409 {
		t.Fatalf("non-git diff: %v", err)
	}
}

// errorAnswer sends req as it is and returns the status and error body of
// agentctl's answer.
func errorAnswer(t *testing.T, req *http.Request) (int, agentctl.ErrorBody) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var eb agentctl.ErrorBody
	_ = json.NewDecoder(resp.Body).Decode(&eb)
	return resp.StatusCode, eb
}

func TestBadInput(t *testing.T) {
	p := startServe(t, t.TempDir(), "PADDOCK_AGENTCTL_INIT_TIMEOUT=1500ms")
	c := p.c
	c.SetFencingToken(1)

	t.Run("secret", func(t *testing.T) {
		for _, auth := range []string{"", "Bearer wrong", "Basic " + testSecret, testSecret} {
			req, _ := http.NewRequest("GET", p.info.URL+"/v1/health", nil)
			if auth != "" {
				req.Header.Set("Authorization", auth)
			}
			status, eb := errorAnswer(t, req)
			if status != 401 || eb.Error.Code != "unauthorized" {
				t.Fatalf("auth %q: %d %+v", auth, status, eb)
			}
		}
	})
	t.Run("resume tokens", func(t *testing.T) {
		for _, tok := range []string{"--help", "-x", "a b", "a;rm -rf", strings.Repeat("a", 129), "../x", "tok\n"} {
			_, err := c.StartAgent(ctx(t), ptyProfile, tok)
			if ae := apiErr(t, err); ae.Status != 400 || !strings.Contains(ae.Message, "resume_token") {
				t.Fatalf("token %q: %+v", tok, ae)
			}
		}
	})
	t.Run("malformed json", func(t *testing.T) {
		for _, body := range []string{"{", "[]", `{"profile":{"protocol":"acp","command":["x"]},"bogus":1}`, `{"profile":1}`, "{} {}", ""} {
			req, _ := http.NewRequest("POST", p.info.URL+"/v1/agent/start", bytes.NewBufferString(body))
			req.Header.Set("Authorization", "Bearer "+testSecret)
			req.Header.Set(agentctl.FencingHeader, "1")
			status, eb := errorAnswer(t, req)
			if status != 400 || eb.Error.Code != "bad_request" || eb.Error.Message == "" {
				t.Fatalf("body %q: %d %+v", body, status, eb)
			}
		}
	})
	t.Run("event queries", func(t *testing.T) {
		for _, query := range []string{"since=-1", "since=x", "wait=soon", "wait=-1s", "compact=maybe", "gather=soon", "gather=-1s", "permissions=maybe"} {
			req, _ := http.NewRequest("GET", p.info.URL+"/v1/events?"+query, nil)
			req.Header.Set("Authorization", "Bearer "+testSecret)
			status, eb := errorAnswer(t, req)
			name, _, _ := strings.Cut(query, "=")
			if status != 400 || eb.Error.Code != "bad_request" || !strings.Contains(eb.Error.Message, name+"=") {
				t.Fatalf("%s: %d %+v, want 400 naming %s", query, status, eb, name)
			}
		}
	})
	t.Run("bad profiles", func(t *testing.T) {
		for _, pr := range []agentctl.Profile{{Protocol: "ssh", Command: []string{"x"}}, {Protocol: "acp"}, {Protocol: "acp", Command: []string{"x"}, Permission: "maybe"}} {
			if _, err := c.StartAgent(ctx(t), pr, ""); apiErr(t, err).Status != 400 {
				t.Fatalf("profile %+v: %v", pr, err)
			}
		}
	})
	agents := []struct {
		name    string
		profile agentctl.Profile
		want    string
	}{
		{"missing binary", agentctl.Profile{Protocol: "acp", Command: []string{"no-such-agent-xyz"}}, "not found on PATH"},
		{"exits at once", agentctl.Profile{Protocol: "acp", Command: []string{"sh", "-c", "echo boom >&2; exit 3"}}, "exited with code 3"},
		{"writes garbage", agentctl.Profile{Protocol: "acp", Command: []string{"sh", "-c", "echo 'Welcome to my agent!'; sleep 30"}}, "not JSON-RPC"},
		{"never answers", agentctl.Profile{Protocol: "acp", Command: []string{"sleep", "30"}}, "did not answer initialize"},
		{"pty exits at once", agentctl.Profile{Protocol: "pty", Command: []string{"sh", "-c", "echo bye; exit 4"}}, "exited with code 4"},
	}
	w := newWatcher(c)
	for _, tc := range agents {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			_, err := c.StartAgent(ctx(t), tc.profile, "")
			ae := apiErr(t, err)
			if !strings.Contains(ae.Message, tc.want) {
				t.Fatalf("start: %+v, want message containing %q", ae, tc.want)
			}
			if time.Since(start) > 8*time.Second {
				t.Fatalf("start took %s", time.Since(start))
			}
			ev := w.waitEvent(t, agentctl.EventAgentError, nil, 5*time.Second)
			if !strings.Contains(string(ev.Data), tc.want) {
				t.Fatalf("agent_error %s", ev.Data)
			}
			healthy(t, c)
			st, _ := c.AgentState(ctx(t))
			if st.Status != agentctl.StatusError || !strings.Contains(st.Error, tc.want) {
				t.Fatalf("state: %+v", st)
			}
		})
	}
	// After all of that, a real agent still starts.
	if _, err := c.StartAgent(ctx(t), acpProfile, ""); err != nil {
		t.Fatalf("start after errors: %v", err)
	}
	if _, err := c.StartAgent(ctx(t), acpProfile, ""); apiErr(t, err).Status != 409 {
		t.Fatalf("second start: %v", err)
	}
}

func TestServeRequiresSecret(t *testing.T) {
	cmd := exec.Command(filepath.Join(binDir, "agentctl"), "serve", "-session", "s1", "-workspace", t.TempDir())
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PADDOCK_AGENTCTL_SECRET=") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "secret") {
		t.Fatalf("want exit 1 with a secret message, got %v: %s", err, out)
	}
}

// hostProc runs agentctl host.
func startHost(t *testing.T, root string, args ...string) (*exec.Cmd, *agentctl.HostClient) {
	t.Helper()
	secretFile := filepath.Join(t.TempDir(), "host.secret")
	if err := os.WriteFile(secretFile, []byte("host-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(binDir, "agentctl"), append([]string{"host", "-listen", "127.0.0.1:0", "-root", root, "-secret-file", secretFile,
		"-log-file", filepath.Join(root, "host.log")}, args...)...)
	cmd.Env = append(os.Environ(), "PATH="+binDir+":"+os.Getenv("PATH"))
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sc := bufio.NewScanner(out)
	if !sc.Scan() {
		t.Fatal("host printed nothing")
	}
	var info struct {
		URL string `json:"url"`
	}
	if err := json.Unmarshal(sc.Bytes(), &info); err != nil {
		t.Fatal(err)
	}
	return cmd, agentctl.NewHostClient(info.URL, "host-secret", 30*time.Second)
}

// agentctl host -nice N starts its instances with serve -nice N (their
// agents run at N); the instances themselves keep their priority.
func TestHostStartsInstancesAtItsNiceValue(t *testing.T) {
	_, hc := startHost(t, t.TempDir(), "-nice", "6")
	in, err := hc.CreateInstance(ctx(t), "sess-nice")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(in.PID, syscall.SIGKILL) })
	argv, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", in.PID))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(argv), "\x00-nice\x006\x00") {
		t.Fatalf("instance argv %q lacks -nice 6", argv)
	}
	if n, err := nice.Of(in.PID); err != nil || n == 6 {
		t.Fatalf("the instance itself runs at nice %d (%v)", n, err)
	}
	if n, ok, err := nice.GroupOf(in.PID); err != nil || (ok && n != 0) {
		t.Fatalf("the instance's scheduling group is at nice %d (%v), want 0", n, err)
	}
}

func TestHostInstancesSurviveHostRestart(t *testing.T) {
	root := t.TempDir()
	cmd, hc := startHost(t, root)
	a, err := hc.CreateInstance(ctx(t), "sess-a")
	if err != nil {
		t.Fatalf("create a: %v", err)
	}
	b, err := hc.CreateInstance(ctx(t), "sess-b")
	if err != nil {
		t.Fatalf("create b: %v", err)
	}
	t.Cleanup(func() {
		for _, pid := range []int{a.PID, b.PID} {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	if a.Secret == b.Secret || a.Workspace == b.Workspace || a.URL == b.URL || !a.Healthy || !b.Healthy {
		t.Fatalf("instances: %+v %+v", a, b)
	}
	if _, err := hc.CreateInstance(ctx(t), "--bad id"); apiErr(t, err).Status != 400 {
		t.Fatalf("bad session id: %v", err)
	}
	// The instance's own secret works against it, the host's does not.
	ca := agentctl.NewClient(a.URL, a.Secret, 5*time.Second)
	if h, err := ca.Health(ctx(t)); err != nil || h.Nonce != a.Nonce || h.SessionID != "sess-a" {
		t.Fatalf("instance a health: %+v %v", h, err)
	}
	if _, err := agentctl.NewClient(a.URL, "host-secret", 5*time.Second).Health(ctx(t)); apiErr(t, err).Status != 401 {
		t.Fatal("instance accepted the host secret")
	}
	if err := hc.DeleteInstance(ctx(t), "sess-a"); err != nil {
		t.Fatalf("delete a: %v", err)
	}
	testkit.WaitFor(t, 10*time.Second, "instance a to exit", testkit.Cond(func() bool { return syscall.Kill(a.PID, 0) != nil }))

	// Restart the host daemon on the same root.
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Wait()
	_, hc2 := startHost(t, root)
	list, err := hc2.Instances(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].SessionID != "sess-b" || !list[0].Healthy || list[0].Nonce != b.Nonce || list[0].PID != b.PID {
		t.Fatalf("instances after host restart: %+v", list)
	}
	cb := agentctl.NewClient(b.URL, b.Secret, 5*time.Second)
	healthy(t, cb)
	if err := hc2.DeleteInstance(ctx(t), "sess-b"); err != nil {
		t.Fatal(err)
	}
	if err := hc2.DeleteInstance(ctx(t), "sess-b"); apiErr(t, err).Status != 404 {
		t.Fatalf("delete unknown: %v", err)
	}
}

// An agentctl killed outright leaves its agent running (the agent leads a
// session of its own); the next agentctl on the same state dir ends it
// before it serves, so a new agent never runs beside it.
func TestRestartEndsTheAgentAKilledAgentctlLeft(t *testing.T) {
	ws := t.TempDir()
	p := startServe(t, ws)
	// An agent that outlives its PTY's hangup, as a busy agent outlives
	// its closed stdin.
	st, err := p.c.StartAgent(ctx(t), agentctl.Profile{Protocol: agentctl.ProtocolPTY,
		Command: []string{"/bin/sh", "-c", "trap '' HUP; printf 'demo> '; exec sleep 600"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	p.kill()
	if syscall.Kill(st.PID, 0) != nil {
		t.Fatal("the agent ended with its agentctl: the test could not tell")
	}
	startServe(t, ws)
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", st.PID)); err == nil && !strings.Contains(string(b), ") Z ") {
		t.Fatalf("agent pid %d still runs once the next agentctl serves: %s", st.PID, b)
	}
}
