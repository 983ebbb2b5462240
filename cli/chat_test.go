package cli

import (
	"reflect"
	"strings"
	"testing"
)

// A prompt is a line, or a bracketed paste with the rest of the line it
// ends on; blank lines send nothing; the last line needs no newline.
func TestReadPrompts(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want []string
	}{
		{"lines", "one\ntwo\n", []string{"one", "two"}},
		{"blank lines", "\n  \none\n\n", []string{"one"}},
		{"no final newline", "one\ntwo", []string{"one", "two"}},
		{"crlf", "one\r\n", []string{"one"}},
		{"paste", pasteStart + "line one\nline two" + pasteEnd + "\n", []string{"line one\nline two"}},
		{"paste ending in a newline", pasteStart + "a\nb\n" + pasteEnd + "\n", []string{"a\nb"}},
		{"typed after a paste", pasteStart + "a\nb" + pasteEnd + " and c\nnext\n", []string{"a\nb and c", "next"}},
		{"paste cut by EOF", pasteStart + "a\nb", []string{"a\nb"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ch := make(chan string)
			go readPrompts(strings.NewReader(tc.in), ch)
			var got []string
			for p := range ch {
				got = append(got, p)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("prompts %q, want %q", got, tc.want)
			}
		})
	}
}
