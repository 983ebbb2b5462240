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
	if err := fs.Parse(args); err != nil {
		return 1
	}
	cfg, cleanup, err := loadServerConfig(files, *dev)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cleanup()
	log := hclog.New(&hclog.LoggerOptions{
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
