package agentctl

import (
	"net/http"
	"sync"
	"time"

	"github.com/paddockhq/paddock/shared/agentctl/pin"
)

// pinnedTransports holds one transport per pinned fingerprint (one per
// agentctl start), sharing the pool settings of the plain one. Every start
// makes a new key, so the map is emptied (idle connections closed) when it
// reaches maxPinnedTransports rather than growing with restarts.
var (
	pinnedMu         sync.Mutex
	pinnedTransports = map[string]*http.Transport{}
)

const maxPinnedTransports = 4096

func transportFor(fingerprint string) *http.Transport {
	if fingerprint == "" {
		return transport
	}
	pinnedMu.Lock()
	defer pinnedMu.Unlock()
	if t, ok := pinnedTransports[fingerprint]; ok {
		return t
	}
	if len(pinnedTransports) >= maxPinnedTransports {
		for _, t := range pinnedTransports {
			t.CloseIdleConnections()
		}
		pinnedTransports = map[string]*http.Transport{}
	}
	t := transport.Clone()
	t.TLSClientConfig = pin.ClientConfig(fingerprint)
	t.ForceAttemptHTTP2 = false
	pinnedTransports[fingerprint] = t
	return t
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
