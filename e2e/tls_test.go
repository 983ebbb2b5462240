package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	wire "github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/api/termproto"
	"github.com/paddockhq/paddock/bench/harness"
	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/shared/term/termtest"
	"github.com/paddockhq/paddock/shared/testkit"
)

const tlsToken = "e2e-tls-token"

// paddockTLS runs `paddock tls ARGS…` in dir and fails the test on an error.
func paddockTLS(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "paddock"), append([]string{"tls"}, args...)...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("paddock tls %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// newTLSDir makes a CA with `paddock tls` and, signed by it, a server
// certificate for each node and one client certificate.
func newTLSDir(t *testing.T, nodes ...string) string {
	t.Helper()
	dir := t.TempDir()
	paddockTLS(t, dir, "ca", "create")
	for _, n := range nodes {
		paddockTLS(t, dir, "cert", "create", "-server", "-node", n)
	}
	paddockTLS(t, dir, "cert", "create", "-client")
	return dir
}

// tlsCLI is a CLI runner for addr over TLS with the files of dir.
func tlsCLI(t *testing.T, addr, dir string) cliRunner {
	return cliRunner{t: t, addr: addr, env: []string{"PADDOCK_TOKEN=" + tlsToken,
		"PADDOCK_CACERT=" + filepath.Join(dir, "paddock-ca.pem"),
		"PADDOCK_CLIENT_CERT=" + filepath.Join(dir, "paddock-client-0.pem"),
		"PADDOCK_CLIENT_KEY=" + filepath.Join(dir, "paddock-client-0-key.pem")}}
}

// raftPortOf reads a node's raft port from its config file.
func raftPortOf(t *testing.T, n *harness.Node) string {
	t.Helper()
	b, err := os.ReadFile(n.Config)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`raft\s*=\s*(\d+)`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no raft port in %s", n.Config)
	}
	return string(m[1])
}

// refusedHandshakes counts the TLS handshakes the cluster's APIs logged as
// failed on a certificate.
func refusedHandshakes(c *harness.Cluster) int {
	n := 0
	for _, node := range c.Nodes {
		for _, line := range strings.Split(node.Log(), "\n") {
			if strings.Contains(line, "TLS handshake error") && strings.Contains(line, "certificate") {
				n++
			}
		}
	}
	return n
}

// TestTLSClusterMadeWithPaddockTLS: a 3-node cluster whose every connection
// (API, raft, node-to-node) runs TLS with certificates made by `paddock tls`
// (verify_incoming and verify_server_hostname on): sessions, terminals and
// failover work through the CLI and the API; plain HTTP and plain raft
// connections are refused; a node whose certificate comes from another CA
// cannot join; the CLI refuses a server certificate it cannot verify.
func TestTLSClusterMadeWithPaddockTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e")
	}
	dir := newTLSDir(t, "node1", "node2", "node3")
	c := startClusterWith(t, harness.Options{Size: 3, TLSDir: dir, Token: tlsToken,
		Extra: standaloneConfig(t) + fmt.Sprintf("acl {\n  token = %q\n}\n", tlsToken)})
	leader := leaderOf(t, c)
	var follower *harness.Node
	for _, n := range c.Nodes {
		if n != leader {
			follower = n
			break
		}
	}
	api, err := client.New(follower.URL(), tlsToken, client.WithTLS(follower.TLS))
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 20*time.Second, "every node registered", testkit.Cond(func() bool {
		ns, err := api.Nodes(testCtx(t))
		return err == nil && len(ns) == 3
	}))

	// A session on the follower, made and prompted with the CLI through the
	// leader (runtime calls cross to the follower over TLS).
	taskID := strings.TrimSpace(tlsCLI(t, leader.URL(), dir).ok("-json", "task", "create", "-title", "over tls"))
	taskID = regexp.MustCompile(`"id":\s*"([^"]+)"`).FindStringSubmatch(taskID)[1]
	out := tlsCLI(t, leader.URL(), dir).ok("-json", "session", "create", "-task", taskID, "-agent", "demo", "-runtime", "standalone", "-option", "node="+follower.Name)
	sessID := regexp.MustCompile(`"id":\s*"([^"]+)"`).FindStringSubmatch(out)[1]
	if out := tlsCLI(t, leader.URL(), dir).ok("session", "prompt", sessID, "remember", "certificates"); !strings.Contains(out, "ok, remembering certificates") {
		t.Fatalf("prompt over TLS printed %q", out)
	}

	// A terminal over wss through the leader, relayed to the follower's agentctl.
	url := "wss://" + leader.HTTP + "/v1/sessions/" + sessID + "/terminal?name=shell"
	sh, resp, err := termtest.DialTLS(t, url, http.Header{"Authorization": {"Bearer " + tlsToken}}, termtest.Hello(t, termproto.Hello{Cols: 120, Rows: 40}), leader.TLS)
	if err != nil {
		t.Fatalf("terminal over wss: %v (%v)", err, resp)
	}
	sh.Timeout = 15 * time.Second
	sh.WaitMsg("attached")
	if got := shellRun(t, sh, "echo tls-$((20+22))"); got != "tls-42" {
		t.Fatalf("shell over wss printed %q", got)
	}
	sh.Close()

	// Refused: plain HTTP on the API port, plain raft on the raft port.
	if resp, err := http.Get("http://" + leader.HTTP + "/v1/health"); err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatalf("plain HTTP to the TLS API answered 200: %s", body)
		}
	}
	plain, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, 2*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	var vote raft.RequestVoteResponse
	if err := plain.RequestVote(raft.ServerID(leader.Name), raft.ServerAddress("127.0.0.1:"+raftPortOf(t, leader)),
		&raft.RequestVoteRequest{RPCHeader: raft.RPCHeader{ID: []byte("intruder"), Addr: []byte("127.0.0.1:1")}, Term: 1 << 40}, &vote); err == nil {
		t.Fatalf("a plain raft RequestVote was answered: %+v", vote)
	}

	// The CLI refuses a server whose certificate it cannot verify: with
	// another CA, and with the system's roots.
	other := newTLSDir(t, "node4")
	if code, _, errOut := tlsCLI(t, leader.URL(), other).run("status"); code == 0 || !strings.Contains(errOut, "certificate") {
		t.Fatalf("CLI trusting another CA: exit %d, %q; want a certificate error", code, errOut)
	}
	cmd := exec.Command(filepath.Join(binDir, "paddock"), "-address", leader.URL(), "-token", tlsToken, "status")
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "certificate") {
		t.Fatalf("CLI without -ca-cert: %v, %s; want a certificate error", err, out)
	}

	// A node whose certificate comes from another CA cannot join: the
	// leader cannot verify it, and it cannot verify the cluster.
	ip := "127.0.0.1"
	pair, err := testkit.FreePorts(ip, 2)
	if err != nil {
		t.Fatal(err)
	}
	httpPort, raftPort := pair[0], pair[1]
	n4dir := t.TempDir()
	var join []string
	for _, n := range c.Nodes {
		join = append(join, fmt.Sprintf("%q", n.HTTP))
	}
	cfg := fmt.Sprintf(`node_name = "node4"
data_dir  = "./data"
bind_addr = %q
ports {
  http = %d
  raft = %d
}
server {
  bootstrap_expect = 3
  retry_join       = [%s]
  cluster_secret   = "another-clusters-node-secret"
}
acl {
  token = %q
}
tls {
  ca_file   = %q
  cert_file = %q
  key_file  = %q
}
%s`, ip, httpPort, raftPort, strings.Join(join, ", "), tlsToken,
		filepath.Join(other, "paddock-ca.pem"), filepath.Join(other, "paddock-server-node4.pem"), filepath.Join(other, "paddock-server-node4-key.pem"), standaloneConfig(t))
	cfgPath := filepath.Join(n4dir, "config.hcl")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	refusedBefore := refusedHandshakes(c)
	n4 := startNode(t, "node4", n4dir, cfgPath, fmt.Sprintf("%s:%d", ip, httpPort))
	// node4's retry_join probes reach the cluster and fail their handshakes.
	testkit.WaitFor(t, 30*time.Second, "node4's join attempts to fail their handshakes", testkit.Cond(func() bool {
		return refusedHandshakes(c) > refusedBefore
	}))
	if code, _, errOut := tlsCLI(t, leader.URL(), dir).run("operator", "raft", "add-peer", n4.HTTP); code == 0 {
		t.Fatalf("add-peer of another CA's node succeeded: %s", errOut)
	}
	peers := tlsCLI(t, leader.URL(), dir).ok("operator", "raft", "list-peers")
	if strings.Contains(peers, "node4") {
		t.Fatalf("node4 joined:\n%s", peers)
	}

	// Failover: the leader is killed; the others elect a leader over TLS
	// and the session on the follower keeps its memory.
	leader.Kill()
	next, err := c.Leader(30 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if out := tlsCLI(t, next.URL(), dir).ok("session", "prompt", sessID, "recall"); !strings.Contains(out, "you asked me to remember: certificates") {
		t.Fatalf("recall after failover printed %q", out)
	}
	s, err := api.GetSession(testCtx(t), sessID)
	if err != nil || s.State != wire.SessionWaitingForInput {
		t.Fatalf("session after failover: %+v (%v)", s, err)
	}
}
