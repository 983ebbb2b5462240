package remoteexec_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/paddockhq/paddock/plugins/remote/remoteexec"
	"github.com/paddockhq/paddock/shared/runtime"
)

// The config body starts at line 20, column 5 of paddock.hcl, as if nested
// in `plugin "remote" { config { … } }`.
var configStart = hcl.Pos{Line: 20, Column: 5, Byte: 400}

func secretFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "host.secret")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestParseConfigValid(t *testing.T) {
	sf := secretFile(t, "s3cret\n")
	src := fmt.Sprintf(`host "gpu-box" {
  url         = "http://10.0.0.5:7800/"
  secret_file = %q
}
host "b" {
  url         = "https://b.example:7800"
  secret_file = %q
}
reconnect {
  initial  = "10ms"
  max      = "1s"
  attempts = 4
}
`, sf, sf)
	cfg, diags := remoteexec.ParseConfig(runtime.ConfigSource{Filename: "paddock.hcl", Source: []byte(src), Start: configStart})
	if diags.HasErrors() {
		t.Fatalf("valid config refused: %s", diags.Error())
	}
	if len(cfg.Hosts) != 2 || cfg.Hosts[0].Name != "gpu-box" || cfg.Hosts[0].URL != "http://10.0.0.5:7800" || cfg.Hosts[0].Secret != "s3cret" || cfg.Hosts[1].Name != "b" {
		t.Errorf("hosts = %+v", cfg.Hosts)
	}
	want := remoteexec.Reconnect{Initial: 10 * time.Millisecond, Max: time.Second, Attempts: 4, Timeout: remoteexec.DefaultReconnect.Timeout}
	if cfg.Reconnect != want {
		t.Errorf("reconnect = %+v, want %+v", cfg.Reconnect, want)
	}
}

func TestParseConfigInvalid(t *testing.T) {
	sf := secretFile(t, "s3cret")
	empty := secretFile(t, " \n")
	missing := filepath.Join(t.TempDir(), "nope.secret")
	host := func(body string) string { return "host \"h\" {\n" + body + "}\n" }
	good := fmt.Sprintf("  url = \"http://127.0.0.1:7800\"\n  secret_file = %q\n", sf)
	for _, tc := range []struct {
		name    string
		src     string
		summary string
		line    int // 1-based line of the diagnostic in src
		col     int // 1-based column in src
	}{
		{"no_host_block", "", "Missing host block", 1, 1},
		{"only_reconnect", "reconnect {\n  attempts = 3\n}\n", "Missing host block", 1, 1},
		{"unknown_top_attribute", host(good) + "hosts = 1\n", "Unsupported argument", 5, 1},
		{"unknown_host_attribute", host(good + "  token = \"x\"\n"), "Unsupported argument", 4, 3},
		{"bad_url_scheme", host(fmt.Sprintf("  url = \"ftp://x:1\"\n  secret_file = %q\n", sf)), "Invalid url", 2, 9},
		{"bad_url_text", host(fmt.Sprintf("  url = \"not a url\"\n  secret_file = %q\n", sf)), "Invalid url", 2, 9},
		{"url_with_path", host(fmt.Sprintf("  url = \"http://x:1/api\"\n  secret_file = %q\n", sf)), "Invalid url", 2, 9},
		{"url_not_string", host(fmt.Sprintf("  url = 7800\n  secret_file = %q\n", sf)), "Invalid url", 2, 9},
		{"missing_url", host(fmt.Sprintf("  secret_file = %q\n", sf)), "Missing required argument", 1, 10},
		{"missing_secret_file", host("  url = \"http://x:1\"\n"), "Missing required argument", 1, 10},
		{"secret_file_absent", host(fmt.Sprintf("  url = \"http://x:1\"\n  secret_file = %q\n", missing)), "Invalid secret_file", 3, 17},
		{"secret_file_empty", host(fmt.Sprintf("  url = \"http://x:1\"\n  secret_file = %q\n", empty)), "Invalid secret_file", 3, 17},
		{"fingerprint_not_hex", host(good + "  fingerprint = \"zz\"\n"), "Invalid fingerprint", 4, 17},
		{"fingerprint_with_http", host(good + "  fingerprint = \"" + strings.Repeat("ab", 32) + "\"\n"), "Invalid fingerprint", 4, 17},
		{"bad_host_label", "host \"a b\" {\n" + good + "}\n", "Invalid host name", 1, 6},
		{"duplicate_host", host(good) + host(good), "Duplicate host", 5, 6},
		{"host_without_label", "host {\n" + good + "}\n", "Missing name for host", 1, 6},
		{"bad_initial", host(good) + "reconnect {\n  initial = \"soon\"\n}\n", "Invalid initial", 6, 13},
		{"negative_max", host(good) + "reconnect {\n  max = \"-1s\"\n}\n", "Invalid max", 6, 9},
		{"max_below_initial", host(good) + "reconnect {\n  initial = \"2s\"\n  max = \"1s\"\n}\n", "Invalid max", 7, 9},
		{"zero_attempts", host(good) + "reconnect {\n  attempts = 0\n}\n", "Invalid attempts", 6, 14},
		{"fractional_attempts", host(good) + "reconnect {\n  attempts = 2.5\n}\n", "Invalid attempts", 6, 14},
		{"unknown_reconnect_attribute", host(good) + "reconnect {\n  jitter = true\n}\n", "Unsupported argument", 6, 3},
		{"two_reconnect_blocks", host(good) + "reconnect {\n}\nreconnect {\n}\n", "Duplicate reconnect block", 7, 1},
		{"syntax_error", "host \"h\" {\n  url = = 1\n}\n", "", 2, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, diags := remoteexec.ParseConfig(runtime.ConfigSource{Filename: "paddock.hcl", Source: []byte(tc.src), Start: configStart})
			if !diags.HasErrors() {
				t.Fatalf("config accepted:\n%s", tc.src)
			}
			var d *hcl.Diagnostic
			for _, x := range diags {
				if x.Severity == hcl.DiagError && strings.Contains(x.Summary, tc.summary) {
					d = x
					break
				}
			}
			if d == nil {
				t.Fatalf("no %q diagnostic in %s", tc.summary, diags.Error())
			}
			if d.Subject == nil {
				t.Fatalf("diagnostic %q has no range", d.Summary)
			}
			wantLine := configStart.Line + tc.line - 1
			wantCol := tc.col
			if tc.line == 1 {
				wantCol += configStart.Column - 1
			}
			if d.Subject.Filename != "paddock.hcl" || d.Subject.Start.Line != wantLine || (tc.col != 0 && d.Subject.Start.Column != wantCol) {
				t.Errorf("diagnostic %q at %s, want paddock.hcl:%d,%d", d.Summary, d.Subject, wantLine, wantCol)
			}
			// The operator sees file:line,col in the message.
			if !strings.Contains(d.Error(), fmt.Sprintf("paddock.hcl:%d,", wantLine)) {
				t.Errorf("diagnostic text %q lacks the file:line", d.Error())
			}
		})
	}
}

func TestSetConfigRefusedKeepsPrevious(t *testing.T) {
	sf := secretFile(t, "s3cret")
	r := remoteexec.New(nil)
	ctx := context.Background()
	valid := fmt.Sprintf("host \"h\" {\n  url = \"http://127.0.0.1:1\"\n  secret_file = %q\n}\n", sf)
	if diags, err := r.SetConfig(ctx, runtime.ConfigSource{Filename: "a.hcl", Source: []byte(valid)}); err != nil || diags.HasErrors() {
		t.Fatalf("SetConfig(valid): %v %s", err, diags.Error())
	}
	if diags, err := r.SetConfig(ctx, runtime.ConfigSource{Filename: "a.hcl", Source: []byte("bogus = 1\n")}); err != nil || !diags.HasErrors() {
		t.Fatalf("SetConfig(invalid) = %v, %v; want error diagnostics", diags, err)
	}
	// The valid configuration is still in force: host "h" is known (and
	// down, so unavailable rather than an unknown host or missing config).
	_, err := r.Launch(ctx, runtime.LaunchRequest{SessionID: "s1", AgentctlSecret: "0123456789abcdef", Options: map[string]string{"host": "h"}})
	if err == nil || !strings.Contains(err.Error(), `agentctl host "h"`) {
		t.Fatalf("Launch after a refused config: %v", err)
	}
}

func TestConfigSchemaDocumentsBlocks(t *testing.T) {
	s, err := remoteexec.New(nil).ConfigSchema(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, b := range s.Blocks {
		got[b.Type] = len(b.Body.Attributes)
	}
	if got["host"] != 3 || got["reconnect"] != 4 {
		t.Errorf("schema blocks = %v, want host (url, fingerprint, secret_file) and reconnect (initial, max, attempts, timeout)", got)
	}
}

func FuzzParseConfig(f *testing.F) {
	f.Add("host \"a\" {\n url = \"http://x:1\"\n secret_file = \"/nonexistent\"\n}\n")
	f.Add("reconnect {\n initial = \"1s\"\n max = \"2s\"\n attempts = 3\n}\n")
	f.Add("host \"a\" {\n}\nhost \"a\" {\n}\n")
	f.Add("")
	f.Fuzz(func(t *testing.T, src string) {
		cfg, diags := remoteexec.ParseConfig(runtime.ConfigSource{Filename: "f.hcl", Source: []byte(src), Start: configStart})
		if diags.HasErrors() {
			for _, d := range diags {
				if d.Severity == hcl.DiagError && d.Subject != nil && d.Subject.Filename != "f.hcl" {
					t.Fatalf("diagnostic in file %q", d.Subject.Filename)
				}
			}
			return
		}
		if len(cfg.Hosts) == 0 {
			t.Fatalf("accepted a config without hosts: %q", src)
		}
		if cfg.Reconnect.Attempts < 1 || cfg.Reconnect.Initial <= 0 || cfg.Reconnect.Max < cfg.Reconnect.Initial {
			t.Fatalf("accepted reconnect %+v", cfg.Reconnect)
		}
	})
}
