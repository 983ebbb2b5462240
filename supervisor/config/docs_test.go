package config

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// docKeys returns the keys of the tables in the "## Keys" section of
// docs/CONFIGURATION.md (the server's own keys; plugin keys follow it).
func docKeys(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../docs/CONFIGURATION.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "\n## Keys\n")
	end := strings.Index(doc, "\n## Plugin keys\n")
	if start < 0 || end < start {
		t.Fatal(`docs/CONFIGURATION.md has no "## Keys" section followed by "## Plugin keys"`)
	}
	var keys []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([^`]+)` \\|").FindAllStringSubmatch(doc[start:end], -1) {
		keys = append(keys, m[1])
	}
	sort.Strings(keys)
	return keys
}

// allowedHint loads src, which must set one unknown argument, and returns the
// loader's hint listing what the enclosing block allows.
func allowedHint(t *testing.T, src string) string {
	t.Helper()
	_, err := Parse([]byte(src), "probe.hcl")
	var de *DiagError
	if !errors.As(err, &de) || len(de.Diags) == 0 {
		t.Fatalf("%s: want an unknown-argument error, got %v", src, err)
	}
	for _, d := range de.Diags {
		if strings.Contains(d.Detail, "allowed in") {
			return d.Detail
		}
	}
	t.Fatalf("%s: no diagnostic lists the allowed arguments: %v", src, err)
	return ""
}

// listAfter returns the comma-separated names after prefix, up to ";" or the end.
func listAfter(hint, prefix string) []string {
	i := strings.Index(hint, prefix)
	if i < 0 {
		return nil
	}
	rest := hint[i+len(prefix):]
	if j := strings.Index(rest, ";"); j >= 0 {
		rest = rest[:j]
	}
	var out []string
	for _, s := range strings.Split(rest, ", ") {
		out = append(out, strings.TrimSpace(s))
	}
	return out
}

// loaderKeys asks the loader itself, through the hints of its unknown-argument
// errors, which arguments each block accepts.
func loaderKeys(t *testing.T) []string {
	top := allowedHint(t, "no_such_key_zz = 1\n")
	keys := listAfter(top, "arguments allowed in the top level: ")
	blocks := listAfter(top, "blocks allowed in the top level: ")
	if len(keys) == 0 || len(blocks) == 0 {
		t.Fatalf("unexpected hint %q", top)
	}
	for _, b := range blocks {
		name, labelled := strings.CutSuffix(b, ` "NAME" { … }`)
		if !labelled {
			name = strings.TrimSuffix(b, " { … }")
			hint := allowedHint(t, name+" {\n  no_such_key_zz = 1\n}\n")
			for _, k := range listAfter(hint, "arguments allowed in "+name+": ") {
				keys = append(keys, name+"."+k)
			}
			continue
		}
		hint := allowedHint(t, name+" \"x\" {\n  no_such_key_zz = 1\n}\n")
		where := name + ` "x": `
		for _, k := range listAfter(hint, "arguments allowed in "+where) {
			keys = append(keys, name+".NAME."+k)
		}
		for _, nb := range listAfter(hint, "blocks allowed in "+where) {
			keys = append(keys, name+".NAME."+strings.TrimSuffix(nb, " { … }"))
		}
	}
	sort.Strings(keys)
	return keys
}

// TestConfigurationDocListsEveryKey keeps docs/CONFIGURATION.md's key table and
// the loader in step, both ways: every key the loader accepts is documented,
// and every documented key is accepted.
func TestConfigurationDocListsEveryKey(t *testing.T) {
	doc, loader := docKeys(t), loaderKeys(t)
	for _, want := range []string{"server.cluster_secret", "limits.max_sessions_per_node", "agent.NAME.protocol", "plugin.NAME.config"} {
		if !slices.Contains(loader, want) {
			t.Fatalf("the loader probe misses %s (got %v): the hint format changed", want, loader)
		}
	}
	for _, k := range loader {
		if !slices.Contains(doc, k) {
			t.Errorf("the loader accepts %s but docs/CONFIGURATION.md does not document it", k)
		}
	}
	for _, k := range doc {
		if !slices.Contains(loader, k) {
			t.Errorf("docs/CONFIGURATION.md documents %s but the loader does not accept it", k)
		}
	}
}

// TestConfigurationDocDefaults checks the defaults the table states for
// values whose default is a constant of this package.
func TestConfigurationDocDefaults(t *testing.T) {
	b, err := os.ReadFile("../../docs/CONFIGURATION.md")
	if err != nil {
		t.Fatal(err)
	}
	defaults := map[string]string{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([^`]+)` \\| [^|]+ \\| ([^|]+) \\|").FindAllStringSubmatch(string(b), -1) {
		defaults[m[1]] = strings.TrimSpace(m[2])
	}
	d := Default()
	for key, want := range map[string]string{
		"data_dir":                     "`\"" + d.DataDir + "\"`",
		"bind_addr":                    "`\"" + d.BindAddr + "\"`",
		"log_level":                    "`\"" + d.LogLevel + "\"`",
		"plugin_dir":                   "`\"" + d.PluginDir + "\"`",
		"ports.http":                   "`7700`",
		"ports.raft":                   "`7701`",
		"server.bootstrap_expect":      "`1`",
		"server.heartbeat_timeout":     "`\"" + d.Server.HeartbeatTimeout.String() + "\"`",
		"server.election_timeout":      "`\"" + d.Server.ElectionTimeout.String() + "\"`",
		"server.leader_lease_timeout":  "`\"" + d.Server.LeaderLeaseTimeout.String() + "\"`",
		"server.nice":                  "`" + strconv.Itoa(d.Server.Nice) + "`",
		"recovery.auto_resume":         "`\"" + d.Recovery.AutoResume + "\"`",
		"recovery.health_timeout":      "`\"" + d.Recovery.HealthTimeout.String() + "\"`",
		"lease.ttl":                    "`\"" + d.Lease.TTL.String() + "\"`",
		"limits.max_sessions_per_node": "`0`",
		"agent.NAME.permission":        "`\"" + DefaultPermission + "\"`",
		"api.max_body":                 "`\"1MiB\"`",
		"terminal.replay_bytes":        "`\"256KiB\"`",
		"terminal.idle_timeout":        "`\"30m\"`",
	} {
		if defaults[key] != want {
			t.Errorf("docs/CONFIGURATION.md: default of %s is %s, the code's is %s", key, defaults[key], want)
		}
	}
	if d.Ports.HTTP != 7700 || d.Ports.Raft != 7701 || d.Server.BootstrapExpect != 1 || d.API.MaxBody != 1<<20 ||
		d.Terminal.ReplayBytes != 256<<10 || d.Terminal.IdleTimeout.String() != "30m0s" || d.Limits.MaxSessionsPerNode != 0 {
		t.Errorf("a default changed; update docs/CONFIGURATION.md and this test: %+v", d)
	}
}

// TestRelativePathsAreRelativeToTheirFile: a server started from another
// directory uses the data and plugins its file names; an absolute path, a
// default and Parse's paths are left as they are. Every key of PathKeys is
// covered.
func TestRelativePathsAreRelativeToTheirFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) string {
		p := dir + "/" + name
		if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	other := t.TempDir()
	rel := write("rel.hcl", "plugin_dir = \"./bin/plugins\"\ndata_dir = \"data\"\ntls {\n  ca_file = \"ca.pem\"\n  cert_file = \"tls/n1.pem\"\n  key_file = \"/etc/paddock/n1-key.pem\"\n}\n")
	abs := write("abs.hcl", "plugin_dir = \"/opt/paddock/plugins\"\ndata_dir = \"/var/lib/paddock\"\n")
	none := write("none.hcl", "log_level = \"debug\"\n")
	elsewhere := other + "/elsewhere.hcl"
	if err := os.WriteFile(elsewhere, []byte("data_dir = \"../x/d\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		files              []string
		pluginDir, dataDir string
	}{
		{[]string{rel}, dir + "/bin/plugins", dir + "/data"},
		{[]string{abs}, "/opt/paddock/plugins", "/var/lib/paddock"},
		{[]string{none}, DefaultPluginDir, DefaultDataDir},
		{[]string{rel, none}, dir + "/bin/plugins", dir + "/data"},
		{[]string{rel, abs}, "/opt/paddock/plugins", "/var/lib/paddock"},
		// Each key is relative to the file that set it last.
		{[]string{rel, elsewhere}, dir + "/bin/plugins", filepath.Join(filepath.Dir(other), "x", "d")},
	} {
		c, err := Load(tt.files...)
		if err != nil {
			t.Fatal(err)
		}
		if c.PluginDir != tt.pluginDir || c.DataDir != tt.dataDir {
			t.Errorf("Load(%v): plugin_dir %q data_dir %q, want %q %q", tt.files, c.PluginDir, c.DataDir, tt.pluginDir, tt.dataDir)
		}
	}
	c, err := Load(rel)
	if err != nil {
		t.Fatal(err)
	}
	if c.TLS.CAFile != dir+"/ca.pem" || c.TLS.CertFile != dir+"/tls/n1.pem" || c.TLS.KeyFile != "/etc/paddock/n1-key.pem" {
		t.Errorf("tls files %q %q %q, want them relative to %s", c.TLS.CAFile, c.TLS.CertFile, c.TLS.KeyFile, dir)
	}
	c, err = Parse([]byte("plugin_dir = \"./p\"\ndata_dir = \"d\"\n"), dir+"/x.hcl")
	if err != nil || c.PluginDir != "./p" || c.DataDir != "d" {
		t.Fatalf("Parse: %q %q %v", c.PluginDir, c.DataDir, err)
	}
	// Every path key is one the test above sets.
	src, err := os.ReadFile(rel)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range PathKeys {
		if !strings.Contains(string(src), k[strings.LastIndex(k, ".")+1:]+" = ") {
			t.Errorf("path key %s is not covered by this test", k)
		}
	}
}
