package remoteexec

import (
	"fmt"
	"math/big"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/paddockhq/paddock/shared/runtime"
)

// Config is the remote plugin's `config { … }` body.
type Config struct {
	// Hosts are the agentctl host daemons, in declaration order (the first
	// healthy one is the default for a launch).
	Hosts []Host
	// Reconnect is the backoff policy of Recover.
	Reconnect Reconnect
}

// Host is one `host "name" { url, secret_file }` block.
type Host struct {
	Name       string
	URL        string
	SecretFile string
	// Secret is read from SecretFile at configuration time; never logged.
	Secret string
}

// Reconnect is the `reconnect { … }` block: Recover health-checks an
// executor up to Attempts times, waiting Initial after the first failure,
// doubling up to Max between later ones. Timeout bounds each health check.
type Reconnect struct {
	Initial  time.Duration
	Max      time.Duration
	Attempts int
	Timeout  time.Duration
}

// DefaultReconnect is used when the config has no reconnect block (or leaves
// some of its attributes out).
var DefaultReconnect = Reconnect{Initial: 200 * time.Millisecond, Max: 5 * time.Second, Attempts: 10, Timeout: 2 * time.Second}

// host looks a host up by name.
func (c Config) host(name string) (Host, bool) {
	for _, h := range c.Hosts {
		if h.Name == name {
			return h, true
		}
	}
	return Host{}, false
}

var (
	rootSchema = &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{
		{Type: "host", LabelNames: []string{"name"}},
		{Type: "reconnect"},
	}}
	hostSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
		{Name: "url", Required: true},
		{Name: "secret_file", Required: true},
	}}
	reconnectSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
		{Name: "initial"}, {Name: "max"}, {Name: "attempts"}, {Name: "timeout"},
	}}
)

// schemaDoc documents the config body for ConfigSchema.
var schemaDoc = runtime.Schema{Blocks: []runtime.BlockSchema{
	{Type: "host", LabelNames: []string{"name"}, Description: "an agentctl host daemon (one or more; the first healthy one is the default, runtime_options.host picks one by name)",
		Body: runtime.Schema{Attributes: []runtime.AttributeSchema{
			{Name: "url", Type: "string", Required: true, Description: "base URL of the host API, http:// or https://, e.g. http://10.0.0.5:7800"},
			{Name: "secret_file", Type: "string", Required: true, Description: "file holding the host API secret (read at configuration time)"},
		}}},
	{Type: "reconnect", Description: "backoff of recover's health checks",
		Body: runtime.Schema{Attributes: []runtime.AttributeSchema{
			{Name: "initial", Type: "duration", Description: "wait after the first failed check (default 200ms)"},
			{Name: "max", Type: "duration", Description: "longest wait between checks (default 5s)"},
			{Name: "attempts", Type: "number", Description: "health checks before giving up (default 10)"},
			{Name: "timeout", Type: "duration", Description: "bound of each health check (default 2s)"},
		}}},
}}

// ParseConfig parses a config body; diagnostics carry ranges in src.Filename.
// It reads every host's secret_file.
func ParseConfig(src runtime.ConfigSource) (Config, hcl.Diagnostics) {
	cfg := Config{Reconnect: DefaultReconnect}
	start := src.Start
	if start.Line == 0 {
		start = hcl.Pos{Line: 1, Column: 1}
	}
	file, diags := hclsyntax.ParseConfig(src.Source, src.Filename, start)
	if diags.HasErrors() {
		return cfg, diags
	}
	content, cdiags := file.Body.Content(rootSchema)
	diags = append(diags, cdiags...)
	seen := map[string]hcl.Range{}
	var reconnects int
	for _, b := range content.Blocks {
		switch b.Type {
		case "host":
			h, hdiags := parseHost(b, src)
			diags = append(diags, hdiags...)
			if prev, dup := seen[h.Name]; dup {
				diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Duplicate host",
					Detail: fmt.Sprintf("host %q is already declared at %s.", h.Name, prev), Subject: b.LabelRanges[0].Ptr()})
				continue
			}
			seen[h.Name] = b.LabelRanges[0]
			if !hdiags.HasErrors() {
				cfg.Hosts = append(cfg.Hosts, h)
			}
		case "reconnect":
			reconnects++
			if reconnects > 1 {
				diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Duplicate reconnect block",
					Detail: "Only one reconnect block is allowed.", Subject: b.DefRange.Ptr()})
				continue
			}
			rdiags := parseReconnect(b, &cfg.Reconnect)
			diags = append(diags, rdiags...)
		}
	}
	if len(seen) == 0 && !diags.HasErrors() {
		rng := file.Body.(*hclsyntax.Body).SrcRange
		if len(src.Source) == 0 {
			rng = hcl.Range{Filename: src.Filename, Start: start, End: start}
		}
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Missing host block",
			Detail: `The remote runtime needs at least one host "name" { url = "http://…"  secret_file = "…" } block.`, Subject: &rng})
	}
	return cfg, diags
}

func parseHost(b *hcl.Block, src runtime.ConfigSource) (Host, hcl.Diagnostics) {
	h := Host{Name: b.Labels[0]}
	var diags hcl.Diagnostics
	if !runtime.ValidID(h.Name) {
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid host name",
			Detail: fmt.Sprintf("host name %q must be letters, digits, '.', '_' or '-' (at most 128).", h.Name), Subject: b.LabelRanges[0].Ptr()})
	}
	content, cdiags := b.Body.Content(hostSchema)
	diags = append(diags, cdiags...)
	if a, ok := content.Attributes["url"]; ok {
		if s, ok := stringAttr(a, &diags); ok {
			if u, err := validURL(s); err != nil {
				diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid url",
					Detail: fmt.Sprintf("host %q: %v.", h.Name, err), Subject: a.Expr.Range().Ptr()})
			} else {
				h.URL = u
			}
		}
	}
	if a, ok := content.Attributes["secret_file"]; ok {
		if s, ok := stringAttr(a, &diags); ok {
			// Relative to the directory of the file that names it.
			s = src.Path(s)
			secret, err := readSecretFile(s)
			if err != nil {
				diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid secret_file",
					Detail: fmt.Sprintf("host %q: %v.", h.Name, err), Subject: a.Expr.Range().Ptr()})
			} else {
				h.SecretFile, h.Secret = s, secret
			}
		}
	}
	return h, diags
}

// validURL accepts http(s)://host[:port][/] and returns it without a
// trailing slash.
func validURL(s string) (string, error) {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return "", fmt.Errorf("%q is not a URL: %v", s, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("%q must start with http:// or https://", s)
	case u.Host == "" || u.Hostname() == "":
		return "", fmt.Errorf("%q has no host", s)
	case u.User != nil || u.RawQuery != "" || u.Fragment != "" || (u.Path != "" && u.Path != "/"):
		return "", fmt.Errorf("%q must be only scheme://host[:port]", s)
	}
	return strings.TrimRight(s, "/"), nil
}

func readSecretFile(path string) (string, error) {
	if path == "" {
		return "", fmt.Errorf("secret_file is empty")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read %s: %v", path, err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return s, nil
}

func parseReconnect(b *hcl.Block, r *Reconnect) hcl.Diagnostics {
	content, diags := b.Body.Content(reconnectSchema)
	dur := func(name string, dst *time.Duration) {
		a, ok := content.Attributes[name]
		if !ok {
			return
		}
		s, ok := stringAttr(a, &diags)
		if !ok {
			return
		}
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid " + name,
				Detail: fmt.Sprintf("%q is not a positive duration like \"200ms\" or \"5s\".", s), Subject: a.Expr.Range().Ptr()})
			return
		}
		*dst = d
	}
	dur("initial", &r.Initial)
	dur("max", &r.Max)
	dur("timeout", &r.Timeout)
	if a, ok := content.Attributes["attempts"]; ok {
		v, vdiags := a.Expr.Value(nil)
		diags = append(diags, vdiags...)
		if !vdiags.HasErrors() {
			n, ok := smallInt(v)
			if !ok || n < 1 || n > 1000 {
				diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid attempts",
					Detail: "attempts must be a whole number from 1 to 1000.", Subject: a.Expr.Range().Ptr()})
			} else {
				r.Attempts = n
			}
		}
	}
	if !diags.HasErrors() && r.Max < r.Initial {
		subject := b.DefRange.Ptr()
		if a, ok := content.Attributes["max"]; ok {
			subject = a.Expr.Range().Ptr()
		}
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid max",
			Detail: fmt.Sprintf("max (%s) must not be shorter than initial (%s).", r.Max, r.Initial), Subject: subject})
	}
	return diags
}

func smallInt(v cty.Value) (int, bool) {
	if v.IsNull() || !v.IsKnown() || v.Type() != cty.Number {
		return 0, false
	}
	bf := v.AsBigFloat()
	if !bf.IsInt() {
		return 0, false
	}
	i, acc := bf.Int64()
	if acc != big.Exact || i < -1<<31 || i > 1<<31-1 {
		return 0, false
	}
	return int(i), true
}

// stringAttr evaluates a literal string attribute, appending a diagnostic
// when it is anything else.
func stringAttr(a *hcl.Attribute, diags *hcl.Diagnostics) (string, bool) {
	v, vdiags := a.Expr.Value(nil)
	*diags = append(*diags, vdiags...)
	if vdiags.HasErrors() {
		return "", false
	}
	if v.IsNull() || !v.IsKnown() || v.Type() != cty.String {
		*diags = append(*diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid " + a.Name,
			Detail: a.Name + " must be a string.", Subject: a.Expr.Range().Ptr()})
		return "", false
	}
	return v.AsString(), true
}
