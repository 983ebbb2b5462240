package bench

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	wire "github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/bench/harness"
	"github.com/paddockhq/paddock/certs"
)

const areaTLS = "TLS: the cluster and terminals with every connection over TLS"

// TLSSuite measures what TLS on every connection (a tls block with
// verify_incoming and verify_server_hostname: HTTPS API, raft over mutual
// TLS, node-to-node calls) costs: writes at 64 clients and failover on a
// 3-node TLS cluster beside a plain 3-node cluster in the same run (trials
// alternating), and terminal throughput over wss beside the direct PTY.
func TLSSuite(ctx context.Context, env Env) ([]Result, error) {
	dir, err := os.MkdirTemp(env.Dir, "tls-")
	if err != nil {
		return nil, err
	}
	defer harness.KillProcessesUnder(dir)
	pki := filepath.Join(dir, "pki")
	if err := writePKI(pki, "node1", "node2", "node3"); err != nil {
		return nil, err
	}
	plain, err := harness.Start(harness.Options{Bin: env.Bin, Dir: filepath.Join(dir, "plain"), Size: 3, LogLevel: "warn"})
	if err != nil {
		return nil, err
	}
	defer plain.Stop()
	secure, err := harness.Start(harness.Options{Bin: env.Bin, Dir: filepath.Join(dir, "tls"), Size: 3, LogLevel: "warn", TLSDir: pki})
	if err != nil {
		return nil, err
	}
	defer secure.Stop()
	trials, d, kills := 5, 5*time.Second, 20
	if env.Quick {
		trials, d, kills = 2, 2*time.Second, 3
	}

	var rates, plainRates []float64
	errs := 0
	for t := 0; t < trials; t++ {
		pl, err := plain.Leader(30 * time.Second)
		if err != nil {
			return nil, err
		}
		sl, err := secure.Leader(30 * time.Second)
		if err != nil {
			return nil, err
		}
		load := RunWrites(ctx, 64, d, PaddockWriter(pl.URL()))
		plainRates = append(plainRates, load.Rate)
		load = RunWrites(ctx, 64, d, tlsWriter(sl, 64))
		rates = append(rates, load.Rate)
		errs += load.Errors
	}
	env.Logf("writes c64: tls %.0f/s, plain %.0f/s", Percentile(rates, 50), Percentile(plainRates, 50))
	w := Summary(Result{Name: "writes_per_s_c64_tls", Area: areaTLS, Unit: "writes/s",
		Note: fmt.Sprintf("as writes_per_s_c64 (64 closed-loop clients, POST /v1/tasks to the leader, keep-alive) over HTTPS with a client certificate to a cluster whose raft and node calls run TLS; beside a plain cluster in the same run, %d×%s trials alternating; %d errors (ratio TLS/plain; higher is better)", trials, d, errs)}, rates, true)
	out := []Result{withBaseline(w, "plain", Percentile(plainRates, 50))}

	var times, plainTimes []float64
	for k := 0; k < kills; k++ {
		ts, err := Failover(ctx, plain, 1, func(n *harness.Node) Writer { return PaddockWriter(n.URL()) })
		if err != nil {
			return out, fmt.Errorf("plain failover: %w", err)
		}
		for _, t := range ts {
			plainTimes = append(plainTimes, t.Write)
		}
		ts, err = Failover(ctx, secure, 1, func(n *harness.Node) Writer { return tlsWriter(n, 1) })
		if err != nil {
			return out, fmt.Errorf("tls failover: %w", err)
		}
		for _, t := range ts {
			times = append(times, t.Write)
		}
	}
	env.Logf("failover to write: tls p50 %.0fms, plain p50 %.0fms", Percentile(times, 50), Percentile(plainTimes, 50))
	fo := Summary(Result{Name: "failover_to_write_ms_tls", Area: areaTLS, Unit: "ms",
		Note: fmt.Sprintf("as failover_to_write_ms (kill -9 of the leader until a write through a survivor succeeds) on the TLS cluster: the new leader's raft connections and the write's forwarding handshake TLS; %d kills alternating with the plain cluster's (ratio TLS/plain; lower is better)", len(times))}, times, false)
	out = append(out, withBaseline(fo, "plain", Percentile(plainTimes, 50)))

	term, err := terminalTLS(ctx, env, dir, pki)
	if err != nil {
		return out, fmt.Errorf("terminal over tls: %w", err)
	}
	return append(out, term), nil
}

// withBaseline records the same run's figure without TLS and the ratio.
func withBaseline(r Result, peer string, peerP50 float64) Result {
	r.Peer, r.PeerP50 = peer, peerP50
	if peerP50 > 0 {
		r.Ratio = r.P50 / peerP50
	}
	return r
}

// writePKI writes a CA, a server certificate per node and a client
// certificate into dir, named as `paddock tls` names them.
func writePKI(dir string, nodes ...string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	caPEM, err := certs.NewCA(certs.CAOptions{})
	if err != nil {
		return err
	}
	ca, err := certs.LoadCA(caPEM.Cert, caPEM.Key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "paddock-ca.pem"), caPEM.Cert, 0o644); err != nil {
		return err
	}
	write := func(base string, opts certs.CertOptions) error {
		p, err := ca.Sign(opts)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, base+".pem"), p.Cert, 0o644); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, base+"-key.pem"), p.Key, 0o600)
	}
	for _, n := range nodes {
		if err := write("paddock-server-"+n, certs.CertOptions{Server: true, Node: n}); err != nil {
			return err
		}
	}
	return write("paddock-client-0", certs.CertOptions{})
}

// tlsWriter is PaddockWriter over HTTPS with n's client certificate: its own
// keep-alive pool of conns connections (the loop's plain client is unused).
func tlsWriter(n *harness.Node, conns int) Writer {
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: n.TLS, MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns}}
	write := PaddockWriter(n.URL())
	return func(ctx context.Context, _ *http.Client, i int) error { return write(ctx, hc, i) }
}

// terminalTLS is terminal_throughput_ratio over wss: the cat trials of the
// terminal suite through a one-node TLS supervisor, each between two
// direct-PTY trials (D S D S … D).
func terminalTLS(ctx context.Context, env Env, dir, pki string) (Result, error) {
	size, rounds := 64<<20, 8
	if env.Quick {
		size, rounds = 16<<20, 3
	}
	file := filepath.Join(dir, "cat.txt")
	if err := makeTextFile(file, size); err != nil {
		return Result{}, err
	}
	if old, had := os.LookupEnv("SHELL"); had {
		defer os.Setenv("SHELL", old)
	} else {
		defer os.Unsetenv("SHELL")
	}
	if err := os.Setenv("SHELL", "/bin/sh"); err != nil {
		return Result{}, err
	}
	c, err := harness.Start(harness.Options{Bin: env.Bin, Dir: filepath.Join(dir, "terminal"), Size: 1, LogLevel: "warn", TLSDir: pki,
		Extra: standaloneHCL(env.Bin, filepath.Join(dir, "terminal"), "")})
	if err != nil {
		return Result{}, err
	}
	defer c.Stop()
	node, err := c.Leader(30 * time.Second)
	if err != nil {
		return Result{}, err
	}
	api := apiOf(node)
	task, err := api.CreateTask(ctx, wire.CreateTaskRequest{Title: "bench terminals over tls"})
	if err != nil {
		return Result{}, err
	}
	s, err := api.CreateSession(ctx, task.ID, wire.CreateSessionRequest{Agent: "demo", Runtime: "standalone"})
	if err != nil {
		return Result{}, err
	}
	if err := waitSession(ctx, api, s.ID, wire.SessionWaitingForInput, 60*time.Second, 20*time.Millisecond); err != nil {
		return Result{}, err
	}
	paths := &termPaths{dir: dir, supervisorTLS: node.TLS.Clone(), supervisorWS: func(name string) string {
		return "wss://" + node.HTTP + "/v1/sessions/" + s.ID + "/terminal?name=" + name
	}}
	procs := map[string]int{}
	for _, p := range []string{"direct", "supervisor"} {
		if _, err := catTrial(paths, p, file, procs); err != nil {
			return Result{}, fmt.Errorf("warm-up %s: %w", p, err)
		}
	}
	seq := []string{"direct"}
	for r := 0; r < rounds; r++ {
		seq = append(seq, "supervisor", "direct")
	}
	trials := make([]catResult, len(seq))
	for i, p := range seq {
		if trials[i], err = catTrial(paths, p, file, procs); err != nil {
			return Result{}, fmt.Errorf("%s: %w", p, err)
		}
	}
	var ratios, rates, direct []float64
	for i, p := range seq {
		if p == "direct" {
			direct = append(direct, trials[i].rate)
			continue
		}
		rates = append(rates, trials[i].rate)
		ratios = append(ratios, trials[i].rate/((trials[i-1].rate+trials[i+1].rate)/2))
	}
	env.Logf("terminal over wss: %.0f MiB/s, direct %.0f MiB/s, pair ratio %.3f", Percentile(rates, 50), Percentile(direct, 50), Percentile(ratios, 50))
	return Summary(Result{Name: "terminal_throughput_ratio_tls", Area: areaTLS, Unit: "ratio",
		Note: fmt.Sprintf("as terminal_throughput_ratio (cat of a %d MiB text file, PTY → agentctl → supervisor relay → WebSocket) with the client on wss (TLS, a client certificate) to a TLS supervisor; median of %d per-pair ratios over the mean of the direct-PTY trials around each; p50 %.0f MiB/s vs direct %.0f MiB/s",
			size>>20, len(ratios), Percentile(rates, 50), Percentile(direct, 50))}, ratios, true), nil
}
