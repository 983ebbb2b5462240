package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Every `X --help` prints X's usage on stdout and exits 0, for groups and
// leaf commands alike, in each of the spellings people type.
func TestHelpExitsZero(t *testing.T) {
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"session", "--help"}, []string{"Usage: paddock session COMMAND", "paddock session create", "paddock session cancel", "paddock session diff"}},
		{[]string{"session", "-h"}, []string{"paddock session prompt"}},
		{[]string{"help", "session"}, []string{"paddock session status"}},
		{[]string{"operator", "--help"}, []string{"paddock operator raft list-peers", "paddock operator snapshot save"}},
		{[]string{"operator", "raft", "--help"}, []string{"paddock operator raft remove-peer"}},
		{[]string{"task", "--help"}, []string{"paddock task close", "paddock task delete"}},
		{[]string{"session", "status", "--help"}, []string{"Usage: paddock session status ID"}},
		{[]string{"resume", "--help"}, []string{"Usage: paddock resume [-task ID] [-all]", "-all"}},
		{[]string{"events", "-help"}, []string{"Usage: paddock events", "-session"}},
		{[]string{"--help"}, []string{"Usage: paddock", "paddock resume", "paddock version"}},
		{[]string{"help"}, []string{"paddock completion bash|zsh|fish"}},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errOut := runCLI("http://127.0.0.1:1", tc.args...)
			if code != 0 || errOut != "" {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			assertInOrder(t, out, tc.want)
		})
	}
}

func TestDidYouMean(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"sesion", "list"}, `did you mean "paddock session"?`},
		{[]string{"statu"}, `did you mean "paddock status"?`},
		{[]string{"session", "stauts", "x"}, `did you mean "paddock session status"?`},
		{[]string{"task", "lst"}, `did you mean "paddock task list"?`},
		{[]string{"versoin"}, `did you mean "paddock version"?`},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errOut := runCLI("http://127.0.0.1:1", tc.args...)
			if code != 1 || out != "" {
				t.Fatalf("exit %d, stdout %q", code, out)
			}
			assertOneErrorLine(t, errOut, tc.want)
		})
	}
	// Nothing close: no guess.
	_, _, errOut := runCLI("http://127.0.0.1:1", "frobnicate")
	if strings.Contains(errOut, "did you mean") {
		t.Errorf("a guess for a word unlike any command: %q", errOut)
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"-version"}, {"--version"}} {
		code, out, errOut := runCLI("http://127.0.0.1:1", args...)
		if code != 0 || errOut != "" {
			t.Fatalf("%v: exit %d, stderr %q", args, code, errOut)
		}
		assertInOrder(t, out, []string{"paddock ", "commit ", "go1."})
	}
	code, out, _ := runCLI("http://127.0.0.1:1", "version", "-json")
	if code != 0 || !strings.Contains(out, `"go_version": "go1.`) || !strings.Contains(out, `"commit"`) {
		t.Errorf("version -json: exit %d, %q", code, out)
	}
}

// The completion scripts are valid for their shell and complete commands
// and subcommands.
func TestCompletion(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish"} {
		code, out, errOut := runCLI("http://127.0.0.1:1", "completion", shell)
		if code != 0 || errOut != "" {
			t.Fatalf("%s: exit %d, stderr %q", shell, code, errOut)
		}
		if !strings.Contains(out, "session") || !strings.Contains(out, "list-peers") {
			t.Errorf("%s script lacks command words:\n%s", shell, out)
		}
	}
	if code, _, errOut := runCLI("http://127.0.0.1:1", "completion", "tcsh"); code != 1 || !strings.Contains(errOut, "bash, zsh or fish") {
		t.Errorf("unknown shell: exit %d, %q", code, errOut)
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("SKIPPED: no bash to run the script")
	}
	_, script, _ := runCLI("http://127.0.0.1:1", "completion", "bash")
	f := filepath.Join(t.TempDir(), "paddock.bash")
	if err := os.WriteFile(f, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	complete := func(words ...string) string {
		line := "paddock " + strings.Join(words, " ")
		sh := `source "$1"; COMP_WORDS=(` + line + `); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )); _paddock; echo "${COMPREPLY[*]}"`
		out, err := exec.Command(bash, "-c", sh, "bash", f).CombinedOutput()
		if err != nil {
			t.Fatalf("bash completion of %q: %v: %s", line, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if got := complete("ses"); got != "session" {
		t.Errorf("paddock ses<TAB> = %q, want session", got)
	}
	if got := complete("session", "st"); got != "status stop" {
		t.Errorf("paddock session st<TAB> = %q, want \"status stop\"", got)
	}
	if got := complete("operator", "raft", "li"); got != "list-peers" {
		t.Errorf("paddock operator raft li<TAB> = %q", got)
	}
}

func TestMatchPrefix(t *testing.T) {
	ids := []string{"abcd1234", "abcd5678", "ef001122"}
	cases := []struct {
		prefix, want, err string
	}{
		{"ef00", "ef001122", ""},
		{"abcd1", "abcd1234", ""},
		{"abcd", "", "ambiguous: it matches abcd1234, abcd5678"},
		{"zzzz", "zzzz", ""},
	}
	for _, tc := range cases {
		got, err := matchPrefix(idSession, tc.prefix, ids)
		if got != tc.want || (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("matchPrefix(%q) = %q, %v; want %q, %q", tc.prefix, got, err, tc.want, tc.err)
		}
	}
}

// TestHelpFitsEightyColumns: help pads no line past 80 columns, however
// long a command's usage; "help server" answers with server's usage.
func TestHelpFitsEightyColumns(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"session", "--help"}, {"tls", "--help"}} {
		code, out, _ := runCLI("http://127.0.0.1:1", args...)
		if code != 0 {
			t.Fatalf("%v: exit %d", args, code)
		}
		for _, l := range strings.Split(out, "\n") {
			if n := len([]rune(l)); n > 80 {
				t.Errorf("%v: a line of %d columns: %q", args, n, l)
			}
		}
	}
	code, out, errOut := runCLI("http://127.0.0.1:1", "help", "server")
	if code != 0 || errOut != "" || !strings.Contains(out, "Usage: paddock server -config FILE") {
		t.Errorf("help server: exit %d, %q %q", code, out, errOut)
	}
}

// TestAgentctlErrorsInTheUsersWords: an error the server passes on from a
// session's agentctl is printed as agentctl's sentence alone.
func TestAgentctlErrorsInTheUsersWords(t *testing.T) {
	f, addr := startFake(t)
	f.routes["POST /v1/sessions/s1/cancel"] = route{409, `{"error":{"code":"conflict","message":"agentctl: 409 conflict: no turn is running"}}`}
	code, _, errOut := runCLI(addr, "session", "cancel", "s1")
	if code != 1 || errOut != "Error: no turn is running\n" {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
}
