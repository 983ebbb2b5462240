package agentctl

import (
	"net/http"
	"sync"
	"time"

	"github.com/paddockhq/paddock/shared/agentctl/pin"
)

// pinnedTransports holds one transport per pinned fingerprint (one per
// agentctl start), sharing the pool settings of the plain one.
var pinnedTransports sync.Map // fingerprint → *http.Transport

func transportFor(fingerprint string) *http.Transport {
	if fingerprint == "" {
		return transport
	}
	if t, ok := pinnedTransports.Load(fingerprint); ok {
		return t.(*http.Transport)
	}
	t := transport.Clone()
	t.TLSClientConfig = pin.ClientConfig(fingerprint)
	t.ForceAttemptHTTP2 = false
	actual, _ := pinnedTransports.LoadOrStore(fingerprint, t)
	return actual.(*http.Transport)
}

// NewPinnedClient is NewClient for an agentctl serving TLS (an https URL)
// whose certificate has the given fingerprint; any other certificate, a
// man in the middle's included, is refused before a request is sent.
//
// An empty fingerprint is NewClient (a plain-HTTP agentctl).
func NewPinnedClient(baseURL, secret, fingerprint string, timeout time.Duration) *Client {
	c := NewClient(baseURL, secret, timeout)
	c.hc = &http.Client{Transport: transportFor(fingerprint)}
	return c
}
