package bench

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/paddockhq/paddock/bench/harness"
)

// Raft timing given to etcd so that it matches Paddock's LAN defaults
// (heartbeat_timeout = election_timeout = 300ms): etcd elects after a
// randomised [election, 2×election) without heartbeats, as hashicorp/raft
// does after [heartbeat_timeout, 2×heartbeat_timeout); etcd's heartbeat
// interval must be ≤ election/5.
const (
	etcdElectionMS  = 300
	etcdHeartbeatMS = 50
)

// EnsureEtcd returns the etcd binary, installing Debian's etcd-server with
// apt-get when it is missing.
func EnsureEtcd(logf func(string, ...any)) (string, error) {
	if p, err := exec.LookPath("etcd"); err == nil {
		return p, nil
	}
	logf("etcd missing: apt-get install -y etcd-server")
	install := func() error {
		cmd := exec.Command("apt-get", "install", "-y", "etcd-server")
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("apt-get install etcd-server: %w: %s", err, lastLines(string(out), 5))
		}
		return nil
	}
	if err := install(); err != nil {
		if out, uerr := exec.Command("apt-get", "update").CombinedOutput(); uerr != nil {
			return "", fmt.Errorf("apt-get update: %w: %s", uerr, lastLines(string(out), 5))
		}
		if err := install(); err != nil {
			return "", err
		}
	}
	return exec.LookPath("etcd")
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// EtcdMember is one etcd process.
type EtcdMember struct {
	Name   string
	Client string // http://127.0.0.1:port
	args   []string
	bin    string
	dir    string

	harness.Process // the etcd process
}

// EtcdCluster is a set of etcd processes on loopback.
type EtcdCluster struct {
	Members []*EtcdMember
}

// StartEtcd starts a size-member etcd cluster with data under dir (fsync on,
// etcd's default).
func StartEtcd(bin, dir string, size int) (*EtcdCluster, error) {
	type ports struct{ client, peer int }
	var ps []ports
	var initial []string
	free, err := harness.FreePorts("127.0.0.1", 2*size)
	if err != nil {
		return nil, err
	}
	for i := 0; i < size; i++ {
		c, p := free[2*i], free[2*i+1]
		ps = append(ps, ports{c, p})
		initial = append(initial, fmt.Sprintf("etcd%d=http://127.0.0.1:%d", i+1, p))
	}
	ec := &EtcdCluster{}
	for i, p := range ps {
		name := fmt.Sprintf("etcd%d", i+1)
		mdir := filepath.Join(dir, name)
		if err := os.MkdirAll(mdir, 0o700); err != nil {
			return nil, err
		}
		clientURL := fmt.Sprintf("http://127.0.0.1:%d", p.client)
		peerURL := fmt.Sprintf("http://127.0.0.1:%d", p.peer)
		m := &EtcdMember{Name: name, Client: clientURL, bin: bin, dir: mdir, args: []string{
			"--name", name, "--data-dir", filepath.Join(mdir, "data"),
			"--listen-client-urls", clientURL, "--advertise-client-urls", clientURL,
			"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", "paddock-bench",
			"--heartbeat-interval", fmt.Sprint(etcdHeartbeatMS), "--election-timeout", fmt.Sprint(etcdElectionMS),
			"--log-level", "warn", "--logger", "zap",
		}}
		ec.Members = append(ec.Members, m)
	}
	for _, m := range ec.Members {
		if err := m.Start(); err != nil {
			ec.Stop()
			return nil, err
		}
	}
	return ec, nil
}

// Start runs the member (again after Kill: same data dir).
func (m *EtcdMember) Start() error {
	return m.Process.Start(m.dir, filepath.Join(m.dir, "etcd.log"), append([]string{m.bin}, m.args...)...)
}

// Stop kills every member.
func (ec *EtcdCluster) Stop() {
	for _, m := range ec.Members {
		m.Kill()
	}
}

// Running returns the live members.
func (ec *EtcdCluster) Running() []*EtcdMember {
	var out []*EtcdMember
	for _, m := range ec.Members {
		if m.Running() {
			out = append(out, m)
		}
	}
	return out
}

var etcdStatusClient = &http.Client{Timeout: time.Second}

// etcdStatus is what POST /v3/maintenance/status says of a member (the
// JSON gateway renders the ids and indexes as strings).
type etcdStatus struct {
	Header struct {
		MemberID string `json:"member_id"`
	} `json:"header"`
	Leader           string `json:"leader"`
	RaftIndex        string `json:"raftIndex"` // the member's commit index
	RaftAppliedIndex string `json:"raftAppliedIndex"`
}

func (m *EtcdMember) fullStatus() (etcdStatus, error) {
	var st etcdStatus
	resp, err := etcdStatusClient.Post(m.Client+"/v3/maintenance/status", "application/json", strings.NewReader("{}"))
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return st, fmt.Errorf("status of %s: %w", m.Name, err)
	}
	return st, nil
}

// status is this member's id and its leader.
func (m *EtcdMember) status() (member, leader string, err error) {
	st, err := m.fullStatus()
	return st.Header.MemberID, st.Leader, err
}

// indexes is this member's commit and applied index.
func (m *EtcdMember) indexes() (raftIndex, applied uint64, err error) {
	st, err := m.fullStatus()
	if err != nil {
		return 0, 0, err
	}
	ri, err1 := strconv.ParseUint(st.RaftIndex, 10, 64)
	ai, err2 := strconv.ParseUint(st.RaftAppliedIndex, 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("status of %s: raftIndex %q raftAppliedIndex %q", m.Name, st.RaftIndex, st.RaftAppliedIndex)
	}
	return ri, ai, nil
}

// Leader waits until every running member names the same leader, which is
// one of them, and a write through it succeeds.
func (ec *EtcdCluster) Leader(timeout time.Duration) (*EtcdMember, error) {
	deadline := time.Now().Add(timeout)
	hc := &http.Client{Timeout: 2 * time.Second}
	for {
		if l := ec.agreedLeader(); l != nil {
			if EtcdWriter(l.Client)(context.Background(), hc, -1) == nil {
				return l, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("etcd: no agreed leader after %s", timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (ec *EtcdCluster) agreedLeader() *EtcdMember {
	var leader *EtcdMember
	leaderID := ""
	for _, m := range ec.Running() {
		id, l, err := m.status()
		if err != nil || l == "" || l == "0" || (leaderID != "" && l != leaderID) {
			return nil
		}
		leaderID = l
		if id == l {
			leader = m
		}
	}
	return leader
}

// EtcdWriter PUTs a small record through etcd's v3 JSON gateway at url
// (POST /v3/kv/put with base64 key and value).
func EtcdWriter(url string) Writer {
	return func(ctx context.Context, hc *http.Client, i int) error {
		key := base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "bench/%d", i))
		val := base64.StdEncoding.EncodeToString(fmt.Appendf(nil, `{"title":"bench-%d"}`, i))
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v3/kv/put",
			bytes.NewBufferString(`{"key":"`+key+`","value":"`+val+`"}`))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("etcd put: status %s: %s", resp.Status, bytes.TrimSpace(body))
		}
		if bytes.Contains(body, []byte(`"error"`)) {
			return fmt.Errorf("etcd put: %s", bytes.TrimSpace(body))
		}
		return nil
	}
}

// EtcdFailover kills the etcd leader and measures the time from the kill
// until a survivor names a new leader and until a put through a survivor
// succeeds; the member is then restarted. As for Paddock, the cluster has
// settled first: one agreed leader and every member applied what the leader
// had committed.
func EtcdFailover(ctx context.Context, ec *EtcdCluster) (FailoverTrial, error) {
	leader, err := ec.Leader(30 * time.Second)
	if err != nil {
		return FailoverTrial{}, err
	}
	if err := ec.caughtUp(ctx, leader); err != nil {
		return FailoverTrial{}, err
	}
	var writers []Writer
	var survivors []*EtcdMember
	for _, m := range ec.Running() {
		if m != leader {
			writers = append(writers, EtcdWriter(m.Client))
			survivors = append(survivors, m)
		}
	}
	oldID, _, _ := leader.status()
	start := time.Now()
	leader.Kill()
	led := firstTime(ctx, start, func() bool {
		for _, m := range survivors {
			if _, l, err := m.status(); err == nil && l != "" && l != "0" && l != oldID {
				return true
			}
		}
		return false
	})
	if err := untilWrite(ctx, writers); err != nil {
		return FailoverTrial{}, fmt.Errorf("etcd: %w", err)
	}
	t := FailoverTrial{Write: ms(time.Since(start))}
	t.Leader = <-led
	if err := leader.Start(); err != nil {
		return t, err
	}
	return t, nil
}

// caughtUp waits until every running member's applied index reached the
// leader's raft index when the wait began.
func (ec *EtcdCluster) caughtUp(ctx context.Context, leader *EtcdMember) error {
	target, _, err := leader.indexes()
	if err != nil {
		return err
	}
	return waitUntil(ctx, 60*time.Second, 10*time.Millisecond, "every etcd member to catch up", func() bool {
		for _, m := range ec.Running() {
			if _, applied, err := m.indexes(); err != nil || applied < target {
				return false
			}
		}
		return true
	})
}

// etcdReadPrefix holds the keys the read benchmark ranges over.
const etcdReadPrefix = "read/"

// EtcdSeed puts values under etcdReadPrefix (keys read/000, read/001, …).
func EtcdSeed(ctx context.Context, url string, values [][]byte) error {
	hc := &http.Client{Timeout: 10 * time.Second}
	defer hc.CloseIdleConnections()
	for i, v := range values {
		key := base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "%s%03d", etcdReadPrefix, i))
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v3/kv/put",
			bytes.NewBufferString(`{"key":"`+key+`","value":"`+base64.StdEncoding.EncodeToString(v)+`"}`))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			return fmt.Errorf("etcd seed: %w", err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || bytes.Contains(body, []byte(`"error"`)) {
			return fmt.Errorf("etcd seed: %s: %s", resp.Status, bytes.TrimSpace(body))
		}
	}
	return nil
}

// EtcdReader ranges over every key under etcdReadPrefix through the JSON
// gateway of url: a linearizable read (etcd's default, serializable=false:
// the member confirms its leadership by a ReadIndex round before it
// answers). It has the Writer shape so that RunWrites drives it.
func EtcdReader(url string, want int) Writer {
	end := []byte(etcdReadPrefix)
	end[len(end)-1]++
	body := `{"key":"` + base64.StdEncoding.EncodeToString([]byte(etcdReadPrefix)) + `","range_end":"` + base64.StdEncoding.EncodeToString(end) + `"}`
	wantCount := fmt.Appendf(nil, `"count":"%d"`, want)
	return func(ctx context.Context, hc *http.Client, _ int) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v3/kv/range", bytes.NewBufferString(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("etcd range: status %s: %s", resp.Status, bytes.TrimSpace(out))
		}
		if !bytes.Contains(out, wantCount) {
			return fmt.Errorf("etcd range: not %d keys: %.200s", want, out)
		}
		return nil
	}
}
