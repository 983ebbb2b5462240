package config

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// FuzzParse checks that any input either parses into a valid config or yields a
// *DiagError whose every line is located and hinted; nothing panics.
func FuzzParse(f *testing.F) {
	for _, p := range []string{"testdata/contract_example.hcl", "../../config.hcl"} {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("ports {\n  http = 0\n}\n"))
	f.Add([]byte(`plugin "x" { config { a = "${b}" } }`))
	f.Add([]byte(`agent "a" { protocol = "acp" command = ["a"] }`))
	f.Add([]byte("server {\n  retry_join = [\"a:1\"]\n  heartbeat_timeout = \"1s\"\n}\n"))
	f.Add([]byte(`api { max_body = "1MiB" }`))
	f.Fuzz(func(t *testing.T, src []byte) {
		c, err := Parse(src, "fuzz.hcl")
		if err == nil {
			if c == nil {
				t.Fatal("nil config without error")
			}
			if verr := c.Validate(); verr != nil {
				t.Fatalf("Parse accepted a config that Validate rejects: %v", verr)
			}
			for _, p := range c.Plugins {
				if p.Start.Byte+len(p.Source) > len(src) || string(src[p.Start.Byte:p.Start.Byte+len(p.Source)]) != string(p.Source) {
					t.Fatalf("plugin %q source does not match its position", p.Name)
				}
			}
			return
		}
		var de *DiagError
		if !errors.As(err, &de) || len(de.Diags) == 0 {
			t.Fatalf("error %T without diagnostics: %v", err, err)
		}
		for _, line := range strings.Split(err.Error(), "\n") {
			if !strings.Contains(line, "hint: ") {
				t.Fatalf("line without hint: %q", line)
			}
		}
	})
}
