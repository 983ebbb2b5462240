package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	wire "github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/bench/harness"
	"github.com/paddockhq/paddock/client"
)

// standaloneHCL is the config every session suite appends: the standalone
// runtime (workspaces under dir, shared by the cluster's nodes, so a
// survivor takes over a killed node's sessions), the demo agent as an ACP agent that can
// resume, and /bin/sh as the terminal shell.
func standaloneHCL(bin, dir, extra string) string {
	return fmt.Sprintf(`
plugin_dir = %q
plugin "standalone" {
  config {
    workspace_root        = %q
    shared_workspace_root = true # every node of a bench cluster runs on this host
  }
}
agent "demo" {
  protocol = "acp"
  command  = ["paddock-demo-agent"]
}
terminal {
  shell = ["/bin/sh"]
}
%s
`, filepath.Join(bin, "plugins"), filepath.Join(dir, "workspaces"), extra)
}

// paddockCluster starts size real server processes with the standalone
// runtime and returns them with a stop function that also kills every
// plugin and agentctl process they started.
func paddockCluster(env Env, name string, size int, separateIPs bool, extra string) (*harness.Cluster, string, func(), error) {
	dir, err := os.MkdirTemp(env.Dir, name+"-")
	if err != nil {
		return nil, "", nil, fmt.Errorf("scratch dir: %w", err)
	}
	c, err := harness.Start(harness.Options{Bin: env.Bin, Dir: dir, Size: size, SeparateIPs: separateIPs, LogLevel: "warn",
		Extra: standaloneHCL(env.Bin, dir, extra)})
	if err != nil {
		return nil, "", nil, fmt.Errorf("start %s cluster: %w", name, err)
	}
	stop := func() {
		c.Stop()
		harness.KillProcessesUnder(dir)
	}
	return c, dir, stop, nil
}

// apiOf is an API client of a node.
func apiOf(n *harness.Node) *client.Client {
	c, _ := client.New(n.URL(), "", client.WithTimeout(10*time.Second), client.WithTLS(n.TLS))
	return c
}

// errTimeout is returned by waitUntil.
var errTimeout = errors.New("timed out")

// waitUntil polls cond every interval until it holds, ctx ends or timeout passes.
func waitUntil(ctx context.Context, timeout, interval time.Duration, what string, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waiting %s for %s: %w", timeout, what, errTimeout)
		}
		time.Sleep(interval)
	}
	return nil
}

// waitSession polls a session until it is in want (an ERROR state fails fast).
func waitSession(ctx context.Context, api *client.Client, id string, want wire.SessionState, timeout, interval time.Duration) error {
	var last error
	err := waitUntil(ctx, timeout, interval, fmt.Sprintf("session %s to be %s", id, want), func() bool {
		s, err := api.GetSession(ctx, id)
		if err != nil {
			last = err
			return false
		}
		if s.State == wire.SessionError && want != wire.SessionError {
			last = fmt.Errorf("session %s is ERROR: %s", id, s.ErrorMessage)
			return true
		}
		return s.State == want
	})
	if err == nil && last != nil && strings.Contains(last.Error(), "is ERROR") {
		return last
	}
	if err != nil && last != nil {
		return fmt.Errorf("%w (last: %v)", err, last)
	}
	return err
}

// createSessions starts n demo sessions of a task on the standalone runtime,
// at most par at a time, and waits until each waits for input.
func createSessions(ctx context.Context, api *client.Client, taskID string, n, par int) ([]string, error) {
	ids := make([]string, n)
	errs := make(chan error, n)
	sem := make(chan struct{}, par)
	for i := 0; i < n; i++ {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			s, err := api.CreateSession(ctx, taskID, wire.CreateSessionRequest{Agent: "demo", Runtime: "standalone"})
			if err != nil {
				errs <- fmt.Errorf("create session %d: %w", i, err)
				return
			}
			ids[i] = s.ID
			errs <- waitSession(ctx, api, s.ID, wire.SessionWaitingForInput, 120*time.Second, 100*time.Millisecond)
		}()
	}
	var all []error
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			all = append(all, err)
		}
	}
	return ids, errors.Join(all...)
}

// rssKiB is a process's resident set size in KiB (0 when unknown).
func rssKiB(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			f := strings.Fields(line)
			if len(f) >= 2 {
				n, _ := strconv.Atoi(f[1])
				return n
			}
		}
	}
	return 0
}

// memAvailableKiB is MemAvailable from /proc/meminfo.
func memAvailableKiB() int {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "MemAvailable:") {
			f := strings.Fields(line)
			if len(f) >= 2 {
				n, _ := strconv.Atoi(f[1])
				return n
			}
		}
	}
	return 0
}

// killWait sends SIGKILL to pid and waits until it is gone or a zombie.
func killWait(pid int) {
	_ = syscall.Kill(pid, syscall.SIGKILL)
	deadline := time.Now().Add(10 * time.Second)
	for syscall.Kill(pid, 0) == nil && !isZombie(pid) && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
}

func isZombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	for i := len(b) - 1; i > 0; i-- {
		if b[i] == ')' && i+2 < len(b) {
			return b[i+2] == 'Z'
		}
	}
	return false
}

// ms is a duration in milliseconds.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// agentctlPID is the host pid of a session's current executor.
func agentctlPID(ctx context.Context, api *client.Client, id string) (int, error) {
	exs, err := api.Executors(ctx, id)
	if err != nil {
		return 0, fmt.Errorf("executors of %s: %w", id, err)
	}
	for i := len(exs) - 1; i >= 0; i-- {
		if exs[i].PID != 0 && exs[i].Status == wire.ExecutorReady {
			return exs[i].PID, nil
		}
	}
	return 0, fmt.Errorf("session %s has no ready local executor", id)
}

// loadAverage is the 1-minute load average from /proc/loadavg (-1 if unread).
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return v
}

// cpuProfile takes a CPU profile of a node started with enable_debug for d,
// in the background, into env.Profiles/name.pprof (`go tool pprof -top
// bin/paddock FILE`). The returned wait blocks until it is written and
// returns its path ("" when none was taken).
func cpuProfile(env Env, n *harness.Node, name string, d time.Duration) (wait func() string) {
	if env.Profiles == "" {
		return func() string { return "" }
	}
	done := make(chan string, 1)
	go func() {
		path, err := saveProfile(n.URL()+fmt.Sprintf("/debug/pprof/profile?seconds=%d", int(d.Seconds())), filepath.Join(env.Profiles, name+".pprof"))
		if err != nil {
			env.Logf("profile %s: %v", name, err)
		} else if top := profileTop(path, 5); top != "" {
			env.Logf("%s: %s", name, top)
		}
		done <- path
	}()
	return func() string { return <-done }
}

func saveProfile(url, path string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", err
	}
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return "", err
	}
	return path, f.Close()
}

// profileTop summarises a CPU profile for a report's Note: how much CPU
// its samples hold over the profile's duration, the functions with the most
// samples of their own, and Paddock's own functions with the most samples
// under them (cumulative). It reads `go tool pprof -top` and returns "" when
// the profile cannot be read.
func profileTop(path string, n int) string {
	if path == "" {
		return ""
	}
	out, err := exec.Command("go", "tool", "pprof", "-top", "-nodecount=200", path).Output()
	if err != nil {
		return ""
	}
	return summariseTop(string(out), n)
}

// summariseTop is profileTop's reading of `go tool pprof -top` output.
func summariseTop(top string, n int) string {
	type row struct {
		name      string
		flat, cum float64 // percent of all samples
	}
	var rows []row
	total := ""
	for _, line := range strings.Split(top, "\n") {
		if strings.HasPrefix(line, "Duration:") {
			total = strings.TrimSpace(strings.TrimPrefix(line, "Duration:"))
			continue
		}
		f := strings.Fields(line)
		if len(f) < 6 || !strings.HasSuffix(f[1], "%") || !strings.HasSuffix(f[4], "%") {
			continue
		}
		flat, err1 := strconv.ParseFloat(strings.TrimSuffix(f[1], "%"), 64)
		cum, err2 := strconv.ParseFloat(strings.TrimSuffix(f[4], "%"), 64)
		if err1 != nil || err2 != nil {
			continue
		}
		rows = append(rows, row{name: strings.Join(f[5:], " "), flat: flat, cum: cum})
	}
	if len(rows) == 0 {
		return ""
	}
	short := func(name string) string {
		name = strings.TrimSuffix(name, " (inline)")
		return strings.TrimPrefix(name, "github.com/paddockhq/paddock/")
	}
	var own, under []string
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].flat > rows[j].flat })
	for _, r := range rows[:min(n, len(rows))] {
		own = append(own, fmt.Sprintf("%s %.1f%%", short(r.name), r.flat))
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].cum > rows[j].cum })
	for _, r := range rows {
		if len(under) == n {
			break
		}
		if strings.HasPrefix(r.name, "github.com/paddockhq/paddock/") {
			under = append(under, fmt.Sprintf("%s %.1f%%", short(r.name), r.cum))
		}
	}
	s := fmt.Sprintf("profile %s; most own samples: %s", total, strings.Join(own, ", "))
	if len(under) > 0 {
		s += "; Paddock code with most samples under it: " + strings.Join(under, ", ")
	}
	return s
}
