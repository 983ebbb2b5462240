package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/hashicorp/go-hclog"

	"github.com/paddockhq/paddock/shared/nice"
	"github.com/paddockhq/paddock/supervisor/config"
	"github.com/paddockhq/paddock/supervisor/server"
)

// stringList is a repeatable flag.
type stringList []string

func (l *stringList) String() string     { return fmt.Sprint(*l) }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// runServer implements `paddock server -config FILE… | -dev`.
func runServer(args []string) int {
	fs := flag.NewFlagSet("paddock server", flag.ContinueOnError)
	var files stringList
	fs.Var(&files, "config", "HCL config file (repeatable; later files override earlier ones)")
	dev := fs.Bool("dev", false, "run one node with a built-in config and a temporary data dir")
	httpPort := fs.Int("http-port", 0, "serve the HTTP API on this port (overrides ports.http; default 7700)")
	raftPort := fs.Int("raft-port", 0, "use this port for raft (overrides ports.raft; default 7701)")
	fs.SetOutput(os.Stderr)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: paddock server -config FILE… | -dev [-http-port PORT] [-raft-port PORT]\n\nstart a supervisor node\n\nFlags:")
		fs.PrintDefaults()
	}
	for _, a := range args {
		if a == "-h" || a == "-help" || a == "--help" {
			// Asked for, the usage is the answer: stdout and exit 0.
			fs.SetOutput(os.Stdout)
			fs.Usage()
			return 0
		}
	}
	if err := fs.Parse(args); err != nil {
		return 1
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "paddock server: unexpected argument %q; flags are -config FILE, -dev, -http-port PORT and -raft-port PORT\n", fs.Arg(0))
		return 1
	}
	cfg, cleanup, err := loadServerConfig(files, *dev)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cleanup()
	if err := overridePorts(cfg, fs, *httpPort, *raftPort); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// An intercept logger lets `paddock monitor` attach streams at any level.
	log := hclog.NewInterceptLogger(&hclog.LoggerOptions{
		Name:       "paddock",
		Level:      hclog.LevelFromString(cfg.LogLevel),
		JSONFormat: cfg.LogJSON,
		Output:     os.Stderr,
	})
	raisePriority(cfg.Server.Nice, log)
	srv, err := server.Start(cfg, log)
	var diags *config.DiagError
	if errors.As(err, &diags) {
		// Configuration problems (a plugin's config block, a missing plugin
		// binary) read as the file's own errors do, with their positions.
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err != nil {
		log.Error("cannot start server", "error", err)
		return 1
	}
	if *dev {
		// The data dir goes at exit: the agentctls go first.
		srv.DestroyExecutorsAtExit()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := srv.Wait(ctx); err != nil {
		log.Error("server failed", "error", err)
		return 1
	}
	return 0
}

// raisePriority raises the server's CPU priority to server.nice before it
// starts anything (its plugins inherit it). Without the privilege the
// server runs on at its priority: a note, not a failure.
func raisePriority(n int, log hclog.Logger) {
	if n == 0 {
		return
	}
	group, err := nice.Raise(n, log.Warn)
	if err != nil {
		log.Info("the server keeps its CPU priority", "nice", n, "reason", err,
			"hint", "run it as root or with CAP_SYS_NICE to raise it, or set server.nice = 0")
		return
	}
	log.Info("raised the server's CPU priority", "nice", n, "scheduling_group", group)
}

// overridePorts applies -http-port and -raft-port when they were given.
func overridePorts(cfg *config.Config, fs *flag.FlagSet, httpPort, raftPort int) error {
	var err error
	fs.Visit(func(f *flag.Flag) {
		dst, port := (*int)(nil), 0
		switch f.Name {
		case "http-port":
			dst, port = &cfg.Ports.HTTP, httpPort
		case "raft-port":
			dst, port = &cfg.Ports.Raft, raftPort
		default:
			return
		}
		if port < 1 || port > 65535 {
			err = errors.Join(err, fmt.Errorf("paddock server: -%s %d is not a port; use 1 to 65535", f.Name, port))
			return
		}
		*dst = port
	})
	if err == nil && cfg.Ports.HTTP == cfg.Ports.Raft {
		err = fmt.Errorf("paddock server: the HTTP and raft ports are both %d; choose two ports", cfg.Ports.HTTP)
	}
	return err
}

func loadServerConfig(files []string, dev bool) (*config.Config, func(), error) {
	nothing := func() {}
	switch {
	case dev && len(files) > 0:
		return nil, nothing, errors.New("paddock server: use either -dev or -config, not both")
	case dev:
		dir, err := os.MkdirTemp("", "paddock-dev-")
		if err != nil {
			return nil, nothing, fmt.Errorf("paddock server -dev: %w", err)
		}
		cfg := config.Dev(dir)
		// The runtime plugins of a build sit next to it (bin/plugins beside
		// bin/paddock); use those when the working directory has none.
		if _, err := os.Stat(cfg.PluginDir); err != nil {
			if exe, err := os.Executable(); err == nil {
				if beside := filepath.Join(filepath.Dir(exe), "plugins"); isDir(beside) {
					cfg.PluginDir = beside
				}
			}
		}
		return cfg, func() { os.RemoveAll(dir) }, nil
	case len(files) == 0:
		return nil, nothing, errors.New("paddock server: -config FILE is required (or -dev for a throwaway node)")
	}
	cfg, err := config.Load(files...)
	if err != nil {
		return nil, nothing, err
	}
	return cfg, nothing, nil
}

func isDir(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}
