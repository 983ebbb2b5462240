package certs

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// Options are the settings of a `tls` block.
type Options struct {
	// CAFile is the CA certificate that signs every node's and client's.
	CAFile string
	// CertFile and KeyFile are this node's server certificate and key.
	CertFile string
	KeyFile  string
	// VerifyIncoming makes the HTTP API require a client certificate of the
	// CA from every client. Raft and the node-to-node routes always require
	// a server certificate of the CA.
	VerifyIncoming bool
	// VerifyServerHostname makes this node check, on every connection it
	// opens to a peer, that the peer's certificate is a server certificate
	// (server.NODE.paddock), and that of the node it means to reach when it
	// knows which.
	VerifyServerHostname bool
}

// TLS is a node's loaded TLS material.
type TLS struct {
	opts Options
	pool *x509.CertPool
	cert tls.Certificate
}

// Load reads the CA, the certificate and its key, and checks that the
// certificate is a server certificate of that CA for node.
func Load(opts Options, node string) (*TLS, error) {
	caPEM, err := os.ReadFile(opts.CAFile)
	if err != nil {
		return nil, fmt.Errorf("tls.ca_file: %w", err)
	}
	ca, err := parseCert(caPEM)
	if err != nil {
		return nil, fmt.Errorf("tls.ca_file %s: %w", opts.CAFile, err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	cert, err := tls.LoadX509KeyPair(opts.CertFile, opts.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("%w: tls.cert_file %s with tls.key_file %s: %v", ErrInvalid, opts.CertFile, opts.KeyFile, err)
	}
	leaf := cert.Leaf
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}); err != nil {
		return nil, fmt.Errorf("%w: tls.cert_file %s is not a server certificate signed by tls.ca_file %s: %v", ErrInvalid, opts.CertFile, opts.CAFile, err)
	}
	if got := NodeOf(leaf); got != node {
		if got == "" {
			return nil, fmt.Errorf("%w: tls.cert_file %s is not a server certificate; create one with: paddock tls cert create -server -node %s", ErrInvalid, opts.CertFile, node)
		}
		return nil, fmt.Errorf("%w: tls.cert_file %s is node %q's, not this node's (%q); create one with: paddock tls cert create -server -node %s", ErrInvalid, opts.CertFile, got, node, node)
	}
	return &TLS{opts: opts, pool: pool, cert: cert}, nil
}

// Options returns the settings t was loaded with.
func (t *TLS) Options() Options { return t.opts }

// APIConfig is the TLS configuration of the HTTP API's listener: clients
// must present a certificate of the CA when VerifyIncoming is set; one that
// presents a certificate has it verified in any case (the node-to-node
// routes need a server's).
func (t *TLS) APIConfig() *tls.Config {
	auth := tls.VerifyClientCertIfGiven
	if t.opts.VerifyIncoming {
		auth = tls.RequireAndVerifyClientCert
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{t.cert},
		ClientCAs:    t.pool,
		ClientAuth:   auth,
	}
}

// RaftConfig is the TLS configuration of the raft listener: mutual TLS, and
// the peer must be a server of the CA.
func (t *TLS) RaftConfig() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{t.cert},
		ClientCAs:    t.pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if PeerNode(&cs) == "" {
				return errors.New("raft peers must present a server certificate")
			}
			return nil
		},
	}
}

// PeerConfig is the TLS configuration of a connection this node opens to a
// peer server (raft, node-to-node calls, forwarded requests), presenting its
// own certificate. The peer's chain must lead to the CA and be fit to serve;
// with VerifyServerHostname it must be a server certificate, node's own when
// node is not "". Peers are reached by address, so the names are checked
// here rather than against the dialled host.
func (t *TLS) PeerConfig(node string) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{t.cert},
		RootCAs:      t.pool,
		// The chain and the names are verified in VerifyConnection.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			return t.verifyPeer(cs, node)
		},
	}
}

func (t *TLS) verifyPeer(cs tls.ConnectionState, node string) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("the peer presented no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	leaf := cs.PeerCertificates[0]
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: t.pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		return fmt.Errorf("the peer's certificate is not a server certificate of this cluster's CA: %w", err)
	}
	if !t.opts.VerifyServerHostname {
		return nil
	}
	got := NodeOf(leaf)
	switch {
	case got == "":
		return fmt.Errorf("the peer's certificate (%s) names no server", leaf.Subject.CommonName)
	case node != "" && got != node:
		return fmt.Errorf("the peer's certificate is server %q's, not %q's", got, node)
	}
	return nil
}

// PeerNode is the node named by the verified server certificate a TLS peer
// presented, or "" when it presented none (or a client certificate).
func PeerNode(cs *tls.ConnectionState) string {
	if cs == nil || len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return ""
	}
	return NodeOf(cs.VerifiedChains[0][0])
}

// DialedNode is the node named by the server certificate of a connection
// made with PeerConfig (which verified its chain), or "".
func DialedNode(cs *tls.ConnectionState) string {
	if cs == nil || len(cs.PeerCertificates) == 0 {
		return ""
	}
	return NodeOf(cs.PeerCertificates[0])
}
