package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os/signal"
	"strings"
	"syscall"

	"github.com/paddockhq/paddock/client"
)

// monitorCommand is `paddock monitor`, Consul's `consul monitor` for a
// Paddock node: it follows one node's logs (the one -address names).
var monitorCommand = command{
	path:    "monitor",
	args:    "[-log-level LEVEL] [-log-json]",
	summary: "stream the logs of the node you ask, at any level, until interrupted",
	bind:    withFlags(monitorFlags, runMonitor),
}

type monitorOpts struct {
	level *string
	json  *bool
}

func monitorFlags(fs *flag.FlagSet) *monitorOpts {
	return &monitorOpts{
		level: fs.String("log-level", "info", "most verbose level shown: trace, debug, info, warn or error"),
		json:  fs.Bool("log-json", false, "JSON log lines"),
	}
}

var monitorLevels = []string{"trace", "debug", "info", "warn", "error"}

// runMonitor copies the node's log stream to stdout until interrupted or
// the node goes away (then it says so and fails).
func runMonitor(e *env, o *monitorOpts, pos []string) error {
	if err := exactArgs(pos); err != nil {
		return err
	}
	level := strings.ToLower(*o.level)
	known := false
	for _, l := range monitorLevels {
		known = known || l == level
	}
	if !known {
		return &usageError{msg: fmt.Sprintf("-log-level %q is not one of %s", *o.level, strings.Join(monitorLevels, ", "))}
	}
	c, err := e.client()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	body, err := c.Monitor(ctx, client.MonitorOptions{LogLevel: level, JSON: *o.json || e.g.json})
	if err != nil {
		return err
	}
	defer body.Close()
	_, err = io.Copy(e.stdout, body)
	if ctx.Err() != nil {
		return nil // interrupted: the normal end
	}
	if err == nil || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("the log stream of %s ended: the node stopped or restarted", c.Address())
	}
	return fmt.Errorf("the log stream of %s broke: %w", c.Address(), err)
}
