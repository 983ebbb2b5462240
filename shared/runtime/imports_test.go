package runtime_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestSharedImportsOnlyShared backs the package comment: nothing under
// shared/ (the SDK, its kit, agentctl) depends on a package of this module
// outside shared/ but api, the wire contract (which links only the standard
// library), so a third-party plugin builds with shared/ and api alone.
func TestSharedImportsOnlyShared(t *testing.T) {
	const module = "github.com/paddockhq/paddock/"
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", module+"shared/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	var shared int
	for _, dep := range strings.Fields(string(out)) {
		if dep == module+"api" || strings.HasPrefix(dep, module+"api/") {
			continue // the wire contract: standard library only
		}
		if strings.HasPrefix(dep, module+"shared/") {
			shared++
		} else if strings.HasPrefix(dep, module) {
			t.Errorf("shared/ depends on %s (supervisor/ and the rest of the module are off limits)", dep)
		}
	}
	if shared < 5 {
		t.Fatalf("go list -deps found only %d shared/ packages: %s", shared, out)
	}
}
