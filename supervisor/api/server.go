package api

import (
	"bufio"
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paddockhq/paddock/api"
	"github.com/paddockhq/paddock/certs"
	"github.com/paddockhq/paddock/shared/agentctl"
	"github.com/paddockhq/paddock/shared/runtime"
	"github.com/paddockhq/paddock/supervisor/cluster"
	"github.com/paddockhq/paddock/supervisor/config"
	"github.com/paddockhq/paddock/supervisor/monitor"
	"github.com/paddockhq/paddock/supervisor/nodes"
	"github.com/paddockhq/paddock/supervisor/plugins"
	"github.com/paddockhq/paddock/supervisor/state"
)

// Cluster is what the API needs from the raft node.
type Cluster interface {
	ID() string
	IsLeader() bool
	Leader() (id, httpAddr string)
	WaitForLeader(ctx context.Context) (id, httpAddr string, err error)
	Apply(ctx context.Context, typ state.CommandType, body any) (*state.Result, error)
	ApplyEncoded(ctx context.Context, data []byte) (*state.Result, error)
	WaitApplied(ctx context.Context, index uint64) error
	// ConfirmRead makes a read of Store linearizable; an error wrapping
	// cluster.ErrNotLeader means this node does not lead.
	ConfirmRead(ctx context.Context) error
	// ReadIndex is the leader's confirmed read index, for a follower's
	// CatchUp; CatchUp makes this node's Store hold every write committed
	// before the call (on a follower too).
	ReadIndex(ctx context.Context) (uint64, error)
	CatchUp(ctx context.Context) error
	Store() *state.Store
	Status() (api.ClusterStatus, error)
	Peers() ([]api.Peer, error)
	RemovePeer(id string) error
	AddPeer(ctx context.Context, httpAddr string) (cluster.PeerInfo, error)
	TransferLeadership(id string) (string, error)
	SnapshotTo(w io.Writer) error
	Restore(r io.Reader) error
	Join(ctx context.Context, p cluster.PeerInfo) error
	LocalInfo() cluster.PeerInfo
	Prove(challenge string) cluster.Proof
	// ServerHealth is the leader's autopilot view of each server (ok is
	// false on a follower or before its first round).
	ServerHealth() (map[string]cluster.ServerHealth, bool)
}

// Sessions drives session lifecycles on the leader (supervisor/sessions).
type Sessions interface {
	Start(ctx context.Context, sessionID string) error
	Resume(ctx context.Context, sessionID string) error
	Stop(ctx context.Context, sessionID string) error
	// Delete with force completes a session whose node does not answer,
	// its executor destroyed when the node answers again.
	Delete(ctx context.Context, sessionID string, force bool) error
	Prompt(ctx context.Context, sessionID, text string) error
	Cancel(ctx context.Context, sessionID string) error
	IsRunning(sessionID string) bool
	// NodeUnavailable names the node of a session's executor when that
	// node does not answer.
	NodeUnavailable(sessionID string) (string, bool)
	// WorkspaceMissing is the workspace path of a stopped or failed
	// session whose executor's plugin reports its workspace gone.
	WorkspaceMissing(ctx context.Context, sessionID string) (string, bool)
	// LeaseExpiry is the leader's live expiry of a held lease (renewals are
	// not raft writes, so the replicated expires_at is the claim's).
	LeaseExpiry(sessionID string) (time.Time, bool)
	Agentctl(sessionID string) (*agentctl.Client, error)
	// CheckRoom refuses a session no node has room for under the nodes'
	// limits.max_sessions_per_node.
	CheckRoom(ctx context.Context, sess api.Session) error
}

// Nodes is the leader's view of the cluster's nodes as executor hosts
// (supervisor/nodes).
type Nodes interface {
	Usable(runtime string) []string
	Health() []nodes.Health
}

// Plugins lists and checks the loaded runtime plugins (supervisor/plugins).
type Plugins interface {
	List() []plugins.Status
	Get(name string) (runtime.Runtime, error)
}

// Options configure the API server.
type Options struct {
	Cluster  Cluster
	Sessions Sessions
	Plugins  Plugins
	// Nodes places sessions and reports node health (nil: this node alone).
	Nodes  Nodes
	Config *config.Config
	Logger hclog.Logger
	// Registry receives the API's metrics (a new one when nil).
	Registry *prometheus.Registry
	// LogSinks lets GET /v1/monitor stream this node's logs (the server's
	// root hclog.InterceptLogger); nil: the route answers 501.
	LogSinks monitor.Sinks
	// Gatherers are more metric sources /v1/metrics serves (raft's own,
	// from supervisor/telemetry).
	Gatherers []prometheus.Gatherer
	// LeaderWait bounds how long a request waits for a leader (default 5s).
	LeaderWait time.Duration
	// TLS, when not nil, is the node's TLS material: requests are forwarded
	// over HTTPS with its certificate, and node-to-node routes require a
	// server certificate of the cluster's CA.
	TLS *certs.TLS
	// BodyTimeout bounds reading an authenticated request's body (default
	// 30s); BigBodyTimeout does for snapshot restores and other bigBody
	// routes (default 10m).
	BodyTimeout, BigBodyTimeout time.Duration
	// SocketAuthTimeout bounds how long a WebSocket that authenticates in
	// its first frame (events) or hello (terminal) has to send it (default
	// 2s).
	SocketAuthTimeout time.Duration
}

// Server is the HTTP handler of one node.
type Server struct {
	cluster    Cluster
	sessions   Sessions
	plugins    Plugins
	nodes      Nodes
	store      *state.Store
	cfg        *config.Config
	log        hclog.Logger
	mux        *http.ServeMux
	metrics    *metrics
	registry   *prometheus.Registry
	logSinks   monitor.Sinks
	leaderWait time.Duration
	transport  http.RoundTripper
	tls        *certs.TLS
	rate       *rateLimit   // limits.max_request_rate (nil: no cap)
	sockets    *socketCount // limits.max_websockets
	models     sync.Map     // session id → reportedModel of its running agent
	chats      sync.Map     // session id → chatSeen: its chat registration, as agentctl last said

	// Options.BodyTimeout, BigBodyTimeout and SocketAuthTimeout.
	bodyTimeout       time.Duration
	bigBodyTimeout    time.Duration
	socketAuthTimeout time.Duration

	// caughtUp: since it started, this node's state has once held every
	// write the cluster committed before it asked (terminalExecutor).
	caughtUp atomic.Bool
}

// Forwarding headers: the hop count bounds forwarding loops.
const (
	hopsHeader = "X-Paddock-Hops"
	maxHops    = 3
)

// route options.
const (
	local     = 1 << iota // served by any node, never forwarded
	open                  // no token needed
	bigBody               // exempt from api.max_body (snapshots)
	socket                // a WebSocket: a real upgrade may authenticate in its first frame
	node                  // node-to-node: the node secret, never the user token
	manage                // acl.token only, even to read (terminals, snapshots, profiles)
	uncounted             // not subject to limits.max_request_rate (health checks)
)

// New builds the API server.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	if opts.Registry == nil {
		opts.Registry = prometheus.NewRegistry()
	}
	if opts.LeaderWait == 0 {
		opts.LeaderWait = 5 * time.Second
	}
	if opts.BodyTimeout == 0 {
		opts.BodyTimeout = defaultBodyTimeout
	}
	if opts.BigBodyTimeout == 0 {
		opts.BigBodyTimeout = defaultBigBodyTimeout
	}
	if opts.SocketAuthTimeout == 0 {
		opts.SocketAuthTimeout = defaultSocketAuthTimeout
	}
	s := &Server{cluster: opts.Cluster, sessions: opts.Sessions, plugins: opts.Plugins, nodes: opts.Nodes, store: opts.Cluster.Store(), cfg: opts.Config, log: opts.Logger,
		mux: http.NewServeMux(), registry: opts.Registry, logSinks: opts.LogSinks, leaderWait: opts.LeaderWait,
		bodyTimeout: opts.BodyTimeout, bigBodyTimeout: opts.BigBodyTimeout, socketAuthTimeout: opts.SocketAuthTimeout,
		tls: opts.TLS}
	tr := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second}
	if opts.TLS != nil {
		tr.TLSClientConfig = opts.TLS.PeerConfig("")
	}
	s.transport = tr
	s.rate = newRateLimit(opts.Config.Limits.MaxRequestRate)
	s.sockets = &socketCount{max: int64(opts.Config.Limits.MaxWebsockets)}
	s.metrics = newMetrics(opts.Registry, opts.Gatherers, opts.Cluster, opts.Plugins)
	s.routes()
	return s
}

func (s *Server) routes() {
	s.handle("GET /v1/health", local|open|uncounted, s.health)
	s.handle("GET /v1/metrics", local, s.metricsHandler)
	s.handle("GET /v1/monitor", local|manage, s.monitorLogs)
	s.handle("GET /v1/status", 0, s.status)
	s.handle("GET /v1/operator/raft/peers", 0, s.peers)
	s.handle("POST /v1/operator/raft/peers", 0, s.addPeer)
	s.handle("DELETE /v1/operator/raft/peers/{id}", 0, s.removePeer)
	s.handle("POST /v1/operator/raft/transfer-leadership", 0, s.transferLeadership)
	// A snapshot holds every agentctl's secret: not for the read-only token.
	s.handle("GET /v1/operator/snapshot", manage, s.snapshotSave)
	s.handle("PUT /v1/operator/snapshot", bigBody, s.snapshotRestore)

	s.handle("POST /v1/tasks", 0, s.createTask)
	s.handle("GET /v1/tasks", 0, s.listTasks)
	s.handle("GET /v1/tasks/{id}", 0, s.getTask)
	s.handle("POST /v1/tasks/{id}/close", 0, s.closeTask)
	s.handle("POST /v1/tasks/{id}/reopen", 0, s.reopenTask)
	s.handle("DELETE /v1/tasks/{id}", 0, s.deleteTask)
	s.handle("POST /v1/tasks/{id}/sessions", 0, s.createSession)
	s.handle("GET /v1/sessions", 0, s.listSessions)
	s.handle("GET /v1/sessions/{id}", 0, s.getSession)
	s.handle("GET /v1/sessions/{id}/status", 0, s.sessionStatus)
	s.handle("GET /v1/sessions/{id}/messages", 0, s.messages)
	s.handle("GET /v1/sessions/{id}/lease", 0, s.lease)
	s.handle("POST /v1/sessions/{id}/stop", 0, s.stopSession)
	s.handle("DELETE /v1/sessions/{id}", 0, s.deleteSession)
	s.handle("POST /v1/sessions/{id}/resume", 0, s.resumeSession)
	s.handle("POST /v1/sessions/{id}/prompt", 0, s.prompt)
	s.handle("POST /v1/sessions/{id}/cancel", 0, s.cancel)
	s.handle("GET /v1/sessions/{id}/files", 0, s.listFiles)
	s.handle("GET /v1/sessions/{id}/files/content", 0, s.readFile)
	s.handle("PUT /v1/sessions/{id}/files/content", 0, s.writeFile)
	s.handle("GET /v1/sessions/{id}/git/status", 0, s.gitStatus)
	s.handle("GET /v1/sessions/{id}/git/diff", 0, s.gitDiff)
	s.handle("GET /v1/sessions/{id}/permissions", 0, s.listPermissions)
	s.handle("POST /v1/sessions/{id}/permissions/{pid}", 0, s.answerPermission)
	s.handle("POST /v1/sessions/{id}/mode", 0, s.setMode)
	s.handle("PUT /v1/sessions/{id}/controller", 0, s.putController)
	s.handle("DELETE /v1/sessions/{id}/controller", 0, s.deleteController)
	s.handle("GET /v1/sessions/{id}/terminals", 0, s.listTerminals)
	s.handle("POST /v1/sessions/{id}/rename", 0, s.renameSession)
	s.handle("POST /v1/sessions/{id}/pin", 0, s.pinSession)
	s.handle("GET /v1/plugins", 0, s.listPlugins)
	s.handle("GET /v1/plugins/{name}/schema", 0, s.pluginSchema)
	// Terminals are served by any node: the executor's address and secret
	// are replicated, and a WebSocket should not detour through the leader.
	s.handle("GET /v1/sessions/{id}/terminal", local|socket|manage, s.counted(streamTerminal, s.terminal))
	s.handle("GET /v1/executors", 0, s.listExecutors)
	s.handle("GET /v1/executors/{id}", 0, s.getExecutor)
	s.handle("GET /v1/agents", 0, s.agents)
	s.handle("GET /v1/events", local|socket, s.counted(streamEvents, s.events))

	// Node-to-node routes. A join reaches the leader directly (a node asks
	// the leader it knows), so none of these is forwarded.
	// Nodes probe each other here every second without a secret (autopilot):
	// not counted against limits.max_request_rate, like health checks.
	s.handle("GET "+cluster.ProofRoute, local|open|uncounted, s.internalProof)
	s.handle("POST /v1/internal/join", local|node, s.internalJoin)
	s.handle("POST /v1/internal/apply", local|node, s.internalApply)
	s.handle("GET /v1/internal/read-index", local|node, s.internalReadIndex)
	// The leader runs runtime calls for an executor in its owner's plugins.
	s.handle("POST /v1/internal/runtimes/{name}/{op}", local|node|bigBody, s.internalRuntime)
	s.handle("GET /v1/internal/plugins", local|node, s.internalPlugins)
	s.handle("GET /v1/nodes", 0, s.listNodes)

	// The web UI (ui.go): every node serves it, and the page asks for the token.
	s.handle("GET /{$}", local|open, s.uiRoot)
	s.handle("GET /ui/", local|open, s.uiAsset)
	if s.cfg.EnableDebug {
		s.debugRoutes()
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		bodyOf(r).refused(w)
		writeError(w, errorf(http.StatusNotFound, CodeNotFound, "no route for %s %s", r.Method, r.URL.Path))
	})
}

// handlerFunc is a handler that returns its error for uniform reporting.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// counted counts a WebSocket route's open streams in
// paddock_streams while its handler runs.
func (s *Server) counted(stream string, h handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		defer s.metrics.stream(stream)()
		return h(w, r)
	}
}

// handle registers a route with its middleware: request rate, authentication,
// WebSocket count, body limit, forwarding to the leader, metrics and error
// reporting.
func (s *Server) handle(pattern string, flags int, h handlerFunc) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		defer func() {
			s.metrics.observe(pattern, rec.status, time.Since(start))
		}()
		body := bodyOf(r) // before serve puts its own reader over it
		if err := s.serve(rec, r, flags, body, h); err != nil {
			body.refused(rec)
			writeError(rec, err)
		}
	})
}

// serve runs a request through the middleware to its handler. Everything
// before the handler reads only the headers: a request is refused before a
// byte of its body is read, and its body is read under a deadline only once
// it has authenticated.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, flags int, body *requestBody, h handlerFunc) error {
	if flags&uncounted == 0 {
		if err := s.checkRate(w, r, flags); err != nil {
			return err
		}
	}
	acc := fullAccess
	if flags&open == 0 {
		var err error
		if acc, err = s.authenticate(r, flags); err != nil {
			return err
		}
		if acc == readOnly && (!safeMethod(r.Method) || flags&manage != 0) {
			return errReadOnly
		}
	}
	if flags&socket != 0 && websocket.IsWebSocketUpgrade(r) {
		// A socket that authenticates in its first frame is counted
		// against limits.max_websockets only once it has (socketSlot.admit).
		slot, err := s.enterSocket(r, acc)
		if err != nil {
			return err
		}
		defer slot.release() // socket handlers return when the socket ends
		r = r.WithContext(withSocketSlot(r.Context(), slot))
	} else if flags&bigBody != 0 {
		body.setDeadline(s.bigBodyTimeout)
	} else {
		body.setDeadline(s.bodyTimeout)
	}
	if !safeMethod(r.Method) && !s.checkOrigin(r) {
		return errorf(http.StatusForbidden, CodeForbidden, "origin %q may not write to this API; add it to api.allowed_origins to allow it", r.Header.Get("Origin"))
	}
	limit := int64(s.cfg.API.MaxBody)
	if flags&bigBody != 0 {
		limit = 1 << 30
	}
	if r.ContentLength > limit {
		return errorf(http.StatusRequestEntityTooLarge, CodeTooLarge, "request body of %d bytes exceeds api.max_body (%d bytes)", r.ContentLength, limit)
	}
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	if flags&local == 0 && !isStale(r) {
		if err := s.routeToLeader(w, r, flags); !errors.Is(err, errRetryLocal) {
			return err
		}
	}
	return h(w, r)
}

// routeToLeader forwards a request to the leader, or returns errRetryLocal
// when this node leads and may serve it. A read served here is linearizable:
// the node confirms its leadership in a read round shared with concurrent
// reads (cluster.Node.ConfirmRead) and its state then holds every write
// committed before the read. A leader that learns it was deposed forwards
// the read to the new leader; one that cannot confirm answers 503. Local
// state is never served in either case.
func (s *Server) routeToLeader(w http.ResponseWriter, r *http.Request, flags int) error {
	for attempt := 0; ; attempt++ {
		if !s.cluster.IsLeader() {
			if err := s.forward(w, r); !errors.Is(err, errRetryLocal) {
				return err
			}
		}
		if !safeMethod(r.Method) || flags&socket != 0 {
			return errRetryLocal // writes are committed through raft
		}
		ctx, cancel := context.WithTimeout(r.Context(), s.leaderWait)
		err := s.cluster.ConfirmRead(ctx)
		cancel()
		switch {
		case err == nil:
			return errRetryLocal
		case errors.Is(err, cluster.ErrNotLeader) && attempt < 2:
			s.log.Debug("leadership not confirmed for a read; forwarding it", "path", r.URL.Path, "error", err)
		default:
			return errorf(http.StatusServiceUnavailable, CodeUnavailable, "cannot serve a consistent read: %v; retry, or read this node's state with ?stale=true", err)
		}
	}
}

func isStale(r *http.Request) bool {
	if r.Method != http.MethodGet {
		return false
	}
	v, _ := strconv.ParseBool(r.URL.Query().Get("stale"))
	return v
}

// access is what a request's credential allows.
type access int

const (
	fullAccess access = iota // acl.token, the node secret, or an open API
	readOnly                 // acl.read_token: reads and event streams
	firstFrame               // a WebSocket whose token is to come in its first frame or hello
)

// errReadOnly answers a write or a terminal asked for with the read-only token.
var errReadOnly = errorf(http.StatusForbidden, CodeForbidden,
	"the read-only token (acl.read_token) may read and stream events, not write, open terminals or save snapshots; use acl.token")

// authenticate checks the caller's credential for a route:
//   - node-to-node routes take only the node secret (cluster.NodeSecretHeader),
//     and with TLS on also a server certificate of the cluster's CA;
//   - every other route takes the user token (acl.token, or acl.read_token
//     for readOnly access) in a header, except that a real WebSocket upgrade
//     on a socket route may leave it out and send it in its first frame
//     (browsers cannot set headers on WebSockets); the handler then reads
//     that frame before it serves anything.
func (s *Server) authenticate(r *http.Request, flags int) (access, error) {
	if flags&node != 0 {
		if s.tls != nil && certs.PeerNode(r.TLS) == "" {
			return 0, errorf(http.StatusUnauthorized, CodeUnauthorized, "this route is for the cluster's own nodes: it needs a server certificate of the cluster's CA")
		}
		want := s.cfg.NodeSecret()
		if want == "" {
			return fullAccess, nil // an open cluster: no acl.token and no server.cluster_secret
		}
		got := r.Header.Get(cluster.NodeSecretHeader)
		if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
			return 0, errorf(http.StatusUnauthorized, CodeUnauthorized, "this route is for the cluster's own nodes: it needs the node secret, not a user token")
		}
		return fullAccess, nil
	}
	if s.cfg.ACL.Token == "" {
		return fullAccess, nil
	}
	got, present := requestToken(r)
	if !present && flags&socket != 0 && websocket.IsWebSocketUpgrade(r) {
		return firstFrame, nil // the first frame decides (firstFrameAuth, terminal hello)
	}
	if !present {
		return 0, errorf(http.StatusUnauthorized, CodeUnauthorized, "missing token: send Authorization: Bearer TOKEN or X-Paddock-Token")
	}
	acc, ok := s.tokenAccess(got)
	if !ok {
		return 0, errorf(http.StatusUnauthorized, CodeUnauthorized, "invalid token")
	}
	return acc, nil
}

// tokenAccess is what a user token allows; ok is false for an unknown token.
// Both comparisons always run, in constant time.
func (s *Server) tokenAccess(token string) (acc access, ok bool) {
	full := subtle.ConstantTimeCompare([]byte(token), []byte(s.cfg.ACL.Token)) == 1
	read := s.cfg.ACL.ReadToken != "" && subtle.ConstantTimeCompare([]byte(token), []byte(s.cfg.ACL.ReadToken)) == 1
	switch {
	case full:
		return fullAccess, true
	case read:
		return readOnly, true
	}
	return 0, false
}

// safeMethod reports whether a method only reads.
func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

func requestToken(r *http.Request) (string, bool) {
	if h := r.Header.Get("Authorization"); h != "" {
		return strings.TrimPrefix(h, "Bearer "), true
	}
	if h := r.Header.Get("X-Paddock-Token"); h != "" {
		return h, true
	}
	return "", false
}

// forward proxies a request to the leader. It waits a bounded time for a
// leader and retries while the leader it knew cannot be dialled (a request
// that never reached a server is safe to send again); the body is buffered
// for that, and is already bounded by api.max_body.
func (s *Server) forward(w http.ResponseWriter, r *http.Request) error {
	hops, _ := strconv.Atoi(r.Header.Get(hopsHeader))
	if hops >= maxHops {
		return errorf(http.StatusServiceUnavailable, CodeUnavailable, "request forwarded %d times without reaching the leader", hops)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return bodyError("request body", err)
	}
	deadline := time.Now().Add(s.leaderWait)
	for {
		ctx, cancel := context.WithDeadline(r.Context(), deadline)
		id, addr, err := s.cluster.WaitForLeader(ctx)
		cancel()
		if err != nil {
			return errorf(http.StatusServiceUnavailable, CodeUnavailable, "no cluster leader elected within %s; retry later", s.leaderWait)
		}
		if id == s.cluster.ID() {
			r.Body = io.NopCloser(bytes.NewReader(body))
			return errRetryLocal
		}
		out := r.Clone(r.Context())
		out.Body = io.NopCloser(bytes.NewReader(body))
		out.ContentLength = int64(len(body))
		out.Header.Set(hopsHeader, strconv.Itoa(hops+1))
		var proxyErr error
		s.proxy(id, addr, &proxyErr).ServeHTTP(w, out)
		if proxyErr == nil {
			return nil
		}
		if !notDialled(proxyErr) || time.Now().After(deadline) {
			return errorf(http.StatusServiceUnavailable, CodeUnavailable, "forward to leader %s at %s: %v", id, addr, proxyErr)
		}
		select {
		case <-r.Context().Done():
			return r.Context().Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// notDialled reports whether a proxy error happened before the request
// reached the other server.
func notDialled(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// errRetryLocal is returned by forward when this node became leader while
// waiting; the request is then served here.
var errRetryLocal = errors.New("this node is now the leader")

// proxy returns a reverse proxy to the leader that records a transport error
// in *errp instead of answering, so forward can retry.
func (s *Server) proxy(leader, addr string, errp *error) *httputil.ReverseProxy {
	target := &url.URL{Scheme: s.cfg.Scheme(), Host: addr}
	return &httputil.ReverseProxy{
		ModifyResponse: func(resp *http.Response) error {
			// With node identities checked, the leader must answer as itself.
			if s.tls != nil && s.tls.Options().VerifyServerHostname && certs.DialedNode(resp.TLS) != leader {
				return fmt.Errorf("leader %s answered with server %q's certificate", leader, certs.DialedNode(resp.TLS))
			}
			return nil
		},
		Transport: s.transport,
		Rewrite: func(pr *httputil.ProxyRequest) {
			// This node has checked the Host and Origin; the leader sees its
			// own address and no Origin, as for a CLI.
			pr.SetURL(target)
			pr.Out.Header.Del("Origin")
			// The node secret tells the leader the request was counted
			// against limits.max_request_rate here.
			if secret := s.cfg.NodeSecret(); secret != "" {
				pr.Out.Header.Set(cluster.NodeSecretHeader, secret)
			}
		},
		ErrorHandler: func(_ http.ResponseWriter, _ *http.Request, err error) { *errp = err },
	}
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		if v := recover(); v != nil {
			s.log.Error("handler panic", "path", r.URL.Path, "panic", fmt.Sprint(v))
			writeError(w, errorf(http.StatusInternalServerError, CodeInternal, "internal error"))
		}
	}()
	r, body := trackBody(w, r)
	if err := s.checkHost(r); err != nil {
		body.refused(w)
		writeError(w, err)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// decode reads a strict JSON body into v: unknown fields, trailing data and
// oversized bodies are errors. A request type with a hand-written reader
// (compactRequest) is read by it when the body is in its compact form.
func decode(r *http.Request, v any) error {
	if err := requireJSON(r); err != nil {
		return err
	}
	buf := bodyBuffer()
	defer releaseBodyBuffer(buf)
	if _, err := buf.ReadFrom(r.Body); err != nil {
		return bodyError("request body", err)
	}
	if c, ok := v.(compactRequest); ok && c.decodeCompact(buf.Bytes()) {
		return nil
	}
	return decodeStrict(buf.Bytes(), v)
}

// decodeStrict is decode's encoding/json reading of a body, stricter than
// encoding/json: besides unknown fields and trailing data, a key given twice
// in an object and a key that names a field only when case is ignored are
// refused (checkKeys).
func decodeStrict(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return badRequest("request body is empty; expected a JSON object")
		}
		return badRequest("invalid JSON body: %v", err)
	}
	// Only whitespace may follow (dec.More would let a stray '}' or ']' by).
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return badRequest("invalid JSON body: unexpected data after the object")
	}
	if err := checkKeys(body, reflect.TypeOf(v)); err != nil {
		return badRequest("invalid JSON body: key %v", err)
	}
	return nil
}

// compactRequest is a request body with a hand-written reader for the
// compact JSON that clients write for it.
type compactRequest interface {
	// decodeCompact sets the request from body when body is in exactly
	// that form (one that decodeStrict reads to the same value), and
	// reports whether it did; the request is unchanged when it reports
	// false.
	decodeCompact(body []byte) bool
}

// cutPlainString reads a JSON string of printable ASCII without quotes or
// backslashes (one that needs no unescaping) from the start of b.
func cutPlainString(b []byte) (s string, rest []byte, ok bool) {
	if len(b) == 0 || b[0] != '"' {
		return "", b, false
	}
	for i := 1; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return string(b[1:i]), b[i+1:], true
		case c < 0x20 || c >= 0x7f || c == '\\':
			return "", b, false
		}
	}
	return "", b, false
}

// requireJSON refuses a body declared as anything but JSON. A browser can
// send text/plain, form and multipart bodies to another site without asking
// it first, so accepting them would let any web page write to the API. A
// missing Content-Type is accepted: browsers always send one.
func requireJSON(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	if ct == "" || ct == "application/json" {
		return nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		return errorf(http.StatusUnsupportedMediaType, CodeBadRequest, "Content-Type %q is not accepted for a JSON body; send Content-Type: application/json", ct)
	}
	return nil
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController and the WebSocket upgrader reach the
// underlying writer (Hijack, Flush).
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// Hijack lets the WebSocket upgrader take over the connection.
func (r *statusRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := r.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("connection cannot be hijacked")
	}
	r.status = http.StatusSwitchingProtocols
	return h.Hijack()
}

// Flush sends buffered data (used when proxying streams).
func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
