package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	refBegin = "<!-- BEGIN GENERATED REFERENCE: go test ./cli -run TestCLIReferenceIsCurrent -update -->"
	refEnd   = "<!-- END GENERATED REFERENCE -->"
)

// docs/CLI.md's command reference is generated from the command table; run
// with -update to write it again after changing a command.
func TestCLIReferenceIsCurrent(t *testing.T) {
	path := filepath.Join("..", "docs", "CLI.md")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	before, rest, ok := strings.Cut(doc, refBegin)
	_, after, ok2 := strings.Cut(rest, refEnd)
	if !ok || !ok2 {
		t.Fatalf("%s lacks the generated reference markers", path)
	}
	var ref bytes.Buffer
	reference(&ref)
	want := before + refBegin + "\n" + ref.String() + "\n" + refEnd + after
	if *updateGolden {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if doc != want {
		t.Errorf("%s is out of date with the command table: run go test ./cli -run TestCLIReferenceIsCurrent -update", path)
	}
	for _, c := range commands {
		if !strings.Contains(doc, "`"+c.usage()+"`") {
			t.Errorf("%s does not document %q", path, c.usage())
		}
	}
}
