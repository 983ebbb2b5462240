package api_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportsOnlyStandardLibrary backs the package comment: the wire types
// link nothing but the standard library (and their own subpackages), so any
// Go program can use them.
func TestImportsOnlyStandardLibrary(t *testing.T) {
	for _, self := range []string{"github.com/paddockhq/paddock/api", "github.com/paddockhq/paddock/api/termproto"} {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", self).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps: %v\n%s", err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			// api holds the terminal protocol's codec as a package of its own.
			if dep != self && !strings.HasPrefix(dep, "github.com/paddockhq/paddock/api/") {
				t.Errorf("package %s depends on %s; it may import only the standard library and api's own packages", self, dep)
			}
		}
	}
}
