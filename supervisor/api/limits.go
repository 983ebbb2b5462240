package api

import (
	"crypto/subtle"
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/paddockhq/paddock/supervisor/cluster"
)

// The limits block (limits.max_websockets, limits.max_request_rate) keeps a
// node standing under abuse; limits.max_sessions_per_node is checked where
// sessions are created (sessions.go).

// CodeTooManyRequests is the error code of a request refused by
// limits.max_request_rate (429).
const CodeTooManyRequests = "too_many_requests"

// socketCount caps the WebSockets a node serves at once.
type socketCount struct {
	max  int64
	open atomic.Int64
}

// acquire takes a slot, or reports false when all max are taken (max 0: no cap).
func (c *socketCount) acquire() bool {
	if c.open.Add(1) > c.max && c.max > 0 {
		c.open.Add(-1)
		return false
	}
	return true
}

func (c *socketCount) release() { c.open.Add(-1) }

// rateLimit is a token bucket per client address: each refills at rate
// tokens per second up to rate, and a request takes one.
type rateLimit struct {
	rate float64

	mu        sync.Mutex
	buckets   map[string]*bucket
	lastSweep time.Time
}

type bucket struct {
	tokens float64
	last   time.Time
}

// idleBucket is how long a client's bucket is kept after its last request;
// a bucket refills in a second, so a dropped one is a full one.
const idleBucket = time.Minute

func newRateLimit(perSecond int) *rateLimit {
	if perSecond <= 0 {
		return nil
	}
	return &rateLimit{rate: float64(perSecond), buckets: map[string]*bucket{}}
}

// allow takes a token of client's bucket; when there is none it returns
// false and how long until there is.
func (l *rateLimit) allow(client string, now time.Time) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.lastSweep) > idleBucket {
		for k, b := range l.buckets {
			if now.Sub(b.last) > idleBucket {
				delete(l.buckets, k)
			}
		}
		l.lastSweep = now
	}
	b, ok := l.buckets[client]
	if !ok {
		b = &bucket{tokens: l.rate, last: now}
		l.buckets[client] = b
	}
	b.tokens = math.Min(l.rate, b.tokens+now.Sub(b.last).Seconds()*l.rate)
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) / l.rate * float64(time.Second))
}

// checkRate applies limits.max_request_rate to a request. Calls between
// nodes are not counted, and a request a peer forwarded was counted where it
// arrived.
func (s *Server) checkRate(w http.ResponseWriter, r *http.Request, flags int) error {
	if s.rate == nil || s.fromNode(r, flags) {
		return nil
	}
	client, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		client = r.RemoteAddr
	}
	ok, wait := s.rate.allow(client, time.Now())
	if ok {
		return nil
	}
	secs := max(1, int(math.Ceil(wait.Seconds())))
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	return errorf(http.StatusTooManyRequests, CodeTooManyRequests,
		"too many requests from %s: this node serves at most %d per second per client (limits.max_request_rate); retry in %s",
		client, s.cfg.Limits.MaxRequestRate, wait.Round(time.Millisecond))
}

// fromNode reports whether a request comes from one of the cluster's nodes:
// it carries the node secret, or, in an open cluster (no secret at all), it
// is for a node-to-node route or carries a forwarding hop count.
func (s *Server) fromNode(r *http.Request, flags int) bool {
	want := s.cfg.NodeSecret()
	if want == "" {
		return flags&node != 0 || r.Header.Get(hopsHeader) != ""
	}
	got := r.Header.Get(cluster.NodeSecretHeader)
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// errTooManySockets answers a WebSocket past limits.max_websockets.
func (s *Server) errTooManySockets() error {
	return errorf(http.StatusServiceUnavailable, CodeUnavailable,
		"node %s already serves %s, its limits.max_websockets; close one or connect to another node",
		s.cluster.ID(), plural(int(s.sockets.max), "WebSocket"))
}

func plural(n int, what string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", what)
	}
	return fmt.Sprintf("%d %ss", n, what)
}
