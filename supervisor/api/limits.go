package api

import (
	"context"
	"crypto/subtle"
	"errors"
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

// maxPendingSockets caps the WebSockets one client address may hold while
// they wait for the token of their first frame or hello. Those are not
// counted against limits.max_websockets (a client without a token could
// otherwise fill it), and each is closed after Options.SocketAuthTimeout.
const maxPendingSockets = 8

// socketCount caps the WebSockets a node serves at once
// (limits.max_websockets), and those each client holds before they have
// authenticated (maxPendingSockets).
type socketCount struct {
	max  int64
	open atomic.Int64

	mu      sync.Mutex
	pending map[string]int // client address → its sockets not yet authenticated
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

// Why socketCount.enter refuses a socket.
var (
	errSocketsFull    = errors.New("limits.max_websockets reached")
	errSocketsPending = errors.New("too many sockets waiting to authenticate")
)

// enter gives a WebSocket its place: a counted slot at once when it has
// authenticated by header, else a pending one under its client's address
// until socketSlot.admit.
func (c *socketCount) enter(client string, pending bool) (*socketSlot, error) {
	if !pending {
		if !c.acquire() {
			return nil, errSocketsFull
		}
		return &socketSlot{c: c, counted: true}, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending[client] >= maxPendingSockets {
		return nil, errSocketsPending
	}
	if c.pending == nil {
		c.pending = map[string]int{}
	}
	c.pending[client]++
	return &socketSlot{c: c, client: client}, nil
}

// socketSlot is one WebSocket's place in its node's socketCount: pending for
// its client address until it authenticates, then counted. A socket's
// request and handler use it one after the other, never at once.
type socketSlot struct {
	c       *socketCount
	client  string // the client address it is pending under; "" when not pending
	counted bool
}

// admit counts an authenticated socket against limits.max_websockets; false
// when the node is at that limit, and the socket must then be closed. A nil
// slot (a handler reached without serve's middleware) admits.
func (sl *socketSlot) admit() bool {
	if sl == nil || sl.counted {
		return true
	}
	sl.leavePending()
	sl.counted = sl.c.acquire()
	return sl.counted
}

// release gives back whatever the slot holds.
func (sl *socketSlot) release() {
	sl.leavePending()
	if sl.counted {
		sl.counted = false
		sl.c.release()
	}
}

func (sl *socketSlot) leavePending() {
	if sl.client == "" {
		return
	}
	sl.c.mu.Lock()
	defer sl.c.mu.Unlock()
	if sl.c.pending[sl.client]--; sl.c.pending[sl.client] <= 0 {
		delete(sl.c.pending, sl.client)
	}
	sl.client = ""
}

type socketSlotKey struct{}

func withSocketSlot(ctx context.Context, sl *socketSlot) context.Context {
	return context.WithValue(ctx, socketSlotKey{}, sl)
}

// socketSlotOf is the slot serve gave a WebSocket request (nil if none).
func socketSlotOf(r *http.Request) *socketSlot {
	sl, _ := r.Context().Value(socketSlotKey{}).(*socketSlot)
	return sl
}

// clientAddr is the address a request came from, without its port.
func clientAddr(r *http.Request) string {
	client, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return client
}

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
	client := clientAddr(r)
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

// enterSocket gives a WebSocket request its socketSlot, or the refusal: 503
// past limits.max_websockets, 429 when its client already holds
// maxPendingSockets sockets that have not authenticated.
func (s *Server) enterSocket(r *http.Request, acc access) (*socketSlot, error) {
	client := clientAddr(r)
	sl, err := s.sockets.enter(client, acc == firstFrame)
	switch {
	case errors.Is(err, errSocketsFull):
		return nil, s.errTooManySockets()
	case errors.Is(err, errSocketsPending):
		return nil, errorf(http.StatusTooManyRequests, CodeTooManyRequests,
			"%s from %s are already waiting to authenticate; send the token in a header, or in the first frame as soon as the socket opens",
			plural(maxPendingSockets, "WebSocket"), client)
	}
	return sl, err
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
