// Package configspec declares a runtime plugin's `config { … }` body once:
// the same [Spec] decodes the body, with diagnostics that point at the
// operator's file, line and column, and documents it as the [runtime.Schema]
// the plugin's ConfigSchema returns (what `paddock plugin schema` and the
// configuration reference show). It plays the part of Nomad's hclspec.
//
// A Spec is a list of attributes and blocks, each built by a constructor
// ([String], [Bool], [Duration], [Int], [Number], [Attr], [Blocks], [Block])
// that knows the attribute's type, its description and where in the plugin's
// config struct T the decoded value goes:
//
//	var spec = configspec.Spec[Config]{
//		Attributes: []configspec.Attribute[Config]{
//			configspec.String("workspace_root", "directory of session workspaces",
//				func(c *Config) *string { return &c.WorkspaceRoot }, configspec.NotEmpty),
//			configspec.Duration("start_timeout", "how long agentctl may take (default 15s)",
//				func(c *Config) *time.Duration { return &c.StartTimeout }),
//		},
//	}
//	cfg := defaults()
//	diags := spec.Decode(src, &cfg)
//
// Values are literals: no variables or functions are in scope. Unknown
// attributes and blocks are refused by HCL itself. This package imports only
// shared/runtime and HCL, never supervisor/.
package configspec

import (
	"fmt"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/paddockhq/paddock/shared/runtime"
)

// Spec is the declaration of one configuration body decoded into a T.
type Spec[T any] struct {
	Attributes []Attribute[T]
	Blocks     []BlockSpec[T]
	// Checks run, in order, once every attribute and block decoded without
	// errors: cross-field rules, required blocks, and normalisation of
	// defaults.
	Checks []Check[T]
}

// Attribute is one attribute of a Spec; build it with a constructor.
type Attribute[T any] struct {
	Name        string
	Type        string
	Required    bool
	Description string
	decode      func(cfg *T, v cty.Value, src runtime.ConfigSource) error
}

// BlockSpec is one nested block type of a Spec; build it with [Block] or
// [Blocks].
type BlockSpec[T any] struct {
	Type        string
	LabelNames  []string
	Description string
	body        runtime.Schema
	decode      func(cfg *T, blocks hcl.Blocks, src runtime.ConfigSource) hcl.Diagnostics
}

// Check is a rule over the decoded config. An error from Fn becomes a
// diagnostic with Summary (default "Invalid <Attr>") at Attr's value, or at
// the body when the attribute is absent.
type Check[T any] struct {
	Attr    string
	Summary string
	Fn      func(cfg *T) error
}

// Schema documents the body for runtime.Runtime.ConfigSchema.
func (s Spec[T]) Schema() runtime.Schema {
	var out runtime.Schema
	for _, a := range s.Attributes {
		out.Attributes = append(out.Attributes, runtime.AttributeSchema{Name: a.Name, Type: a.Type, Required: a.Required, Description: a.Description})
	}
	for _, b := range s.Blocks {
		out.Blocks = append(out.Blocks, runtime.BlockSchema{Type: b.Type, LabelNames: b.LabelNames, Body: b.body, Description: b.Description})
	}
	return out
}

func (s Spec[T]) hclSchema() *hcl.BodySchema {
	schema := &hcl.BodySchema{}
	for _, a := range s.Attributes {
		schema.Attributes = append(schema.Attributes, hcl.AttributeSchema{Name: a.Name, Required: a.Required})
	}
	for _, b := range s.Blocks {
		schema.Blocks = append(schema.Blocks, hcl.BlockHeaderSchema{Type: b.Type, LabelNames: b.LabelNames})
	}
	return schema
}

// Decode parses src at its true position in its file and decodes it into
// cfg, which holds the defaults on entry. Error diagnostics mean the body
// was refused; cfg may then be partly written and must be discarded.
func (s Spec[T]) Decode(src runtime.ConfigSource, cfg *T) hcl.Diagnostics {
	start := src.Start
	if start.Line == 0 {
		start = hcl.Pos{Line: 1, Column: 1}
	}
	file, diags := hclsyntax.ParseConfig(src.Source, src.Filename, start)
	if diags.HasErrors() {
		return diags
	}
	body := file.Body
	whole := body.(*hclsyntax.Body).SrcRange
	if len(src.Source) == 0 {
		whole = hcl.Range{Filename: src.Filename, Start: start, End: start}
	}
	return append(diags, s.decodeBody(body, src, whole, cfg)...)
}

// Parse decodes src onto cfg (the defaults) and returns the result.
func (s Spec[T]) Parse(src runtime.ConfigSource, cfg T) (T, hcl.Diagnostics) {
	diags := s.Decode(src, &cfg)
	return cfg, diags
}

// decodeBody decodes one body; whole is where a diagnostic about the body
// itself (a failed check on an absent attribute) points.
func (s Spec[T]) decodeBody(body hcl.Body, src runtime.ConfigSource, whole hcl.Range, cfg *T) hcl.Diagnostics {
	content, diags := body.Content(s.hclSchema())
	for _, a := range s.Attributes {
		attr, ok := content.Attributes[a.Name]
		if !ok {
			continue
		}
		v, vdiags := attr.Expr.Value(nil)
		diags = append(diags, vdiags...)
		if vdiags.HasErrors() {
			continue
		}
		var err error
		if v.IsNull() || !v.IsKnown() {
			err = fmt.Errorf("%s must not be null", a.Name)
		} else {
			err = a.decode(cfg, v, src)
		}
		if err != nil {
			diags = append(diags, invalid(a.Name, err, attr.Expr.Range().Ptr()))
		}
	}
	for _, b := range s.Blocks {
		diags = append(diags, b.decode(cfg, content.Blocks.OfType(b.Type), src)...)
	}
	if diags.HasErrors() {
		return diags
	}
	for _, c := range s.Checks {
		if err := c.Fn(cfg); err != nil {
			subject := whole.Ptr()
			if attr, ok := content.Attributes[c.Attr]; ok {
				subject = attr.Expr.Range().Ptr()
			}
			d := invalid(c.Attr, err, subject)
			if c.Summary != "" {
				d.Summary = c.Summary
			}
			diags = append(diags, d)
		}
	}
	return diags
}

func invalid(name string, err error, subject *hcl.Range) *hcl.Diagnostic {
	detail := err.Error()
	if detail != "" && !strings.HasSuffix(detail, ".") {
		detail += "."
	}
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid " + name, Detail: detail, Subject: subject}
}

// Attr declares an attribute of any type: decode receives the literal value
// (never null) and returns an error to refuse it.
func Attr[T any](name, typ, description string, decode func(cfg *T, v cty.Value) error) Attribute[T] {
	return Attribute[T]{Name: name, Type: typ, Description: description,
		decode: func(cfg *T, v cty.Value, _ runtime.ConfigSource) error { return decode(cfg, v) }}
}

// Required marks a as required (HCL reports it missing at the block).
func Required[T any](a Attribute[T]) Attribute[T] { a.Required = true; return a }

// String declares a string attribute stored in *field after each check
// (which may also rewrite the value) accepts it.
func String[T any](name, description string, field func(*T) *string, checks ...func(string) (string, error)) Attribute[T] {
	return stringAttr(name, description, false, field, checks)
}

// Path declares a path attribute: a relative path is relative to the
// directory of the file that sets it (runtime.ConfigSource.Path), then the
// checks run (e.g. [AbsPath], [Executable]). A default the attribute does
// not override is left as it is.
func Path[T any](name, description string, field func(*T) *string, checks ...func(string) (string, error)) Attribute[T] {
	return stringAttr(name, description, true, field, checks)
}

func stringAttr[T any](name, description string, path bool, field func(*T) *string, checks []func(string) (string, error)) Attribute[T] {
	return Attribute[T]{Name: name, Type: "string", Description: description, decode: func(cfg *T, v cty.Value, src runtime.ConfigSource) error {
		if v.Type() != cty.String {
			return fmt.Errorf("%s must be a string", name)
		}
		s := v.AsString()
		if path {
			s = src.Path(s)
		}
		for _, check := range checks {
			var err error
			if s, err = check(s); err != nil {
				return err
			}
		}
		*field(cfg) = s
		return nil
	}}
}

// Bool declares a bool attribute.
func Bool[T any](name, description string, field func(*T) *bool) Attribute[T] {
	return Attr(name, "bool", description, func(cfg *T, v cty.Value) error {
		if v.Type() != cty.Bool {
			return fmt.Errorf("%s must be true or false", name)
		}
		*field(cfg) = v.True()
		return nil
	})
}

// Duration declares a positive duration attribute written as a string like
// "15s" or "200ms".
func Duration[T any](name, description string, field func(*T) *time.Duration) Attribute[T] {
	return Attr(name, "duration", description, func(cfg *T, v cty.Value) error {
		if v.Type() != cty.String {
			return fmt.Errorf("%s must be a duration string like \"15s\"", name)
		}
		d, err := time.ParseDuration(v.AsString())
		if err != nil || d <= 0 {
			return fmt.Errorf("%q is not a positive duration like \"200ms\" or \"15s\"", v.AsString())
		}
		*field(cfg) = d
		return nil
	})
}

// Int declares a whole-number attribute in [lo, hi].
func Int[T any, N ~int | ~int64](name, description string, lo, hi N, field func(*T) *N) Attribute[T] {
	return Attr(name, "number", description, func(cfg *T, v cty.Value) error {
		n, ok := wholeNumber(v)
		if !ok || n < int64(lo) || n > int64(hi) {
			if lo == 1 && int64(hi) == math.MaxInt64 {
				return fmt.Errorf("%s must be a positive whole number, not %s", name, literal(v))
			}
			return fmt.Errorf("%s must be a whole number from %d to %d, not %s", name, lo, hi, literal(v))
		}
		*field(cfg) = N(n)
		return nil
	})
}

// Number declares a number attribute in (lo, hi] passed to set, which may
// refuse it too.
func Number[T any](name, description string, lo, hi float64, set func(cfg *T, f float64) error) Attribute[T] {
	return Attr(name, "number", description, func(cfg *T, v cty.Value) error {
		if v.Type() != cty.Number {
			return fmt.Errorf("%s must be a number", name)
		}
		f, _ := v.AsBigFloat().Float64()
		if math.IsNaN(f) || f <= lo || f > hi {
			if lo == 0 {
				return fmt.Errorf("%s must be a positive number up to %g, not %s", name, hi, literal(v))
			}
			return fmt.Errorf("%s must be a number above %g and at most %g, not %s", name, lo, hi, literal(v))
		}
		return set(cfg, f)
	})
}

// literal shows a value in a message.
func literal(v cty.Value) string {
	switch v.Type() {
	case cty.Number:
		return v.AsBigFloat().Text('g', -1)
	case cty.String:
		return fmt.Sprintf("%q", v.AsString())
	case cty.Bool:
		return fmt.Sprint(v.True())
	}
	return "a " + v.Type().FriendlyName()
}

func wholeNumber(v cty.Value) (int64, bool) {
	if v.Type() != cty.Number {
		return 0, false
	}
	bf := v.AsBigFloat()
	if !bf.IsInt() {
		return 0, false
	}
	n, acc := bf.Int64()
	return n, acc == big.Exact
}

// NotEmpty refuses an empty (or all-space) string.
func NotEmpty(s string) (string, error) {
	if strings.TrimSpace(s) == "" {
		return s, fmt.Errorf("must not be empty")
	}
	return s, nil
}

// AbsPath refuses an empty path and makes it absolute (relative to the
// plugin's working directory).
func AbsPath(s string) (string, error) {
	if s == "" {
		return s, fmt.Errorf("must not be empty")
	}
	return filepath.Abs(s)
}

// Executable makes a path absolute and requires an executable regular file.
func Executable(s string) (string, error) {
	abs, err := filepath.Abs(s)
	if err != nil {
		return s, err
	}
	if st, err := os.Stat(abs); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		return abs, fmt.Errorf("%s is not an executable file", abs)
	}
	return abs, nil
}

// Block declares a block that appears at most once and decodes into
// *field(cfg) (which holds its defaults).
func Block[T, E any](typ, description string, spec Spec[E], field func(*T) *E) BlockSpec[T] {
	return BlockSpec[T]{Type: typ, Description: description, body: spec.Schema(), decode: func(cfg *T, blocks hcl.Blocks, src runtime.ConfigSource) hcl.Diagnostics {
		var diags hcl.Diagnostics
		for i, b := range blocks {
			if i > 0 {
				diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Duplicate " + typ + " block",
					Detail: fmt.Sprintf("Only one %s block is allowed; the first is at %s.", typ, blocks[0].DefRange), Subject: b.DefRange.Ptr()})
				continue
			}
			diags = append(diags, spec.decodeBody(b.Body, src, b.DefRange, field(cfg))...)
		}
		return diags
	}}
}

// Blocks declares a block with one label that may repeat (each label once),
// each decoded from zero into an E and passed to add in file order.
// labelOK, when set, refuses a label with an error.
func Blocks[T, E any](typ, label, description string, spec Spec[E], labelOK func(string) error, add func(cfg *T, label string, e E)) BlockSpec[T] {
	return BlockSpec[T]{Type: typ, LabelNames: []string{label}, Description: description, body: spec.Schema(), decode: func(cfg *T, blocks hcl.Blocks, src runtime.ConfigSource) hcl.Diagnostics {
		var diags hcl.Diagnostics
		seen := map[string]hcl.Range{}
		for _, b := range blocks {
			name := b.Labels[0]
			if prev, dup := seen[name]; dup {
				diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Duplicate " + typ,
					Detail: fmt.Sprintf("%s %q is already declared at %s.", typ, name, prev), Subject: b.LabelRanges[0].Ptr()})
				continue
			}
			seen[name] = b.LabelRanges[0]
			var bd hcl.Diagnostics
			if labelOK != nil {
				if err := labelOK(name); err != nil {
					bd = append(bd, invalid(typ+" "+label, err, b.LabelRanges[0].Ptr()))
				}
			}
			var e E
			bd = append(bd, spec.decodeBody(b.Body, src, b.DefRange, &e)...)
			if !bd.HasErrors() {
				add(cfg, name, e)
			}
			diags = append(diags, bd...)
		}
		return diags
	}}
}
