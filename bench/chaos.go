package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
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

// ChaosSuite reports the counts of the chaos loop from ChaosFile; when the
// file is absent it reports 0 faults with the note "chaos suite not run".
func ChaosSuite(_ context.Context, env Env) ([]Result, error) {
	return chaosResults(ChaosFile)
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
