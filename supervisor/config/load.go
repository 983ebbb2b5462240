package config

import (
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// Load parses each file in order, merges them (scalars and lists set in a later file
// override earlier ones; plugin and agent blocks with the same name replace the earlier
// block in place), applies defaults and validates the result. Every problem is
// reported, as a *DiagError. With no paths it returns the validated defaults.
func Load(paths ...string) (*Config, error) {
	l := newLoader()
	for _, p := range paths {
		src, err := os.ReadFile(p)
		if err != nil {
			l.diags = append(l.diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  fmt.Sprintf("Cannot read configuration file %q", p),
				Detail:   joinHint(err.Error()+".", "check the -config path; each -config FILE must exist and be readable"),
			})
			continue
		}
		l.file(src, p)
	}
	l.resolvePaths()
	return l.finish()
}

// PathKeys are the server's own settings that name a file or directory. A
// relative value set in a file is relative to that file's directory (as
// Nomad resolves its paths), so a server started from another directory
// uses the same data and plugins; defaults stay relative to the working
// directory. A plugin resolves the paths in its config block against the
// same directory (runtime.ConfigSource.Path).
var PathKeys = []string{"data_dir", "plugin_dir", "tls.ca_file", "tls.cert_file", "tls.key_file"}

// resolvePaths applies PathKeys' rule. Parse leaves paths as written: its
// file name need not be a real path.
func (l *loader) resolvePaths() {
	for _, key := range PathKeys {
		dst := l.pathField(key)
		r, ok := l.ranges[key]
		if !ok || *dst == "" || filepath.IsAbs(*dst) {
			continue
		}
		if dir, err := filepath.Abs(filepath.Dir(r.Filename)); err == nil {
			*dst = filepath.Join(dir, *dst)
		}
	}
}

// pathField is the field a PathKeys key sets.
func (l *loader) pathField(key string) *string {
	switch key {
	case "data_dir":
		return &l.cfg.DataDir
	case "plugin_dir":
		return &l.cfg.PluginDir
	case "tls.ca_file":
		return &l.cfg.TLS.CAFile
	case "tls.cert_file":
		return &l.cfg.TLS.CertFile
	case "tls.key_file":
		return &l.cfg.TLS.KeyFile
	}
	panic("config: no path field for " + key) // impossible: PathKeys is fixed above
}

// Parse parses one in-memory file named filename, applies defaults and validates it.
func Parse(src []byte, filename string) (*Config, error) {
	l := newLoader()
	l.file(src, filename)
	return l.finish()
}

// Validate checks a configuration built or changed in code. Its diagnostics have no
// source ranges; Load and Parse already validate what they return.
func (c *Config) Validate() error {
	diags := validate(c, nil)
	if diags.HasErrors() {
		return &DiagError{Diags: diags, Files: map[string]*hcl.File{}}
	}
	return nil
}

// loader applies files one after the other onto one Config.
type loader struct {
	cfg    *Config
	files  map[string]*hcl.File
	order  []string             // file names in load order
	ranges map[string]hcl.Range // value key ("ports.http", "agent.demo.command[0]") -> where it was last set
	diags  hcl.Diagnostics
}

func newLoader() *loader {
	return &loader{cfg: Default(), files: map[string]*hcl.File{}, ranges: map[string]hcl.Range{}}
}

func (l *loader) finish() (*Config, error) {
	l.diags = append(l.diags, validate(l.cfg, l.ranges)...)
	l.sortDiags()
	if l.diags.HasErrors() {
		return nil, &DiagError{Diags: l.diags, Files: l.files}
	}
	return l.cfg, nil
}

// sortDiags orders diagnostics by file (in load order) and position; those without a
// range come first.
func (l *loader) sortDiags() {
	rank := func(d *hcl.Diagnostic) (int, int) {
		if d.Subject == nil {
			return -1, 0
		}
		return slices.Index(l.order, d.Subject.Filename), d.Subject.Start.Byte
	}
	sort.SliceStable(l.diags, func(i, j int) bool {
		fi, bi := rank(l.diags[i])
		fj, bj := rank(l.diags[j])
		if fi != fj {
			return fi < fj
		}
		return bi < bj
	})
}

// file parses one file and applies it onto l.cfg.
func (l *loader) file(src []byte, filename string) {
	l.order = append(l.order, filename)
	f, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
	if f != nil {
		l.files[filename] = f
	}
	if diags.HasErrors() {
		l.diags = append(l.diags, withHint(diags, hintSyntax)...)
		return
	}
	l.root(f.Body, src)
}

// setter decodes one attribute into its destination, recording its range under key.
type setter func(a *hcl.Attribute, key string)

// blockSpec describes the attributes and nested blocks allowed in one body.
type blockSpec struct {
	where  string            // for hints: "the top level", "server", `agent "demo"`
	prefix string            // key prefix: "", "server.", "agent.demo."
	attrs  map[string]setter // allowed attributes
	blocks []hcl.BlockHeaderSchema
}

// decode checks body against spec (unknown names are diagnostics with ranges), runs
// the setters in source order and returns the nested blocks.
func (l *loader) decode(body hcl.Body, spec blockSpec) hcl.Blocks {
	schema := &hcl.BodySchema{Blocks: spec.blocks}
	names := make([]string, 0, len(spec.attrs))
	for n := range spec.attrs {
		names = append(names, n)
		schema.Attributes = append(schema.Attributes, hcl.AttributeSchema{Name: n})
	}
	sort.Strings(names)
	content, diags := body.Content(schema)
	l.diags = append(l.diags, withHint(diags, schemaHint(spec, names))...)
	if content == nil {
		return nil
	}
	attrs := make([]*hcl.Attribute, 0, len(content.Attributes))
	for _, a := range content.Attributes {
		attrs = append(attrs, a)
	}
	sort.Slice(attrs, func(i, j int) bool { return attrs[i].Range.Start.Byte < attrs[j].Range.Start.Byte })
	for _, a := range attrs {
		spec.attrs[a.Name](a, spec.prefix+a.Name)
	}
	return content.Blocks
}

func schemaHint(spec blockSpec, attrs []string) string {
	var parts []string
	if len(attrs) > 0 {
		parts = append(parts, "arguments allowed in "+spec.where+": "+strings.Join(attrs, ", "))
	}
	if len(spec.blocks) > 0 {
		var bs []string
		for _, b := range spec.blocks {
			if len(b.LabelNames) > 0 {
				bs = append(bs, b.Type+` "NAME" { … }`)
			} else {
				bs = append(bs, b.Type+" { … }")
			}
		}
		parts = append(parts, "blocks allowed in "+spec.where+": "+strings.Join(bs, ", "))
	}
	if len(parts) == 0 {
		return spec.where + " takes no arguments"
	}
	return strings.Join(parts, "; ")
}

func (l *loader) root(body hcl.Body, src []byte) {
	c := l.cfg
	blocks := l.decode(body, blockSpec{
		where: "the top level",
		attrs: map[string]setter{
			"node_name":    l.str(&c.NodeName),
			"data_dir":     l.str(&c.DataDir),
			"bind_addr":    l.str(&c.BindAddr),
			"log_level":    l.lower(&c.LogLevel),
			"log_json":     l.boolean(&c.LogJSON),
			"plugin_dir":   l.str(&c.PluginDir),
			"enable_debug": l.boolean(&c.EnableDebug),
		},
		blocks: []hcl.BlockHeaderSchema{
			{Type: "ports"}, {Type: "server"}, {Type: "acl"}, {Type: "api"},
			{Type: "recovery"}, {Type: "terminal"}, {Type: "lease"}, {Type: "limits"}, {Type: "tls"},
			{Type: "plugin", LabelNames: []string{"name"}},
			{Type: "agent", LabelNames: []string{"name"}},
		},
	})
	seen := map[string]*hcl.Block{}
	plugins, agents := map[string]bool{}, map[string]bool{}
	for _, b := range blocks {
		switch b.Type {
		case "plugin":
			l.plugin(b, src, plugins)
			continue
		case "agent":
			l.agent(b, agents)
			continue
		}
		if prev, dup := seen[b.Type]; dup {
			l.diags = append(l.diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  fmt.Sprintf("Duplicate %s block", b.Type),
				Detail: joinHint(fmt.Sprintf("A %s block was already defined at %s.", b.Type, prev.DefRange),
					fmt.Sprintf("put every %s setting in one %s { … } block per file", b.Type, b.Type)),
				Subject: b.DefRange.Ptr(),
			})
			continue
		}
		seen[b.Type] = b
		l.section(b)
	}
}

// section decodes one of the unlabelled top-level blocks.
func (l *loader) section(b *hcl.Block) {
	c := l.cfg
	spec := blockSpec{where: b.Type, prefix: b.Type + "."}
	switch b.Type {
	case "ports":
		spec.attrs = map[string]setter{"http": l.integer(&c.Ports.HTTP), "raft": l.integer(&c.Ports.Raft)}
	case "server":
		spec.attrs = map[string]setter{
			"bootstrap_expect":     l.integer(&c.Server.BootstrapExpect),
			"retry_join":           l.strings(&c.Server.RetryJoin),
			"heartbeat_timeout":    l.duration(&c.Server.HeartbeatTimeout),
			"election_timeout":     l.duration(&c.Server.ElectionTimeout),
			"leader_lease_timeout": l.duration(&c.Server.LeaderLeaseTimeout),
			"cluster_secret":       l.str(&c.Server.ClusterSecret),
			"cleanup_dead_servers": l.boolean(&c.Server.CleanupDeadServers),
			"raft_store":           l.lower(&c.Server.RaftStore),
			"nice":                 l.integer(&c.Server.Nice),
		}
	case "acl":
		spec.attrs = map[string]setter{"token": l.str(&c.ACL.Token), "read_token": l.str(&c.ACL.ReadToken)}
	case "api":
		spec.attrs = map[string]setter{"allowed_origins": l.strings(&c.API.AllowedOrigins), "max_body": l.size(&c.API.MaxBody)}
	case "recovery":
		spec.attrs = map[string]setter{"auto_resume": l.lower(&c.Recovery.AutoResume), "health_timeout": l.duration(&c.Recovery.HealthTimeout)}
	case "terminal":
		spec.attrs = map[string]setter{
			"shell":        l.strings(&c.Terminal.Shell),
			"replay_bytes": l.size(&c.Terminal.ReplayBytes),
			"idle_timeout": l.duration(&c.Terminal.IdleTimeout),
		}
	case "lease":
		spec.attrs = map[string]setter{"ttl": l.duration(&c.Lease.TTL)}
	case "tls":
		spec.attrs = map[string]setter{
			"ca_file":                l.str(&c.TLS.CAFile),
			"cert_file":              l.str(&c.TLS.CertFile),
			"key_file":               l.str(&c.TLS.KeyFile),
			"verify_incoming":        l.boolean(&c.TLS.VerifyIncoming),
			"verify_server_hostname": l.boolean(&c.TLS.VerifyServerHostname),
		}
	case "limits":
		spec.attrs = map[string]setter{
			"max_sessions_per_node": l.integer(&c.Limits.MaxSessionsPerNode),
			"max_websockets":        l.integer(&c.Limits.MaxWebsockets),
			"max_request_rate":      l.integer(&c.Limits.MaxRequestRate),
		}
	}
	l.decode(b.Body, spec)
}

// duplicateNamed reports a second block of the same name in one file.
func (l *loader) duplicateNamed(b *hcl.Block, seen map[string]bool) bool {
	name := b.Labels[0]
	if !seen[name] {
		seen[name] = true
		return false
	}
	l.diags = append(l.diags, &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  fmt.Sprintf("Duplicate %s %q", b.Type, name),
		Detail: joinHint(fmt.Sprintf("%s %q is defined twice in this file.", b.Type, name),
			"give each block its own name; to override a block, redefine it in a later -config file"),
		Subject: b.DefRange.Ptr(),
	})
	return true
}

// forget drops the recorded ranges of a block that is being replaced.
func (l *loader) forget(prefix string) {
	for k := range l.ranges {
		if strings.HasPrefix(k, prefix) {
			delete(l.ranges, k)
		}
	}
}

func (l *loader) plugin(b *hcl.Block, src []byte, seen map[string]bool) {
	if l.duplicateNamed(b, seen) {
		return
	}
	name := b.Labels[0]
	key := "plugin." + name
	p := &Plugin{Name: name, Filename: b.DefRange.Filename, DefRange: b.DefRange}
	l.forget(key + ".")
	l.ranges[key] = b.LabelRanges[0]
	configs := l.decode(b.Body, blockSpec{
		where:  fmt.Sprintf("plugin %q", name),
		prefix: key + ".",
		attrs:  map[string]setter{"optional": l.boolean(&p.Optional)},
		blocks: []hcl.BlockHeaderSchema{{Type: "config"}},
	})
	for i, cb := range configs {
		if i > 0 {
			l.diags = append(l.diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Duplicate config block",
				Detail:   joinHint(fmt.Sprintf("plugin %q already has a config block at %s.", name, configs[0].DefRange), "merge the settings into one config { … } block"),
				Subject:  cb.DefRange.Ptr(),
			})
			continue
		}
		l.rawConfig(p, b, cb, src)
	}
	replaceNamed(&l.cfg.Plugins, p, func(q *Plugin) string { return q.Name })
}

// rawConfig keeps the inner body of a plugin's config block as source.
func (l *loader) rawConfig(p *Plugin, pb, cb *hcl.Block, src []byte) {
	outer, ok := pb.Body.(*hclsyntax.Body)
	if !ok {
		return
	}
	for _, sb := range outer.Blocks {
		if sb.Body != cb.Body {
			continue
		}
		start, end := sb.OpenBraceRange.End, sb.CloseBraceRange.Start
		if start.Byte < 0 || end.Byte > len(src) || start.Byte > end.Byte {
			return
		}
		p.Source = append([]byte(nil), src[start.Byte:end.Byte]...)
		p.Start = start
		return
	}
}

func (l *loader) agent(b *hcl.Block, seen map[string]bool) {
	if l.duplicateNamed(b, seen) {
		return
	}
	name := b.Labels[0]
	key := "agent." + name
	a := &Agent{Name: name, Permission: DefaultPermission, DefRange: b.DefRange}
	l.forget(key + ".")
	l.ranges[key] = b.DefRange
	l.decode(b.Body, blockSpec{
		where:  fmt.Sprintf("agent %q", name),
		prefix: key + ".",
		attrs: map[string]setter{
			"protocol":                l.lower(&a.Protocol),
			"command":                 l.strings(&a.Command),
			"new_args":                l.strings(&a.NewArgs),
			"resume_args":             l.strings(&a.ResumeArgs),
			"permission":              l.lower(&a.Permission),
			"auto_allow":              l.strings(&a.AutoAllow),
			"permission_timeout":      l.duration(&a.PermissionTimeout),
			"supports_session_resume": l.boolPtr(&a.SupportsSessionResume),
		},
	})
	replaceNamed(&l.cfg.Agents, a, func(q *Agent) string { return q.Name })
}

// replaceNamed replaces the element with the same name in place, or appends v.
func replaceNamed[T any](list *[]*T, v *T, name func(*T) string) {
	for i, old := range *list {
		if name(old) == name(v) {
			(*list)[i] = v
			return
		}
	}
	*list = append(*list, v)
}

// ---- attribute decoding ----

func (l *loader) errorAt(a *hcl.Attribute, summary, detail, hint string) {
	l.diags = append(l.diags, &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  summary,
		Detail:   joinHint(detail, hint),
		Subject:  a.Expr.Range().Ptr(),
		Context:  a.Range.Ptr(),
	})
}

// value evaluates a literal; ok is false on error or when the value is null (unset).
func (l *loader) value(a *hcl.Attribute, key string) (cty.Value, bool) {
	if e := nonLiteral(a.Expr); e != nil {
		l.diags = append(l.diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Expression not allowed",
			Detail:   joinHint("Configuration values must be literals.", `use a literal value such as "text", 7700, true or ["a", "b"]: configuration files have no variables, functions or interpolation`),
			Subject:  e.Range().Ptr(),
			Context:  a.Range.Ptr(),
		})
		return cty.NilVal, false
	}
	v, diags := a.Expr.Value(nil)
	if diags.HasErrors() {
		l.diags = append(l.diags, withHint(diags, "use a literal value: configuration files have no variables or functions")...)
		return cty.NilVal, false
	}
	if v.IsNull() {
		return cty.NilVal, false
	}
	l.ranges[key] = a.Expr.Range()
	return v, true
}

// nonLiteral returns the first part of e that is not a literal (a number, bool, null,
// quoted string or heredoc without interpolation, or a list of those), or nil.
func nonLiteral(e hcl.Expression) hcl.Expression {
	switch e := e.(type) {
	case *hclsyntax.LiteralValueExpr:
		return nil
	case *hclsyntax.TemplateExpr:
		for _, p := range e.Parts {
			// An interpolated literal ("${1e100000000}") is an expression too.
			if lit, ok := p.(*hclsyntax.LiteralValueExpr); !ok || lit.Val.Type() != cty.String {
				return p
			}
		}
		return nil
	case *hclsyntax.TupleConsExpr:
		for _, x := range e.Exprs {
			if bad := nonLiteral(x); bad != nil {
				return bad
			}
		}
		return nil
	case *hclsyntax.UnaryOpExpr:
		if e.Op == hclsyntax.OpNegate {
			return nonLiteral(e.Val)
		}
		return e
	case *hclsyntax.ParenthesesExpr:
		return nonLiteral(e.Expression)
	default:
		return e
	}
}

func (l *loader) convert(a *hcl.Attribute, key string, want cty.Type, what, example string) (cty.Value, bool) {
	v, ok := l.value(a, key)
	if !ok {
		return cty.NilVal, false
	}
	cv, err := convert.Convert(v, want)
	if err != nil || !cv.IsWhollyKnown() {
		l.errorAt(a, "Incorrect attribute value type", fmt.Sprintf("%s must be %s.", a.Name, what), "use a value such as "+example)
		return cty.NilVal, false
	}
	return cv, true
}

func (l *loader) str(dst *string) setter {
	return func(a *hcl.Attribute, key string) {
		v, ok := l.value(a, key)
		if !ok {
			return
		}
		if v.Type() != cty.String {
			// No number-to-string conversion: formatting 1e100000000 takes minutes.
			l.errorAt(a, "Incorrect attribute value type", fmt.Sprintf("%s must be a string, not %s.", a.Name, v.Type().FriendlyName()), `use a quoted string such as "text"`)
			return
		}
		*dst = v.AsString()
	}
}

func (l *loader) lower(dst *string) setter {
	set := l.str(dst)
	return func(a *hcl.Attribute, key string) {
		set(a, key)
		*dst = strings.ToLower(*dst)
	}
}

func (l *loader) boolean(dst *bool) setter {
	return func(a *hcl.Attribute, key string) {
		if v, ok := l.convert(a, key, cty.Bool, "true or false", "true"); ok {
			*dst = v.True()
		}
	}
}

func (l *loader) boolPtr(dst **bool) setter {
	return func(a *hcl.Attribute, key string) {
		if v, ok := l.convert(a, key, cty.Bool, "true or false", "true"); ok {
			b := v.True()
			*dst = &b
		}
	}
}

func (l *loader) integer(dst *int) setter {
	return func(a *hcl.Attribute, key string) {
		v, ok := l.convert(a, key, cty.Number, "a whole number", "7700")
		if !ok {
			return
		}
		n, ok := wholeNumber(v.AsBigFloat())
		if !ok || n < -1<<31 || n > 1<<31-1 {
			l.errorAt(a, "Invalid number", fmt.Sprintf("%s must be a whole number within ±2^31.", a.Name), "use a value such as 7700")
			return
		}
		*dst = int(n)
	}
}

// wholeNumber returns f as an int64 when it is a whole number in int64's range.
func wholeNumber(f *big.Float) (int64, bool) {
	if !f.IsInt() {
		return 0, false
	}
	n, acc := f.Int64()
	return n, acc == big.Exact
}

// strings decodes a list of strings; elements must be strings (no conversion).
func (l *loader) strings(dst *[]string) setter {
	return func(a *hcl.Attribute, key string) {
		v, ok := l.value(a, key)
		if !ok {
			return
		}
		ty := v.Type()
		if !(ty.IsTupleType() || ty.IsListType()) {
			l.errorAt(a, "Incorrect attribute value type", fmt.Sprintf("%s must be a list of strings, not %s.", a.Name, ty.FriendlyName()), `use a list such as ["a", "b"]`)
			return
		}
		out := []string{}
		for it := v.ElementIterator(); it.Next(); {
			_, ev := it.Element()
			if ev.IsNull() || ev.Type() != cty.String {
				l.errorAt(a, "Invalid list element", fmt.Sprintf("%s must contain only strings.", a.Name), `use quoted strings, such as ["a", "b"]`)
				return
			}
			out = append(out, ev.AsString())
		}
		if exprs, diags := hcl.ExprList(a.Expr); !diags.HasErrors() {
			for i, e := range exprs {
				l.ranges[fmt.Sprintf("%s[%d]", key, i)] = e.Range()
			}
		}
		*dst = out
	}
}

func (l *loader) duration(dst *time.Duration) setter {
	const hint = `use a duration such as "300ms", "2s" or "30m"`
	return func(a *hcl.Attribute, key string) {
		v, ok := l.value(a, key)
		if !ok {
			return
		}
		if v.Type() != cty.String {
			l.errorAt(a, "Invalid duration", fmt.Sprintf("%s must be a duration string with a unit, not %s.", a.Name, v.Type().FriendlyName()), hint)
			return
		}
		d, err := parseDuration(v.AsString())
		if err != nil {
			l.errorAt(a, "Invalid duration", err.Error()+".", hint)
			return
		}
		*dst = d
	}
}

func (l *loader) size(dst *int64) setter {
	const hint = `use a size such as "256KiB", "1MiB", "64KB" or a number of bytes`
	return func(a *hcl.Attribute, key string) {
		v, ok := l.value(a, key)
		if !ok {
			return
		}
		switch v.Type() {
		case cty.Number:
			n, ok := wholeNumber(v.AsBigFloat())
			if !ok {
				l.errorAt(a, "Invalid size", fmt.Sprintf("%s must be a whole number of bytes within int64's range.", a.Name), hint)
				return
			}
			*dst = n
		case cty.String:
			n, err := ParseSize(v.AsString())
			if err != nil {
				l.errorAt(a, "Invalid size", err.Error()+".", hint)
				return
			}
			*dst = n
		default:
			l.errorAt(a, "Invalid size", fmt.Sprintf("%s must be a number or a string, not %s.", a.Name, v.Type().FriendlyName()), hint)
		}
	}
}
