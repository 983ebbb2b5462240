package ptyagent

import "testing"

// A line typed at the prompt is reported as the agent received it: its echo
// with erased characters removed and escape sequences stripped.
func TestParserReportsTypedLines(t *testing.T) {
	cases := []struct {
		name string
		echo string
		want []string
	}{
		{"plain", "demo> remember cats\r\n", []string{"remember cats"}},
		{"erased typo", "demo> remember dogz\b \bs\r\n", []string{"remember dogs"}},
		{"erased multibyte", "demo> café\b \be\r\n", []string{"cafe"}},
		{"colour", "\x1b[1mdemo> \x1b[0mhello\r\n", []string{"hello"}},
		{"empty line", "demo> \r\n", nil},
		{"reply is not input", "agent: ok\r\n", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			p := &Parser{OnInput: func(text string) { got = append(got, text) }}
			p.Feed([]byte(c.echo))
			if len(got) != len(c.want) || (len(got) > 0 && got[0] != c.want[0]) {
				t.Fatalf("typed lines %q, want %q", got, c.want)
			}
		})
	}
}
