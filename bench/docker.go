package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	wire "github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/bench/harness"
)

const areaDocker = "Docker runtime"

// DockerSuite measures session start on the docker runtime and recovery of
// N containers' sessions after a leader kill; it reports a skip note when
// no Docker engine answers.
func DockerSuite(ctx context.Context, env Env) ([]Result, error) {
	nStart, nRec, kills := 10, 20, 3
	if env.Quick {
		nStart, nRec, kills = 3, 5, 1
	}
	skip := func(why string) ([]Result, error) {
		env.Logf("docker: skipped: %s", why)
		return []Result{
			{Name: "docker_session_start_ms", Area: areaDocker, Unit: "ms", Note: "skipped: " + why},
			{Name: fmt.Sprintf("docker_failover_to_usable_ms_n%d", nRec), Area: areaDocker, Unit: "ms", Note: "skipped: " + why},
		}, nil
	}
	vctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	out, err := exec.CommandContext(vctx, "docker", "version", "--format", "{{.Server.Version}}").CombinedOutput()
	cancel()
	if err != nil {
		return skip(fmt.Sprintf("the Docker engine does not answer (%v: %s)", err, strings.TrimSpace(string(out))))
	}
	const image = "paddock-executor:bench"
	bctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	out, err = exec.CommandContext(bctx, filepath.Join("deploy", "image", "build.sh"), "-b", env.Bin, "-t", image).CombinedOutput()
	cancel()
	if err != nil {
		return skip(fmt.Sprintf("building %s failed (%v: %s)", image, err, lastLines(string(out), 3)))
	}
	dir, err := os.MkdirTemp(env.Dir, "docker-")
	if err != nil {
		return nil, err
	}
	label := fmt.Sprintf("bench-%d", rand.Int64())
	defer removeContainers(label)
	cfg := fmt.Sprintf(`
plugin_dir = %q
plugin "docker" {
  config {
    image          = %q
    workspace_root = %q
    cluster        = %q
    start_timeout  = "60s"
  }
}
agent "demo" {
  protocol = "acp"
  command  = ["paddock-demo-agent"]
}
`, filepath.Join(env.Bin, "plugins"), image, filepath.Join(dir, "workspaces"), label)
	c, err := harness.Start(harness.Options{Bin: env.Bin, Dir: dir, Size: 3, SeparateIPs: true, LogLevel: "warn", Extra: cfg})
	if err != nil {
		return nil, err
	}
	defer func() { c.Stop(); harness.KillProcessesUnder(dir) }()
	leader, err := c.Leader(60 * time.Second)
	if err != nil {
		return nil, err
	}
	api := apiOf(leader)
	task, err := api.CreateTask(ctx, wire.CreateTaskRequest{Title: "docker bench"})
	if err != nil {
		return nil, err
	}
	var starts []float64
	var ids []string
	retries := 0
	for i := 0; i < nRec; i++ {
		t0 := time.Now()
		s, err := api.CreateSession(ctx, task.ID, wire.CreateSessionRequest{Agent: "demo", Runtime: "docker"})
		if err != nil {
			return nil, fmt.Errorf("create docker session: %w", err)
		}
		if err := waitSession(ctx, api, s.ID, wire.SessionWaitingForInput, 120*time.Second, 5*time.Millisecond); err != nil {
			// A leader change under the machine's load can interrupt a
			// launch; count it and start another session.
			if retries++; retries > 3 {
				return nil, err
			}
			env.Logf("docker: session %d failed (%v), starting another", i, err)
			if _, err := api.DeleteSession(ctx, s.ID); err != nil {
				env.Logf("docker: delete failed session: %v", err)
			}
			api = apiOf(mustLeader(c))
			i--
			continue
		}
		if i < nStart {
			starts = append(starts, ms(time.Since(t0)))
		}
		ids = append(ids, s.ID)
	}
	res := []Result{Summary(Result{Name: "docker_session_start_ms", Area: areaDocker, Unit: "ms",
		Note: fmt.Sprintf("POST /v1/tasks/{id}/sessions on the docker runtime until WAITING_FOR_INPUT (polled every 5 ms): container create and start from %s, agentctl and the demo agent inside; %d sessions one after another on a 3-node cluster", image, nStart)}, starts, false)}
	env.Logf("docker session start p50 %.0fms", res[0].P50)
	var times []float64
	for k := 0; k < kills; k++ {
		u, err := failoverToUsable(ctx, env, c, task.ID, ids, false, "")
		if err != nil {
			return res, fmt.Errorf("docker failover %d: %w", k, err)
		}
		times = append(times, u.Total)
		env.Logf("docker failover n=%d: %.0fms (leader after %.0fms, its recovery run finished after %.0fms)", nRec, u.Total, u.Leader, u.Recovered)
	}
	res = append(res, Summary(Result{Name: fmt.Sprintf("docker_failover_to_usable_ms_n%d", nRec), Area: areaDocker, Unit: "ms",
		Note: fmt.Sprintf("%d live demo sessions in containers on a 3-node cluster; kill -9 of the leader until every session answered a prompt through the new leader; %d kills", nRec, kills)}, times, false))
	return res, nil
}

// removeContainers force-removes the containers labelled with cluster.
func removeContainers(cluster string) {
	out, err := exec.Command("docker", "ps", "-aq", "--filter", "label=paddock.cluster="+cluster).Output()
	if err != nil {
		return
	}
	for _, id := range strings.Fields(string(out)) {
		_ = exec.Command("docker", "rm", "-f", id).Run()
	}
}

// mustLeader is the cluster's leader, or its first node when none is agreed.
func mustLeader(c *harness.Cluster) *harness.Node {
	if l, err := c.Leader(30 * time.Second); err == nil {
		return l
	}
	return c.Nodes[0]
}
