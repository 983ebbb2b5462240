package localexec_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/paddockhq/paddock/plugins/standalone/localexec"
	"github.com/paddockhq/paddock/shared/runtime"
)

// rpcFixture is a loaded standalone plugin process configured like the
// plugin_rpc_us bench: workspace_root in a temp dir, one session's dirs, and
// a handle whose pid is this (live, non-agentctl) test process.
type rpcFixture struct {
	c      *runtime.Client
	handle []byte
}

func newRPCFixture(tb testing.TB) rpcFixture {
	tb.Helper()
	ctx := context.Background()
	root := tb.TempDir()
	c, err := runtime.NewClient(ctx, runtime.ClientConfig{Path: bins.Plugin})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Kill)
	if diags, err := c.SetConfig(ctx, runtime.ConfigSource{Filename: "bench.hcl", Source: fmt.Appendf(nil, "workspace_root = %q\n", root)}); err != nil || diags.HasErrors() {
		tb.Fatalf("set config: %v %v", err, diags)
	}
	return rpcFixture{c: c, handle: benchHandle(tb, root)}
}

// benchHandle creates the session dirs under root and returns the handle the
// bench inspects.
func benchHandle(tb testing.TB, root string) []byte {
	tb.Helper()
	sdir := filepath.Join(root, "bench1")
	ws, stateDir := filepath.Join(sdir, "workspace"), filepath.Join(sdir, "state")
	for _, d := range []string{ws, stateDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			tb.Fatal(err)
		}
	}
	handle, err := json.Marshal(map[string]any{"v": 1, "session_id": "bench1", "session_dir": sdir, "workspace": ws,
		"owns_workspace": true, "state_dir": stateDir, "pid": os.Getpid(), "nonce": "n", "url": "http://127.0.0.1:1"})
	if err != nil {
		tb.Fatal(err)
	}
	return handle
}

// p50µs is the median of samples in µs.
func p50µs(samples []time.Duration) float64 {
	slices.Sort(samples)
	return float64(samples[len(samples)/2].Nanoseconds()) / 1000
}

// loopP50 runs call b.N times and reports the median call in µs beside
// ns/op (the mean), since a shared 2-core machine has a long tail.
func loopP50(b *testing.B, call func() error) {
	b.Helper()
	if err := call(); err != nil { // warm-up
		b.Fatal(err)
	}
	samples := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if err := call(); err != nil {
			b.Fatal(err)
		}
		samples = append(samples, time.Since(t0))
	}
	b.StopTimer()
	b.ReportMetric(p50µs(samples), "p50-µs")
}

// BenchmarkInspectRoundTrip is one Inspect through go-plugin (gRPC over a
// Unix socket) to the real plugin process, as bench plugin_rpc_us measures,
// paired with one Capabilities call (the transport baseline: its plugin side
// does no work), the order alternating, so that both medians see the same
// machine load.
// ns/op and allocs/op cover the pair.
func BenchmarkInspectRoundTrip(b *testing.B) {
	f := newRPCFixture(b)
	ctx := context.Background()
	inspect := func() error {
		resp, err := f.c.Inspect(ctx, f.handle)
		if err == nil && resp.State != runtime.StateExited {
			err = fmt.Errorf("state %q, want %q", resp.State, runtime.StateExited)
		}
		return err
	}
	noop := func() error { _, err := f.c.Capabilities(ctx); return err }
	if err := errors.Join(inspect(), noop()); err != nil { // warm-up
		b.Fatal(err)
	}
	ins, nop := make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// The order alternates: a call right after another one finds the
		// plugin's threads awake, one after a pause does not.
		first, second := inspect, noop
		if i%2 == 1 {
			first, second = noop, inspect
		}
		t0 := time.Now()
		if err := first(); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := second(); err != nil {
			b.Fatal(err)
		}
		d1, d2 := t1.Sub(t0), time.Since(t1)
		if i%2 == 1 {
			d1, d2 = d2, d1
		}
		ins, nop = append(ins, d1), append(nop, d2)
	}
	b.StopTimer()
	b.ReportMetric(p50µs(ins), "inspect-p50-µs")
	b.ReportMetric(p50µs(nop), "noop-p50-µs")
}

// BenchmarkInspectInProcess is Inspect's own work without any transport.
func BenchmarkInspectInProcess(b *testing.B) {
	ctx := context.Background()
	root := b.TempDir()
	r := localexec.New(nil)
	if diags, err := r.SetConfig(ctx, runtime.ConfigSource{Filename: "bench.hcl", Source: fmt.Appendf(nil, "workspace_root = %q\n", root)}); err != nil || diags.HasErrors() {
		b.Fatalf("set config: %v %v", err, diags)
	}
	handle := benchHandle(b, root)
	loopP50(b, func() error {
		_, err := r.Inspect(ctx, handle)
		return err
	})
}
