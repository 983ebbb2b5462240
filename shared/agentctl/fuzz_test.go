package agentctl_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/shared/agentctl"
	"github.com/paddockhq/paddock/shared/agentctl/ptyagent"
	"github.com/paddockhq/paddock/shared/agentctl/workspace"
)

// FuzzDecodeStartRequest: request decoding and validation never panic, and a
// token that passes validation can never look like an option.
func FuzzDecodeStartRequest(f *testing.F) {
	for _, s := range []string{`{"profile":{"protocol":"acp","command":["a"]},"resume_token":"x"}`, `{`, `{"resume_token":"--help"}`, `null`, `{"profile":{"env":{"":"x"}}}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		var req agentctl.StartRequest
		if err := agentctl.DecodeJSON(strings.NewReader(body), &req); err != nil {
			return
		}
		_ = req.Profile.Validate()
		if agentctl.CheckToken("resume_token", req.ResumeToken) == nil {
			if strings.HasPrefix(req.ResumeToken, "-") || strings.ContainsAny(req.ResumeToken, " \t\n/") {
				t.Fatalf("token %q passed validation", req.ResumeToken)
			}
		}
	})
}

// FuzzParseFencingToken: only plain non-negative integers are accepted.
func FuzzParseFencingToken(f *testing.F) {
	for _, s := range []string{"0", "5", "-1", "", "1e3", " 7 ", "18446744073709551616"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := agentctl.ParseFencingToken(s)
		if err == nil && strings.TrimLeft(strings.TrimSpace(s), "0123456789") != "" {
			t.Fatalf("%q accepted as %d", s, n)
		}
	})
}

// FuzzPTYParser: arbitrary terminal output never panics the parser, and a
// reply line always yields its text.
func FuzzPTYParser(f *testing.F) {
	for _, s := range []string{"demo> ", "agent: hi\r\ndemo> ", "\x1b[31magent: x\x1b[0m\n", "\x1b]0;t\x07demo> ", "^C[turn cancelled]\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var last string
		p := &ptyagent.Parser{OnReply: func(text string, final bool) { last = text }}
		p.Feed(b)
		p.Feed([]byte("\nagent: done\n"))
		if last != "done" && !bytes.Contains(b, []byte{0x1b}) {
			t.Fatalf("reply after %q parsed as %q", b, last)
		}
	})
}

// FuzzCleanPath: a cleaned path never climbs out of the workspace.
func FuzzCleanPath(f *testing.F) {
	for _, s := range []string{"a/b", "../x", "/etc", "a/../../b", ".", "", "a\x00b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		c, err := workspace.Clean(p)
		if err != nil {
			return
		}
		if strings.HasPrefix(c, "/") || c == ".." || strings.HasPrefix(c, "../") {
			t.Fatalf("%q cleaned to %q", p, c)
		}
	})
}
