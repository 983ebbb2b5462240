package server

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/supervisor/cluster"
	"github.com/paddockhq/paddock/supervisor/config"
	"github.com/paddockhq/paddock/supervisor/state"
)

// Regression tests for the third security round's findings on joins and the
// node secret: each failed on the code before its fix.

// fakeServer answers HTTP as a Paddock server would on a join: it records
// every header it is sent and answers the proof route as the identity it
// claims, with the secret it knows ("" = it knows none and makes one up).
type fakeServer struct {
	info   cluster.PeerInfo
	secret string
	addr   string

	mu      sync.Mutex
	headers []http.Header
}

func startFakeServer(t *testing.T, id, secret string) *fakeServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// Its raft port: one nothing answers at (a listener closed at once).
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	raftAddr := dead.Addr().String()
	dead.Close()
	f := &fakeServer{secret: secret, addr: ln.Addr().String(),
		info: cluster.PeerInfo{ID: id, RaftAddr: raftAddr, HTTPAddr: ln.Addr().String(), Stats: &cluster.ServerStats{LastContact: -1}}}
	srv := &http.Server{Handler: http.HandlerFunc(f.serve)}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return f
}

func (f *fakeServer) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.headers = append(f.headers, r.Header.Clone())
	f.mu.Unlock()
	challenge := r.URL.Query().Get("challenge")
	secret := f.secret
	if secret == "" {
		secret = "a guess at the secret"
	}
	w.Header().Set("Content-Type", "application/json")
	// Every route answers as a server: the old node route and the proof.
	_ = json.NewEncoder(w).Encode(cluster.ProveAs(secret, challenge, f.info))
}

// sawSecret reports whether any request to f carried secret anywhere in its
// headers.
func (f *fakeServer) sawSecret(secret string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, h := range f.headers {
		for _, vs := range h {
			for _, v := range vs {
				if strings.Contains(v, secret) {
					return true
				}
			}
		}
	}
	return false
}

func (f *fakeServer) requests() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.headers)
}

func voters(peers []api.Peer) int {
	n := 0
	for _, p := range peers {
		if p.Suffrage == "Voter" {
			n++
		}
	}
	return n
}

// TestAddPeerNeverHandsOutTheNodeSecret (finding 1, high): with the user
// token, `operator raft add-peer ADDR` made the leader call ADDR with the
// node secret in a header; a responder that logged it and answered as a
// server was added as a voter, and the cluster lost its quorum for good.
// Now the leader sends a challenge, never the secret, and a server that
// cannot prove it knows the secret is refused.
func TestAddPeerNeverHandsOutTheNodeSecret(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	const secret = "the-clusters-own-node-secret"
	c := newTestClusterWith(t, 3, testToken, func(_ int, cfg *config.Config) { cfg.Server.ClusterSecret = secret })
	leader := c.waitLeader(-1)
	fake := startFakeServer(t, "evil", "")
	_, err := c.client(leader).AddPeer(ctx(t), fake.addr)
	if err == nil || !strings.Contains(err.Error(), "did not prove") {
		t.Fatalf("add-peer of a server that does not know the secret: %v, want refused", err)
	}
	if fake.requests() == 0 {
		t.Fatal("the leader never called the address: the test proves nothing")
	}
	if fake.sawSecret(secret) {
		t.Fatal("the leader sent the node secret to an address a user named")
	}
	peers, err := c.client(leader).RaftPeers(ctx(t))
	if err != nil || len(peers) != 3 || voters(peers) != 3 {
		t.Fatalf("peers after the refused add-peer: %+v (%v), want the three servers", peers, err)
	}
	if _, err := c.client(c.follower()).CreateTask(ctx(t), api.CreateTaskRequest{Title: "still writable"}); err != nil {
		t.Fatalf("a write after the refused add-peer: %v", err)
	}
}

// TestAServerThatDoesNotAnswerOverRaftNeverVotes (finding 1): even a server
// that knows the secret is added as a non-voter first and promoted only
// once its raft log has caught up; one whose raft address answers nothing
// stays a non-voter, so the cluster keeps its quorum.
func TestAServerThatDoesNotAnswerOverRaftNeverVotes(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	const secret = "the-clusters-own-node-secret"
	c := newTestClusterWith(t, 3, testToken, func(_ int, cfg *config.Config) { cfg.Server.ClusterSecret = secret })
	leader := c.waitLeader(-1)
	fake := startFakeServer(t, "mute", secret)
	if _, err := c.client(leader).AddPeer(ctx(t), fake.addr); err != nil {
		t.Fatalf("add-peer of a server that proves the secret: %v", err)
	}
	// Autopilot runs a round a second: give it a few to (wrongly) promote.
	deadline := time.Now().Add(4 * time.Second)
	for time.Now().Before(deadline) {
		peers, err := c.client(leader).RaftPeers(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range peers {
			if p.ID == "mute" && p.Suffrage == "Voter" {
				t.Fatalf("a server that never answered over raft became a voter: %+v", peers)
			}
		}
		if _, err := c.client(c.follower()).CreateTask(ctx(t), api.CreateTaskRequest{Title: "quorum kept"}); err != nil {
			t.Fatalf("a write with the non-voter in the configuration: %v", err)
		}
	}
}

// TestARefusedJoinKeepsTheExistingVoter (finding 2, medium): a join with the
// node secret naming an existing server's id at an address where nothing
// answers removed that server from the configuration before it found out
// the new address did not answer.
func TestARefusedJoinKeepsTheExistingVoter(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	const secret = "the-clusters-own-node-secret"
	c := newTestClusterWith(t, 3, testToken, func(_ int, cfg *config.Config) { cfg.Server.ClusterSecret = secret })
	leader := c.waitLeader(-1)
	victim := c.follower()
	id := c.cfgs[victim].NodeName
	body := fmt.Sprintf(`{"id":%q,"raft_addr":"127.0.0.1:1","http_addr":"127.0.0.1:2"}`, id)
	status, _, resp := rawCall(t, "POST", "http://"+c.servers[leader].HTTPAddr()+"/v1/internal/join", "", body,
		map[string]string{cluster.NodeSecretHeader: secret})
	if status == http.StatusOK {
		t.Fatalf("join of %s at an address nothing answers at: %d %s", id, status, resp)
	}
	peers, err := c.client(leader).RaftPeers(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range peers {
		if p.ID == id {
			if p.Address != c.cfgs[victim].RaftAddr() || p.Suffrage != "Voter" {
				t.Fatalf("%s after the refused join: %+v, want a voter at %s", id, p, c.cfgs[victim].RaftAddr())
			}
			return
		}
	}
	t.Fatalf("the refused join removed %s: peers %+v", id, peers)
}

// TestTheNodeSecretIsNotDerivedFromTheUserToken (finding 5, low): with no
// server.cluster_secret the node secret was HMAC(acl.token), so a user-token
// holder could send raw raft commands through /v1/internal/apply. A single
// server now makes a random secret and keeps it in its data dir; servers
// that join each other must be given one.
func TestTheNodeSecretIsNotDerivedFromTheUserToken(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	c := newTestCluster(t, 1, testToken)
	c.waitLeader(-1)
	m := hmac.New(sha256.New, []byte(testToken))
	m.Write([]byte("paddock node-to-node secret v1"))
	derived := hex.EncodeToString(m.Sum(nil))
	planted := encodedCommand(t, state.CmdCreateTask, &state.CreateTaskBody{Task: api.Task{ID: "planted", Title: "planted", Workspace: api.Workspace{Path: "/etc"}}})
	status, code, body := rawCall(t, "POST", "http://"+c.servers[0].HTTPAddr()+"/v1/internal/apply", "", planted,
		map[string]string{cluster.NodeSecretHeader: derived})
	if status != http.StatusUnauthorized {
		t.Fatalf("a raw command with the secret derived from the user token: %d %q %s, want 401", status, code, truncate(body))
	}
	if _, ok := c.servers[0].Node.Store().Task("planted"); ok {
		t.Fatal("a raw command was committed with a secret derived from the user token")
	}
	path := filepath.Join(c.cfgs[0].DataDir, "cluster-secret")
	st, err := os.Stat(path)
	if err != nil {
		t.Fatalf("the server kept no secret of its own: %v", err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("%s has mode %v, want 0600", path, st.Mode().Perm())
	}
	made := c.cfgs[0].Server.ClusterSecret
	if len(made) < 32 || made == derived || strings.Contains(made, testToken) {
		t.Fatalf("the secret made is %q", made)
	}
	// A restart keeps it: the file, not a new one, is the secret.
	c.cfgs[0].Server.ClusterSecret = ""
	c.stop(0)
	c.start(0)
	c.waitLeader(-1)
	if got := c.cfgs[0].Server.ClusterSecret; got != made {
		t.Fatalf("after a restart the node secret is %q, want the one kept in %s", got, path)
	}
}
