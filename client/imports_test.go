package client_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLinksNoServerCode backs the package comment: a program using the client
// links neither raft nor any supervisor or executor package.
func TestLinksNoServerCode(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}",
		"github.com/paddockhq/paddock/client").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 {
		t.Fatal("go list -deps listed nothing")
	}
	banned := []string{"github.com/hashicorp/raft", "github.com/paddockhq/paddock/supervisor", "github.com/paddockhq/paddock/shared"}
	for _, dep := range deps {
		for _, b := range banned {
			if dep == b || strings.HasPrefix(dep, b+"/") {
				t.Errorf("package client depends on %s", dep)
			}
		}
	}
}
