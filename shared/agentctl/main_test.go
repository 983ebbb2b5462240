package agentctl_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/paddockhq/paddock/shared/agentctl"
	"github.com/paddockhq/paddock/shared/runtime/runtimetest"
)

// binDir holds agentctl and paddock-demo-agent (built in TestMain or $PADDOCK_BIN).
var binDir string

func TestMain(m *testing.M) {
	if os.Getenv(workAgentEnv) == "1" { // re-executed as the ACP test agent
		os.Exit(runWorkAgent())
	}
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	if d := os.Getenv("PADDOCK_BIN"); d != "" {
		if _, err := os.Stat(filepath.Join(d, "agentctl")); err == nil {
			binDir = d
			return m.Run()
		}
	}
	dir, err := os.MkdirTemp("", "agentctl-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	for _, pkg := range []string{"../../cmd/agentctl", "../../cmd/paddock-demo-agent"} {
		cmd := exec.Command("go", "build", "-o", dir+"/", pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n%s", pkg, err, out)
			return 1
		}
	}
	binDir = dir
	return m.Run()
}

const testSecret = "test-secret-0123456789"

// proc is one running agentctl serve process.
type proc struct {
	cmd  *exec.Cmd
	info agentctl.Info
	c    *agentctl.Client
}

func (p *proc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	_ = p.cmd.Wait()
}

// startServe runs agentctl serve on ws and waits for its info line.
func startServe(t testing.TB, ws string, extraEnv ...string) *proc {
	t.Helper()
	return startServeArgs(t, ws, nil, extraEnv...)
}

// startServeArgs is startServe with more serve flags.
func startServeArgs(t testing.TB, ws string, args []string, extraEnv ...string) *proc {
	t.Helper()
	runtimetest.CleanupProcesses(t, ws) // the agent too, which outlives a killed agentctl
	cmd := exec.Command(filepath.Join(binDir, "agentctl"), append([]string{"serve", "-session", "s1", "-workspace", ws, "-listen", "127.0.0.1:0", "-log-level", "debug",
		"-log-file", filepath.Join(t.TempDir(), "agentctl.log")}, args...)...)
	cmd.Env = append(os.Environ(), "PADDOCK_AGENTCTL_SECRET="+testSecret, "PATH="+binDir+":"+os.Getenv("PATH"))
	cmd.Env = append(cmd.Env, extraEnv...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd}
	t.Cleanup(p.kill)
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	select {
	case l, ok := <-lines:
		if !ok {
			t.Fatal("agentctl exited before printing its info line")
		}
		if err := json.Unmarshal([]byte(l), &p.info); err != nil {
			t.Fatalf("info line %q: %v", l, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("agentctl did not print its info line")
	}
	p.c = agentctl.NewClient(p.info.URL, testSecret, 10*time.Second)
	return p
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

// eventWatcher follows the event stream from a position.
type eventWatcher struct {
	c    *agentctl.Client
	next uint64
	seen []agentctl.Event
}

func newWatcher(c *agentctl.Client) *eventWatcher { return &eventWatcher{c: c, next: 1} }

// waitEvent returns the first not-yet-consumed event of type typ matching pred.
func (w *eventWatcher) waitEvent(t testing.TB, typ string, pred func(agentctl.Event) bool, timeout time.Duration) agentctl.Event {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		for i, ev := range w.seen {
			if ev.Type == typ && (pred == nil || pred(ev)) {
				w.seen = w.seen[i+1:]
				return ev
			}
		}
		w.seen = nil
		left := time.Until(deadline)
		if left <= 0 {
			t.Fatalf("timed out waiting for event %s", typ)
		}
		resp, err := w.c.Events(context.Background(), w.next, min(left, 2*time.Second))
		if err != nil {
			t.Fatalf("events: %v", err)
		}
		w.seen = append(w.seen, resp.Events...)
		w.next = resp.Next
	}
}

// collect returns every event consumed or pending so far (without waiting).
func (w *eventWatcher) all(t testing.TB) []agentctl.Event {
	resp, err := w.c.Events(context.Background(), 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Events
}

func turnOutcome(t testing.TB, ev agentctl.Event) agentctl.TurnFinishedData {
	var d agentctl.TurnFinishedData
	if err := json.Unmarshal(ev.Data, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

func lastAgentMessage(t testing.TB, c *agentctl.Client) agentctl.Message {
	t.Helper()
	msgs, err := c.Messages(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "agent" {
			return msgs[i]
		}
	}
	t.Fatalf("no agent message in %+v", msgs)
	return agentctl.Message{}
}

func apiErr(t testing.TB, err error) *agentctl.APIError {
	t.Helper()
	var ae *agentctl.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("want an API error, got %v", err)
	}
	return ae
}

func healthy(t testing.TB, c *agentctl.Client) {
	t.Helper()
	h, err := c.Health(context.Background())
	if err != nil || h.Status != "ok" {
		t.Fatalf("agentctl not healthy: %+v %v", h, err)
	}
}

var (
	acpProfile = agentctl.Profile{Protocol: "acp", Command: []string{"paddock-demo-agent"}, Permission: "deny"}
	ptyProfile = agentctl.Profile{Protocol: "pty", Command: []string{"paddock-demo-agent", "--tty"},
		NewArgs: []string{"--session-id", "{{resume_token}}"}, ResumeArgs: []string{"--resume", "{{resume_token}}"}, SupportsSessionResume: true}
)

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// inProcess serves an agentctl Server in the test process, with the demo
// agent on its PATH, secret "x" and a null logger unless o sets them, and a
// workspace of its own unless o names one; it is closed at cleanup.
func inProcess(t testing.TB, o agentctl.Options) (*agentctl.Server, *httptest.Server, *agentctl.Client) {
	t.Helper()
	if o.SessionID == "" {
		o.SessionID = "s1"
	}
	if o.Workspace == "" {
		o.Workspace = t.TempDir()
	}
	if o.Secret == "" {
		o.Secret = "x"
	}
	if o.Env == nil {
		o.Env = append(os.Environ(), "PATH="+binDir+":"+os.Getenv("PATH"))
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	srv, err := agentctl.NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	t.Cleanup(srv.Close)
	return srv, hs, agentctl.NewClient(hs.URL, o.Secret, 10*time.Second)
}
