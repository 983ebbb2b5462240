package cluster

import (
	"crypto/tls"
	"net"
	"net/http"
	"time"

	"github.com/hashicorp/raft"

	"github.com/paddockhq/paddock/certs"
)

// tlsStream is the raft stream layer over mutual TLS: accepted connections
// must present a server certificate of the cluster's CA (a plain TCP
// connection fails its handshake and is closed), and dialled peers must
// present one too. It wraps the hint listener, so a TLS connection's end
// still feeds the dead-leader detector.
type tlsStream struct {
	*hintListener
	server *tls.Config
	client *tls.Config
}

var _ raft.StreamLayer = (*tlsStream)(nil)

func newTLSStream(h *hintListener, t *certs.TLS) *tlsStream {
	return &tlsStream{hintListener: h, server: t.RaftConfig(), client: t.PeerConfig("")}
}

// Accept returns the next connection as a TLS server connection; its
// handshake runs on its first read, in raft's goroutine for the connection,
// so a slow or plain client never holds up the accept loop.
func (s *tlsStream) Accept() (net.Conn, error) {
	c, err := s.hintListener.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &hintConn{Conn: tls.Server(c, s.server), ended: s.ended}, nil
}

// Dial implements raft.StreamLayer: a TLS connection whose handshake is done
// within timeout.
func (s *tlsStream) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout}
	return tls.DialWithDialer(d, "tcp", string(address), s.client)
}

// peerTransport carries this node's calls to its peers' HTTP APIs (joins,
// node probes, forwarded writes) over TLS when the cluster runs TLS: the
// calls are written with http:// URLs, and this transport sends them to the
// same host as https with the node's certificate.
type peerTransport struct {
	base *http.Transport
}

func newPeerHTTP(t *certs.TLS) *http.Client {
	if t == nil {
		return &http.Client{Timeout: 5 * time.Second}
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: &peerTransport{base: &http.Transport{
		Proxy: nil, TLSClientConfig: t.PeerConfig(""), MaxIdleConnsPerHost: 16, IdleConnTimeout: 90 * time.Second,
		ForceAttemptHTTP2: false,
	}}}
}

// RoundTrip sends req over TLS.
func (p *peerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme == "http" {
		r := req.Clone(req.Context())
		r.URL.Scheme = "https"
		req = r
	}
	return p.base.RoundTrip(req)
}

// scheme is the URL scheme of the cluster's HTTP APIs.
func (n *Node) scheme() string {
	if n.cfg.TLS != nil {
		return "https"
	}
	return "http"
}
