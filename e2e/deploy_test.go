package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// requireTool returns the path of a command the test needs; without it the
// test is skipped, except under CI (.ci/run installs it), where it fails.
func requireTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not installed; .ci/run installs it", name)
		}
		t.Skipf("%s is not installed", name)
	}
	return p
}

// TestSystemdUnitVerifies checks deploy/systemd/paddock.service with
// systemd's own tools: `systemd-analyze verify` reports nothing (no unknown
// key, no bad value, the binary it starts exists and is executable), the
// hardening the unit promises is there, and `systemd-analyze security`
// rates its exposure at most 2.5 of 10.
func TestSystemdUnitVerifies(t *testing.T) {
	if testing.Short() {
		t.Skip("needs systemd-analyze and the built binary")
	}
	analyze := requireTool(t, "systemd-analyze")
	src, err := os.ReadFile(repoFile(t, "deploy/systemd/paddock.service"))
	if err != nil {
		t.Fatal(err)
	}
	unit := string(src)
	for _, want := range []string{"\nUser=paddock\n", "\nNoNewPrivileges=yes\n", "\nProtectSystem=strict\n", "\nRestart=on-failure\n",
		"\nStateDirectory=paddock\n", "\nKillMode=process\n", "\nExecStart=/usr/local/bin/paddock server -config /etc/paddock/paddock.hcl\n"} {
		if !strings.Contains(unit, want) {
			t.Errorf("paddock.service lacks %q", strings.TrimSpace(want))
		}
	}
	// Verify the unit as installed, with the binary where this build has it.
	dir := t.TempDir()
	path := filepath.Join(dir, "paddock.service")
	local := strings.ReplaceAll(unit, "/usr/local/bin/paddock ", filepath.Join(binDir, "paddock")+" ")
	if err := os.WriteFile(path, []byte(local), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", path).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	out, err = exec.Command(analyze, "security", "--offline=yes", "--threshold=25", path).CombinedOutput()
	if err != nil {
		t.Errorf("systemd-analyze security: exposure above 2.5 (%v):\n%s", err, out)
	}
	// The check can fail: a misspelt key is reported.
	bad := filepath.Join(dir, "bad.service")
	if err := os.WriteFile(bad, []byte(strings.Replace(local, "ProtectSystem=", "ProtectSystm=", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, _ := exec.Command(analyze, "verify", bad).CombinedOutput(); !strings.Contains(string(out), "ProtectSystm") {
		t.Errorf("systemd-analyze verify did not report a misspelt key: %s", out)
	}
}
