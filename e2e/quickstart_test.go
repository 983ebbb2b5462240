package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/shared/testkit"
)

// quickStartCommands returns the commands of the README's quick start: the
// shell block after "Then, in another shell:", one command a line, with the
// comments cut off.
func quickStartCommands(t *testing.T, readme string) []string {
	t.Helper()
	b, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "Then, in another shell:")
	if !ok {
		t.Fatalf("%s has no \"Then, in another shell:\"", readme)
	}
	_, block, ok := strings.Cut(after, "```sh\n")
	if !ok {
		t.Fatalf("%s: no ```sh block after \"Then, in another shell:\"", readme)
	}
	block, _, ok = strings.Cut(block, "```")
	if !ok {
		t.Fatalf("%s: the quick start block is not closed", readme)
	}
	var cmds []string
	sc := bufio.NewScanner(strings.NewReader(block))
	for sc.Scan() {
		if line := strings.TrimSpace(stripComment(sc.Text())); line != "" {
			cmds = append(cmds, line)
		}
	}
	if len(cmds) == 0 {
		t.Fatalf("%s: the quick start block has no commands", readme)
	}
	return cmds
}

// stripComment cuts a shell comment (a # that starts a word outside quotes).
func stripComment(line string) string {
	var quote rune
	prev := ' '
	for i, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '"' || r == '\'':
			quote = r
		case r == '#' && (prev == ' ' || prev == '\t'):
			return line[:i]
		}
		prev = r
	}
	return line
}

// quickStartServer starts the server as `make run` does (bin/paddock server
// -config config.hcl from the repository's directory), in a directory that
// holds bin/ and a copy of config.hcl with free ports, and waits until it
// leads. It returns the directory and the API address.
func quickStartServer(t *testing.T) (string, string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.Symlink(binDir, filepath.Join(dir, "bin")); err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(repoFile(t, "config.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	pair, err := testkit.FreePorts("127.0.0.1", 2)
	if err != nil {
		t.Fatal(err)
	}
	httpPort, raftPort := pair[0], pair[1]
	ports := regexp.MustCompile(`(?m)^(\s*)(http|raft)(\s*)=\s*\d+`)
	cfg = ports.ReplaceAllFunc(cfg, func(m []byte) []byte {
		sub := ports.FindSubmatch(m)
		port := httpPort
		if string(sub[2]) == "raft" {
			port = raftPort
		}
		return fmt.Appendf(nil, "%s%s%s= %d", sub[1], sub[2], sub[3], port)
	})
	if !bytes.Contains(cfg, fmt.Appendf(nil, "= %d", httpPort)) || !bytes.Contains(cfg, fmt.Appendf(nil, "= %d", raftPort)) {
		t.Fatalf("config.hcl has no ports block to rewrite:\n%s", cfg)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.hcl"), cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", httpPort)
	n := startNode(t, "quickstart", dir, "config.hcl", addr)
	// A newcomer runs the block once make run says the node is up.
	testkit.WaitFor(t, 30*time.Second, "the node to lead", testkit.Cond(func() bool {
		leads, err := n.Leads()
		return err == nil && leads
	}))
	return dir, addr
}

// TestReadmeQuickStart runs the README's quick start as a newcomer pastes it:
// command after command with no pause, against a fresh `make run` server.
// Each command must exit 0; the ids a command prints replace TASK_ID and
// SESSION_ID in the next ones; the conversation shows the agent's answer
// right after the prompt; and after stop and resume the agent still
// remembers.
func TestReadmeQuickStart(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	cmds := quickStartCommands(t, repoFile(t, "README.md"))
	dir, addr := quickStartServer(t)
	ids := map[string]string{}
	idPatterns := map[string]*regexp.Regexp{
		"TASK_ID":    regexp.MustCompile(`Created task (\S+)`),
		"SESSION_ID": regexp.MustCompile(`Created session (\S+)`),
	}
	outputs := map[string]string{}
	for _, line := range cmds {
		for name, id := range ids {
			line = strings.ReplaceAll(line, name, id)
		}
		for name := range idPatterns {
			if strings.Contains(line, name) {
				t.Fatalf("%q uses %s, which no earlier command printed", line, name)
			}
		}
		cmd := exec.Command("sh", "-c", line)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "PADDOCK_ADDR=http://"+addr)
		if strings.Contains(line, " attach ") {
			// No terminal here: attach reads its pipe, and ctrl-] detaches.
			cmd.Stdin = strings.NewReader("pwd\n\x1d")
		}
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		start := time.Now()
		err := cmd.Run()
		t.Logf("$ %s (%s)\n%s%s", line, time.Since(start).Round(time.Millisecond), stdout.String(), stderr.String())
		if err != nil {
			t.Fatalf("%q failed: %v\nstdout:\n%s\nstderr:\n%s", line, err, stdout.String(), stderr.String())
		}
		for name, re := range idPatterns {
			if m := re.FindStringSubmatch(stdout.String()); m != nil {
				ids[name] = m[1]
			}
		}
		outputs[line] = stdout.String()
	}
	check := func(suffix string, want ...string) {
		t.Helper()
		for line, out := range outputs {
			if !strings.HasSuffix(line, suffix) {
				continue
			}
			for _, w := range want {
				if !strings.Contains(out, w) {
					t.Errorf("%q printed no %q:\n%s", line, w, out)
				}
			}
			return
		}
		t.Errorf("the quick start has no command ending in %q", suffix)
	}
	check("session messages "+ids["SESSION_ID"], "remember apples and pears", "ok, remembering apples")
	check(ids["SESSION_ID"]+" recall", "you asked me to remember: apples, and, pears")
	check("session approve "+ids["SESSION_ID"], "Approved permission request", "Run: wc -l notes.txt", "allow_once")
}
