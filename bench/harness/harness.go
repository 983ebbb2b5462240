// Package harness starts real Paddock server processes on loopback addresses
// for end-to-end tests and benchmarks: configs from a template, kill -9,
// restart from the same data_dir, and waiting for an agreed leader.
package harness

import (
	"bytes"
	crand "crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/paddockhq/paddock/shared/runtime/runtimetest"
	"github.com/paddockhq/paddock/shared/testkit"
)

// Node is one `paddock server` process.
type Node struct {
	Name   string
	Dir    string // working directory; data lives in Dir/data
	Config string // path of its config file
	HTTP   string // host:port of its API
	// Token is the API token the harness's own reads send (the config's
	// acl.token, when it has one).
	Token string
	// TLS is the client configuration of a TLS cluster (nil: plain HTTP).
	TLS *tls.Config
	bin string

	Process // the server process
}

// Cluster is a set of server processes that form one raft cluster.
type Cluster struct {
	Nodes []*Node
}

// Options shape a cluster's configs.
type Options struct {
	// Bin is the directory holding the paddock binary.
	Bin string
	// Dir is where node directories are created.
	Dir string
	// Size is 1, 3 or 5.
	Size int
	// Extra is HCL appended to every node's config.
	Extra string
	// ServerExtra is HCL added inside every node's server block (such as
	// "nice = -5"), which Extra cannot hold: a second server block is an
	// error.
	ServerExtra string
	// SeparateIPs puts node i on 127.0.0.i (else all on 127.0.0.1).
	SeparateIPs bool
	// LogLevel of the servers (default info).
	LogLevel string
	// Token is the acl.token Extra sets, if any, for the harness's reads.
	Token string
	// TLSDir, when set, holds what `paddock tls` wrote (tls.go): every node
	// runs TLS with its own server certificate, and the harness reads over
	// HTTPS with a client certificate.
	TLSDir string
}

// FreePort returns a port that was free on ip a moment ago.
func FreePort(ip string) (int, error) {
	ports, err := FreePorts(ip, 1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

// FreePorts returns n distinct ports that were free on ip a moment ago
// (testkit.FreePorts).
func FreePorts(ip string, n int) ([]int, error) { return testkit.FreePorts(ip, n) }

// Start writes configs and starts every node.
func Start(o Options) (*Cluster, error) {
	type addr struct {
		ip         string
		http, raft int
	}
	var addrs []addr
	shared, err := FreePorts("127.0.0.1", 2*o.Size) // every node's, when they share an IP
	if err != nil {
		return nil, err
	}
	for i := 1; i <= o.Size; i++ {
		ip, ports := "127.0.0.1", shared[2*(i-1):2*i]
		if o.SeparateIPs {
			ip = fmt.Sprintf("127.0.0.%d", i)
			if ports, err = FreePorts(ip, 2); err != nil {
				return nil, err
			}
		}
		addrs = append(addrs, addr{ip, ports[0], ports[1]})
	}
	if o.LogLevel == "" {
		o.LogLevel = "info"
	}
	// Servers that join each other share a node secret of their own
	// (server.cluster_secret; with acl.token, one is required).
	serverExtra := o.ServerExtra
	if o.Size > 1 && !strings.Contains(serverExtra, "cluster_secret") {
		serverExtra += fmt.Sprintf("\n  cluster_secret = %q", randomSecret())
	}
	c := &Cluster{}
	for i, a := range addrs {
		var join []string
		for j, b := range addrs {
			if j != i {
				join = append(join, fmt.Sprintf("%q", fmt.Sprintf("%s:%d", b.ip, b.http)))
			}
		}
		name := fmt.Sprintf("node%d", i+1)
		dir := filepath.Join(o.Dir, name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		cfg := fmt.Sprintf(`node_name = %q
data_dir  = "./data"
bind_addr = %q
log_level = %q
ports {
  http = %d
  raft = %d
}
server {
  bootstrap_expect = %d
  retry_join       = [%s]
%s
}
%s
%s
`, name, a.ip, o.LogLevel, a.http, a.raft, o.Size, strings.Join(join, ", "), serverExtra, o.Extra, tlsBlock(o.TLSDir, name))
		path := filepath.Join(dir, "config.hcl")
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			return nil, err
		}
		n := &Node{Name: name, Dir: dir, Config: path, HTTP: fmt.Sprintf("%s:%d", a.ip, a.http), Token: o.Token, bin: o.Bin}
		if o.TLSDir != "" {
			tc, err := clientTLS(o.TLSDir)
			if err != nil {
				return nil, err
			}
			n.TLS = tc
		}
		c.Nodes = append(c.Nodes, n)
	}
	for _, n := range c.Nodes {
		if err := n.Start(); err != nil {
			c.Stop()
			return nil, err
		}
	}
	return c, nil
}

// NewNode describes a server process run from its own config file in dir;
// httpAddr is the API address that config sets. Call Start to run it.
func NewNode(bin, name, dir, config, httpAddr string) *Node {
	return &Node{Name: name, Dir: dir, Config: config, HTTP: httpAddr, bin: bin}
}

// Start runs the node's process (again, after Kill: same data_dir).
func (n *Node) Start() error {
	return n.Process.Start(n.Dir, filepath.Join(n.Dir, "server.log"), filepath.Join(n.bin, "paddock"), "server", "-config", n.Config)
}

// Log returns the node's server log.
func (n *Node) Log() string {
	b, _ := os.ReadFile(filepath.Join(n.Dir, "server.log"))
	return string(b)
}

// URL is the node's API base URL.
func (n *Node) URL() string {
	if n.TLS != nil {
		return "https://" + n.HTTP
	}
	return "http://" + n.HTTP
}

// Stop kills every node.
func (c *Cluster) Stop() {
	for _, n := range c.Nodes {
		n.Kill()
	}
}

var quick = &http.Client{Timeout: time.Second}

// Leads asks the node's GET /v1/health whether it leads.
func (n *Node) Leads() (leader bool, err error) {
	resp, err := n.quick().Get(n.URL() + "/v1/health")
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	var h struct {
		Leader bool `json:"leader"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		return false, err
	}
	return h.Leader, nil
}

// leaderHTTP is what a node believes the leader's API is (stale read).
func (n *Node) leaderHTTP() string {
	req, err := http.NewRequest(http.MethodGet, n.URL()+"/v1/status?stale=true", nil)
	if err != nil {
		return ""
	}
	if n.Token != "" {
		req.Header.Set("Authorization", "Bearer "+n.Token)
	}
	resp, err := n.quick().Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var st struct {
		LeaderHTTP string `json:"leader_http"`
	}
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	_ = json.Unmarshal(buf.Bytes(), &st)
	return st.LeaderHTTP
}

// ErrTimeout is returned when a wait ends without its condition.
var ErrTimeout = errors.New("timed out")

// Leader waits until exactly one running node leads and every running node
// agrees on it.
func (c *Cluster) Leader(timeout time.Duration) (*Node, error) {
	deadline := time.Now().Add(timeout)
	for {
		if l := c.agreedLeader(); l != nil {
			return l, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no agreed leader after %s: %w", timeout, ErrTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (c *Cluster) agreedLeader() *Node {
	var leader *Node
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		isLeader, err := n.Leads()
		if err != nil {
			return nil
		}
		if isLeader {
			if leader != nil {
				return nil
			}
			leader = n
		}
	}
	if leader == nil {
		return nil
	}
	for _, n := range c.Nodes {
		if n.Running() && n.leaderHTTP() != leader.URL() {
			return nil
		}
	}
	return leader
}

// Running returns the nodes whose process is alive.
func (c *Cluster) Running() []*Node {
	var out []*Node
	for _, n := range c.Nodes {
		if n.Running() {
			out = append(out, n)
		}
	}
	return out
}

// KillProcessesUnder kills (SIGKILL) every process that works in, runs
// from or names one of dirs, and their descendants: the plugin and agentctl
// processes a cluster started, which outlive their supervisor by design.
// It is runtimetest.KillProcessesUnder, for the benchmarks' runs.
func KillProcessesUnder(dirs ...string) {
	runtimetest.KillProcessesUnder(dirs...)
}

// randomSecret is a fresh server.cluster_secret.
func randomSecret() string {
	b := make([]byte, 24)
	if _, err := crand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}
