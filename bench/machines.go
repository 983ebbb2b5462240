package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	wire "github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/bench/harness"
	"github.com/paddockhq/paddock/bench/netns"
	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/supervisor/config"
)

// machineCluster is three "machines": each server in its own network
// namespace with its own data_dir and workspace_root (no shared storage),
// agentctl listening on the machine's address.
type machineCluster struct {
	c   *harness.Cluster
	nw  *netns.Net
	dir string
}

func startMachineCluster(env Env, name string) (*machineCluster, error) {
	dir, err := os.MkdirTemp(env.Dir, name+"-")
	if err != nil {
		return nil, err
	}
	prefix := fmt.Sprintf("pb%d", os.Getpid()%100000)
	_ = netns.CleanStale(prefix)
	nw, err := netns.New(prefix, 3)
	if err != nil {
		return nil, err
	}
	common := fmt.Sprintf(`
plugin_dir = %q
agent "demo" {
  protocol = "acp"
  command  = ["paddock-demo-agent"]
}
terminal {
  shell = ["/bin/sh"]
}
`, filepath.Join(env.Bin, "plugins"))
	var hosts []harness.HostSpec
	for i, h := range nw.Hosts {
		root := filepath.Join(dir, fmt.Sprintf("machine%d-workspaces", i+1))
		hosts = append(hosts, harness.HostSpec{IP: h.IP, Wrap: nw.Wrapper(i),
			Extra: fmt.Sprintf("plugin \"standalone\" {\n  config {\n    workspace_root = %q\n  }\n}\n", root)})
	}
	c, err := harness.StartHosts(harness.Options{Bin: env.Bin, Dir: dir, Extra: common, LogLevel: "warn"}, hosts)
	if err != nil {
		_ = nw.Close()
		return nil, fmt.Errorf("start %s cluster: %w", name, err)
	}
	return &machineCluster{c: c, nw: nw, dir: dir}, nil
}

func (m *machineCluster) stop() {
	m.c.Stop()
	for i := range m.nw.Hosts {
		_ = m.nw.KillAll(i, 5*time.Second)
	}
	harness.KillProcessesUnder(m.dir)
	_ = m.nw.Close()
}

// index is the machine a node runs on.
func (m *machineCluster) index(n *harness.Node) int {
	return slices.Index(m.c.Nodes, n)
}

// sessionsByNode maps each node name to the sessions whose executor it owns.
func sessionsByNode(ctx context.Context, api *client.Client, ids []string) (map[string][]string, error) {
	out := map[string][]string{}
	for _, id := range ids {
		exs, err := api.Executors(ctx, id)
		if err != nil {
			return nil, err
		}
		if len(exs) != 1 {
			return nil, fmt.Errorf("session %s has %d executors", id, len(exs))
		}
		out[exs[0].Node] = append(out[exs[0].Node], id)
	}
	return out, nil
}

const noteMachines = "3 server processes, each in its own network namespace (separate network stacks on one host, joined by a bridge) with its own data_dir and workspace_root, no shared storage; agentctl listens on its machine's address"

// MachinesSuite measures a cluster of three machines: failover to usable
// with 100 sessions spread over all three (each executor owned by its node,
// the new leader reattaching the killed leader's sessions over agentctl's
// address), and how soon a whole machine's loss shows on its sessions.
func MachinesSuite(ctx context.Context, env Env) ([]Result, error) {
	n, kills, losses := 100, 8, 5
	if env.Quick {
		n, kills, losses = 30, 3, 2
	}
	spreadName := "failover_to_usable_ms_n100_spread"
	lossName := "node_loss_detect_ms"
	if _, err := netns.IPPath(); err != nil {
		return []Result{
			{Name: spreadName, Area: areaRecovery, Unit: "ms", Goal: "p50 ≤ 1000, p99 ≤ 2000", Note: "not run: " + err.Error()},
			{Name: lossName, Area: areaRecovery, Unit: "ms", Note: "not run: " + err.Error()},
		}, nil
	}
	m, err := startMachineCluster(env, "machines")
	if err != nil {
		return nil, err
	}
	defer m.stop()
	leader, err := m.c.Leader(60 * time.Second)
	if err != nil {
		return nil, err
	}
	api := apiOf(leader)
	if err := waitUntil(ctx, 30*time.Second, 100*time.Millisecond, "every machine to answer with a healthy standalone plugin", func() bool {
		hs, err := api.Nodes(ctx)
		ok := 0
		for _, h := range hs {
			if h.Available && h.Plugins["standalone"] {
				ok++
			}
		}
		return err == nil && ok == 3
	}); err != nil {
		return nil, err
	}
	task, err := api.CreateTask(ctx, wire.CreateTaskRequest{Title: "machines"})
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	ids, err := createSessions(ctx, api, task.ID, n, 4)
	if err != nil {
		return nil, err
	}
	byNode, err := sessionsByNode(ctx, api, ids)
	if err != nil {
		return nil, err
	}
	spread := ""
	for _, node := range m.c.Nodes {
		spread += fmt.Sprintf(" %s %d", node.Name, len(byNode[node.Name]))
	}
	env.Logf("machines: %d sessions started in %s, placed%s", n, time.Since(t0).Round(time.Millisecond), spread)

	var times, elect, recovered []float64
	var failed error
	where := ""
	for i := 0; i < kills && failed == nil; i++ {
		u, err := failoverToUsable(ctx, env, m.c, task.ID, ids, false, "")
		if err != nil {
			failed = fmt.Errorf("machines kill %d: %w", i, err)
			break
		}
		if i == 0 {
			where = whereTheTimeWent("the first kill", u)
		}
		times, elect = append(times, u.Total), append(elect, u.Leader)
		if u.Recovered >= 0 {
			recovered = append(recovered, u.Recovered)
		}
		env.Logf("machines n=%d: usable after %.0fms (leader after %.0fms, its recovery run finished after %.0fms)", n, u.Total, u.Leader, u.Recovered)
	}
	note := fmt.Sprintf("%s; %d live demo sessions on the standalone runtime placed by the leader (fewest live executors first):%s; kill -9 of the leader's server process (its machine, agentctls and agents live on) until every session answered a prompt through the new leader, as failover_to_usable_ms_n100 measures; the killed leader's sessions are reattached over agentctl's recorded address, the others through their owners' plugins; killed server restarted between kills; %d kills; default raft timing (heartbeat %s, election %s)",
		noteMachines, n, spread, len(times), config.DefaultHeartbeatTimeout, config.DefaultElectionTimeout)
	if len(elect) > 0 {
		note += fmt.Sprintf("; a survivor led after p50 %.0f ms (max %.0f)", Percentile(elect, 50), Percentile(elect, 100))
	}
	if len(recovered) > 0 {
		note += fmt.Sprintf(", its recovery run finished after p50 %.0f ms (max %.0f)", Percentile(recovered, 50), Percentile(recovered, 100))
	}
	fo := Summary(Result{Name: spreadName, Area: areaRecovery, Unit: "ms", Goal: "p50 ≤ 1000, p99 ≤ 2000", Note: note + where}, times, false)
	fo = Verdict(fo, fo.P50 <= 1000 && fo.P99 <= 2000)
	if failed != nil {
		fo.Note += "; STOPPED: " + failed.Error()
		fo.Met = "no"
		return []Result{fo, {Name: lossName, Area: areaRecovery, Unit: "ms", Note: "not run: the failover above failed"}}, failed
	}

	var detect, back []float64
	for i := 0; i < losses && failed == nil; i++ {
		d, b, err := nodeLoss(ctx, m, ids)
		if err != nil {
			failed = fmt.Errorf("machine loss %d: %w", i, err)
			break
		}
		detect, back = append(detect, d), append(back, b)
		env.Logf("machines: a lost machine's sessions said node_unavailable after %.0fms; back and answering %.0fms after its restart", d, b)
	}
	lnote := fmt.Sprintf("%s; %d sessions as above; every process in a follower's namespace (server, plugin, agentctls, agents) kill -9'd at once, until every session it owned reports resume_reason node_unavailable in GET /v1/sessions/{id}/status on the leader (polled every 20 ms); a node is unavailable once it has not answered the leader's probe (every 1 s) for 3 s, by design; %d losses",
		noteMachines, n, len(detect))
	if len(back) > 0 {
		lnote += fmt.Sprintf("; after the machine's server restarts, its sessions (their agentctls died with it) are resumed from their tokens and answering after p50 %.0f ms (max %.0f)", Percentile(back, 50), Percentile(back, 100))
	}
	loss := Summary(Result{Name: lossName, Area: areaRecovery, Unit: "ms", Note: lnote}, detect, false)
	if failed != nil {
		loss.Note += "; STOPPED: " + failed.Error()
	}
	return []Result{fo, loss}, failed
}

// nodeLoss kills a follower's whole machine and returns the time until all
// of its sessions report node_unavailable, and, after its server restarts,
// until all of them answer a prompt again.
func nodeLoss(ctx context.Context, m *machineCluster, ids []string) (detect, back float64, err error) {
	leader, err := m.c.Leader(60 * time.Second)
	if err != nil {
		return 0, 0, err
	}
	api := apiOf(leader)
	var victim *harness.Node
	for _, n := range m.c.Running() {
		if n != leader {
			victim = n
			break
		}
	}
	if victim == nil {
		return 0, 0, errors.New("no follower")
	}
	byNode, err := sessionsByNode(ctx, api, ids)
	if err != nil {
		return 0, 0, err
	}
	lost := byNode[victim.Name]
	if len(lost) == 0 {
		return 0, 0, fmt.Errorf("no session on %s", victim.Name)
	}
	t0 := time.Now()
	victim.Kill()
	if err := m.nw.KillAll(m.index(victim), 5*time.Second); err != nil {
		return 0, 0, err
	}
	pending := slices.Clone(lost)
	err = waitUntil(ctx, 60*time.Second, 20*time.Millisecond, "the lost machine's sessions to say node_unavailable", func() bool {
		pending = slices.DeleteFunc(pending, func(id string) bool {
			st, err := api.SessionStatus(ctx, id)
			return err == nil && st.ResumeReason != nil && *st.ResumeReason == wire.ReasonNodeUnavailable
		})
		return len(pending) == 0
	})
	if err != nil {
		return 0, 0, fmt.Errorf("%w (%d of %d still not)", err, len(pending), len(lost))
	}
	detect = ms(time.Since(t0))
	t1 := time.Now()
	if err := victim.Start(); err != nil {
		return detect, 0, err
	}
	pending = slices.Clone(lost)
	err = waitUntil(ctx, 120*time.Second, 50*time.Millisecond, "the machine's sessions to run again", func() bool {
		pending = slices.DeleteFunc(pending, func(id string) bool {
			st, err := api.SessionStatus(ctx, id)
			return err == nil && st.IsAgentRunning && st.ResumeReason == nil && st.State == wire.SessionWaitingForInput
		})
		return len(pending) == 0
	})
	if err != nil {
		return detect, 0, fmt.Errorf("%w (%d of %d still not)", err, len(pending), len(lost))
	}
	for _, id := range lost {
		if err := api.Prompt(ctx, id, "recall"); err != nil {
			return detect, 0, fmt.Errorf("prompt %s after its machine came back: %w", id, err)
		}
	}
	if err := waitUntil(ctx, 60*time.Second, 50*time.Millisecond, "the machine's sessions to answer", func() bool {
		waiting := 0
		for _, id := range lost {
			if s, err := api.GetSession(ctx, id); err == nil && s.State == wire.SessionWaitingForInput && hasUserMessage(ctx, api, id, "recall") {
				waiting++
			}
		}
		return waiting == len(lost)
	}); err != nil {
		return detect, 0, err
	}
	return detect, ms(time.Since(t1)), nil
}
