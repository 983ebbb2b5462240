package bench

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/shared/agentctl"
	"github.com/paddockhq/paddock/shared/runtime/agentctlproc"
	"github.com/paddockhq/paddock/shared/runtime/workspace"
)

func TestPercentileAndSummary(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3}
	for _, tc := range []struct {
		p    float64
		want float64
	}{{50, 3}, {99, 5}, {1, 1}, {0, 1}, {100, 5}} {
		if got := Percentile(xs, tc.p); got != tc.want {
			t.Errorf("Percentile(%v) = %v, want %v", tc.p, got, tc.want)
		}
	}
	if Percentile(nil, 50) != 0 {
		t.Error("empty percentile")
	}
	r := Summary(Result{}, []float64{10, 20, 30}, true)
	if r.P50 != 20 || r.P99 != 10 || r.Samples != 3 {
		t.Errorf("low-tail summary %+v", r)
	}
}

func TestChaosResults(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, body string
		wantErr    bool
		faults     float64
		met        string
	}{
		{name: "absent"},
		{name: "clean", body: `{"faults":40,"violations":0,"operations":900}`, faults: 40, met: "yes"},
		{name: "violations", body: `{"faults":3,"violations":1}`, faults: 3, met: "no"},
		{name: "malformed", body: `{"faults":`, wantErr: true},
		{name: "negative", body: `{"faults":-1,"violations":0}`, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name+".json")
			if tc.body != "" {
				if err := os.WriteFile(path, []byte(tc.body), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			res, err := chaosResults(path)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("no error for %s", tc.body)
				}
				return
			}
			if err != nil || len(res) != 2 {
				t.Fatalf("%v %+v", err, res)
			}
			if tc.body == "" {
				if !strings.Contains(res[0].Note, "chaos suite not run") || res[0].P50 != 0 {
					t.Fatalf("absent file: %+v", res[0])
				}
				return
			}
			if res[0].P50 != tc.faults || res[1].Met != tc.met {
				t.Fatalf("got %+v", res)
			}
		})
	}
}

func TestMarkdownHasEveryResultAndPeer(t *testing.T) {
	r := &Report{Machine: "m", Date: "d", Commit: "c"}
	r.Add(withPeer(Result{Name: "writes_per_s_c1", Area: areaCluster, Unit: "writes/s", P50: 200}, 100, false),
		Result{Name: "plugin_rpc_us", Area: areaPlugins, Unit: "µs", P50: 50, Goal: "≤ 100", Met: "yes"})
	var b strings.Builder
	r.markdown(&b, AreaNotes())
	out := b.String()
	for _, want := range []string{"## " + areaCluster, "| writes_per_s_c1 |", "| etcd | 100 | 2.00 |", "| plugin_rpc_us |", "≤ 100 | yes"} {
		if !strings.Contains(out, want) {
			t.Errorf("markdown lacks %q:\n%s", want, out)
		}
	}
}

func FuzzChaosFile(f *testing.F) {
	f.Add([]byte(`{"faults":1,"violations":0}`))
	f.Add([]byte(`nope`))
	f.Fuzz(func(t *testing.T, b []byte) {
		// The bytes as read from the file: no file per input (a temporary
		// directory per exec made the workers slow to stop at -fuzztime's end).
		res, err := chaosResultsOf(b, "c.json")
		if err == nil && (len(res) != 2 || res[0].P50 < 0 || res[1].P50 < 0) {
			t.Fatalf("accepted %q as %+v", b, res)
		}
	})
}

func TestMarkerWatchAcrossChunks(t *testing.T) {
	w := newMarkerWatch()
	found := w.arm("MK42KM")
	for _, chunk := range []string{"xxM", "K4", "2", "KMyy"} {
		w.sink([]byte(chunk))
	}
	select {
	case <-found:
	default:
		t.Fatal("marker split over chunks not found")
	}
	found = w.arm("MK7KM")
	w.sink([]byte("MK7 KM"))
	select {
	case <-found:
		t.Fatal("found a marker that is not there")
	default:
	}
}

func TestLostChunks(t *testing.T) {
	want := "chunk 1 of 3\nchunk 2 of 3\nchunk 3 of 3\nstreamed 3"
	msg := func(text string, complete bool) []api.Message {
		return []api.Message{{Role: api.RoleUser, Text: "stream 3"}, {Role: api.RoleAgent, Text: text, Complete: complete}}
	}
	cases := []struct {
		msgs []api.Message
		lost int
	}{
		{msg(want, true), 0},
		{msg("chunk 1 of 3\nchunk 3 of 3\nstreamed 3", true), 2},               // 2 missing: 3 is in 2's place
		{msg("chunk 2 of 3\nchunk 1 of 3\nchunk 3 of 3\nstreamed 3", true), 2}, // 1 and 2 swapped
		{msg("chunk 1 of 3\nchunk 2 of 3\nchunk 3 of 3\n", true), 1},           // the closing line is missing
		{msg(want, false), 1}, // never completed
		{nil, 4},
	}
	for i, c := range cases {
		if got := lostChunks(c.msgs, want, 3); got != c.lost {
			t.Errorf("case %d: lost %d, want %d", i, got, c.lost)
		}
	}
}

// TestSelfFencedReadsAgentctlsLog: a session counts as fenced only when its
// agentctl's log (where the standalone runtime puts it) holds the
// self-fencing line.
func TestSelfFencedReadsAgentctlsLog(t *testing.T) {
	dir := t.TempDir()
	write := func(id, text string) {
		stateDir := workspace.Layout{SessionDir: filepath.Join(dir, "workspaces", id)}.StateDir()
		if err := os.MkdirAll(stateDir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(agentctlproc.LogFile(stateDir), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("fenced", "2026-12-01T12:23:24.617Z [INFO]  agentctl: serving\n2026-12-01T12:23:39.175Z [WARN]  agentctl: "+agentctl.SelfFenceLog+"\n")
	write("healthy", "2026-12-01T12:23:24.617Z [INFO]  agentctl: serving\n")
	for id, want := range map[string]bool{"fenced": true, "healthy": false, "no-log": false} {
		if got := selfFenced(dir, id); got != want {
			t.Errorf("selfFenced(%s) = %v, want %v", id, got, want)
		}
	}
}

func TestParseRaftSummaries(t *testing.T) {
	text := `# HELP paddock_raft_commitTime Milliseconds
# TYPE paddock_raft_commitTime summary
paddock_raft_commitTime{quantile="0.5"} 1.25
paddock_raft_commitTime{quantile="0.9"} 2
paddock_raft_commitTime{quantile="0.99"} 7.5
paddock_raft_commitTime_sum 100
paddock_raft_commitTime_count 80
paddock_raft_fsm_apply{quantile="0.5"} NaN
paddock_sessions 3
`
	got := parseRaftSummaries(text)
	if s := got["paddock_raft_commitTime"]; s.P50 != 1.25 || s.P99 != 7.5 {
		t.Fatalf("commitTime %+v", s)
	}
	if _, ok := got["paddock_raft_fsm_apply"]; ok {
		t.Fatal("a NaN quantile (no samples in the window) was taken")
	}
	if len(got) != 1 {
		t.Fatalf("parsed %v", got)
	}
}

// TestProfileTop reads a real CPU profile of this process spinning in a
// function of its own: the summary names the profile's duration, and the
// spinning function among those with most samples of their own and among
// Paddock's functions with most samples under them.
func TestProfileTop(t *testing.T) {
	path := filepath.Join(t.TempDir(), "spin.pprof")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		t.Fatal(err)
	}
	sink = spinForProfile(300 * time.Millisecond)
	pprof.StopCPUProfile()
	f.Close()
	got := profileTop(path, 3)
	for _, want := range []string{"profile ", "Total samples", "most own samples: bench.spinForProfile", "Paddock code with most samples under it: "} {
		if !strings.Contains(got, want) {
			t.Errorf("summary %q lacks %q", got, want)
		}
	}
	if profileTop(filepath.Join(t.TempDir(), "missing.pprof"), 3) != "" {
		t.Error("a missing profile has a summary")
	}
}

var sink uint64

//go:noinline
func spinForProfile(d time.Duration) uint64 {
	var x uint64
	for end := time.Now().Add(d); time.Now().Before(end); {
		for i := 0; i < 1e5; i++ {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	return x
}

// TestCPUSplitCountsEachProgram runs a busy shell under agentctl's command
// name beside this process spinning: the split between two snapshots counts
// the shell's CPU as agentctls' and the spin as the bench's, and says how
// busy the machine was.
func TestCPUSplitCountsEachProgram(t *testing.T) {
	name := filepath.Join(t.TempDir(), "agentctl")
	if err := os.Symlink("/bin/sh", name); err != nil {
		t.Fatal(err)
	}
	before := takeCPUSplit()
	busy := exec.Command(name, "-c", "while :; do :; done")
	if err := busy.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = busy.Process.Kill(); _ = busy.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	for procCPU(busy.Process.Pid) < 300*time.Millisecond && time.Now().Before(deadline) {
		sink = spinForProfile(20 * time.Millisecond)
	}
	after := takeCPUSplit()
	by := after.by(before)
	if got := by["agentctls"]; got < 300*time.Millisecond {
		t.Errorf("agentctls' CPU grew by %s while a process named agentctl that started meanwhile used %s", got, procCPU(busy.Process.Pid))
	}
	if got := by["the bench"]; got < 200*time.Millisecond {
		t.Errorf("the bench's CPU grew by %s while it spun", got)
	}
	s := after.since(before)
	for _, want := range []string{"% busy over ", "agentctls ", "the bench ", "interrupt handlers "} {
		if !strings.Contains(s, want) {
			t.Errorf("split %q lacks %q", s, want)
		}
	}
	if before.since(before) != "" {
		t.Error("an empty interval has a split")
	}
}

// A prompt's wait from its first send to acceptance is counted per session,
// and the failed sends before are summed up by reason, commonest first.
func TestPromptedSaysWhyPromptsWereSentAgain(t *testing.T) {
	t0 := time.Now()
	p := prompted{
		first:    map[string]time.Time{"a": t0, "b": t0},
		accepted: map[string]time.Time{"a": t0.Add(40 * time.Millisecond), "b": t0.Add(10 * time.Millisecond)},
		tries: map[string][]string{
			"a": {"+0ms no leader", "+25ms session has no running agent", "+30ms session has no running agent"},
			"b": {},
		},
	}
	if got := p.acceptWaits(); len(got) != 2 || Percentile(got, 100) != 40 || Percentile(got, 1) != 10 {
		t.Errorf("accept waits %v, want 10 and 40 ms", got)
	}
	want := "1 prompt(s) were sent more than once (3 failed sends: 2× session has no running agent; 1× no leader)"
	if got := p.refusals(); got != want {
		t.Errorf("refusals %q, want %q", got, want)
	}
	if (prompted{tries: map[string][]string{"b": {}}}).refusals() != "" {
		t.Error("refusals without a failed send")
	}
}
