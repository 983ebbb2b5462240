package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/hashicorp/go-hclog"

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
	if err := fs.Parse(args); err != nil {
		return 1
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "paddock server: unexpected argument %q; flags are -config FILE, -dev and -http-port PORT\n", fs.Arg(0))
		return 1
	}
	cfg, cleanup, err := loadServerConfig(files, *dev)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cleanup()
	if err := overridePorts(cfg, fs, *httpPort); err != nil {
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
	srv, err := server.Start(cfg, log)
	if err != nil {
		log.Error("cannot start server", "error", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := srv.Wait(ctx); err != nil {
		log.Error("server failed", "error", err)
		return 1
	}
	return 0
}

// overridePorts applies -http-port when it was given.
func overridePorts(cfg *config.Config, fs *flag.FlagSet, httpPort int) error {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == "http-port" })
	if !set {
		return nil
	}
	if httpPort < 1 || httpPort > 65535 {
		return fmt.Errorf("paddock server: -http-port %d is not a port; use 1 to 65535", httpPort)
	}
	cfg.Ports.HTTP = httpPort
	if cfg.Ports.HTTP == cfg.Ports.Raft {
		return fmt.Errorf("paddock server: -http-port %d is also the raft port (ports.raft); choose another", httpPort)
	}
	return nil
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
		return config.Dev(dir), func() { os.RemoveAll(dir) }, nil
	case len(files) == 0:
		return nil, nothing, errors.New("paddock server: -config FILE is required (or -dev for a throwaway node)")
	}
	cfg, err := config.Load(files...)
	if err != nil {
		return nil, nothing, err
	}
	return cfg, nothing, nil
}
