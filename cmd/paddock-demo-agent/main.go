// Command paddock-demo-agent is Paddock's offline, deterministic demo agent
// (its replies: package shared/demoagent). ACP on stdio by default; --tty for the pty protocol.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	goruntime "runtime"
	"syscall"
	"time"

	"github.com/paddockhq/paddock/shared/demoagent"
)

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	fs := flag.NewFlagSet("paddock-demo-agent", flag.ContinueOnError)
	tty := fs.Bool("tty", false, "run as a line-oriented terminal program (pty protocol)")
	sessionID := fs.String("session-id", "", "--tty: id of a new conversation")
	resume := fs.String("resume", "", "--tty: id of a conversation to continue")
	noResume := fs.Bool("no-resume", false, "advertise no loadSession and refuse --resume")
	workspace := fs.String("workspace", "", "where conversations are kept (default: current directory)")
	chunkDelay := fs.Duration("chunk-delay", 10*time.Millisecond, "pause between streamed reply chunks")
	model := fs.String("model", demoagent.DefaultModel, "the model the ACP agent reports")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ws := *workspace
	if ws == "" {
		wd, err := os.Getwd()
		if err != nil {
			fmt.Fprintln(os.Stderr, "paddock-demo-agent:", err)
			return 1
		}
		ws = wd
	}
	// One processor: the agent's work is a chunk now and then, and with
	// more every timer wakeup also wakes a second thread (a demo agent is
	// one of many on a load test's host). GOMAXPROCS still says otherwise.
	if os.Getenv("GOMAXPROCS") == "" {
		goruntime.GOMAXPROCS(1)
	}
	cfg := demoagent.Config{Workspace: ws, NoResume: *noResume, ChunkDelay: *chunkDelay, Model: *model}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	if *tty {
		if *sessionID != "" && *resume != "" {
			fmt.Fprintln(os.Stderr, "paddock-demo-agent: --session-id and --resume are exclusive")
			return 2
		}
		id, isResume := *sessionID, false
		if *resume != "" {
			id, isResume = *resume, true
		}
		if err := demoagent.ServeTTY(ctx, cfg, id, isResume, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "paddock-demo-agent:", err)
			return 1
		}
		return 0
	}
	if *resume != "" && *noResume {
		fmt.Fprintln(os.Stderr, "paddock-demo-agent: --no-resume refuses --resume")
		return 2
	}
	// In ACP mode the workspace is the session's cwd unless -workspace is given.
	if *workspace == "" {
		cfg.Workspace = ""
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if err := demoagent.ServeACP(ctx, cfg, os.Stdin, os.Stdout, log); err != nil {
		fmt.Fprintln(os.Stderr, "paddock-demo-agent:", err)
		return 1
	}
	return 0
}
