package server

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/hashicorp/raft"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/api/termproto"
	"github.com/paddockhq/paddock/certs"
	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/shared/testkit"
	"github.com/paddockhq/paddock/supervisor/config"
)

// testPKI is a CA with its certificates written to a directory.
type testPKI struct {
	t    *testing.T
	dir  string
	ca   *certs.CA
	pool *x509.CertPool
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	p, err := certs.NewCA(certs.CAOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ca, err := certs.LoadCA(p.Cert, p.Key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ca.pem"), p.Cert, 0o644); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(p.Cert)
	return &testPKI{t: t, dir: dir, ca: ca, pool: pool}
}

// sign writes a certificate and key named name and returns their paths.
func (p *testPKI) sign(name string, opts certs.CertOptions) (cert, key string) {
	p.t.Helper()
	pem, err := p.ca.Sign(opts)
	if err != nil {
		p.t.Fatal(err)
	}
	cert, key = filepath.Join(p.dir, name+".pem"), filepath.Join(p.dir, name+"-key.pem")
	if err := os.WriteFile(cert, pem.Cert, 0o644); err != nil {
		p.t.Fatal(err)
	}
	if err := os.WriteFile(key, pem.Key, 0o600); err != nil {
		p.t.Fatal(err)
	}
	return cert, key
}

// serverTLS is the tls block of node.
func (p *testPKI) serverTLS(node string) config.TLS {
	cert, key := p.sign(node, certs.CertOptions{Server: true, Node: node})
	return config.TLS{CAFile: filepath.Join(p.dir, "ca.pem"), CertFile: cert, KeyFile: key, VerifyIncoming: true, VerifyServerHostname: true}
}

// clientConfig is a TLS client configuration trusting the CA, presenting
// the certificate of opts (none when nil).
func (p *testPKI) clientConfig(opts *certs.CertOptions) *tls.Config {
	p.t.Helper()
	c := &tls.Config{RootCAs: p.pool}
	if opts != nil {
		pem, err := p.ca.Sign(*opts)
		if err != nil {
			p.t.Fatal(err)
		}
		kp, err := tls.X509KeyPair(pem.Cert, pem.Key)
		if err != nil {
			p.t.Fatal(err)
		}
		c.Certificates = []tls.Certificate{kp}
	}
	return c
}

func httpsClient(tc *tls.Config) *http.Client {
	return &http.Client{Transport: &http.Transport{TLSClientConfig: tc}, Timeout: 20 * time.Second}
}

// TestTLSClusterEveryConnection: a 3-node cluster whose API, raft and
// node-to-node calls all run TLS (verify_incoming, verify_server_hostname)
// creates sessions on any node, serves terminals and fails over; plain
// HTTP and plain raft connections are refused; a client or node without the
// right certificate gets nothing.
func TestTLSClusterEveryConnection(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	pki := newTestPKI(t)
	c := newTestClusterWith(t, 3, testToken, func(i int, cfg *config.Config) { cfg.TLS = pki.serverTLS(cfg.NodeName) })
	clientTLS := pki.clientConfig(&certs.CertOptions{})
	cl := func(i int) *client.Client {
		cl, err := client.New("https://"+c.servers[i].HTTPAddr(), testToken, client.WithHTTPClient(httpsClient(clientTLS)))
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	leader := c.waitLeader(-1)
	f := c.follower()
	testkit.WaitFor(t, 15*time.Second, "every node registered over TLS", testkit.Cond(func() bool {
		return len(c.servers[leader].Node.Store().Nodes()) == 3
	}))

	// A write through a follower (forwarded over TLS) placing a session on
	// the follower (the leader's runtime calls reach it over TLS).
	task, err := cl(f).CreateTask(ctx(t), api.CreateTaskRequest{Title: "over tls"})
	if err != nil {
		t.Fatalf("create a task through a follower: %v", err)
	}
	sess, err := cl(f).CreateSession(ctx(t), task.ID, api.CreateSessionRequest{Agent: "demo", Runtime: "standalone",
		RuntimeOptions: map[string]string{"node": c.cfgs[f].NodeName}})
	if err != nil {
		t.Fatalf("create a session on %s: %v", c.cfgs[f].NodeName, err)
	}
	testkit.WaitFor(t, 60*time.Second, "the session to wait for input", testkit.Cond(func() bool {
		s, err := cl(leader).GetSession(ctx(t), sess.ID)
		return err == nil && s.State == api.SessionWaitingForInput
	}))
	if err := cl(f).Prompt(ctx(t), sess.ID, "remember tls"); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 60*time.Second, "the reply", testkit.Cond(func() bool {
		msgs, err := cl(leader).Messages(ctx(t), sess.ID)
		return err == nil && len(msgs) == 2 && msgs[1].Text == "ok, remembering tls" && msgs[1].Complete
	}))

	// A terminal over wss.
	d := websocket.Dialer{TLSClientConfig: clientTLS, Subprotocols: []string{termproto.Subprotocol}, HandshakeTimeout: 10 * time.Second}
	ws, resp, err := d.Dial("wss://"+c.servers[leader].HTTPAddr()+"/v1/sessions/"+sess.ID+"/terminal", http.Header{"Authorization": []string{"Bearer " + testToken}})
	if err != nil {
		t.Fatalf("terminal over wss: %v (%v)", err, resp)
	}
	defer ws.Close()
	hello, _ := termproto.EncodeMessage(termproto.Hello{Cols: 80, Rows: 24})
	if err := ws.WriteMessage(websocket.TextMessage, hello); err != nil {
		t.Fatal(err)
	}
	_ = ws.SetReadDeadline(time.Now().Add(15 * time.Second))
	if _, msg, err := ws.ReadMessage(); err != nil || !bytes.Contains(msg, []byte(`"attached"`)) {
		t.Fatalf("terminal's first message: %s (%v), want attached", msg, err)
	}

	// Refused: plain HTTP to the API port, a client without a certificate
	// (verify_incoming), a client that does not trust the server's CA.
	if resp, err := http.Get("http://" + c.servers[leader].HTTPAddr() + "/v1/health"); err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatalf("plain HTTP to the TLS port answered 200: %s", body)
		}
	}
	if _, err := httpsClient(pki.clientConfig(nil)).Get("https://" + c.servers[leader].HTTPAddr() + "/v1/health"); err == nil {
		t.Fatal("a client without a certificate was served despite verify_incoming")
	}
	other := newTestPKI(t)
	if _, err := httpsClient(other.clientConfig(&certs.CertOptions{})).Get("https://" + c.servers[leader].HTTPAddr() + "/v1/health"); err == nil ||
		!strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a client trusting another CA: %v, want a certificate error", err)
	}

	// A plain raft client gets no answer from a TLS raft port.
	plain, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, 2*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	var vote raft.RequestVoteResponse
	err = plain.RequestVote(raft.ServerID(c.cfgs[leader].NodeName), raft.ServerAddress(c.cfgs[leader].RaftAddr()),
		&raft.RequestVoteRequest{RPCHeader: raft.RPCHeader{ID: []byte("intruder"), Addr: []byte("127.0.0.1:1")}, Term: 1 << 40}, &vote)
	if err == nil {
		t.Fatalf("a plain raft RequestVote was answered: %+v", vote)
	}

	// Node-to-node routes: another CA's server cannot even connect; a
	// client certificate of the right CA is not a server's; a server
	// certificate joins only under its own name.
	join := func(tc *tls.Config, id string) (int, string, error) {
		body := fmt.Sprintf(`{"id":%q,"raft_addr":"127.0.0.1:1","http_addr":"127.0.0.1:2"}`, id)
		req, _ := http.NewRequest(http.MethodPost, "https://"+c.servers[leader].HTTPAddr()+"/v1/internal/join", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Paddock-Node-Secret", c.cfgs[leader].NodeSecret())
		resp, err := httpsClient(tc).Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var e struct {
			Error struct{ Code, Message string }
		}
		_ = json.Unmarshal(b, &e)
		return resp.StatusCode, e.Error.Message, nil
	}
	otherServer := other.clientConfig(&certs.CertOptions{Server: true, Node: "n4"})
	otherServer.RootCAs = pki.pool
	if st, msg, err := join(otherServer, "n4"); err == nil {
		t.Fatalf("a server of another CA reached the join route: %d %s", st, msg)
	}
	if st, msg, err := join(pki.clientConfig(&certs.CertOptions{}), "n4"); err != nil || st != http.StatusUnauthorized {
		t.Fatalf("a join with a client certificate: %d %s (%v), want 401", st, msg, err)
	}
	if st, msg, err := join(pki.clientConfig(&certs.CertOptions{Server: true, Node: "n4"}), c.cfgs[f].NodeName); err != nil || st != http.StatusForbidden {
		t.Fatalf("server n4 joining as %s: %d %s (%v), want 403", c.cfgs[f].NodeName, st, msg, err)
	}
	if peers, err := cl(leader).RaftPeers(ctx(t)); err != nil || len(peers) != 3 {
		t.Fatalf("peers after the refused joins: %v (%v)", peers, err)
	}

	// Failover: the leader stops; the others elect one over TLS and commit.
	c.stop(leader)
	next := c.waitLeader(leader)
	if _, err := cl(next).CreateTask(ctx(t), api.CreateTaskRequest{Title: "after failover"}); err != nil {
		t.Fatalf("write after failover: %v", err)
	}
	if s, err := cl(next).GetSession(ctx(t), sess.ID); err != nil || s.ID != sess.ID {
		t.Fatalf("session after failover: %v (%v)", s, err)
	}
}
