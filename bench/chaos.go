package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/paddockhq/paddock/bench/chaos"
)

// ChaosFile is where the chaos loop (e2e/bench) writes its counts:
// {"faults":N,"violations":M}, optionally with "operations" and "note".
const ChaosFile = "bench/tmp/chaos.json"

// ChaosCounts is the chaos loop's result file.
type ChaosCounts struct {
	Faults     int    `json:"faults"`
	Violations int    `json:"violations"`
	Operations int    `json:"operations,omitempty"`
	Note       string `json:"note,omitempty"`
}

const areaChaos = "Chaos: fault injection"

// ChaosSuite runs the chaos loop (bench/chaos: kill -9, SIGSTOP and
// partitions of the leader from one injector, kill -9 of sessions' agentctls
// from another, prompts checked throughout, with the overlap/token checker)
// aiming at 1000 faults (20 in quick mode) within a time bound, writes its
// counts to ChaosFile and reports them. The bound keeps make bench's chaos
// part within about 12 minutes (setup and the final settle come on top of
// the fault phase): fewer faults than aimed at are reported as such.
func ChaosSuite(ctx context.Context, env Env) ([]Result, error) {
	// 8 sessions keep the agentctl injector supplied while others are
	// being resumed; 25 prompts each keep the conversations (which every
	// resume replays) short. Leader faults run at about 10–15 a minute on
	// the shared 2-core machine, agentctl kills at about 120.
	o := chaos.Options{Bin: env.Bin, Faults: 1000, MinLeaderFaults: 50, Sessions: 8, PromptsPerSession: 25,
		MaxDuration: 9*time.Minute + 30*time.Second, Out: ChaosFile, Logf: env.Logf, RaftStore: env.ChaosRaftStore}
	if env.Quick {
		// ≤ 90 s even when sessions are lost: 40 s of faults, 15+7.5+11 s
		// for the end of the run, about 10 s of setup.
		o.Faults, o.MinLeaderFaults, o.Sessions, o.PromptsPerSession = 20, 5, 3, 10
		o.MaxDuration, o.FinalBound = 40*time.Second, 15*time.Second
	}
	dir, err := os.MkdirTemp(env.Dir, "chaos-")
	if err != nil {
		return nil, err
	}
	o.Dir = dir
	res, err := chaos.Run(ctx, o)
	if err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	out, err := chaosResults(ChaosFile)
	if err == nil && len(out) > 0 {
		out[0].Goal = fmt.Sprintf("≥ %d", o.Faults)
		out[0] = Verdict(out[0], res.Faults >= o.Faults)
		store := env.ChaosRaftStore
		if store == "" {
			store = "bolt (the default)"
		}
		out[0].Note += fmt.Sprintf(" Servers' raft store: %s.", store)
		out[0].Note += fmt.Sprintf(" Aimed at %d faults (≥ %d of them leader faults) within %s; injected %v in %.0f s (%.0f faults/min; partitions=%v), %d sessions (%d of them added for sessions that stayed unusable)."+
			" Checked: %d executions, %d lease changes, %d of %d accepted prompts answered (%d lost their turn to their agent's end), %d of %d sessions answered the final recall; run took %.0f s in all.",
			o.Faults, o.MinLeaderFaults, o.MaxDuration, res.ByKind, res.FaultSeconds, res.FaultsPerMinute, res.Partitions, res.Sessions, res.SessionsAdded,
			res.Executions, res.Grants, res.PromptsAnswered, res.PromptsSent, res.PromptsUnanswered, res.Recalls, res.Sessions, res.Seconds)
	}
	return out, err
}

func chaosResults(path string) ([]Result, error) {
	faults := Result{Name: "chaos_faults", Area: areaChaos, Unit: "faults", Samples: 1}
	viol := Result{Name: "chaos_violations", Area: areaChaos, Unit: "violations", Goal: "0", Samples: 1}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		faults.Note, viol.Note = "chaos suite not run ("+path+" absent)", "chaos suite not run"
		faults.Samples, viol.Samples = 0, 0
		return []Result{faults, viol}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("chaos results: %w", err)
	}
	return chaosResultsOf(b, path)
}

// chaosResultsOf reads the chaos loop's counts from b, the contents of path.
func chaosResultsOf(b []byte, path string) ([]Result, error) {
	faults := Result{Name: "chaos_faults", Area: areaChaos, Unit: "faults", Samples: 1}
	viol := Result{Name: "chaos_violations", Area: areaChaos, Unit: "violations", Goal: "0", Samples: 1}
	var c ChaosCounts
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("chaos results %s: %w", path, err)
	}
	if c.Faults < 0 || c.Violations < 0 {
		return nil, fmt.Errorf("chaos results %s: negative count", path)
	}
	faults.P50, faults.P99 = float64(c.Faults), float64(c.Faults)
	viol.P50, viol.P99 = float64(c.Violations), float64(c.Violations)
	faults.Note = fmt.Sprintf("faults injected by the chaos loop (%s); %d operations checked. %s", path, c.Operations, c.Note)
	viol.Note = "double owners / lost sessions found by the chaos checker"
	return []Result{faults, Verdict(viol, c.Violations == 0)}, nil
}
