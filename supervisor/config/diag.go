package config

import (
	"fmt"
	"io"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// DiagError is the error returned by Load, Parse and Validate: HCL diagnostics with
// ranges, plus the parsed files so that a caller can print source snippets.
type DiagError struct {
	// Diags are the problems found, each with a hint at the end of its Detail.
	Diags hcl.Diagnostics
	// Files are the parsed files by name (for hcl.NewDiagnosticTextWriter).
	Files map[string]*hcl.File
}

// Error returns every diagnostic on its own line as "FILE:LINE:COL: summary: detail",
// the detail ending with a one-line "hint: …".
func (e *DiagError) Error() string {
	var b strings.Builder
	for i, d := range e.Diags {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(formatDiag(d))
	}
	return b.String()
}

// WriteText renders the diagnostics with source snippets (as HCL tools do) to w.
func (e *DiagError) WriteText(w io.Writer, width uint, color bool) error {
	wr := hcl.NewDiagnosticTextWriter(w, e.Files, width, color)
	if err := wr.WriteDiagnostics(e.Diags); err != nil {
		return fmt.Errorf("write diagnostics: %w", err)
	}
	return nil
}

func formatDiag(d *hcl.Diagnostic) string {
	var b strings.Builder
	if d.Subject != nil {
		fmt.Fprintf(&b, "%s:%d:%d: ", d.Subject.Filename, d.Subject.Start.Line, d.Subject.Start.Column)
	}
	if d.Severity == hcl.DiagWarning {
		b.WriteString("warning: ")
	}
	b.WriteString(d.Summary)
	detail := strings.Join(strings.Fields(d.Detail), " ")
	if detail != "" {
		b.WriteString(": ")
		b.WriteString(detail)
	}
	if !strings.Contains(detail, "hint:") {
		b.WriteString(" hint: see docs/CONFIGURATION.md")
	}
	return b.String()
}

// withHint appends "hint: …" to the detail of every diagnostic that has none yet.
func withHint(diags hcl.Diagnostics, hint string) hcl.Diagnostics {
	for _, d := range diags {
		if strings.Contains(d.Detail, "hint:") {
			continue
		}
		d.Detail = joinHint(d.Detail, hint)
	}
	return diags
}

func joinHint(detail, hint string) string {
	detail = strings.TrimSpace(detail)
	if detail == "" {
		return "hint: " + hint
	}
	return detail + " hint: " + hint
}

const (
	hintSyntax = `check the HCL syntax here: arguments are NAME = VALUE on their own line, strings are in double quotes, and every { has its }`
)
