// Command bench runs Paddock's benchmark suites and writes the report
// (docs/BENCHMARKS.md and bench/results.json). `make bench` and
// `make bench-quick` call it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/paddockhq/paddock/bench"
)

func main() { os.Exit(run(os.Args[1:])) }

type suite struct {
	name string
	run  func(context.Context, bench.Env) ([]bench.Result, error)
	// optional suites run only when -only names them.
	optional bool
}

var suites = []suite{
	{"cluster", bench.ClusterSuite, false},
	{"sessions", bench.SessionsSuite, false},
	{"agentwork", bench.AgentWorkSuite, false},
	{"terminal", bench.TerminalSuite, false},
	{"tls", bench.TLSSuite, false},
	{"ui", bench.UISuite, false},
	{"recovery", bench.RecoverySuite, false},
	{"machines", bench.MachinesSuite, false},
	{"scale", bench.ScaleSuite, false},
	{"docker", bench.DockerSuite, false},
	{"storm", bench.PromptStormSuite, false}, // storm-paced, then storm-capacity
	{"storm-paced", bench.PacedStormSuite, true},
	{"storm-capacity", bench.CapacitySuite, true},
	{"storm-burst", bench.PromptBurstSuite, true},
	{"chaos", bench.ChaosSuite, false},
}

// optionalSuites lists the suites only -only runs.
func optionalSuites() string {
	var names []string
	for _, s := range suites {
		if s.optional {
			names = append(names, s.name)
		}
	}
	return strings.Join(names, ", ")
}

func knownSuite(name string) bool {
	for _, s := range suites {
		if s.name == name {
			return true
		}
	}
	return false
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	s := err.Error()
	if len(s) > 2000 {
		s = s[:2000] + " …(truncated)"
	}
	return s
}

func run(args []string) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	quick := fs.Bool("quick", false, "reduced run (under 5 minutes)")
	out := fs.String("out", "docs/BENCHMARKS.md", "markdown report")
	jsonOut := fs.String("json", "bench/results.json", "JSON results")
	only := fs.String("only", "", "comma-separated suites to run (default all but the optional ones: "+optionalSuites()+")")
	profiles := fs.String("profiles", "bench/tmp/profiles", "directory for the CPU profiles suites take (empty: none)")
	chaosStore := fs.String("chaos-raft-store", "", `server.raft_store of the chaos suite's servers: "bolt" or "wal" (default: unset, bolt)`)
	keep := fs.Bool("keep", false, "keep the scratch directory (the servers' logs, the sessions' workspaces) and print where it is")
	if err := fs.Parse(args); err != nil {
		return 1
	}
	if *chaosStore != "" && *chaosStore != "bolt" && *chaosStore != "wal" {
		fmt.Fprintf(os.Stderr, "bench: -chaos-raft-store %q: use bolt or wal\n", *chaosStore)
		return 1
	}
	if *only != "" {
		for _, name := range strings.Split(*only, ",") {
			if !knownSuite(name) {
				fmt.Fprintf(os.Stderr, "bench: -only %q: no suite %q\n", *only, name)
				return 1
			}
		}
	}
	bin := os.Getenv("PADDOCK_BIN")
	if bin == "" {
		bin = "bin"
	}
	bin, _ = filepath.Abs(bin)
	scratch, err := os.MkdirTemp("", "paddock-bench-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if *keep {
		defer fmt.Fprintf(os.Stderr, "kept the scratch directory %s\n", scratch)
	} else {
		defer os.RemoveAll(scratch)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	env := bench.Env{Bin: bin, Quick: *quick, Dir: scratch, Profiles: *profiles, ChaosRaftStore: *chaosStore, Logf: func(f string, a ...any) {
		fmt.Fprintf(os.Stderr, "%s  "+f+"\n", append([]any{time.Now().Format("15:04:05")}, a...)...)
	}}
	report := bench.NewReport(*quick)
	failed := false
	began := time.Now()
	for _, s := range suites {
		named := strings.Contains(","+*only+",", ","+s.name+",")
		if *only != "" && !named || *only == "" && s.optional {
			continue
		}
		env.Logf("suite %s", s.name)
		t0 := time.Now()
		res, err := s.run(ctx, env)
		report.Add(res...)
		report.Timings = append(report.Timings, bench.SuiteTiming{Suite: s.name, Seconds: time.Since(t0).Seconds(), Error: errString(err)})
		if err != nil {
			env.Logf("suite %s failed: %v", s.name, err)
			failed = true
		}
	}
	report.Seconds = time.Since(began).Seconds()
	if err := report.WriteMarkdown(*out, bench.AreaNotes()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := report.WriteJSON(*jsonOut); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	env.Logf("wrote %s and %s", *out, *jsonOut)
	if failed {
		return 1
	}
	return 0
}
