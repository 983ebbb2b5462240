package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"strings"
	"text/tabwriter"
)

// newTable returns a tabwriter for aligned columns.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

// table prints header and rows as aligned columns. Cells are sanitized so a
// tab or newline in server data cannot break the layout.
func table(w io.Writer, header []string, rows [][]string) error {
	tw := newTable(w)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		cells := make([]string, len(r))
		for i, c := range r {
			cells[i] = cell(c)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// kv prints label/value pairs as two aligned columns.
func kv(w io.Writer, pairs [][2]string) error {
	tw := newTable(w)
	for _, p := range pairs {
		fmt.Fprintf(tw, "%s\t%s\n", p[0], cell(p[1]))
	}
	return tw.Flush()
}

// cell makes s safe for one table cell: control characters become spaces and
// an empty value shows as "-".
func cell(s string) string {
	s = noControls(s, "")
	if strings.TrimSpace(s) == "" {
		return "-"
	}
	return s
}

// noControls replaces every control character (C0, DEL and C1) of server
// data with a space, except those in keep: an ESC or 8-bit CSI would let the
// text retitle the terminal, clear the screen or recolour what follows.
func noControls(s, keep string) string {
	return strings.Map(func(r rune) rune {
		if (r < 0x20 || r == 0x7f || r >= 0x80 && r <= 0x9f) && !strings.ContainsRune(keep, r) {
			return ' '
		}
		return r
	}, s)
}

// printJSON writes the server's raw JSON body indented, or "{}" when the
// server sent no body.
func printJSON(w io.Writer, raw []byte) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		raw = []byte("{}")
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return fmt.Errorf("server sent malformed JSON: %w", err)
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}

// strOr returns *p, or def when p is nil or empty.
func strOr[T ~string](p *T, def string) string {
	if p == nil || *p == "" {
		return def
	}
	return string(*p)
}

// templateWriter formats each JSON document written to it with a Go
// template (-t, as Nomad's -t): the document decoded into maps and slices,
// keys as the API names them ({{.state}}, {{range .sessions}}{{.id}}
// {{end}}). Anything that is not JSON is written as it is.
type templateWriter struct {
	t   *template.Template
	out io.Writer
}

func newTemplateWriter(text string, out io.Writer) (*templateWriter, error) {
	t, err := template.New("-t").Option("missingkey=zero").Parse(text)
	if err != nil {
		return nil, fmt.Errorf("-t: %w", err)
	}
	return &templateWriter{t: t, out: out}, nil
}

func (w *templateWriter) Write(p []byte) (int, error) {
	dec := json.NewDecoder(bytes.NewReader(p))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return w.out.Write(p)
	}
	var buf bytes.Buffer
	if err := w.t.Execute(&buf, doc); err != nil {
		return 0, fmt.Errorf("-t: %w", err)
	}
	if buf.Len() > 0 && buf.Bytes()[buf.Len()-1] != '\n' {
		buf.WriteByte('\n')
	}
	if _, err := w.out.Write(buf.Bytes()); err != nil {
		return 0, err
	}
	return len(p), nil
}
