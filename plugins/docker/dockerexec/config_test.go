package dockerexec

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/paddockhq/paddock/shared/runtime"
	"github.com/paddockhq/paddock/shared/runtime/workspace"
)

func parse(t *testing.T, src string) (Config, hcl.Diagnostics) {
	t.Helper()
	return ParseConfig(runtime.ConfigSource{Filename: "c.hcl", Source: []byte(src), Start: hcl.Pos{Line: 10, Column: 3, Byte: 200}})
}

func TestParseConfigDefaults(t *testing.T) {
	cfg, diags := parse(t, "")
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	abs, _ := filepath.Abs(DefaultWorkspaceRoot)
	if cfg.Image != DefaultImage || cfg.WorkspaceRoot != abs || cfg.PublishAddr != "127.0.0.1" || !cfg.RestartStopped ||
		cfg.StartTimeout != DefaultStartTimeout || cfg.AgentUser != DefaultAgentUser || cfg.ReconcileGrace != 0 || cfg.Memory != 0 || cfg.NanoCPUs != 0 || cfg.Pids != 0 || cfg.Host != "" {
		t.Errorf("defaults = %+v", cfg)
	}
}

// TestPublishAddrDefaultsToTheNodesAddress: on a cluster of machines every
// node must reach agentctl, so its port is published on the address the
// host's node serves on (passed in runtime.NodeAddrEnv), not on loopback.
func TestPublishAddrDefaultsToTheNodesAddress(t *testing.T) {
	t.Setenv(runtime.NodeAddrEnv, "10.0.0.12")
	cfg, diags := parse(t, "")
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if cfg.PublishAddr != "10.0.0.12" || cfg.advertiseHost() != "10.0.0.12" {
		t.Errorf("publish_addr %q, advertised %q; want the node's 10.0.0.12", cfg.PublishAddr, cfg.advertiseHost())
	}
	cfg, diags = parse(t, `publish_addr = "127.0.0.1"`)
	if diags.HasErrors() || cfg.PublishAddr != "127.0.0.1" {
		t.Errorf("an explicit publish_addr is kept: %q (%v)", cfg.PublishAddr, diags)
	}
}

func TestParseConfigValid(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	_, diags := parse(t, `
image = "my/img:1"
host = "tcp://10.0.0.5:2375"
agentctl_path = "`+exe+`"
workspace_root = "/srv/ws"
publish_addr = "0.0.0.0"
memory = "1.5g"
cpus = 1.5
pids = 512
user = "1000:1000"
restart_stopped = false
cluster = "prod-1"
start_timeout = "45s"
`)
	if !diags.HasErrors() {
		t.Fatal("memory 1.5g must be refused (whole numbers only)")
	}
	cfg, diags := parse(t, strings.Replace(`
image = "my/img:1"
host = "tcp://10.0.0.5:2375"
agentctl_path = "EXE"
workspace_root = "/srv/ws"
publish_addr = "0.0.0.0"
memory = "1536m"
cpus = 1.5
pids = 512
user = "1000:1000"
agent_user = "2000:2000"
restart_stopped = false
cluster = "prod-1"
start_timeout = "45s"
reconcile_grace = "90s"
`, "EXE", exe, 1))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	want := Config{Image: "my/img:1", Host: "tcp://10.0.0.5:2375", AgentctlPath: exe, WorkspaceRoot: "/srv/ws", PublishAddr: "0.0.0.0",
		Memory: 1536 << 20, NanoCPUs: 15e8, Pids: 512, User: "1000:1000", AgentUser: "2000:2000", RestartStopped: false, Cluster: "prod-1", StartTimeout: 45 * time.Second,
		ReconcileGrace: 90 * time.Second}
	if cfg != want {
		t.Errorf("config = %+v\nwant     %+v", cfg, want)
	}
	if cfg.nodeLocal() {
		t.Error("tcp://10.0.0.5 is not node-local")
	}
	if cfg.advertiseHost() != "127.0.0.1" {
		t.Errorf("advertise for 0.0.0.0 = %s", cfg.advertiseHost())
	}
	if cfg, _ := parse(t, `memory = 67108864`); cfg.Memory != 64<<20 {
		t.Errorf("numeric memory = %d", cfg.Memory)
	}
}

// The agent switches to agent_user only inside a container whose user is
// root; "container" (or a non-root container user) keeps the container user.
func TestAgentUID(t *testing.T) {
	for _, tc := range []struct {
		user, agent string
		ok          bool
	}{
		{"0:0", DefaultAgentUser, true},
		{"root", "123:456", true},
		{"1000:1000", DefaultAgentUser, false},
		{"0", AgentUserContainer, false},
		{"", DefaultAgentUser, os.Getuid() == 0},
	} {
		uid, gid, ok := Config{User: tc.user, AgentUser: tc.agent}.agentUID()
		if ok != tc.ok || ok && tc.agent == "123:456" && (uid != 123 || gid != 456) {
			t.Errorf("user %q agent_user %q: %d:%d %v, want switch %v", tc.user, tc.agent, uid, gid, ok, tc.ok)
		}
	}
}

func TestParseConfigInvalid(t *testing.T) {
	for name, tc := range map[string]struct{ src, attr string }{
		"unknown":            {`imagee = "x"`, ""},
		"image_empty":        {`image = ""`, "image"},
		"image_number":       {`image = 3`, "image"},
		"host_scheme":        {`host = "docker.example:2375"`, "host"},
		"agentctl_missing":   {`agentctl_path = "/nonexistent/agentctl"`, "agentctl_path"},
		"publish_not_ip":     {`publish_addr = "localhost"`, "publish_addr"},
		"advertise_url":      {`advertise = "http://x/"`, "advertise"},
		"memory_words":       {`memory = "lots"`, "memory"},
		"memory_tiny":        {`memory = "1m"`, "memory"},
		"memory_negative":    {`memory = -5`, "memory"},
		"memory_bool":        {`memory = true`, "memory"},
		"cpus_zero":          {`cpus = 0`, "cpus"},
		"cpus_negative":      {`cpus = -1`, "cpus"},
		"cpus_too_small":     {`cpus = 0.001`, "cpus"},
		"cpus_string":        {`cpus = "two"`, "cpus"},
		"pids_zero":          {`pids = 0`, "pids"},
		"pids_fraction":      {`pids = 1.5`, "pids"},
		"restart_string":     {`restart_stopped = "yes"`, "restart_stopped"},
		"cluster_slash":      {`cluster = "a/b"`, "cluster"},
		"timeout_bad":        {`start_timeout = "soon"`, "start_timeout"},
		"timeout_negative":   {`start_timeout = "-1s"`, "start_timeout"},
		"grace_zero":         {`reconcile_grace = "0s"`, "reconcile_grace"},
		"grace_words":        {`reconcile_grace = "a while"`, "reconcile_grace"},
		"grace_number":       {`reconcile_grace = 60`, "reconcile_grace"},
		"user_empty":         {`user = ""`, "user"},
		"agent_user_root":    {`agent_user = "0:0"`, "agent_user"},
		"agent_user_name":    {`agent_user = "nobody"`, "agent_user"},
		"agent_user_empty":   {`agent_user = ""`, "agent_user"},
		"workspace_empty":    {`workspace_root = ""`, "workspace_root"},
		"null":               {`image = null`, "image"},
		"syntax":             {`image = = "x"`, ""},
		"variable_reference": {`image = var.x`, ""},
	} {
		t.Run(name, func(t *testing.T) {
			_, diags := parse(t, tc.src)
			if !diags.HasErrors() {
				t.Fatalf("%q accepted", tc.src)
			}
			for _, d := range diags {
				if d.Severity != hcl.DiagError {
					continue
				}
				if d.Subject == nil || d.Subject.Filename != "c.hcl" || d.Subject.Start.Line < 10 {
					t.Errorf("diagnostic %q has no range into c.hcl at line ≥ 10: %v", d.Summary, d.Subject)
				}
				if tc.attr != "" && !strings.Contains(d.Summary+d.Detail, tc.attr) {
					t.Errorf("diagnostic %q / %q does not name %s", d.Summary, d.Detail, tc.attr)
				}
			}
		})
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"100": 100, "100b": 100, "6m": 6 << 20, "512M": 512 << 20, "512mb": 512 << 20,
		"2g": 2 << 30, "2GiB": 2 << 30, "1k": 1024, "1t": 1 << 40, " 7m ": 7 << 20} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "m", "-1", "0", "1.5g", "1x", "99999999999t", "g1", "1 g"} {
		if got, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) = %d, want an error", in, got)
		}
	}
}

func TestNodeLocal(t *testing.T) {
	t.Setenv("DOCKER_HOST", "")
	for host, want := range map[string]bool{"": true, "unix:///var/run/docker.sock": true, "tcp://127.0.0.1:2375": true,
		"tcp://localhost:2375": true, "tcp://[::1]:2375": true, "tcp://10.1.2.3:2375": false, "ssh://user@box": false} {
		if got := (Config{Host: host}).nodeLocal(); got != want {
			t.Errorf("nodeLocal(%q) = %v, want %v", host, got, want)
		}
	}
}

func TestHostname(t *testing.T) {
	for in, want := range map[string]string{"abc": "paddock-abc", "A_B.c-1": "paddock-a-b-c-1", "--x--": "paddock-x",
		strings.Repeat("a", 128): "paddock-" + strings.Repeat("a", 54)} {
		if got := hostname(in); got != want {
			t.Errorf("hostname(%q) = %q, want %q", in, got, want)
		}
		if len(hostname(in)) > 63 {
			t.Errorf("hostname(%q) longer than 63", in)
		}
	}
}

func TestDecodeHandle(t *testing.T) {
	root := "/srv/ws"
	good := handle{V: 1, ContainerID: strings.Repeat("ab", 32), SessionID: "s1", Layout: workspace.Layout{SessionDir: "/srv/ws/s1", Workspace: "/srv/ws/s1/workspace", OwnsWorkspace: true}}
	b, _ := json.Marshal(good)
	if h, err := decodeHandle(b, root); err != nil || h != good {
		t.Fatalf("decode good handle: %+v %v", h, err)
	}
	mut := func(f func(*handle)) []byte {
		h := good
		f(&h)
		b, _ := json.Marshal(h)
		return b
	}
	for name, b := range map[string][]byte{
		"garbage":       []byte("nope"),
		"version":       mut(func(h *handle) { h.V = 2 }),
		"container_id":  mut(func(h *handle) { h.ContainerID = "../../x" }),
		"session_id":    mut(func(h *handle) { h.SessionID = "../s1" }),
		"session_dir":   mut(func(h *handle) { h.SessionDir = "/etc" }),
		"workspace_out": mut(func(h *handle) { h.Workspace = "/etc" }),
		"other_root":    mut(func(h *handle) { h.SessionDir, h.Workspace = "/other/s1", "/other/s1/workspace" }),
		"no_workspace":  mut(func(h *handle) { h.Workspace = "" }),
	} {
		if _, err := decodeHandle(b, root); !errors.Is(err, runtime.ErrNotFound) {
			t.Errorf("%s: error = %v, want ErrNotFound", name, err)
		}
	}
	if _, err := decodeHandle(nil, root); !errors.Is(err, runtime.ErrInvalidRequest) {
		t.Errorf("empty handle: %v, want ErrInvalidRequest", err)
	}
}

func TestCapabilities(t *testing.T) {
	t.Setenv("DOCKER_HOST", "")
	r := New(nil)
	caps, err := r.Capabilities(context.Background())
	if err != nil || !caps.SurvivesSupervisorRestart || !caps.SupportsWorkspaceOnly || !caps.NodeLocal {
		t.Errorf("capabilities = %+v, %v", caps, err)
	}
	diags, _ := r.SetConfig(context.Background(), runtime.ConfigSource{Filename: "c.hcl", Source: []byte(`host = "tcp://10.9.9.9:2375"`)})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if caps, _ := r.Capabilities(context.Background()); caps.NodeLocal {
		t.Error("a remote engine must not be node-local")
	}
	// A refused config keeps the previous one.
	diags, _ = r.SetConfig(context.Background(), runtime.ConfigSource{Filename: "c.hcl", Source: []byte(`cpus = -1`)})
	if !diags.HasErrors() {
		t.Fatal("cpus = -1 accepted")
	}
	if caps, _ := r.Capabilities(context.Background()); caps.NodeLocal {
		t.Error("a refused config replaced the previous one")
	}
}

func TestDemux(t *testing.T) {
	frame := func(stream byte, s string) []byte {
		n := len(s)
		return append([]byte{stream, 0, 0, 0, byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}, s...)
	}
	in := append(frame(1, "out\n"), frame(2, "err\n")...)
	if got := demux(in); got != "out\nerr\n" {
		t.Errorf("demux = %q", got)
	}
	if got := demux([]byte("plain")); got != "plain" {
		t.Errorf("demux(plain) = %q", got)
	}
	if got := demux(append([]byte{1, 0, 0, 0, 0, 0, 0, 99}, "short"...)); got != "short" {
		t.Errorf("demux(truncated) = %q", got)
	}
}

func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{"", `memory = "512m"`, `cpus = 1.5`, `pids = 3`, `host = "unix:///x"`, `image = "a"` + "\n" + `cluster = "c"`, `x = {`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		cfg, diags := ParseConfig(runtime.ConfigSource{Filename: "f.hcl", Source: []byte(src)})
		if diags.HasErrors() {
			return
		}
		if cfg.Image == "" || cfg.StartTimeout <= 0 || cfg.Memory < 0 || (cfg.Memory != 0 && cfg.Memory < MinMemory) || cfg.NanoCPUs < 0 || cfg.Pids < 0 {
			t.Fatalf("accepted config is unusable: %+v", cfg)
		}
	})
}

func FuzzDecodeHandle(f *testing.F) {
	good, _ := json.Marshal(handle{V: 1, ContainerID: strings.Repeat("ab", 32), SessionID: "s1", Layout: workspace.Layout{SessionDir: "/r/s1", Workspace: "/r/s1/workspace", OwnsWorkspace: true}})
	f.Add(good)
	f.Add([]byte(`{"v":1}`))
	f.Add([]byte{0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := decodeHandle(b, "/r")
		if err != nil {
			return
		}
		if !runtime.ValidID(h.SessionID) || !validContainerID(h.ContainerID) || h.SessionDir != filepath.Join("/r", h.SessionID) {
			t.Fatalf("accepted handle is unsafe: %+v", h)
		}
		if h.OwnsWorkspace && !workspace.Within(h.SessionDir, h.Workspace) {
			t.Fatalf("accepted owned workspace outside the session dir: %+v", h)
		}
	})
}

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"1", "512m", "2GiB", "-1", "9223372036854775807", "8589934592g"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if n, err := ParseSize(s); err == nil && n <= 0 {
			t.Fatalf("ParseSize(%q) = %d", s, n)
		}
	})
}
