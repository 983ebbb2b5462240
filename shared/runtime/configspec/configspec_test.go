package configspec_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/paddockhq/paddock/shared/runtime"
	"github.com/paddockhq/paddock/shared/runtime/configspec"
)

type peer struct{ Addr string }

type testConfig struct {
	Name    string
	Verbose bool
	Wait    time.Duration
	Retries int
	Ratio   float64
	Peers   map[string]peer
	Limits  limits
}

type limits struct{ Low, High int64 }

var limitsSpec = configspec.Spec[limits]{
	Attributes: []configspec.Attribute[limits]{
		configspec.Int("low", "lower bound", 0, 100, func(l *limits) *int64 { return &l.Low }),
		configspec.Int("high", "upper bound", 0, 100, func(l *limits) *int64 { return &l.High }),
	},
	Checks: []configspec.Check[limits]{{Attr: "high", Fn: func(l *limits) error {
		if l.High < l.Low {
			return fmt.Errorf("high (%d) is below low (%d)", l.High, l.Low)
		}
		return nil
	}}},
}

var testSpec = configspec.Spec[testConfig]{
	Attributes: []configspec.Attribute[testConfig]{
		configspec.Required(configspec.String("name", "the name", func(c *testConfig) *string { return &c.Name }, configspec.NotEmpty)),
		configspec.Bool("verbose", "log more", func(c *testConfig) *bool { return &c.Verbose }),
		configspec.Duration("wait", "how long", func(c *testConfig) *time.Duration { return &c.Wait }),
		configspec.Int("retries", "how often", 1, 10, func(c *testConfig) *int { return &c.Retries }),
		configspec.Number("ratio", "a share", 0, 1, func(c *testConfig, f float64) error { c.Ratio = f; return nil }),
	},
	Blocks: []configspec.BlockSpec[testConfig]{
		configspec.Blocks("peer", "name", "a peer", configspec.Spec[peer]{Attributes: []configspec.Attribute[peer]{
			configspec.Required(configspec.String("addr", "its address", func(p *peer) *string { return &p.Addr })),
		}}, nil, func(c *testConfig, name string, p peer) {
			if c.Peers == nil {
				c.Peers = map[string]peer{}
			}
			c.Peers[name] = p
		}),
		configspec.Block("limits", "bounds", limitsSpec, func(c *testConfig) *limits { return &c.Limits }),
	},
}

// The body starts at line 7, column 3 of paddock.hcl.
var start = hcl.Pos{Line: 7, Column: 3, Byte: 120}

func decode(src string) (testConfig, hcl.Diagnostics) {
	return testSpec.Parse(runtime.ConfigSource{Filename: "paddock.hcl", Source: []byte(src), Start: start},
		testConfig{Wait: time.Second, Retries: 3, Limits: limits{High: 50}})
}

func TestDecodeValues(t *testing.T) {
	cfg, diags := decode(`name = "n"
verbose = true
wait = "250ms"
peer "a" {
  addr = "10.0.0.1"
}
peer "b" {
  addr = "10.0.0.2"
}
limits {
  low = 5
}
`)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	want := testConfig{Name: "n", Verbose: true, Wait: 250 * time.Millisecond, Retries: 3,
		Peers: map[string]peer{"a": {"10.0.0.1"}, "b": {"10.0.0.2"}}, Limits: limits{Low: 5, High: 50}}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("config = %+v\nwant     %+v", cfg, want)
	}
}

func TestDecodeDiagnosticsAreLocated(t *testing.T) {
	for _, tc := range []struct {
		name, src, summary string
		line, col          int // in the file
	}{
		{"missing_required", `verbose = true`, "Missing required argument", 7, 3},
		{"wrong_type", "name = \"n\"\nverbose = \"yes\"\n", "Invalid verbose", 8, 11},
		{"null", "name = null\n", "Invalid name", 7, 10},
		{"empty", "name = \"\"\n", "Invalid name", 7, 10},
		{"bad_duration", "name = \"n\"\nwait = \"soon\"\n", "Invalid wait", 8, 8},
		{"int_out_of_range", "name = \"n\"\nretries = 11\n", "Invalid retries", 8, 11},
		{"int_fraction", "name = \"n\"\nretries = 2.5\n", "Invalid retries", 8, 11},
		{"number_range", "name = \"n\"\nratio = 2\n", "Invalid ratio", 8, 9},
		{"unknown_attribute", "name = \"n\"\nnope = 1\n", "Unsupported argument", 8, 1},
		{"unknown_block", "name = \"n\"\nnope {\n}\n", "Unsupported block type", 8, 1},
		{"variable", "name = var.x\n", "Variables not allowed", 7, 10},
		{"duplicate_label", "name = \"n\"\npeer \"a\" {\n  addr = \"x\"\n}\npeer \"a\" {\n  addr = \"y\"\n}\n", "Duplicate peer", 11, 6},
		{"duplicate_block", "name = \"n\"\nlimits {\n}\nlimits {\n}\n", "Duplicate limits block", 10, 1},
		{"nested_missing", "name = \"n\"\npeer \"a\" {\n}\n", "Missing required argument", 8, 10},
		{"nested_check", "name = \"n\"\nlimits {\n  low = 9\n  high = 2\n}\n", "Invalid high", 10, 10},
		{"syntax", "name = = 1\n", "", 7, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, diags := decode(tc.src)
			var d *hcl.Diagnostic
			for _, x := range diags {
				if x.Severity == hcl.DiagError && strings.Contains(x.Summary, tc.summary) {
					d = x
					break
				}
			}
			if d == nil || d.Subject == nil {
				t.Fatalf("no located %q diagnostic: %s", tc.summary, diags.Error())
			}
			if d.Subject.Filename != "paddock.hcl" || d.Subject.Start.Line != tc.line || (tc.col != 0 && d.Subject.Start.Column != tc.col) {
				t.Errorf("%q at %s, want paddock.hcl:%d,%d", d.Summary, d.Subject, tc.line, tc.col)
			}
			if !strings.Contains(d.Error(), fmt.Sprintf("paddock.hcl:%d,", tc.line)) {
				t.Errorf("diagnostic text %q lacks file:line", d.Error())
			}
		})
	}
}

func TestCheckOnAbsentAttributePointsAtTheBody(t *testing.T) {
	spec := configspec.Spec[limits]{Attributes: limitsSpec.Attributes, Checks: []configspec.Check[limits]{
		{Attr: "low", Summary: "Missing low", Fn: func(l *limits) error { return fmt.Errorf("low is required here") }}}}
	_, diags := spec.Parse(runtime.ConfigSource{Filename: "f.hcl", Source: []byte("high = 3\n"), Start: start}, limits{})
	if len(diags) != 1 || diags[0].Summary != "Missing low" || diags[0].Subject.Start != start {
		t.Fatalf("diags = %v, want one Missing low at the body's start", diags)
	}
}

// The one declaration documents itself: the schema lists every attribute
// and block with its type, requiredness and description, in order.
func TestSchemaDocumentsTheDeclaration(t *testing.T) {
	s := testSpec.Schema()
	var got []string
	for _, a := range s.Attributes {
		got = append(got, fmt.Sprintf("%s:%s:%v:%s", a.Name, a.Type, a.Required, a.Description))
	}
	for _, b := range s.Blocks {
		got = append(got, fmt.Sprintf("%s%v:%d:%s", b.Type, b.LabelNames, len(b.Body.Attributes), b.Description))
	}
	want := []string{"name:string:true:the name", "verbose:bool:false:log more", "wait:duration:false:how long",
		"retries:number:false:how often", "ratio:number:false:a share", "peer[name]:1:a peer", "limits[]:2:bounds"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("schema = %q\nwant     %q", got, want)
	}
	if !s.Blocks[0].Body.Attributes[0].Required {
		t.Error("the peer block's addr is required in the declaration but not in the schema")
	}
}

func FuzzDecode(f *testing.F) {
	f.Add("name = \"n\"\nlimits {\n low = 1\n}\n")
	f.Add("peer \"a\" {\n}\npeer \"a\" {\n}\n")
	f.Add("x = {")
	f.Fuzz(func(t *testing.T, src string) {
		cfg, diags := decode(src)
		for _, d := range diags {
			if d.Severity == hcl.DiagError && d.Subject != nil && d.Subject.Filename != "paddock.hcl" {
				t.Fatalf("diagnostic in %q", d.Subject.Filename)
			}
		}
		if !diags.HasErrors() && (cfg.Name == "" || cfg.Retries < 1 || cfg.Limits.High < cfg.Limits.Low) {
			t.Fatalf("accepted %+v", cfg)
		}
	})
}

// A path the file sets is relative to the file's directory; a default is
// left as it is.
func TestPathIsRelativeToTheFile(t *testing.T) {
	type paths struct{ Root string }
	spec := configspec.Spec[paths]{Attributes: []configspec.Attribute[paths]{
		configspec.Path("root", "a directory", func(p *paths) *string { return &p.Root })}}
	for _, tc := range []struct{ filename, src, want string }{
		{"/etc/paddock/paddock.hcl", `root = "data/ws"`, "/etc/paddock/data/ws"},
		{"/etc/paddock/paddock.hcl", `root = "/srv/ws"`, "/srv/ws"},
		{"/etc/paddock/paddock.hcl", ``, "./default"},
		{"inline.hcl", `root = "ws"`, "ws"},
	} {
		got, diags := spec.Parse(runtime.ConfigSource{Filename: tc.filename, Source: []byte(tc.src)}, paths{Root: "./default"})
		if diags.HasErrors() || got.Root != tc.want {
			t.Errorf("%s in %s: root = %q %v, want %q", tc.src, tc.filename, got.Root, diags, tc.want)
		}
	}
}
