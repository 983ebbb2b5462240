package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/paddockhq/paddock/client"
)

// Environment variables read for the global flags' defaults.
const (
	EnvAddress    = "PADDOCK_ADDR"
	EnvToken      = "PADDOCK_TOKEN"
	EnvCACert     = "PADDOCK_CACERT"
	EnvClientCert = "PADDOCK_CLIENT_CERT"
	EnvClientKey  = "PADDOCK_CLIENT_KEY"
)

// Run dispatches one paddock subcommand (everything except `server`) with its
// arguments (os.Args[1:]) and returns the exit code: 0 on success, 1 on any
// error, after printing one line to stderr.
func Run(args []string, stdout, stderr io.Writer) int {
	return run(args, stdout, stderr, os.Getenv)
}

// globals are the flags every subcommand accepts.
type globals struct {
	address string
	token   string
	json    bool
	tmpl    string // -t: a Go template for a read's JSON answer
	stale   bool
	tls     client.TLSOptions
}

// env is the state of one invocation.
type env struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	g      globals

	// stdinBytes is stdin once read: a command run again with an expanded
	// id prefix reads the same text (stdin can be read once).
	stdinBytes []byte
	stdinRead  bool
}

// readStdin returns all of stdin, reading it on the first call only.
func (e *env) readStdin() ([]byte, error) {
	if !e.stdinRead {
		in := e.stdin
		if in == nil {
			in = os.Stdin
		}
		b, err := io.ReadAll(in)
		if err != nil {
			return nil, err
		}
		e.stdinBytes, e.stdinRead = b, true
	}
	return e.stdinBytes, nil
}

// command is one leaf subcommand.
type command struct {
	path    string // words after "paddock", e.g. "session list"
	args    string // usage after the path, e.g. "[-task ID] [-state S]"
	summary string
	// bind defines the command's own flags on fs and returns its run
	// function, which reads them (noFlags and withFlags make one).
	bind func(fs *flag.FlagSet) runFunc
	// id is the kind of id the first argument is (idSession, idTask), so a
	// unique prefix of it is expanded before run; "" when it takes none.
	id string
}

// runFunc runs a command with its positional arguments, its flags parsed.
type runFunc func(e *env, pos []string) error

// noFlags is the bind of a command that has no flags of its own.
func noFlags(run runFunc) func(*flag.FlagSet) runFunc {
	return func(*flag.FlagSet) runFunc { return run }
}

// withFlags is the bind of a command with flags of its own: define adds
// them to the flag set and returns where they are parsed into (a pointer or
// a struct of pointers), and run reads them from there, typed.
func withFlags[T any](define func(fs *flag.FlagSet) T, run func(e *env, flags T, pos []string) error) func(*flag.FlagSet) runFunc {
	return func(fs *flag.FlagSet) runFunc {
		flags := define(fs)
		return func(e *env, pos []string) error { return run(e, flags, pos) }
	}
}

func (c *command) usage() string {
	s := "paddock " + c.path
	if c.args != "" {
		s += " " + c.args
	}
	return s
}

// usageError is an error in how the command was called.
type usageError struct {
	msg   string
	usage string
}

func (u *usageError) Error() string {
	if u.usage == "" {
		return u.msg
	}
	return fmt.Sprintf("%s. Usage: %s", u.msg, u.usage)
}

func run(args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	return runWithStdin(args, os.Stdin, stdout, stderr, getenv)
}

func runWithStdin(args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	e := &env{stdin: stdin, stdout: stdout, stderr: stderr}
	e.g.address = getenv(EnvAddress)
	if e.g.address == "" {
		e.g.address = client.DefaultAddress
	}
	e.g.token = getenv(EnvToken)
	e.g.tls = client.TLSOptions{CACert: getenv(EnvCACert), ClientCert: getenv(EnvClientCert), ClientKey: getenv(EnvClientKey)}

	top := flag.NewFlagSet("paddock", flag.ContinueOnError)
	top.SetOutput(io.Discard)
	registerGlobals(top, &e.g)
	showVersion := top.Bool("version", false, "print the version and exit")
	if err := top.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printHelp(stdout)
			return 0
		}
		return e.fail(&usageError{msg: err.Error(), usage: "paddock [global flags] COMMAND [args]"})
	}
	rest := top.Args()
	if *showVersion {
		return e.runCommand(commandIndex["version"], rest)
	}
	if len(rest) == 0 {
		printHelp(stderr)
		return 1
	}
	switch rest[0] {
	case "help", "-help", "--help", "-h":
		if len(rest) > 1 && rest[1] == "server" {
			fmt.Fprintf(stdout, "Usage: %s\n\nstart a supervisor node (\"paddock server --help\" lists its flags)\n", serverUsage)
			return 0
		}
		if len(rest) > 1 {
			return e.groupHelp(rest[1:])
		}
		printHelp(stdout)
		return 0
	case "server":
		return e.fail(errors.New(`"paddock server" is not handled by the CLI dispatcher`))
	}
	cmd, n := lookup(rest)
	if cmd == nil {
		if isHelpRequest(rest) {
			return e.groupHelp(rest)
		}
		return e.fail(unknownCommand(rest))
	}
	return e.runCommand(cmd, rest[n:])
}

// isHelpRequest reports whether args ask for help (-h, -help, --help).
func isHelpRequest(args []string) bool {
	for _, a := range args {
		if a == "-h" || a == "-help" || a == "--help" {
			return true
		}
	}
	return false
}

// groupHelp prints the commands under a group (`paddock session --help`),
// or one command's usage, and exits 0; an unknown group is an error.
func (e *env) groupHelp(args []string) int {
	var words []string
	for _, a := range args {
		if strings.HasPrefix(a, "-") {
			break
		}
		words = append(words, a)
	}
	if cmd, n := lookup(words); cmd != nil && n == len(words) {
		return e.runCommand(cmd, []string{"-help"})
	}
	group := strings.Join(words, " ")
	var sub []*command
	for i := range commands {
		if group == "" || strings.HasPrefix(commands[i].path, group+" ") {
			sub = append(sub, &commands[i])
		}
	}
	if len(sub) == 0 {
		return e.fail(unknownCommand(words))
	}
	fmt.Fprintf(e.stdout, "Usage: paddock %s COMMAND [args]\n\nCommands:\n", group)
	var list [][2]string
	for _, c := range sub {
		list = append(list, [2]string{c.usage(), c.summary})
	}
	printCommandList(e.stdout, list)
	fmt.Fprintf(e.stdout, "\nRun \"paddock %s COMMAND --help\" for a command's flags.\n", group)
	return 0
}

// registerGlobals adds the global flags to fs, bound to g.
func registerGlobals(fs *flag.FlagSet, g *globals) {
	fs.StringVar(&g.address, "address", g.address, "supervisor HTTP address (env "+EnvAddress+")")
	fs.StringVar(&g.token, "token", g.token, "ACL token (env "+EnvToken+")")
	fs.BoolVar(&g.json, "json", g.json, "print the server's JSON")
	fs.StringVar(&g.tmpl, "t", g.tmpl, "format the JSON answer with a Go template, e.g. -t '{{.state}}' (implies -json)")
	fs.BoolVar(&g.stale, "stale", g.stale, "read the local node's state instead of the leader's")
	fs.StringVar(&g.tls.CACert, "ca-cert", g.tls.CACert, "CA certificate that verifies an https server (env "+EnvCACert+")")
	fs.StringVar(&g.tls.ClientCert, "client-cert", g.tls.ClientCert, "client certificate for a server with tls.verify_incoming (env "+EnvClientCert+")")
	fs.StringVar(&g.tls.ClientKey, "client-key", g.tls.ClientKey, "key of -client-cert (env "+EnvClientKey+")")
}

func (e *env) runCommand(cmd *command, args []string) int {
	fs := flag.NewFlagSet(cmd.path, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	registerGlobals(fs, &e.g)
	run := cmd.bind(fs)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(e.stdout, "Usage: %s\n\n%s\n\nFlags:\n", cmd.usage(), cmd.summary)
			fs.SetOutput(e.stdout)
			fs.PrintDefaults()
			return 0
		}
		return e.fail(&usageError{msg: err.Error(), usage: cmd.usage()})
	}
	if e.g.tmpl != "" {
		tw, err := newTemplateWriter(e.g.tmpl, e.stdout)
		if err != nil {
			return e.fail(&usageError{msg: err.Error(), usage: cmd.usage()})
		}
		e.g.json, e.stdout = true, tw
	}
	err = run(e, pos)
	if cmd.id != "" && len(pos) > 0 && len(pos[0]) >= minPrefix && client.IsCode(err, "not_found") {
		// Not an id: maybe a unique prefix of one. Nothing was done for a
		// missing id, so the command runs again with the whole id.
		full, rerr := e.expandPrefix(cmd.id, pos[0])
		switch {
		case rerr != nil:
			err = rerr
		case full != pos[0]:
			pos[0] = full
			err = run(e, pos)
		}
	}
	if err != nil {
		var ue *usageError
		if errors.As(err, &ue) && ue.usage == "" {
			ue.usage = cmd.usage()
		}
		return e.fail(err)
	}
	return 0
}

// fail prints err as one line on stderr and returns the error exit code.
// The message may carry server text, so its control characters go.
func (e *env) fail(err error) int {
	code := 1
	var xe *exitError
	if errors.As(err, &xe) {
		code = xe.code
	}
	msg := strings.Join(strings.Fields(noControls(strings.ReplaceAll(userWords(err), "\n", "; "), "")), " ")
	fmt.Fprintf(e.stderr, "Error: %s\n", msg)
	return code
}

// internalPrefix is how the server passes on an error of a session's
// agentctl ("agentctl: 409 conflict: no turn is running"): words for the
// supervisor's log, not its user.
var internalPrefix = regexp.MustCompile(`^agentctl: \d{3} [a-z_]+: `)

// userWords is err's message as the user should read it: an API error
// that passes on agentctl's is said in agentctl's own words alone.
func userWords(err error) string {
	msg := err.Error()
	var ae *client.APIError
	if errors.As(err, &ae) {
		if m := internalPrefix.FindString(ae.Message); m != "" {
			msg = strings.Replace(msg, ae.Error(), strings.TrimPrefix(ae.Message, m), 1)
		}
	}
	return msg
}

// client builds an API client from the global flags.
func (e *env) client() (*client.Client, error) {
	tc, err := e.tlsConfig()
	if err != nil {
		return nil, err
	}
	return client.New(e.g.address, e.g.token, client.WithStaleReads(e.g.stale), client.WithTLS(tc))
}

// tlsConfig is the TLS configuration of -ca-cert, -client-cert and
// -client-key, or nil when none is set (an https address then trusts the
// system's roots).
func (e *env) tlsConfig() (*tls.Config, error) {
	if e.g.tls == (client.TLSOptions{}) {
		return nil, nil
	}
	return client.TLSConfig(e.g.tls)
}

// ctx is the context of one API call; the client applies its default timeout.
func (e *env) ctx() context.Context { return context.Background() }

// parseInterspersed parses flags that may appear before, between and after
// positional arguments; "--" ends flag parsing.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// lookup finds the longest command path that prefixes args and returns it with
// the number of words it used.
func lookup(args []string) (*command, int) {
	for n := min(3, len(args)); n > 0; n-- {
		if c, ok := commandIndex[strings.Join(args[:n], " ")]; ok {
			return c, n
		}
	}
	return nil, 0
}

// unknownCommand explains an unmatched command line, listing the subcommands of
// the deepest group it named.
func unknownCommand(args []string) error {
	group := ""
	for i, a := range args {
		if strings.HasPrefix(a, "-") {
			break
		}
		p := strings.TrimSpace(group + " " + a)
		if len(subcommands(p)) == 0 {
			hint := ""
			if s := suggest(a, subcommands(group)); s != "" {
				hint = fmt.Sprintf("; did you mean %q?", strings.TrimSpace("paddock "+group+" "+s))
			}
			if group == "" {
				return fmt.Errorf("unknown command %q%s; run \"paddock help\" for the list", a, hint)
			}
			return &usageError{msg: fmt.Sprintf("unknown subcommand %q%s", strings.Join(args[:i+1], " "), hint),
				usage: "paddock " + group + " " + strings.Join(subcommands(group), "|")}
		}
		group = p
	}
	return &usageError{msg: fmt.Sprintf("%q needs a subcommand", group),
		usage: "paddock " + group + " " + strings.Join(subcommands(group), "|")}
}

// subcommands lists the next words after the group prefix.
func subcommands(group string) []string {
	seen := map[string]bool{}
	var out []string
	prefix := group + " "
	if group == "" {
		prefix = ""
	}
	for _, c := range commands {
		if !strings.HasPrefix(c.path, prefix) {
			continue
		}
		w := strings.Fields(strings.TrimPrefix(c.path, prefix))[0]
		if !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out
}

// serverUsage is how `paddock server` is called (cmd/paddock parses it).
const serverUsage = "paddock server -config FILE… | -dev [-http-port PORT] [-raft-port PORT]"

// Help lists commands in two columns no wider than helpWidth: a usage that
// fits helpColumn goes beside its summary, a longer one on a line of its
// own with the summary under it; summaries wrap at word ends.
const (
	helpWidth  = 80
	helpColumn = 34
)

// printCommandList prints usage/summary pairs for help.
func printCommandList(w io.Writer, list [][2]string) {
	indent := strings.Repeat(" ", 2+helpColumn+2)
	for _, c := range list {
		usage, summary := c[0], c[1]
		lines := wrapWords(summary, helpWidth-len(indent))
		if n := len([]rune(usage)); n <= helpColumn {
			fmt.Fprintf(w, "  %s%s%s\n", usage, strings.Repeat(" ", helpColumn-n+2), lines[0])
			lines = lines[1:]
		} else {
			u := wrapWords(usage, helpWidth-2)
			fmt.Fprintf(w, "  %s\n", u[0])
			for _, l := range wrapWords(strings.Join(u[1:], " "), helpWidth-6) {
				if l != "" {
					fmt.Fprintf(w, "      %s\n", l)
				}
			}
		}
		for _, l := range lines {
			fmt.Fprintf(w, "%s%s\n", indent, l)
		}
	}
}

// wrapWords breaks s into lines of at most width characters at spaces (a
// longer word has a line of its own).
func wrapWords(s string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(s) {
		switch {
		case line == "":
			line = word
		case len([]rune(line))+1+len([]rune(word)) <= width:
			line += " " + word
		default:
			lines = append(lines, line)
			line = word
		}
	}
	return append(lines, line)
}

func printHelp(w io.Writer) {
	fmt.Fprintln(w, "Usage: paddock [global flags] COMMAND [args]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	list := [][2]string{{serverUsage, "start a supervisor node"}}
	for _, c := range commands {
		list = append(list, [2]string{c.usage(), c.summary})
	}
	list = append(list, [2]string{"paddock help [COMMAND]", "show this help, or a command's"})
	printCommandList(w, list)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Global flags (before or after the command):")
	fmt.Fprintln(w, "  -address ADDR  supervisor HTTP address (env PADDOCK_ADDR,")
	fmt.Fprintln(w, "                 default "+client.DefaultAddress+")")
	fmt.Fprintln(w, "  -token TOKEN   ACL token (env PADDOCK_TOKEN)")
	fmt.Fprintln(w, "  -json          print the server's JSON instead of a table")
	fmt.Fprintln(w, "  -stale         read the local node's state instead of the leader's")
	fmt.Fprintln(w, "  -ca-cert FILE  CA certificate that verifies an https server")
	fmt.Fprintln(w, "                 (env PADDOCK_CACERT)")
	fmt.Fprintln(w, "  -client-cert FILE, -client-key FILE")
	fmt.Fprintln(w, "                 client certificate and key (env PADDOCK_CLIENT_CERT,")
	fmt.Fprintln(w, "                 PADDOCK_CLIENT_KEY)")
}

// commands is the table of every leaf subcommand and commandIndex maps each
// path to its command. Both are built once, in init (the completion and
// help commands read them, so they cannot be variable initializers), and
// never modified.
var (
	commands     []command
	commandIndex map[string]*command
)

func init() {
	commands = commandTable()
	commandIndex = make(map[string]*command, len(commands))
	for i := range commands {
		commandIndex[commands[i].path] = &commands[i]
	}
}

// sortedKeys returns the keys of m whose value is true, sorted.
func sortedTrueKeys(m map[string]bool) []string {
	var out []string
	for k, v := range m {
		if v {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// age renders how long ago t was, "-" for the zero time.
func age(t time.Time, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	switch {
	case d < 0:
		return t.UTC().Format(time.RFC3339)
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	default:
		return t.UTC().Format("2006-01-02")
	}
}

// contextWithTimeout returns a context for a long call (snapshots) that the
// client's default timeout must not cut short.
func contextWithTimeout(e *env, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(e.ctx(), d)
}
