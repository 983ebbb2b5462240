package config

import (
	"fmt"
	"path/filepath"

	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"
)

// DevFilename is the name diagnostics and plugins see for the built-in dev config.
const DevFilename = "<dev>"

// DevSource returns the built-in configuration of `paddock server -dev` for dataDir:
// one node, the standalone runtime with its workspaces under dataDir, and the demo
// agent profiles (demo, demo-tty, demo-noresume).
func DevSource(dataDir string) []byte {
	return fmt.Appendf(nil, `# Built-in configuration of "paddock server -dev".
data_dir  = %s

server {
  bootstrap_expect = 1
}

plugin "standalone" {
  config {
    workspace_root = %s
  }
}

agent "demo" {
  protocol   = "acp"
  command    = ["paddock-demo-agent"]
  permission = "ask"
}

agent "demo-tty" {
  protocol                = "pty"
  command                 = ["paddock-demo-agent", "--tty"]
  new_args                = ["--session-id", "{{resume_token}}"]
  resume_args             = ["--resume", "{{resume_token}}"]
  supports_session_resume = true
}

agent "demo-noresume" {
  protocol = "acp"
  command  = ["paddock-demo-agent", "--no-resume"]
}
`, hclString(dataDir), hclString(filepath.Join(dataDir, "workspaces")))
}

// Dev returns the built-in dev configuration (see DevSource) with its data in dataDir.
// The caller creates dataDir (a temporary directory for `paddock server -dev`); an
// empty dataDir means DefaultDataDir.
func Dev(dataDir string) *Config {
	if dataDir == "" {
		dataDir = DefaultDataDir
	}
	c, err := Parse(DevSource(dataDir), DevFilename)
	if err != nil {
		// Impossible: the source is built in and its strings are quoted by hclwrite;
		// TestDev covers awkward paths.
		panic(fmt.Sprintf("config: built-in dev config is invalid: %v", err))
	}
	c.DataDir = dataDir // exactly as given, without HCL's string normalisation
	return c
}

// hclString quotes s as an HCL string literal (escaping quotes and ${ / %{ templates).
func hclString(s string) []byte {
	return hclwrite.TokensForValue(cty.StringVal(s)).Bytes()
}
