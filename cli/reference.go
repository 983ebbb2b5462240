package cli

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

// globalFlagNames are the flags every command takes (documented once).
var globalFlagNames = map[string]bool{"address": true, "token": true, "json": true, "stale": true}

// reference writes the command reference of docs/CLI.md in Markdown, from
// the command table itself, so the page cannot drift from the binary.
func reference(w io.Writer) {
	group := ""
	for _, c := range commands {
		g := strings.Fields(c.path)[0]
		if g != group {
			group = g
			fmt.Fprintf(w, "\n### %s\n", g)
		}
		fmt.Fprintf(w, "\n#### `%s`\n\n%s.\n", c.usage(), strings.ToUpper(c.summary[:1])+c.summary[1:])
		if c.id != "" {
			fmt.Fprintf(w, "The %s id may be a unique prefix of 4 or more characters.\n", c.id)
		}
		fs := flag.NewFlagSet(c.path, flag.ContinueOnError)
		c.bind(fs)
		var rows []string
		fs.VisitAll(func(f *flag.Flag) {
			if globalFlagNames[f.Name] {
				return
			}
			def := ""
			if f.DefValue != "" && f.DefValue != "false" {
				def = fmt.Sprintf(" (default `%s`)", f.DefValue)
			}
			rows = append(rows, fmt.Sprintf("| `-%s` | %s%s |", f.Name, strings.ReplaceAll(f.Usage, "|", `\|`), def))
		})
		if len(rows) > 0 {
			fmt.Fprintf(w, "\n| flag | meaning |\n|---|---|\n%s\n", strings.Join(rows, "\n"))
		}
	}
}
