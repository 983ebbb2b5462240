package docs

import (
	"context"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/paddockhq/paddock/plugins/docker/dockerexec"
	"github.com/paddockhq/paddock/plugins/remote/remoteexec"
	"github.com/paddockhq/paddock/plugins/standalone/localexec"
	"github.com/paddockhq/paddock/shared/runtime"
	"github.com/paddockhq/paddock/supervisor/config"
)

// TestNothingPointsOutsideTheRepository fails when a tracked file refers to
// the team's specifications, which are not part of the repository.
func TestNothingPointsOutsideTheRepository(t *testing.T) {
	out, err := exec.Command("git", "-C", "..", "ls-files", "-z").Output()
	if err != nil {
		t.Skipf("git ls-files: %v (not a git checkout)", err)
	}
	// The team keeps its specification and style guide beside the
	// repository, not in it. The names are built here (upper-cased stems, a
	// joined path) so that this file names no document outside the tree.
	var banned []string
	for _, stem := range []string{"contract", "product", "style"} {
		banned = append(banned, strings.ToUpper(stem)+".md")
	}
	banned = append(banned, filepath.Join("..", "shared", "docs"))
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		b, err := os.ReadFile(filepath.Join("..", name))
		if err != nil {
			continue // deleted in the work tree
		}
		for _, word := range banned {
			if i := strings.Index(string(b), word); i >= 0 {
				line := strings.Count(string(b[:i]), "\n") + 1
				t.Errorf("%s:%d mentions %s, which is not in the repository; point at docs/ instead", name, line, word)
			}
		}
	}
}

// registeredRoutes returns the patterns passed to Server.handle in
// supervisor/api, read from the source.
func registeredRoutes(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob("../supervisor/api/*.go")
	if err != nil {
		t.Fatal(err)
	}
	var routes []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "handle" {
				return true
			}
			lit, ok := call.Args[0].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			p, err := strconv.Unquote(lit.Value)
			if err == nil {
				routes = append(routes, p)
			}
			return true
		})
	}
	return routes
}

// TestAPIDocListsEveryRoute checks that docs/API.md names every route the
// API server registers, as "METHOD /path".
func TestAPIDocListsEveryRoute(t *testing.T) {
	b, err := os.ReadFile("API.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	routes := registeredRoutes(t)
	if len(routes) < 30 || !slices.Contains(routes, "GET /v1/nodes") {
		t.Fatalf("found only %d routes in supervisor/api: %v", len(routes), routes)
	}
	for _, r := range routes {
		// The route, ending where the path ends (a query, a backtick, a space).
		if !regexp.MustCompile(regexp.QuoteMeta(r) + "([?` ]|$)").MatchString(doc) {
			t.Errorf("docs/API.md does not document %s", r)
		}
	}
}

// schemaKeys flattens a plugin's config schema into the keys
// docs/CONFIGURATION.md uses: plugin.NAME.config.attr, …config.block.LABEL.attr.
func schemaKeys(prefix string, s runtime.Schema) []string {
	var out []string
	for _, a := range s.Attributes {
		out = append(out, prefix+a.Name)
	}
	for _, b := range s.Blocks {
		p := prefix + b.Type + "."
		for range b.LabelNames {
			p += "NAME."
		}
		out = append(out, schemaKeys(p, b.Body)...)
	}
	return out
}

// TestConfigurationDocListsEveryPluginKey compares the plugin key tables of
// docs/CONFIGURATION.md with each bundled plugin's ConfigSchema, both ways.
func TestConfigurationDocListsEveryPluginKey(t *testing.T) {
	b, err := os.ReadFile("CONFIGURATION.md")
	if err != nil {
		t.Fatal(err)
	}
	var doc []string
	for _, m := range regexp.MustCompile("(?m)^\\| `(plugin\\.[a-z]+\\.config\\.[^`]+)` \\|").FindAllStringSubmatch(string(b), -1) {
		doc = append(doc, m[1])
	}
	log := hclog.NewNullLogger()
	var code []string
	for name, rt := range map[string]runtime.Runtime{
		"standalone": localexec.New(log), "docker": dockerexec.New(log), "remote": remoteexec.New(log),
	} {
		s, err := rt.ConfigSchema(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		code = append(code, schemaKeys("plugin."+name+".config.", s)...)
	}
	sort.Strings(doc)
	sort.Strings(code)
	if !slices.Contains(code, "plugin.standalone.config.shared_workspace_root") {
		t.Fatalf("unexpected schema keys %v", code)
	}
	for _, k := range code {
		if !slices.Contains(doc, k) {
			t.Errorf("the plugin schema has %s but docs/CONFIGURATION.md does not document it", k)
		}
	}
	for _, k := range doc {
		if !slices.Contains(code, k) {
			t.Errorf("docs/CONFIGURATION.md documents %s but no plugin schema has it", k)
		}
	}
}

// TestClusterDeployFiles loads the three node configurations of
// deploy/cluster and checks that they differ only where a node must.
func TestClusterDeployFiles(t *testing.T) {
	var cfgs []*config.Config
	for _, n := range []string{"n1", "n2", "n3"} {
		c, err := config.Load("../deploy/cluster/" + n + ".hcl")
		if err != nil {
			t.Fatalf("deploy/cluster/%s.hcl: %v", n, err)
		}
		cfgs = append(cfgs, c)
	}
	names := map[string]bool{}
	for i, c := range cfgs {
		names[c.NodeName] = true
		if c.Server.BootstrapExpect != 3 || len(c.Server.RetryJoin) != 2 || slices.Contains(c.Server.RetryJoin, c.HTTPAddr()) {
			t.Errorf("n%d: bootstrap_expect %d, retry_join %v (want 3 and the other two servers)", i+1, c.Server.BootstrapExpect, c.Server.RetryJoin)
		}
		for _, peer := range c.Server.RetryJoin {
			found := false
			for _, o := range cfgs {
				found = found || o.HTTPAddr() == peer
			}
			if !found {
				t.Errorf("n%d: retry_join %s is none of the three servers", i+1, peer)
			}
		}
		// What must be the same everywhere.
		a, b := *cfgs[0], *c
		a.NodeName, a.BindAddr, a.Server.RetryJoin = "", "", nil
		b.NodeName, b.BindAddr, b.Server.RetryJoin = "", "", nil
		a.Plugins, b.Plugins, a.Agents, b.Agents = nil, nil, nil, nil
		if !equalJSON(t, a, b) || !sameBlocks(cfgs[0], c) {
			t.Errorf("n%d differs from n1 beyond node_name, bind_addr and retry_join", i+1)
		}
	}
	if len(names) != 3 {
		t.Errorf("node names %v are not distinct", names)
	}
}

func equalJSON(t *testing.T, a, b any) bool {
	t.Helper()
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	return string(ja) == string(jb)
}

// sameBlocks compares the plugin and agent blocks of two configurations.
func sameBlocks(a, b *config.Config) bool {
	if len(a.Plugins) != len(b.Plugins) || len(a.Agents) != len(b.Agents) {
		return false
	}
	for i := range a.Plugins {
		if a.Plugins[i].Name != b.Plugins[i].Name || string(a.Plugins[i].Source) != string(b.Plugins[i].Source) {
			return false
		}
	}
	for i := range a.Agents {
		x, y := *a.Agents[i], *b.Agents[i]
		x.DefRange = y.DefRange
		if !reflect.DeepEqual(x, y) {
			return false
		}
	}
	return true
}
