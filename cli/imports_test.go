package cli_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestTheCLILinksNoServerCode: the CLI and the Go client speak to a server
// through the wire contract (api, api/termproto) alone; neither links a
// supervisor package nor shared/term's PTY code (creack/pty).
func TestTheCLILinksNoServerCode(t *testing.T) {
	const module = "github.com/paddockhq/paddock/"
	for _, pkg := range []string{module + "cli", module + "client"} {
		out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			if strings.HasPrefix(dep, module+"supervisor/") || dep == module+"shared/term" || dep == "github.com/creack/pty" {
				t.Errorf("%s links %s", pkg, dep)
			}
		}
	}
}
