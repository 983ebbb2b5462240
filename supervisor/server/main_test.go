package server

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// binDir holds the real binaries (agentctl, the demo agent, plugins/) that
// sessions in these tests run.
var binDir string

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	if testing.Short() {
		return m.Run()
	}
	binDir = os.Getenv("PADDOCK_BIN")
	if binDir == "" {
		dir, err := os.MkdirTemp("", "paddock-server-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		cmd := exec.Command("make", "-C", "../..", "build", "BIN="+dir)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "build binaries:", err)
			return 1
		}
		binDir = dir
	}
	return m.Run()
}
