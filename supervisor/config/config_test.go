package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// writeFile writes content into dir/name and returns the path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func mustParse(t *testing.T, src string) *Config {
	t.Helper()
	c, err := Parse([]byte(src), "test.hcl")
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return c
}

func TestDefault(t *testing.T) {
	c := Default()
	host, _ := os.Hostname()
	want := &Config{
		NodeName: host, DataDir: "./data", BindAddr: "127.0.0.1", LogLevel: "info",
		Ports: Ports{HTTP: 7700, Raft: 7701},
		Server: Server{BootstrapExpect: 1, HeartbeatTimeout: 300 * time.Millisecond,
			ElectionTimeout: 300 * time.Millisecond, LeaderLeaseTimeout: 150 * time.Millisecond},
		API:       API{MaxBody: 1 << 20},
		PluginDir: "./bin/plugins",
		Recovery:  Recovery{AutoResume: "active", HealthTimeout: 2 * time.Second},
		Terminal:  Terminal{ReplayBytes: 256 << 10, IdleTimeout: 30 * time.Minute},
		Lease:     Lease{TTL: 10 * time.Second},
	}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("Default() = %+v\nwant %+v", c, want)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	if c.HTTPAddr() != "127.0.0.1:7700" || c.RaftAddr() != "127.0.0.1:7701" {
		t.Fatalf("addrs %s %s", c.HTTPAddr(), c.RaftAddr())
	}
	c.BindAddr = "::1"
	if c.HTTPAddr() != "[::1]:7700" {
		t.Fatalf("ipv6 addr %s", c.HTTPAddr())
	}
}

func TestParseValid(t *testing.T) {
	tests := []struct {
		name  string
		src   string
		check func(t *testing.T, c *Config)
	}{
		{"empty file gives defaults", "", func(t *testing.T, c *Config) {
			d := Default()
			if !reflect.DeepEqual(c, d) {
				t.Fatalf("got %+v want %+v", c, d)
			}
		}},
		{"only comments", "# nothing\n// nothing\n/* nothing */\n", func(t *testing.T, c *Config) {
			if c.Ports.HTTP != 7700 {
				t.Fatal("defaults not applied")
			}
		}},
		{"partial blocks keep other defaults", `
ports { http = 8800 }
server {
  heartbeat_timeout = "1s"
  election_timeout  = "2s"
}
`, func(t *testing.T, c *Config) {
			if c.Ports.HTTP != 8800 || c.Ports.Raft != 7701 {
				t.Fatalf("ports %+v", c.Ports)
			}
			if c.Server.HeartbeatTimeout != time.Second || c.Server.ElectionTimeout != 2*time.Second || c.Server.BootstrapExpect != 1 {
				t.Fatalf("server %+v", c.Server)
			}
		}},
		{"literals", `
data_dir  = "/srv/$${HOME}/%%{x}"
plugin_dir = <<EOT
/opt/plugins
EOT
ports { http = (8080) }
log_json = true
`, func(t *testing.T, c *Config) {
			if c.DataDir != "/srv/${HOME}/%{x}" || c.PluginDir != "/opt/plugins\n" || c.Ports.HTTP != 8080 || !c.LogJSON {
				t.Fatalf("got %q %q %d %v", c.DataDir, c.PluginDir, c.Ports.HTTP, c.LogJSON)
			}
		}},
		{"durations and sizes", `
api { max_body = "64KB" }
terminal {
  replay_bytes = 4096
  idle_timeout = "1h30m"
  shell        = ["/bin/bash", "-l"]
}
recovery {
  auto_resume    = "ALL"
  health_timeout = "750ms"
}
lease { ttl = "15s" }
`, func(t *testing.T, c *Config) {
			if c.API.MaxBody != 64000 || c.Terminal.ReplayBytes != 4096 || c.Terminal.IdleTimeout != 90*time.Minute {
				t.Fatalf("got %+v %+v", c.API, c.Terminal)
			}
			if !reflect.DeepEqual(c.Terminal.Shell, []string{"/bin/bash", "-l"}) {
				t.Fatalf("shell %q", c.Terminal.Shell)
			}
			if c.Recovery.AutoResume != "all" || c.Recovery.HealthTimeout != 750*time.Millisecond || c.Lease.TTL != 15*time.Second {
				t.Fatalf("got %+v %+v", c.Recovery, c.Lease)
			}
		}},
		{"agent defaults", `
agent "a" {
  protocol = "acp"
  command  = ["x"]
}
agent "b" {
  protocol                = "pty"
  command                 = ["y", "{{workspace}}"]
  permission              = "allow"
  supports_session_resume = false
}
agent "c" {
  protocol           = "acp"
  command            = ["z"]
  permission         = "ASK"
  auto_allow         = ["read", "search", "think"]
  permission_timeout = "5m"
}
`, func(t *testing.T, c *Config) {
			a, b := c.Agent("a"), c.Agent("b")
			if a == nil || b == nil || c.Agent("zz") != nil {
				t.Fatalf("lookup: %v %v", a, b)
			}
			if a.Permission != "ask" || a.AutoAllow != nil || a.PermissionTimeout != 0 || a.SupportsSessionResume != nil || a.NewArgs != nil {
				t.Fatalf("a = %+v", a)
			}
			if b.Permission != "allow" || b.SupportsSessionResume == nil || *b.SupportsSessionResume {
				t.Fatalf("b = %+v", b)
			}
			if ag := c.Agent("c"); ag.Permission != "ask" || !reflect.DeepEqual(ag.AutoAllow, []string{"read", "search", "think"}) || ag.PermissionTimeout != 5*time.Minute {
				t.Fatalf("c = %+v", ag)
			}
			if a.DefRange.Filename != "test.hcl" || a.DefRange.Start.Line != 2 {
				t.Fatalf("a.DefRange = %v", a.DefRange)
			}
		}},
		{"plugin without config", `plugin "docker" {}`, func(t *testing.T, c *Config) {
			p := c.Plugin("docker")
			if p == nil || len(p.Source) != 0 || p.Filename != "test.hcl" {
				t.Fatalf("plugin %+v", p)
			}
		}},
		{"one-line plugin config", "plugin \"x\" {\n  config { a = 1 }\n}\n", func(t *testing.T, c *Config) {
			p := c.Plugin("x")
			if strings.TrimSpace(string(p.Source)) != "a = 1" {
				t.Fatalf("source %q", p.Source)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.check(t, mustParse(t, tt.src))
		})
	}
}

func TestContractExample(t *testing.T) {
	c, err := Load("testdata/contract_example.hcl")
	if err != nil {
		t.Fatalf("the full example of docs/CONFIGURATION.md does not load: %v", err)
	}
	if c.NodeName != "n1" || c.ACL.Token != "s3cr3t" || c.API.MaxBody != 1<<20 || c.Terminal.ReplayBytes != 256<<10 {
		t.Fatalf("got %+v", c)
	}
	if !reflect.DeepEqual(c.Server.RetryJoin, []string{"127.0.0.2:7700"}) ||
		!reflect.DeepEqual(c.API.AllowedOrigins, []string{"http://localhost:7700"}) ||
		!reflect.DeepEqual(c.Terminal.Shell, []string{"/bin/sh", "-l"}) {
		t.Fatalf("lists: %+v %+v %+v", c.Server, c.API, c.Terminal)
	}
	var names []string
	for _, p := range c.Plugins {
		names = append(names, p.Name)
	}
	if !reflect.DeepEqual(names, []string{"docker", "standalone", "remote"}) {
		t.Fatalf("plugins %v", names)
	}
	cl := c.Agent("claude-cli")
	if cl == nil || cl.Protocol != "pty" || !reflect.DeepEqual(cl.ResumeArgs, []string{"--resume", "{{resume_token}}"}) ||
		cl.SupportsSessionResume == nil || !*cl.SupportsSessionResume {
		t.Fatalf("claude-cli %+v", cl)
	}
	// The testdata copy must stay the full example of docs/CONFIGURATION.md.
	b, err := os.ReadFile("../../docs/CONFIGURATION.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)## Full example.*?```hcl\n(.*?)```").FindSubmatch(b)
	if m == nil {
		t.Fatal("docs/CONFIGURATION.md: no hcl block in the Full example section")
	}
	own, _ := os.ReadFile("testdata/contract_example.hcl")
	if string(m[1]) != string(own) {
		t.Fatal("testdata/contract_example.hcl differs from the full example in docs/CONFIGURATION.md")
	}
}

// TestPluginSourceReparses checks that a plugin re-parsing its Source gets ranges in
// the original file.
func TestPluginSourceReparses(t *testing.T) {
	c, err := Load("testdata/contract_example.hcl")
	if err != nil {
		t.Fatal(err)
	}
	src, _ := os.ReadFile("testdata/contract_example.hcl")
	lines := strings.Split(string(src), "\n")
	for _, tt := range []struct{ plugin, attr string }{
		{"docker", "image"}, {"standalone", "workspace_root"}, {"remote", "url"},
	} {
		p := c.Plugin(tt.plugin)
		f, diags := hclsyntax.ParseConfig(p.Source, p.Filename, p.Start)
		if diags.HasErrors() {
			t.Fatalf("%s: %v", tt.plugin, diags)
		}
		body := f.Body.(*hclsyntax.Body)
		var a *hclsyntax.Attribute
		if tt.plugin == "remote" {
			a = body.Blocks[0].Body.Attributes[tt.attr]
		} else {
			a = body.Attributes[tt.attr]
		}
		if a == nil {
			t.Fatalf("%s: no %s in %q", tt.plugin, tt.attr, p.Source)
		}
		r := a.SrcRange
		if r.Filename != "testdata/contract_example.hcl" {
			t.Fatalf("filename %q", r.Filename)
		}
		line := lines[r.Start.Line-1]
		if !strings.HasPrefix(line[r.Start.Column-1:], tt.attr) {
			t.Fatalf("%s: range %s points at %q", tt.plugin, r, line)
		}
		if string(src[r.Start.Byte:r.Start.Byte+len(tt.attr)]) != tt.attr {
			t.Fatalf("%s: byte offset %d wrong", tt.plugin, r.Start.Byte)
		}
		// An unknown key in the plugin's config is the plugin's business, not ours.
	}
	if _, err := Parse([]byte("plugin \"x\" {\n  config {\n    anything_goes = 1\n  }\n}\n"), "p.hcl"); err != nil {
		t.Fatalf("plugin config body must be kept raw: %v", err)
	}
}

func TestLoadMerge(t *testing.T) {
	dir := t.TempDir()
	a := writeFile(t, dir, "a.hcl", `
node_name = "a"
log_level = "debug"
ports { http = 8000 }
server {
  retry_join        = ["10.1.1.1:7700", "10.1.1.2:7700"]
  heartbeat_timeout = "500ms"
  election_timeout  = "1s"
}
plugin "one" {
  config { x = 1 }
}
plugin "two" {}
agent "a" {
  protocol    = "pty"
  command     = ["a"]
  new_args    = ["--new"]
  permission  = "allow"
}
agent "b" {
  protocol = "acp"
  command  = ["b"]
}
`)
	b := writeFile(t, dir, "b.hcl", `
node_name = "b"
ports { raft = 9001 }
server { retry_join = ["10.2.2.2:7700"] }
plugin "one" {
  config {
    y = 2
  }
}
agent "a" {
  protocol = "acp"
  command  = ["a2"]
}
agent "c" {
  protocol = "acp"
  command  = ["c"]
}
`)
	c, err := Load(a, b)
	if err != nil {
		t.Fatal(err)
	}
	if c.NodeName != "b" || c.LogLevel != "debug" || c.Ports.HTTP != 8000 || c.Ports.Raft != 9001 {
		t.Fatalf("scalars: %+v", c)
	}
	if !reflect.DeepEqual(c.Server.RetryJoin, []string{"10.2.2.2:7700"}) || c.Server.HeartbeatTimeout != 500*time.Millisecond || c.Server.ElectionTimeout != time.Second {
		t.Fatalf("server %+v", c.Server)
	}
	if len(c.Plugins) != 2 || c.Plugins[0].Name != "one" || c.Plugins[1].Name != "two" {
		t.Fatalf("plugins %+v", c.Plugins)
	}
	if p := c.Plugin("one"); p.Filename != b || strings.TrimSpace(string(p.Source)) != "y = 2" || p.Start.Line != 6 {
		t.Fatalf("plugin one = %+v (%q)", p, p.Source)
	}
	var names []string
	for _, ag := range c.Agents {
		names = append(names, ag.Name)
	}
	if !reflect.DeepEqual(names, []string{"a", "b", "c"}) {
		t.Fatalf("agents %v", names)
	}
	// The later block replaces the earlier one whole: no new_args, default permission.
	if ag := c.Agent("a"); ag.Protocol != "acp" || ag.NewArgs != nil || ag.Permission != "ask" || ag.Command[0] != "a2" || ag.DefRange.Filename != b {
		t.Fatalf("agent a = %+v", ag)
	}

	// Order matters: the other way round, a's values win.
	c, err = Load(b, a)
	if err != nil {
		t.Fatal(err)
	}
	if c.NodeName != "a" || c.Agent("a").Protocol != "pty" || c.Plugin("one").Filename != a {
		t.Fatalf("reverse merge: %+v", c)
	}
}

func TestMergeErrorPointsAtLaterFile(t *testing.T) {
	dir := t.TempDir()
	a := writeFile(t, dir, "a.hcl", "ports { http = 8000 }\n")
	b := writeFile(t, dir, "b.hcl", "\nports {\n  raft = 8000\n}\n")
	_, err := Load(a, b)
	if err == nil || !strings.Contains(err.Error(), b+":3:10: Duplicate port") {
		t.Fatalf("got %v", err)
	}
	// The error about a replaced agent's old attribute must not survive the replacement.
	c := writeFile(t, dir, "c.hcl", "agent \"x\" {\n  protocol = \"acp\"\n  command = [\"x\"]\n  new_args = [\"{{session_id}}\"]\n}\n")
	d := writeFile(t, dir, "d.hcl", "agent \"x\" {\n  command = [\"y\"]\n}\n")
	_, err = Load(c, d)
	if err == nil || !strings.Contains(err.Error(), d+":1:1: Missing protocol") {
		t.Fatalf("got %v", err)
	}
}

func TestErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		src  string
		want string // "LINE:COL: text" expected in the message, after "FILE:"
	}{
		{"syntax error", "ports {\n  http = \n}\n", "2:10: "},
		{"unclosed block", "ports {\n  http = 1\n", "1:7: Unclosed configuration block"},
		{"unknown attribute", "node_name = \"n1\"\nnode_nam = \"x\"\n", `2:1: Unsupported argument`},
		{"unknown attribute in block", "server {\n  bootstrap = 1\n}\n", `2:3: Unsupported argument`},
		{"unknown block", "\nclusters {\n}\n", `2:1: Unsupported block type`},
		{"unknown block in plugin", "plugin \"x\" {\n  settings {}\n}\n", `2:3: Unsupported block type`},
		{"attribute in plugin", "plugin \"x\" {\n  image = \"y\"\n}\n", `2:3: Unsupported argument`},
		{"missing plugin label", "plugin {\n}\n", `1:8: Missing name for plugin`},
		{"label on ports", "ports \"x\" {\n}\n", `1:7: Extraneous label for ports`},
		{"duplicate block", "ports {}\nports {}\n", `2:1: Duplicate ports block`},
		{"duplicate agent in one file", "agent \"a\" {\n protocol = \"acp\"\n command = [\"a\"]\n}\nagent \"a\" {\n protocol = \"acp\"\n command = [\"a\"]\n}\n", `5:1: Duplicate agent "a"`},
		{"duplicate config block", "plugin \"x\" {\n  config {}\n  config {}\n}\n", "3:3: Duplicate config block"},
		{"bad duration", "server {\n  heartbeat_timeout = \"300\"\n}\n", `2:23: Invalid duration: "300" is not a duration.`},
		{"number as duration", "lease {\n  ttl = 10\n}\n", `2:9: Invalid duration`},
		{"negative duration", "lease {\n  ttl = \"-1s\"\n}\n", `2:9: Invalid lease.ttl`},
		{"zero duration", "recovery {\n  health_timeout = \"0s\"\n}\n", `2:20: Invalid recovery.health_timeout`},
		{"bad size unit", "api {\n  max_body = \"1MB2\"\n}\n", `2:14: Invalid size`},
		{"bad size", "terminal {\n  replay_bytes = \"lots\"\n}\n", `2:18: Invalid size`},
		{"fractional size", "terminal {\n  replay_bytes = 1.5\n}\n", `2:18: Invalid size`},
		{"replay buffer below agentctl's minimum", "terminal {\n  replay_bytes = \"1KiB\"\n}\n", `2:18: Invalid terminal.replay_bytes`},
		{"zero size", "api {\n  max_body = 0\n}\n", `2:14: Invalid api.max_body`},
		{"bool as size", "api {\n  max_body = true\n}\n", `2:14: Invalid size`},
		{"huge size", "api {\n  max_body = \"99999999999GiB\"\n}\n", `2:14: Invalid size`},
		{"short cluster secret", "server {\n  cluster_secret = \"short\"\n}\n", `2:20: Invalid server.cluster_secret`},
		{"negative session cap", "limits {\n  max_sessions_per_node = -1\n}\n", `2:27: Invalid limits.max_sessions_per_node`},
		{"negative websocket cap", "limits {\n  max_websockets = -1\n}\n", `2:20: Invalid limits.max_websockets`},
		{"negative request rate", "limits {\n  max_request_rate = -5\n}\n", `2:22: Invalid limits.max_request_rate`},
		{"tls without a key", "tls {\n  ca_file = \"ca.pem\"\n  cert_file = \"n1.pem\"\n}\n", `2:13: Missing tls.key_file`},
		{"verify_incoming without tls", "tls {\n  verify_incoming = true\n}\n", `2:21: Invalid tls.verify_incoming`},
		{"read token without token", "acl {\n  read_token = \"r\"\n}\n", `2:16: Invalid acl.read_token`},
		{"read token same as token", "acl {\n  token = \"t\"\n  read_token = \"t\"\n}\n", `3:16: Invalid acl.read_token`},
		{"bootstrap_expect 2", "server {\n  bootstrap_expect = 2\n}\n", `2:22: Invalid server.bootstrap_expect`},
		{"server nice above 0", "server {\n  nice = 5\n}\n", `2:10: Invalid server.nice`},
		{"server nice below -20", "server {\n  nice = -21\n}\n", `2:10: Invalid server.nice`},
		{"port 0", "ports {\n  http = 0\n}\n", `2:10: Invalid ports.http`},
		{"port 70000", "ports {\n  raft = 70000\n}\n", `2:10: Invalid ports.raft`},
		{"fractional port", "ports {\n  raft = 77.5\n}\n", `2:10: Invalid number`},
		{"string port", "ports {\n  raft = \"x\"\n}\n", `2:10: Incorrect attribute value type`},
		{"duplicate ports", "ports {\n  http = 7700\n  raft = 7700\n}\n", `3:10: Duplicate port`},
		{"bad log_level", "log_level = \"verbose\"\n", `1:13: Invalid log_level`},
		{"bad log_json", "log_json = \"maybe\"\n", `1:12: Incorrect attribute value type`},
		{"bad node_name", "node_name = \"a b\"\n", `1:13: Invalid node_name`},
		{"empty data_dir", "data_dir = \"\"\n", `1:12: Invalid data_dir`},
		{"unspecified bind_addr", "bind_addr = \"0.0.0.0\"\n", `1:13: Invalid bind_addr`},
		{"hostname bind_addr", "bind_addr = \"localhost\"\n", `1:13: Invalid bind_addr`},
		{"bad retry_join", "server {\n  retry_join = [\"10.0.0.1:7700\", \"10.0.0.2\"]\n}\n", `2:34: Invalid server.retry_join`},
		{"retry_join not a list", "server {\n  retry_join = 7\n}\n", `2:16: Incorrect attribute value type`},
		{"retry_join null element", "server {\n  retry_join = [\"a:1\", null]\n}\n", `2:16: Invalid list element`},
		{"lease above heartbeat", "server {\n  leader_lease_timeout = \"400ms\"\n}\n", `2:26: Invalid server.leader_lease_timeout`},
		{"election below heartbeat", "server {\n  heartbeat_timeout = \"1s\"\n}\n", `2:23: Invalid server.election_timeout`},
		{"raft timing too low", "server {\n  leader_lease_timeout = \"1ms\"\n}\n", `2:26: Invalid server.leader_lease_timeout`},
		{"bad origin", "api {\n  allowed_origins = [\"localhost:7700\"]\n}\n", `2:22: Invalid api.allowed_origins`},
		{"bad protocol", "agent \"a\" {\n  protocol = \"ssh\"\n  command = [\"a\"]\n}\n", `2:14: Invalid protocol`},
		{"missing protocol", "agent \"a\" {\n  command = [\"a\"]\n}\n", `1:1: Missing protocol`},
		{"empty command", "agent \"a\" {\n  protocol = \"acp\"\n  command  = []\n}\n", `3:14: Missing command`},
		{"empty program", "agent \"a\" {\n  protocol = \"acp\"\n  command  = [\"\"]\n}\n", `3:14: Missing command`},
		{"missing command", "agent \"a\" {\n  protocol = \"acp\"\n}\n", `1:1: Missing command`},
		{"bad permission", "agent \"a\" {\n  protocol = \"acp\"\n  command = [\"a\"]\n  permission = \"maybe\"\n}\n", `4:16: Invalid agent.a.permission`},
		{"bad auto_allow", "agent \"a\" {\n  protocol = \"acp\"\n  command = [\"a\"]\n  auto_allow = [\"read\", \"sudo\"]\n}\n", `4:25: Invalid tool kind`},
		{"negative permission_timeout", "agent \"a\" {\n  protocol = \"acp\"\n  command = [\"a\"]\n  permission_timeout = \"-1s\"\n}\n", `4:24: Invalid permission_timeout`},
		{"number as permission_timeout", "agent \"a\" {\n  protocol = \"acp\"\n  command = [\"a\"]\n  permission_timeout = 30\n}\n", `4:24: Invalid duration`},
		{"bad agent name", "agent \"a/b\" {\n  protocol = \"acp\"\n  command = [\"a\"]\n}\n", `1:1: Invalid agent name "a/b"`},
		{"bad plugin name", "plugin \"../x\" {}\n", `1:8: Invalid plugin name "../x"`},
		{"unknown template", "agent \"a\" {\n  protocol = \"pty\"\n  command = [\"a\"]\n  resume_args = [\"--resume\", \"{{token}}\"]\n}\n", `4:30: Unknown template`},
		{"bool as supports_session_resume", "agent \"a\" {\n  protocol = \"acp\"\n  command = [\"a\"]\n  supports_session_resume = \"perhaps\"\n}\n", `4:29: Incorrect attribute value type`},
		{"bad auto_resume", "recovery {\n  auto_resume = \"some\"\n}\n", `2:17: Invalid recovery.auto_resume`},
		{"empty shell", "terminal {\n  shell = []\n}\n", `2:11: Invalid terminal.shell`},
		{"variable reference", "data_dir = var.dir\n", `1:12: Expression not allowed`},
		{"function call", "data_dir = upper(\"x\")\n", `1:12: Expression not allowed`},
		{"interpolation", "data_dir = \"/a/${1e100000000}\"\n", `1:18: Expression not allowed`},
		{"arithmetic", "ports {\n  http = 7000 + 700\n}\n", `2:10: Expression not allowed`},
		{"number as string", "node_name = 1e100000000\n", `1:13: Incorrect attribute value type`},
		{"huge port", "ports {\n  http = 1e100000000\n}\n", `2:10: Invalid number`},
		{"huge size number", "api {\n  max_body = -1e100000000\n}\n", `2:14: Invalid size`},
		{"number in list", "server {\n  retry_join = [1]\n}\n", `2:16: Invalid list element`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, dir, strings.ReplaceAll(tt.name, " ", "_")+".hcl", tt.src)
			c, err := Load(path)
			if err == nil {
				t.Fatalf("no error; got %+v", c)
			}
			if c != nil {
				t.Fatalf("a config was returned with the error")
			}
			var de *DiagError
			if !errors.As(err, &de) || !de.Diags.HasErrors() {
				t.Fatalf("error %T is not a *DiagError with errors: %v", err, err)
			}
			msg := err.Error()
			if !strings.Contains(msg, path+":"+tt.want) {
				t.Fatalf("message lacks %q:\n%s", path+":"+tt.want, msg)
			}
			assertHints(t, msg)
			// The same source in memory gives the same message under its own name.
			_, perr := Parse([]byte(tt.src), "mem.hcl")
			if perr == nil || !strings.Contains(perr.Error(), "mem.hcl:"+tt.want) {
				t.Fatalf("Parse: %v", perr)
			}
		})
	}
}

// assertHints checks that every line of msg is FILE:LINE:COL: … with a hint.
func assertHints(t *testing.T, msg string) {
	t.Helper()
	for _, line := range strings.Split(msg, "\n") {
		if !regexp.MustCompile(`^[^:]+:\d+:\d+: \S.*hint: \S`).MatchString(line) {
			t.Fatalf("line is not FILE:LINE:COL: summary … hint: …: %q", line)
		}
	}
}

func TestMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nope.hcl")
	_, err := Load(path)
	var de *DiagError
	if !errors.As(err, &de) {
		t.Fatalf("got %T %v", err, err)
	}
	msg := err.Error()
	if !strings.Contains(msg, path) || !strings.Contains(msg, "no such file") || !strings.Contains(msg, "hint: ") {
		t.Fatalf("unclear: %s", msg)
	}
}

func TestAllErrorsReported(t *testing.T) {
	_, err := Parse([]byte("ports {\n  http = 0\n}\nserver {\n  bootstrap_expect = 4\n}\nlog_level = \"x\"\n"), "m.hcl")
	if err == nil {
		t.Fatal("no error")
	}
	lines := strings.Split(err.Error(), "\n")
	for i, want := range []string{"m.hcl:2:10:", "m.hcl:5:22:", "m.hcl:7:13:"} {
		if len(lines) != 3 || !strings.HasPrefix(lines[i], want) {
			t.Fatalf("line %d should start with %s (in file order):\n%s", i, want, err)
		}
	}
	assertHints(t, err.Error())
	var de *DiagError
	errors.As(err, &de)
	var sb strings.Builder
	if err := de.WriteText(&sb, 80, false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(sb.String(), "http = 0") {
		t.Fatalf("snippet missing:\n%s", sb.String())
	}
}

func TestValidateInCode(t *testing.T) {
	c := Default()
	c.Ports.Raft = c.Ports.HTTP
	c.Agents = append(c.Agents, &Agent{Name: "x", Protocol: "acp", Permission: "deny"})
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "Duplicate port") || !strings.Contains(err.Error(), "Missing command") {
		t.Fatalf("got %v", err)
	}
	if !strings.Contains(err.Error(), "hint: ") {
		t.Fatalf("no hint: %v", err)
	}
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true}, {"4096", 4096, true}, {"256KiB", 256 << 10, true}, {"1MiB", 1 << 20, true},
		{"64KB", 64000, true}, {"1GiB", 1 << 30, true}, {"2 mib", 2 << 20, true}, {"10B", 10, true},
		{"1TiB", 1 << 40, true}, {"", 0, false}, {"KiB", 0, false}, {"-1", 0, false},
		{"1.5MiB", 0, false}, {"1XB", 0, false}, {"9223372036854775807", 1<<63 - 1, true},
		{"9223372036854775808", 0, false}, {"9000000TiB", 0, false},
	}
	for _, tt := range tests {
		got, err := ParseSize(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestDev(t *testing.T) {
	for _, dir := range []string{t.TempDir(), `/tmp/we"ird ${x} %{y} \dir`} {
		c := Dev(dir)
		if c.DataDir != dir || c.Server.BootstrapExpect != 1 {
			t.Fatalf("Dev(%q) = %+v", dir, c)
		}
		if c.Agent("demo") == nil || c.Agent("demo").Command[0] != "paddock-demo-agent" || c.Agent("demo-tty") == nil {
			t.Fatalf("agents %+v", c.Agents)
		}
		p := c.Plugin("standalone")
		f, diags := hclsyntax.ParseConfig(p.Source, p.Filename, p.Start)
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		attrs, _ := f.Body.JustAttributes()
		v, diags := attrs["workspace_root"].Expr.Value(nil)
		if diags.HasErrors() || v.AsString() != filepath.Join(dir, "workspaces") {
			t.Fatalf("workspace_root = %#v %v", v, diags)
		}
	}
	if Dev("").DataDir != DefaultDataDir {
		t.Fatal("empty dataDir")
	}
}

func TestRepoConfig(t *testing.T) {
	c, err := Load("../../config.hcl")
	if err != nil {
		t.Fatal(err)
	}
	repo, _ := filepath.Abs("../..")
	if c.NodeName != "n1" || c.DataDir != filepath.Join(repo, "data") || c.Ports.HTTP != 7700 || c.Ports.Raft != 7701 || c.PluginDir != filepath.Join(repo, "bin", "plugins") {
		t.Fatalf("got %+v", c)
	}
	if c.Plugin("standalone") == nil || !strings.Contains(string(c.Plugin("standalone").Source), `workspace_root = "./data/workspaces"`) {
		t.Fatalf("standalone %+v", c.Plugin("standalone"))
	}
	tty := c.Agent("demo-tty")
	if c.Agent("demo") == nil || c.Agent("demo-noresume") == nil || tty == nil || tty.Protocol != "pty" ||
		!reflect.DeepEqual(tty.NewArgs, []string{"--session-id", "{{resume_token}}"}) || !*tty.SupportsSessionResume {
		t.Fatalf("agents %+v", c.Agents)
	}
}

// TestDiagErrorWithoutSubject covers diagnostics that carry no range.
func TestDiagErrorWithoutSubject(t *testing.T) {
	e := &DiagError{Diags: hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "S", Detail: "multi\nline"}}}
	if got := e.Error(); got != "S: multi line hint: see docs/CONFIGURATION.md" {
		t.Fatalf("got %q", got)
	}
}

// TestNodeSecret: node-to-node routes never take the user token, nor
// anything derived from it: the node secret is server.cluster_secret (a
// single server without one is given a random one at start), and servers
// that join each other with acl.token must be configured with one.
func TestNodeSecret(t *testing.T) {
	open := mustParse(t, "")
	if open.NodeSecret() != "" {
		t.Fatalf("open API: node secret %q, want none", open.NodeSecret())
	}
	withToken := mustParse(t, "acl {\n  token = \"user-token\"\n}\n")
	if got := withToken.NodeSecret(); got != "" {
		t.Fatalf("node secret %q derived from the user token; want none until the server makes its own", got)
	}
	explicit := mustParse(t, "acl {\n  token = \"user-token\"\n}\nserver {\n  cluster_secret = \"0123456789abcdef-cluster\"\n}\n")
	if explicit.NodeSecret() != "0123456789abcdef-cluster" {
		t.Fatalf("cluster_secret not used: %q", explicit.NodeSecret())
	}
	for _, src := range []string{
		"acl {\n  token = \"user-token\"\n}\nserver {\n  bootstrap_expect = 3\n}\n",
	} {
		_, err := Parse([]byte(src), "test.hcl")
		if err == nil || !strings.Contains(err.Error(), "Missing server.cluster_secret") {
			t.Errorf("a cluster with acl.token and no cluster_secret: %v, want Missing server.cluster_secret", err)
		}
	}
	// Without a user token (an open API) servers may join without one.
	if _, err := Parse([]byte("server {\n  bootstrap_expect = 3\n}\n"), "test.hcl"); err != nil {
		t.Errorf("an open cluster: %v", err)
	}
}
