// Command agentctl is Paddock's executor-side daemon: `agentctl serve` owns one
// session's agent, workspace access and terminals; `agentctl host` starts and
// keeps per-session serve instances on a remote machine. See shared/agentctl.
package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/shared/agentctl"
	"github.com/paddockhq/paddock/shared/agentctl/pin"
	"github.com/paddockhq/paddock/shared/agentctl/ptyagent"
	"github.com/paddockhq/paddock/shared/nice"
	"github.com/paddockhq/paddock/shared/term"
)

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	// First, before any secret is read: same-uid processes (the agent) must
	// not read agentctl's memory.
	if err := forbidMemoryReads(); err != nil {
		fmt.Fprintln(os.Stderr, "agentctl:", err)
		return 1
	}
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: agentctl serve|host [flags]")
		return 2
	}
	switch args[0] {
	case "serve":
		return serve(args[1:])
	case "host":
		return host(args[1:])
	}
	fmt.Fprintf(os.Stderr, "agentctl: unknown command %q (want serve or host)\n", args[0])
	return 2
}

// readSecret reads the secret from a file or the environment. The variable
// is removed from agentctl's environment at once, so no agent, shell or
// child process ever inherits it.
func readSecret(envName, file string) (string, error) {
	env := os.Getenv(envName)
	_ = os.Unsetenv(envName)
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("read secret file: %w", err)
		}
		if s := strings.TrimSpace(string(b)); s != "" {
			return s, nil
		}
		return "", fmt.Errorf("secret file %s is empty", file)
	}
	if s := strings.TrimSpace(env); s != "" {
		return s, nil
	}
	return "", fmt.Errorf("no secret: set %s or pass -secret-file", envName)
}

func newLogger(name, level, file string) (hclog.Logger, io.Closer, error) {
	var out io.Writer = os.Stderr
	var closer io.Closer = io.NopCloser(nil)
	if file != "" {
		f, err := os.OpenFile(file, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return nil, nil, fmt.Errorf("open log file: %w", err)
		}
		out, closer = f, f
	}
	return hclog.New(&hclog.LoggerOptions{Name: name, Level: hclog.LevelFromString(level), Output: out}), closer, nil
}

// advertiseURL builds http://HOST:PORT for a listener.
func advertiseURL(l net.Listener, advertise string) string {
	host, port, _ := net.SplitHostPort(l.Addr().String())
	if advertise != "" {
		host = advertise
	} else if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

func writeInfo(path string, info agentctl.Info) error {
	b, _ := json.Marshal(info)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func serve(args []string) int {
	fs := flag.NewFlagSet("agentctl serve", flag.ContinueOnError)
	session := fs.String("session", "", "session id (required)")
	ws := fs.String("workspace", "", "workspace directory (required)")
	stateDir := fs.String("state-dir", "", "durable state (default WORKSPACE/.paddock)")
	listen := fs.String("listen", "127.0.0.1:0", "listen address")
	advertise := fs.String("advertise", "", "host to put in the advertised URL")
	infoFile := fs.String("info-file", "", "write {url,pid,nonce,session_id} here after listening")
	secretFile := fs.String("secret-file", "", "file holding the secret (else env PADDOCK_AGENTCTL_SECRET)")
	secretOnce := fs.Bool("secret-file-once", false, "remove -secret-file once read (the launcher writes it for this start only)")
	level := fs.String("log-level", "info", "trace|debug|info|warn|error")
	logFile := fs.String("log-file", "", "log to this file instead of stderr")
	var shell shellFlag
	fs.Var(&shell, "shell", "terminal program: repeat for each argv word, or one JSON array (default $SHELL, else /bin/sh)")
	replayBytes := fs.Int("replay-bytes", term.DefaultReplayBytes, "replay buffer per terminal, in bytes")
	idleTimeout := fs.Duration("idle-timeout", term.DefaultIdleTimeout, "end a terminal with no connection for this long")
	useTLS := fs.Bool("tls", false, "serve HTTPS with a key made at start (ECDSA P-256, self-signed); the info carries its fingerprint for clients to pin")
	agentUser := fs.String("agent-user", "", "run the agent and terminal shells as UID:GID (numeric; agentctl keeps its own user)")
	niceness := fs.Int("nice", 0, "run the agent and terminal shells at this nice value (0-19), each in a session and scheduling group (Linux autogroup) of its own, so busy agents yield the CPU to other programs on the machine; agentctl keeps its own priority")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := nice.Check(*niceness); err != nil {
		fmt.Fprintln(os.Stderr, "agentctl serve: -nice:", err)
		return 2
	}
	cred, err := parseAgentUser(*agentUser)
	if err != nil {
		fmt.Fprintln(os.Stderr, "agentctl serve: -agent-user:", err)
		return 2
	}
	onAttached := processors()
	if *replayBytes < 4096 || *idleTimeout <= 0 {
		fmt.Fprintln(os.Stderr, "agentctl serve: -replay-bytes must be at least 4096 and -idle-timeout positive")
		return 2
	}
	if *session == "" || *ws == "" {
		fmt.Fprintln(os.Stderr, "agentctl serve: -session and -workspace are required")
		return 2
	}
	secret, err := readSecret("PADDOCK_AGENTCTL_SECRET", *secretFile)
	if *secretOnce && *secretFile != "" {
		_ = os.Remove(*secretFile)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "agentctl serve:", err)
		return 1
	}
	log, closer, err := newLogger("agentctl", *level, *logFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "agentctl serve:", err)
		return 1
	}
	defer closer.Close()
	opts := agentctl.Options{SessionID: *session, Workspace: *ws, StateDir: *stateDir, Secret: secret, Logger: log, AgentCredential: cred, AgentNice: *niceness}
	if v := os.Getenv("PADDOCK_AGENTCTL_INIT_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			fmt.Fprintln(os.Stderr, "agentctl serve: PADDOCK_AGENTCTL_INIT_TIMEOUT:", err)
			return 1
		}
		opts.InitTimeout = d
	}
	// Terminals run in the workspace; "agent" shows the pty agent's own PTY. srv is
	// set before the first request can reach the lookup.
	var srv *agentctl.Server
	absWS, _ := filepath.Abs(*ws)
	terms := term.NewManager(term.Options{
		Shell: shell.argv, Dir: absWS, Credential: cred, Nice: *niceness, ReplayBytes: *replayBytes, IdleTimeout: *idleTimeout,
		// Requests carry the agentctl secret; Origin is the supervisor's to check.
		CheckOrigin: func(*http.Request) bool { return true },
		External:    map[string]func() (term.External, error){agentctl.AgentTerminalName: func() (term.External, error) { return agentPTY(srv) }},
		// cmd-N are the commands the agent runs (read-only); the names are
		// reserved, so no shell takes one before the agent does.
		ExternalFor: func(name string) func() (term.External, error) { return commandTerminal(srv, name) },
		OnAttached:  onAttached,
		Logger:      log.Named("terminals"),
	})
	defer terms.Close()
	opts.Terminals = terminals{Manager: terms, shell: shell.argv}
	srv, err = agentctl.NewServer(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "agentctl serve:", err)
		return 1
	}
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "agentctl serve: listen:", err)
		return 1
	}
	info := agentctl.Info{URL: advertiseURL(l, *advertise), PID: os.Getpid(), Nonce: srv.Nonce(), SessionID: *session}
	if *useTLS {
		cert, fp, err := pin.New("agentctl " + *session)
		if err != nil {
			fmt.Fprintln(os.Stderr, "agentctl serve:", err)
			return 1
		}
		l = tls.NewListener(l, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13})
		info.URL, info.Fingerprint = "https"+strings.TrimPrefix(info.URL, "http"), fp
	}
	if *infoFile != "" {
		if err := writeInfo(*infoFile, info); err != nil {
			fmt.Fprintln(os.Stderr, "agentctl serve: info file:", err)
			return 1
		}
	}
	line, _ := json.Marshal(info)
	fmt.Println(string(line))
	log.Info("serving", "url", info.URL, "session_id", *session, "pid", info.PID)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := srv.Serve(ctx, l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Error("serve", "error", err)
		return 1
	}
	return 0
}

// parseAgentUser parses -agent-user UID:GID ("" is nil: agentctl's own
// user). The agent gets no supplementary groups.
func parseAgentUser(v string) (*syscall.Credential, error) {
	if v == "" {
		return nil, nil
	}
	u, g, ok := strings.Cut(v, ":")
	uid, uerr := strconv.ParseUint(u, 10, 32)
	gid, gerr := strconv.ParseUint(g, 10, 32)
	if !ok || uerr != nil || gerr != nil {
		return nil, fmt.Errorf("%q is not UID:GID (two numbers)", v)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
}

// shellFlag collects -shell: repeated words, or one JSON array.
type shellFlag struct{ argv []string }

func (f *shellFlag) String() string { return strings.Join(f.argv, " ") }

func (f *shellFlag) Set(v string) error {
	if strings.HasPrefix(strings.TrimSpace(v), "[") {
		var argv []string
		if err := json.Unmarshal([]byte(v), &argv); err != nil {
			return fmt.Errorf("-shell JSON array: %w", err)
		}
		if len(argv) == 0 || argv[0] == "" {
			return errors.New("-shell JSON array is empty")
		}
		f.argv = append(f.argv, argv...)
		return nil
	}
	if v == "" {
		return errors.New("-shell word is empty")
	}
	f.argv = append(f.argv, v)
	return nil
}

// ptyAgentTerminal adapts the pty agent to term.External (Resize takes ints).
type ptyAgentTerminal struct{ *ptyagent.Agent }

func (a ptyAgentTerminal) Resize(cols, rows int) error {
	return a.Agent.Resize(uint16(cols), uint16(rows))
}

// agentPTY is the running pty agent's PTY, for the terminal named "agent".
func agentPTY(srv *agentctl.Server) (term.External, error) {
	if srv == nil {
		return nil, errors.New("agentctl is starting")
	}
	a := srv.AgentTerminal()
	if a == nil {
		return nil, errors.New("no pty agent is running in this session (the agent's protocol is not pty, or it has not started)")
	}
	return ptyAgentTerminal{a}, nil
}

func host(args []string) int {
	fs := flag.NewFlagSet("agentctl host", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:7800", "listen address of the host API")
	root := fs.String("root", "", "directory for instances and workspaces (required)")
	secretFile := fs.String("secret-file", "", "file holding the host secret (else env PADDOCK_AGENTCTL_HOST_SECRET)")
	advertise := fs.String("advertise", "", "host to put in instance URLs")
	instHost := fs.String("instance-listen-host", "", "host instances listen on (default: the -listen host)")
	instNice := fs.Int("nice", 0, "start instances with serve -nice N (0-19): their agents, terminal shells and scheduling groups run at that nice value")
	useTLS := fs.Bool("tls", false, "serve HTTPS with a key kept in ROOT/host-tls.{crt,key} (made at the first start; its fingerprint is printed for the remote runtime's host config), and start instances with serve -tls")
	level := fs.String("log-level", "info", "trace|debug|info|warn|error")
	logFile := fs.String("log-file", "", "log to this file instead of stderr")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *root == "" {
		fmt.Fprintln(os.Stderr, "agentctl host: -root is required")
		return 2
	}
	secret, err := readSecret("PADDOCK_AGENTCTL_HOST_SECRET", *secretFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "agentctl host:", err)
		return 1
	}
	log, closer, err := newLogger("agentctl-host", *level, *logFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "agentctl host:", err)
		return 1
	}
	defer closer.Close()
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "agentctl host: listen:", err)
		return 1
	}
	ih := *instHost
	if ih == "" {
		ih, _, _ = net.SplitHostPort(l.Addr().String())
	}
	absRoot, _ := filepath.Abs(*root)
	h, err := agentctl.NewHost(agentctl.HostOptions{Root: absRoot, Secret: secret, ListenHost: ih, Advertise: *advertise, Logger: log, TLS: *useTLS, Nice: *instNice})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	hostInfo := map[string]any{"url": advertiseURL(l, *advertise), "pid": os.Getpid()}
	if *useTLS {
		cert, fp, err := pin.LoadOrNew(filepath.Join(absRoot, "host-tls.crt"), filepath.Join(absRoot, "host-tls.key"), "agentctl host")
		if err != nil {
			fmt.Fprintln(os.Stderr, "agentctl host:", err)
			return 1
		}
		l = tls.NewListener(l, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13})
		hostInfo["url"], hostInfo["fingerprint"] = "https"+strings.TrimPrefix(hostInfo["url"].(string), "http"), fp
		log.Info("serving TLS", "fingerprint", fp)
	}
	line, _ := json.Marshal(hostInfo)
	fmt.Println(string(line))
	hs := &http.Server{Handler: h.Handler(), ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(l) }()
	select {
	case <-ctx.Done():
	case err := <-errc:
		log.Error("host serve", "error", err)
		return 1
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = hs.Shutdown(sctx)
	return 0
}

// commandTerminal is the External source of the agent's command terminal
// name (nil when name is not a cmd-N name).
func commandTerminal(srv *agentctl.Server, name string) func() (term.External, error) {
	if !strings.HasPrefix(name, agentctl.CommandTerminalPrefix) {
		return nil
	}
	return func() (term.External, error) {
		if srv == nil {
			return nil, errors.New("agentctl is starting")
		}
		t, ok := srv.CommandTerminal(name)
		if !ok {
			return nil, fmt.Errorf("the agent runs no command terminal %q", name)
		}
		return t, nil
	}
}

// terminals adapts the terminal manager to agentctl.Terminals.
type terminals struct {
	*term.Manager
	shell []string // the shells' argv
}

// ListTerminals implements agentctl.TerminalLister: the shells (and the
// pty agent's terminal) running now.
func (t terminals) ListTerminals() []api.Terminal {
	var out []api.Terminal
	for _, name := range t.Names() {
		tm, ok := t.Terminal(name)
		if !ok {
			continue
		}
		exited, code := tm.Exited()
		ti := api.Terminal{Name: name, Command: append([]string{}, t.shell...), Owner: agentctl.OwnerUser, Running: !exited}
		if name == agentctl.AgentTerminalName {
			ti.Owner, ti.Command = agentctl.OwnerAgent, []string{}
		}
		if exited {
			ti.ExitCode = &code
		}
		out = append(out, ti)
	}
	return out
}

// ControllerOf implements agentctl.Terminals.
func (t terminals) ControllerOf(name string) (agentctl.TerminalController, bool) {
	c, ok := t.Controller(name)
	return agentctl.TerminalController{Host: c.Host, PID: c.PID, Nonce: c.Nonce, Since: c.Since}, ok
}

// processors sets how many processors the Go scheduler runs on, unless
// GOMAXPROCS says: one, and one per CPU while two or more terminals are
// attached; it returns the term.Options.OnAttached that switches (nil when
// GOMAXPROCS is set). A serve instance is one of many on its host (one per
// session), its work small and bursty (an agent's output, a poll, a lease
// renewal), and with a processor per CPU every goroutine handed work wakes
// a second OS thread to run it: a streamed reply cost agentctl ~20% more
// CPU that way (BenchmarkStreamCPU), and in one run the whole terminal
// path's throughput fell from 0.97 to 0.80 of a direct PTY read. But on
// one processor a goroutine the network readies waits for the busy one's
// time slice (the scheduler looks at the network only when it has nothing
// else to run, or every 10 ms): a keystroke's echo waited behind another
// terminal's flood, p99 17–29 ms (echo_added_ms_agentctl); with one
// processor per CPU it was 4 ms. One stream is served best on one
// processor; a quiet one beside a busy one needs a second.
func processors() func(attached int) {
	if os.Getenv("GOMAXPROCS") != "" {
		return nil
	}
	goruntime.GOMAXPROCS(1)
	current := 1
	return func(attached int) {
		want := 1
		if attached >= 2 {
			want = goruntime.NumCPU()
		}
		if want != current {
			current = want
			goruntime.GOMAXPROCS(want)
		}
	}
}
