package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Version is the release of this build; `-ldflags "-X
// github.com/paddockhq/paddock/cli.Version=v1.2.0"` sets it. Without it the
// module version Go recorded is shown ("(devel)" for a build from a clone).
var Version = ""

// buildInfo is the version, commit and Go version of this binary.
func buildInfo() (version, commit, goVersion string) {
	version, commit, goVersion = Version, "unknown", runtime.Version()
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return orDefault(version, "unknown"), commit, goVersion
	}
	if version == "" {
		version = bi.Main.Version
	}
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			commit = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty && commit != "unknown" {
		commit += " (modified)"
	}
	return orDefault(version, "unknown"), commit, goVersion
}

func runVersion(e *env, pos []string) error {
	if err := exactArgs(pos); err != nil {
		return err
	}
	v, c, g := buildInfo()
	if e.g.json {
		return printJSON(e.stdout, fmt.Appendf(nil, `{"version":%q,"commit":%q,"go_version":%q}`, v, c, g))
	}
	fmt.Fprintf(e.stdout, "paddock %s\ncommit %s\n%s\n", v, c, g)
	return nil
}

// completionWords maps each command group ("" for the top level) to the
// words that may follow it.
func completionWords() map[string][]string {
	m := map[string][]string{"": {"server", "help"}}
	seen := map[string]bool{}
	for _, c := range commands {
		words := strings.Fields(c.path)
		for i := range words {
			group := strings.Join(words[:i], " ")
			key := group + "\x00" + words[i]
			if !seen[key] {
				seen[key] = true
				m[group] = append(m[group], words[i])
			}
		}
	}
	return m
}

func runCompletion(e *env, pos []string) error {
	if err := exactArgs(pos, "shell (bash, zsh or fish)"); err != nil {
		return err
	}
	words := completionWords()
	switch pos[0] {
	case "bash":
		fmt.Fprint(e.stdout, bashCompletion(words))
	case "zsh":
		fmt.Fprint(e.stdout, "#compdef paddock\nautoload -U +X bashcompinit && bashcompinit\n"+bashCompletion(words))
	case "fish":
		fmt.Fprint(e.stdout, fishCompletion(words))
	default:
		return &usageError{msg: fmt.Sprintf("unknown shell %q (bash, zsh or fish)", pos[0])}
	}
	return nil
}

// bashCompletion completes command words: the words after the ones typed
// so far that form a group.
func bashCompletion(words map[string][]string) string {
	var b strings.Builder
	b.WriteString("# paddock completion for bash: source <(paddock completion bash)\n")
	b.WriteString("_paddock() {\n  local cur=\"${COMP_WORDS[COMP_CWORD]}\" group=\"\" w\n")
	b.WriteString("  for w in \"${COMP_WORDS[@]:1:COMP_CWORD-1}\"; do\n    case \"$w\" in -*) ;; *) group=\"${group:+$group }$w\" ;; esac\n  done\n")
	b.WriteString("  local words=\"\"\n  case \"$group\" in\n")
	for _, g := range sortedGroups(words) {
		fmt.Fprintf(&b, "    %q) words=%q ;;\n", g, strings.Join(words[g], " "))
	}
	b.WriteString("  esac\n  COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n}\ncomplete -F _paddock paddock\n")
	return b.String()
}

func fishCompletion(words map[string][]string) string {
	var b strings.Builder
	b.WriteString("# paddock completion for fish: paddock completion fish | source\n")
	b.WriteString("complete -c paddock -f\n")
	for _, g := range sortedGroups(words) {
		cond := "__fish_use_subcommand"
		if g != "" {
			cond = "__fish_seen_subcommand_from " + strings.Fields(g)[len(strings.Fields(g))-1]
		}
		fmt.Fprintf(&b, "complete -c paddock -n '%s' -a '%s'\n", cond, strings.Join(words[g], " "))
	}
	return b.String()
}

func sortedGroups(words map[string][]string) []string {
	m := make(map[string]bool, len(words))
	for g := range words {
		m[g] = true
	}
	return sortedTrueKeys(m)
}
