package certs

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testCA is a CA whose certificate is written in a temporary directory.
type testCA struct {
	t   *testing.T
	dir string
	ca  *CA
	pem PEM
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	p, err := NewCA(CAOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ca, err := LoadCA(p.Cert, p.Key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ca.pem"), p.Cert, 0o644); err != nil {
		t.Fatal(err)
	}
	return &testCA{t: t, dir: dir, ca: ca, pem: p}
}

// write signs a certificate, writes it and its key beside the CA and
// returns them as a tls block's options.
func (c *testCA) write(name string, opts CertOptions) Options {
	c.t.Helper()
	p, err := c.ca.Sign(opts)
	if err != nil {
		c.t.Fatal(err)
	}
	o := Options{CAFile: filepath.Join(c.dir, "ca.pem"), CertFile: filepath.Join(c.dir, name+".pem"), KeyFile: filepath.Join(c.dir, name+"-key.pem")}
	if err := os.WriteFile(o.CertFile, p.Cert, 0o644); err != nil {
		c.t.Fatal(err)
	}
	if err := os.WriteFile(o.KeyFile, p.Key, 0o600); err != nil {
		c.t.Fatal(err)
	}
	return o
}

func (c *testCA) server(node string, verifyHostname bool) *TLS {
	c.t.Helper()
	o := c.write(node, CertOptions{Server: true, Node: node})
	o.VerifyServerHostname = verifyHostname
	tl, err := Load(o, node)
	if err != nil {
		c.t.Fatal(err)
	}
	return tl
}

// handshake runs a TLS handshake between a client and a server config over
// loopback TCP and returns the client's and the server's errors.
func handshake(t *testing.T, client, server *tls.Config) (error, error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	srvErr := make(chan error, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			srvErr <- err
			return
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		s := tls.Server(conn, server)
		err = s.Handshake()
		if err == nil {
			// A TLS 1.3 server finishes first: read until the client's verdict.
			_, err = s.Read(make([]byte, 1))
		}
		srvErr <- err
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	c := tls.Client(conn, client)
	cErr := c.Handshake()
	if cErr == nil {
		_, cErr = c.Write([]byte("x"))
		if cErr == nil {
			// The server's verdict on the client's certificate arrives after
			// the client's handshake (TLS 1.3): an alert, or nothing.
			_ = c.SetReadDeadline(time.Now().Add(time.Second))
			if _, err := c.Read(make([]byte, 1)); err != nil && !isTimeout(err) && !errors.Is(err, io.EOF) {
				cErr = err
			}
		}
	}
	conn.Close()
	return cErr, <-srvErr
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestServerCertificateNamesItsNode(t *testing.T) {
	c := newTestCA(t)
	p, err := c.ca.Sign(CertOptions{Server: true, Node: "n1", IPs: []net.IP{net.ParseIP("10.0.0.5")}, DNSNames: []string{"n1.example"}})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := parseCert(p.Cert)
	if err != nil {
		t.Fatal(err)
	}
	if NodeOf(cert) != "n1" {
		t.Fatalf("NodeOf = %q, want n1", NodeOf(cert))
	}
	for _, host := range []string{"server.n1.paddock", "localhost", "127.0.0.1", "10.0.0.5", "n1.example"} {
		if err := cert.VerifyHostname(host); err != nil {
			t.Errorf("server certificate does not cover %s: %v", host, err)
		}
	}
	if d := cert.NotAfter.Sub(cert.NotBefore); d < 364*24*time.Hour || d > 366*24*time.Hour {
		t.Errorf("lifetime %s, want a year", d)
	}
	cl, err := c.ca.Sign(CertOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ccert, _ := parseCert(cl.Cert)
	if NodeOf(ccert) != "" || len(ccert.ExtKeyUsage) != 1 || ccert.ExtKeyUsage[0] != x509.ExtKeyUsageClientAuth {
		t.Fatalf("client certificate names %q with usages %v, want no node and client auth only", NodeOf(ccert), ccert.ExtKeyUsage)
	}
	if _, err := c.ca.Sign(CertOptions{Server: true, Node: "a/b"}); err == nil {
		t.Fatal("a server certificate for node \"a/b\" was signed")
	}
}

func TestLoadRefusesWhatIsNotThisNodesServerCertificate(t *testing.T) {
	c := newTestCA(t)
	other := newTestCA(t)
	cases := []struct {
		name string
		opts func() Options
		want string
	}{
		{"another node's", func() Options { return c.write("n2", CertOptions{Server: true, Node: "n2"}) }, `node "n2"'s`},
		{"a client certificate", func() Options { return c.write("client", CertOptions{}) }, "not a server certificate"},
		{"another CA's", func() Options {
			o := other.write("n1", CertOptions{Server: true, Node: "n1"})
			o.CAFile = filepath.Join(c.dir, "ca.pem")
			return o
		}, "not a server certificate signed by"},
		{"a key of another certificate", func() Options {
			o := c.write("n1", CertOptions{Server: true, Node: "n1"})
			o.KeyFile = c.write("n1b", CertOptions{Server: true, Node: "n1"}).KeyFile
			return o
		}, "private key does not match"},
		{"a missing CA", func() Options {
			o := c.write("n1", CertOptions{Server: true, Node: "n1"})
			o.CAFile = filepath.Join(c.dir, "nope.pem")
			return o
		}, "tls.ca_file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(tc.opts(), "n1")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestPeerHandshakes(t *testing.T) {
	c := newTestCA(t)
	n1, n2 := c.server("n1", true), c.server("n2", true)
	loose := c.server("n3", false)
	other := newTestCA(t).server("n2", true)
	clientPEM, err := c.ca.Sign(CertOptions{})
	if err != nil {
		t.Fatal(err)
	}
	clientCert, err := tls.X509KeyPair(clientPEM.Cert, clientPEM.Key)
	if err != nil {
		t.Fatal(err)
	}
	asClient := &tls.Config{Certificates: []tls.Certificate{clientCert}, RootCAs: n1.pool, ServerName: "localhost"}
	// A client certificate serving: what a man in the middle holding one would do.
	clientServing := &tls.Config{Certificates: []tls.Certificate{clientCert}}

	cases := []struct {
		name           string
		client, server *tls.Config
		ok             bool
	}{
		{"raft between servers", n1.PeerConfig(""), n2.RaftConfig(), true},
		{"the node it means to reach", n1.PeerConfig("n2"), n2.RaftConfig(), true},
		{"another node than it means to reach", n1.PeerConfig("n3"), n2.RaftConfig(), false},
		{"another node, names unchecked", loose.PeerConfig("n1"), n2.RaftConfig(), true},
		{"a server of another CA", n1.PeerConfig(""), other.RaftConfig(), false},
		{"dialled by a server of another CA", other.PeerConfig(""), n2.RaftConfig(), false},
		{"a client certificate on raft", asClient, n2.RaftConfig(), false},
		{"a client certificate serving", n1.PeerConfig(""), clientServing, false},
		{"a client certificate serving, names unchecked", loose.PeerConfig(""), clientServing, false},
		{"the API without a client certificate", &tls.Config{RootCAs: n1.pool, ServerName: "localhost"}, n2.APIConfig(), true},
		{"the API with a client certificate", asClient, n2.APIConfig(), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cErr, sErr := handshake(t, tc.client, tc.server)
			if ok := cErr == nil && sErr == nil; ok != tc.ok {
				t.Fatalf("handshake: client %v, server %v; want ok=%v", cErr, sErr, tc.ok)
			}
		})
	}

	strict := c.write("n4", CertOptions{Server: true, Node: "n4"})
	strict.VerifyIncoming = true
	n4, err := Load(strict, "n4")
	if err != nil {
		t.Fatal(err)
	}
	if cErr, sErr := handshake(t, &tls.Config{RootCAs: n1.pool, ServerName: "localhost"}, n4.APIConfig()); cErr == nil && sErr == nil {
		t.Fatal("verify_incoming accepted a client without a certificate")
	}
	if cErr, sErr := handshake(t, asClient, n4.APIConfig()); cErr != nil || sErr != nil {
		t.Fatalf("verify_incoming refused a client certificate: %v %v", cErr, sErr)
	}
}
