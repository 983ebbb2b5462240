package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/paddockhq/paddock/shared/runtime"
	"github.com/paddockhq/paddock/shared/runtime/runtimetest"
)

var testPlugin string

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "runtime-sdk-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	testPlugin, err = runtimetest.GoBuild(dir, "testplugin", "github.com/paddockhq/paddock/shared/runtime/testdata/testplugin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

func load(t testing.TB, mode string) (*runtime.Client, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := runtime.NewClient(ctx, runtime.ClientConfig{Path: testPlugin, Env: []string{"TESTPLUGIN_MODE=" + mode}, StartTimeout: 5 * time.Second})
	if err == nil {
		t.Cleanup(c.Kill)
	}
	return c, err
}

func mustLoad(t testing.TB) *runtime.Client {
	t.Helper()
	c, err := load(t, "")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestLoadRefusesIncompatiblePlugins(t *testing.T) {
	for _, tc := range []struct {
		mode, wantMsg string
		wantIs        error
	}{
		{mode: "badcookie", wantMsg: "not a Paddock runtime plugin", wantIs: runtime.ErrHandshake},
		{mode: "protocol9", wantMsg: "Plugin version: 9, Client versions: [1]", wantIs: runtime.ErrHandshake},
		{mode: "api99", wantMsg: `speaks API version "99", this host supports 1`, wantIs: runtime.ErrIncompatibleAPIVersion},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			c, err := load(t, tc.mode)
			if err == nil {
				t.Fatalf("plugin in mode %s was accepted: %+v", tc.mode, c.Info())
			}
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("error %q does not say %q", err, tc.wantMsg)
			}
			if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
				t.Errorf("error %v is not %v", err, tc.wantIs)
			}
		})
	}
}

func TestLoadAcceptsPluginWhenHostOffersItsVersion(t *testing.T) {
	ctx := context.Background()
	c, err := runtime.NewClient(ctx, runtime.ClientConfig{Path: testPlugin, Env: []string{"TESTPLUGIN_MODE=api99"}, SupportedAPIVersions: []string{"1", "99"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Kill()
	if c.Info().APIVersion != "99" {
		t.Fatalf("info = %+v", c.Info())
	}
}

func TestNewClientWithoutPathOrNotAPlugin(t *testing.T) {
	ctx := context.Background()
	if _, err := runtime.NewClient(ctx, runtime.ClientConfig{}); err == nil {
		t.Fatal("no path accepted")
	}
	if _, err := runtime.NewClient(ctx, runtime.ClientConfig{Path: "/bin/true", StartTimeout: 2 * time.Second}); !errors.Is(err, runtime.ErrHandshake) {
		t.Fatalf("/bin/true as a plugin: %v, want ErrHandshake", err)
	}
}

func TestTypedErrorsCrossTheBoundary(t *testing.T) {
	c := mustLoad(t)
	ctx := context.Background()
	for _, tc := range []struct {
		handle string
		want   error
		msg    string
	}{
		{"notfound", runtime.ErrNotFound, "executor x"},
		{"invalidconfig", runtime.ErrInvalidConfig, "no image"},
		{"unavailable", runtime.ErrUnavailable, "daemon down"},
		{"invalidrequest", runtime.ErrInvalidRequest, "bad field"},
	} {
		t.Run(tc.handle, func(t *testing.T) {
			calls := map[string]error{}
			_, calls["recover"] = c.Recover(ctx, []byte(tc.handle), "s")
			_, calls["inspect"] = c.Inspect(ctx, []byte(tc.handle))
			calls["stop"] = c.Stop(ctx, []byte(tc.handle), 1500*time.Millisecond)
			calls["destroy"] = c.Destroy(ctx, []byte(tc.handle))
			for op, err := range calls {
				if !errors.Is(err, tc.want) {
					t.Errorf("%s: error %v is not %v", op, err, tc.want)
				}
				if err != nil && !strings.Contains(err.Error(), tc.msg) {
					t.Errorf("%s: error %q lost the plugin's message %q", op, err, tc.msg)
				}
				for _, other := range []error{runtime.ErrNotFound, runtime.ErrInvalidConfig, runtime.ErrUnavailable, runtime.ErrInvalidRequest} {
					if other != tc.want && errors.Is(err, other) {
						t.Errorf("%s: error %v also matches %v", op, err, other)
					}
				}
			}
		})
	}
	err := c.Destroy(ctx, []byte("plain"))
	if err == nil || !strings.Contains(err.Error(), "something else broke") || errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("untyped error = %v", err)
	}
	if _, err := c.Recover(ctx, nil, "s"); !errors.Is(err, runtime.ErrInvalidRequest) {
		t.Errorf("empty handle: %v, want ErrInvalidRequest", err)
	}
	if _, err := c.Launch(ctx, runtime.LaunchRequest{SessionID: "../x", AgentctlSecret: "s"}); !errors.Is(err, runtime.ErrInvalidRequest) {
		t.Errorf("launch with bad session id: %v, want ErrInvalidRequest", err)
	}
}

func TestDeadlineCrossesTheBoundary(t *testing.T) {
	c := mustLoad(t)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Inspect(ctx, []byte("slow"))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
	if time.Since(start) > 3*time.Second {
		t.Fatalf("deadline not honoured: %s", time.Since(start))
	}
}

func TestDiagnosticsKeepTheirRanges(t *testing.T) {
	c := mustLoad(t)
	ctx := context.Background()
	start := hcl.Pos{Line: 12, Column: 3, Byte: 300}
	for _, tc := range []struct {
		name, src string
		want      hcl.Range
		summary   string
	}{
		{
			name: "unsupported_argument", src: "name = \"x\"\n  bogus = 1\n", summary: "Unsupported argument",
			want: hcl.Range{Filename: "paddock.hcl", Start: hcl.Pos{Line: 13, Column: 3, Byte: 313}, End: hcl.Pos{Line: 13, Column: 8, Byte: 318}},
		},
		{
			name: "syntax_error", src: "name = = 1\n", summary: "Invalid expression",
			want: hcl.Range{Filename: "paddock.hcl", Start: hcl.Pos{Line: 12, Column: 10, Byte: 307}, End: hcl.Pos{Line: 12, Column: 11, Byte: 308}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			diags, err := c.SetConfig(ctx, runtime.ConfigSource{Filename: "paddock.hcl", Source: []byte(tc.src), Start: start})
			if err != nil {
				t.Fatal(err)
			}
			if !diags.HasErrors() {
				t.Fatalf("no errors: %v", diags)
			}
			d := diags[0]
			if d.Summary != tc.summary || d.Severity != hcl.DiagError {
				t.Fatalf("diag = %d %q, want error %q", d.Severity, d.Summary, tc.summary)
			}
			if d.Subject == nil || *d.Subject != tc.want {
				t.Fatalf("subject = %v, want %v", d.Subject, tc.want)
			}
		})
	}
	diags, err := c.SetConfig(ctx, runtime.ConfigSource{Filename: "paddock.hcl", Source: []byte(`name = "ok"`), Start: start})
	if err != nil || diags.HasErrors() || len(diags) != 1 || diags[0].Severity != hcl.DiagWarning || diags[0].Subject != nil {
		t.Fatalf("valid config: diags %v err %v; want one warning without subject", diags, err)
	}
}

func TestSchemaCapabilitiesAndRequestFieldsCross(t *testing.T) {
	c := mustLoad(t)
	ctx := context.Background()
	caps, err := c.Capabilities(ctx)
	if err != nil || !caps.NodeLocal || caps.SupportsWorkspaceOnly || !caps.Extra["supports_gpu"] {
		t.Fatalf("caps = %+v, %v", caps, err)
	}
	s, err := c.ConfigSchema(ctx)
	if err != nil || len(s.Attributes) != 1 || !s.Attributes[0].Required || len(s.Blocks) != 1 || s.Blocks[0].Body.Attributes[0].Name != "url" {
		t.Fatalf("schema = %+v, %v", s, err)
	}
	resp, err := c.Launch(ctx, runtime.LaunchRequest{SessionID: "s1", AgentctlSecret: "sec", Workspace: runtime.Workspace{Branch: "b"},
		Env: map[string]string{"WS": "/w"}, Options: map[string]string{"opt": "/o"}})
	if err != nil || string(resp.Handle) != "s1" || resp.WorktreeBranch != "b" || resp.WorkspacePath != "/w/o" || resp.PID != 1 {
		t.Fatalf("launch = %+v, %v", resp, err)
	}
	ins, err := c.Inspect(ctx, resp.Handle)
	if err != nil || ins.State != runtime.StateRunning || ins.PID != 42 || ins.Details["k"] != "v" {
		t.Fatalf("inspect = %+v, %v", ins, err)
	}
}

func TestReattachToRunningPlugin(t *testing.T) {
	c := mustLoad(t)
	rc := c.ReattachConfig()
	data, err := runtime.MarshalReattach(rc)
	if err != nil {
		t.Fatal(err)
	}
	if err := runtime.VerifyPluginPID(rc.Pid, testPlugin); err != nil {
		t.Fatalf("VerifyPluginPID(own plugin): %v", err)
	}
	if err := runtime.VerifyPluginPID(os.Getpid(), testPlugin); err == nil {
		t.Fatal("VerifyPluginPID accepted the test process as the plugin")
	}
	back, err := runtime.UnmarshalReattach(data)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := runtime.NewClient(context.Background(), runtime.ClientConfig{Reattach: back})
	if err != nil {
		t.Fatalf("reattach: %v", err)
	}
	if c2.Info().Name != "testplugin" {
		t.Fatalf("info = %+v", c2.Info())
	}
	if _, err := c2.Inspect(context.Background(), []byte("h")); err != nil {
		t.Fatal(err)
	}
	if err := c2.Ping(); err != nil {
		t.Fatal(err)
	}
}

func TestUnmarshalReattachRejectsMalformed(t *testing.T) {
	for _, in := range []string{``, `{`, `{"pid":0}`, `{"pid":5,"network":"udp","address":"x","protocol":"grpc"}`,
		`{"pid":5,"network":"tcp","address":"127.0.0.1:1","protocol":"netrpc"}`} {
		if _, err := runtime.UnmarshalReattach([]byte(in)); err == nil {
			t.Errorf("UnmarshalReattach(%q) accepted", in)
		}
	}
}

func TestLaunchRequestValidate(t *testing.T) {
	ok := runtime.LaunchRequest{SessionID: "s-1", TaskID: "t.1", ExecutorID: "e_1", AgentctlSecret: "x"}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*runtime.LaunchRequest){
		"no_session":  func(r *runtime.LaunchRequest) { r.SessionID = "" },
		"slash":       func(r *runtime.LaunchRequest) { r.SessionID = "a/b" },
		"dash_first":  func(r *runtime.LaunchRequest) { r.ExecutorID = "-x" },
		"long":        func(r *runtime.LaunchRequest) { r.TaskID = strings.Repeat("a", 129) },
		"no_secret":   func(r *runtime.LaunchRequest) { r.AgentctlSecret = "" },
		"env_eq":      func(r *runtime.LaunchRequest) { r.Env = map[string]string{"A=B": ""} },
		"env_nul_val": func(r *runtime.LaunchRequest) { r.Env = map[string]string{"A": "x\x00"} },
	} {
		r := ok
		mut(&r)
		if err := r.Validate(); !errors.Is(err, runtime.ErrInvalidRequest) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if s := (runtime.LaunchRequest{SessionID: "s", AgentctlSecret: "topsecret"}).String(); strings.Contains(s, "topsecret") {
		t.Errorf("String() leaks the secret: %s", s)
	}
}

// The optional Reconciler crosses the process boundary: every request field
// reaches the plugin, its typed errors come back, and a plugin without the
// capability (or its own ErrUnsupported) gives ErrUnsupported.
func TestReconcileRoundTrip(t *testing.T) {
	c := mustLoad(t)
	ctx := context.Background()
	removed, err := c.Reconcile(ctx, runtime.ReconcileRequest{Cluster: "c1", Owned: []string{"ex-b"}, Grace: 90 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"ex-a@c1/1m30s", "ex-c@c1/1m30s"}; strings.Join(removed, ",") != strings.Join(want, ",") {
		t.Fatalf("removed %v, want %v", removed, want)
	}
	// The Runtime a host holds (as plugins.Manager.Get returns it) has the
	// capability too, through a type assertion.
	var rt runtime.Runtime = c.Runtime
	rc, ok := rt.(runtime.Reconciler)
	if !ok {
		t.Fatalf("the host-side Runtime %T does not implement Reconciler", rt)
	}
	if removed, err := rc.Reconcile(ctx, runtime.ReconcileRequest{Owned: []string{"ex-a", "ex-b", "ex-c"}}); err != nil || len(removed) != 0 {
		t.Fatalf("everything owned: removed %v, %v; want nothing", removed, err)
	}
	for _, tc := range []struct {
		cluster string
		want    error
		msg     string
	}{
		{"unavailable", runtime.ErrUnavailable, "daemon down"},
		{"unsupported", runtime.ErrUnsupported, "no engine to list"},
	} {
		if _, err := c.Reconcile(ctx, runtime.ReconcileRequest{Cluster: tc.cluster}); !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("cluster %s: error %v, want %v saying %q", tc.cluster, err, tc.want, tc.msg)
		}
	}
}

func TestReconcileUnsupportedByPlugin(t *testing.T) {
	c, err := load(t, "noreconcile")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, err = c.Reconcile(ctx, runtime.ReconcileRequest{Cluster: "c1", Owned: []string{"ex-a"}, Grace: time.Minute})
	if !errors.Is(err, runtime.ErrUnsupported) {
		t.Fatalf("plugin without Reconciler: %v, want ErrUnsupported", err)
	}
	for _, other := range []error{runtime.ErrNotFound, runtime.ErrInvalidConfig, runtime.ErrUnavailable, runtime.ErrInvalidRequest} {
		if errors.Is(err, other) {
			t.Errorf("error %v also matches %v", err, other)
		}
	}
	// The rest of the plugin still works.
	if _, err := c.Inspect(ctx, []byte("h")); err != nil {
		t.Fatal(err)
	}
}

func TestReconcileRequestValidate(t *testing.T) {
	c := mustLoad(t)
	for name, req := range map[string]runtime.ReconcileRequest{
		"bad_cluster":   {Cluster: "a/b"},
		"negative":      {Grace: -time.Second},
		"bad_owned":     {Owned: []string{"ok", "../x"}},
		"empty_owned":   {Owned: []string{""}},
		"dash_first_id": {Owned: []string{"-rf"}},
	} {
		if err := req.Validate(); !errors.Is(err, runtime.ErrInvalidRequest) {
			t.Errorf("%s: Validate = %v, want ErrInvalidRequest", name, err)
		}
		if _, err := c.Reconcile(context.Background(), req); !errors.Is(err, runtime.ErrInvalidRequest) {
			t.Errorf("%s: Reconcile = %v, want ErrInvalidRequest", name, err)
		}
	}
	if err := (runtime.ReconcileRequest{Cluster: "paddock", Owned: []string{"ex-0123"}, Grace: time.Minute}).Validate(); err != nil {
		t.Errorf("valid request refused: %v", err)
	}
	owned := runtime.ReconcileRequest{Owned: []string{"a", "b"}}.OwnedSet()
	if !owned("a") || !owned("b") || owned("c") || owned("") {
		t.Error("OwnedSet membership is wrong")
	}
}

// BenchmarkInspectRPC measures one plugin RPC round trip (Inspect) through
// go-plugin's gRPC transport to a real plugin subprocess.
func BenchmarkInspectRPC(b *testing.B) {
	c := mustLoad(b)
	ctx := context.Background()
	handle := []byte("bench")
	b.ResetTimer()
	for b.Loop() {
		if _, err := c.Inspect(ctx, handle); err != nil {
			b.Fatal(err)
		}
	}
}

// Terminal settings cross the process boundary intact and reach the plugin
// as the agentctl flags they stand for.
func TestTerminalCrossesTheBoundary(t *testing.T) {
	c := mustLoad(t)
	req := runtime.LaunchRequest{SessionID: "s1", AgentctlSecret: "sec", Terminal: runtime.Terminal{
		Shell: []string{"/bin/sh", "-c", "echo hi; exec sh"}, ReplayBytes: 8192, IdleTimeout: 90 * time.Second}}
	resp, err := c.Launch(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Join(req.Terminal.Args(), " "); resp.ContainerID != want {
		t.Fatalf("plugin saw terminal flags %q, want %q", resp.ContainerID, want)
	}
	resp, err = c.Launch(context.Background(), runtime.LaunchRequest{SessionID: "s1", AgentctlSecret: "sec"})
	if err != nil || resp.ContainerID != "" {
		t.Fatalf("no terminal settings: plugin saw %q, %v", resp.ContainerID, err)
	}
}

func TestTerminalArgs(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   runtime.Terminal
		want []string
	}{
		{"zero", runtime.Terminal{}, nil},
		{"shell", runtime.Terminal{Shell: []string{"/bin/sh", "-l"}}, []string{"-shell", `["/bin/sh","-l"]`}},
		{"shell_bracket_word", runtime.Terminal{Shell: []string{"[x"}}, []string{"-shell", `["[x"]`}},
		{"replay", runtime.Terminal{ReplayBytes: 262144}, []string{"-replay-bytes", "262144"}},
		{"idle", runtime.Terminal{IdleTimeout: 30 * time.Minute}, []string{"-idle-timeout", "30m0s"}},
		{"all", runtime.Terminal{Shell: []string{"zsh"}, ReplayBytes: 4096, IdleTimeout: time.Second},
			[]string{"-shell", `["zsh"]`, "-replay-bytes", "4096", "-idle-timeout", "1s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.in.Args()
			if strings.Join(got, "\x00") != strings.Join(tc.want, "\x00") || len(got) != len(tc.want) {
				t.Fatalf("Args() = %q, want %q", got, tc.want)
			}
			if tc.in.IsZero() != (len(tc.want) == 0) {
				t.Fatalf("IsZero() = %v with args %q", tc.in.IsZero(), got)
			}
		})
	}
}

func TestTerminalValidate(t *testing.T) {
	for _, ok := range []runtime.Terminal{{}, {Shell: []string{"/bin/sh"}}, {ReplayBytes: runtime.MinReplayBytes}, {IdleTimeout: time.Millisecond}} {
		if err := ok.Validate(); err != nil {
			t.Errorf("%+v: %v", ok, err)
		}
	}
	for name, bad := range map[string]runtime.Terminal{
		"empty_shell":      {Shell: []string{}},
		"empty_program":    {Shell: []string{"", "-l"}},
		"nul_word":         {Shell: []string{"/bin/sh", "a\x00b"}},
		"not_utf8":         {Shell: []string{"/bin/sh", "\xb0"}},
		"negative_replay":  {ReplayBytes: -1},
		"tiny_replay":      {ReplayBytes: runtime.MinReplayBytes - 1},
		"negative_timeout": {IdleTimeout: -time.Second},
	} {
		if err := bad.Validate(); !errors.Is(err, runtime.ErrInvalidRequest) {
			t.Errorf("%s: Validate() = %v, want ErrInvalidRequest", name, err)
		}
		r := runtime.LaunchRequest{SessionID: "s", AgentctlSecret: "x", Terminal: bad}
		if err := r.Validate(); !errors.Is(err, runtime.ErrInvalidRequest) {
			t.Errorf("%s: LaunchRequest.Validate() = %v, want ErrInvalidRequest", name, err)
		}
	}
}
