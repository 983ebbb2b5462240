// Package server wires one Paddock server together: replicated state, the
// raft node, the HTTP API and the leader-only work, and runs it until its
// context ends. It is the only place that knows every supervisor package.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paddockhq/paddock/certs"
	"github.com/paddockhq/paddock/supervisor/api"
	"github.com/paddockhq/paddock/supervisor/cluster"
	"github.com/paddockhq/paddock/supervisor/config"
	"github.com/paddockhq/paddock/supervisor/monitor"
	"github.com/paddockhq/paddock/supervisor/nodes"
	"github.com/paddockhq/paddock/supervisor/plugins"
	"github.com/paddockhq/paddock/supervisor/recovery"
	"github.com/paddockhq/paddock/supervisor/sessions"
	"github.com/paddockhq/paddock/supervisor/state"
	"github.com/paddockhq/paddock/supervisor/telemetry"
)

// Server is a running Paddock server.
type Server struct {
	Config   *config.Config
	Node     *cluster.Node
	API      *api.Server
	Plugins  *plugins.Manager
	Sessions *sessions.Manager
	Recovery *recovery.Recovery
	Nodes    *nodes.Nodes

	log      hclog.Logger
	listener net.Listener
	http     *http.Server
	done     chan error
	// destroyAtExit: Shutdown destroys this node's executors first
	// (DestroyExecutorsAtExit).
	destroyAtExit atomic.Bool
}

// Start opens the data dir, starts raft and serves the HTTP API. The HTTP
// listener is bound before raft starts so peers can reach this node at once.
func Start(cfg *config.Config, log hclog.Logger) (*Server, error) {
	// Raft reports its metrics through go-metrics' global sink: install it
	// before raft starts.
	var gatherers []prometheus.Gatherer
	if raftMetrics, err := telemetry.Raft(); err != nil {
		log.Warn("raft metrics are not exported", "error", err)
	} else {
		gatherers = append(gatherers, raftMetrics)
	}
	// Plugins first: a plugin that refuses its config block stops the start
	// before anything else happens (exit 1 with HCL diagnostics).
	pm, err := plugins.New(plugins.Options{Dir: cfg.PluginDir, DataDir: cfg.DataDir, NodeAddr: cfg.BindAddr, Plugins: cfg.Plugins, Logger: log.Named("plugins")})
	if err != nil {
		return nil, err
	}
	if err := pm.Start(context.Background()); err != nil {
		return nil, err
	}
	tlsFiles, err := loadTLS(cfg)
	if err != nil {
		pm.Close()
		return nil, err
	}
	made, err := ensureClusterSecret(cfg)
	if err != nil {
		pm.Close()
		return nil, err
	}
	warnMadeSecret(cfg, made, log)
	ln, err := net.Listen("tcp", cfg.HTTPAddr())
	if err != nil {
		pm.Close()
		return nil, fmt.Errorf("listen on %s: %w", cfg.HTTPAddr(), err)
	}
	if tlsFiles != nil {
		// HTTPS only: a plain request gets the TLS server's 400 and nothing else.
		ln = tls.NewListener(ln, tlsFiles.APIConfig())
	}
	// Requests wait this long for a leader before answering 503: long enough
	// for several elections with the configured timing.
	leaderWait := max(3*time.Second, 10*cfg.Server.ElectionTimeout)
	node, err := cluster.New(cluster.Config{
		NodeID:             cfg.NodeName,
		DataDir:            cfg.DataDir,
		RaftAddr:           cfg.RaftAddr(),
		HTTPAddr:           ln.Addr().String(),
		BootstrapExpect:    cfg.Server.BootstrapExpect,
		RetryJoin:          cfg.Server.RetryJoin,
		HeartbeatTimeout:   cfg.Server.HeartbeatTimeout,
		ElectionTimeout:    cfg.Server.ElectionTimeout,
		LeaderLeaseTimeout: cfg.Server.LeaderLeaseTimeout,
		NodeSecret:         cfg.NodeSecret(),
		TLS:                tlsFiles,
		LeaderWait:         leaderWait,
		CleanupDeadServers: cfg.Server.CleanupDeadServers,
		RaftStore:          cfg.Server.RaftStore,
		Logger:             log.Named("cluster"),
	}, state.NewStore())
	if err != nil {
		ln.Close()
		pm.Close()
		return nil, err
	}
	s := &Server{Config: cfg, Node: node, Plugins: pm, log: log, listener: ln, done: make(chan error, 1)}
	// Every node is also an executor host: the leader reaches the plugin
	// that owns an executor through Nodes, and watches which nodes answer.
	s.Nodes = nodes.New(nodes.Options{Self: cfg.NodeName, Store: node.Store(), Plugins: pm, MaxSessions: cfg.Limits.MaxSessionsPerNode, Secret: cfg.NodeSecret(), TLS: tlsFiles, Logger: log.Named("nodes")})
	node.OnLeader(s.Nodes.Watch)
	s.Sessions = sessions.New(sessions.Options{Cluster: node, Nodes: s.Nodes, Config: cfg, Logger: log.Named("sessions")})
	node.OnLeader(s.Sessions.Run)
	// After its recovery pass the leader removes executors no executor row
	// owns (runtimes with runtime.Reconciler), then every 10 minutes.
	s.Recovery = recovery.New(node.Store(), s.Sessions, cfg, log.Named("recovery")).WithOrphans(recovery.OrphanOptions{Runtimes: pm})
	s.Sessions.OnAwaitingRecovery(s.Recovery.Expedite)
	node.OnLeader(s.Recovery.Run)
	// The leader logs each session's lifecycle once for the cluster.
	node.OnLeader(func(ctx context.Context) {
		monitor.LogLifecycle(ctx, node.Store(), log.Named("sessions"), cluster.LeaderSince(ctx))
	})
	// Sessions that waited for their node come back when it answers again.
	s.Nodes.OnUp(s.Recovery.RecoverNode)
	registry := prometheus.NewRegistry()
	registry.MustRegister(s.Recovery.Collectors()...)
	registry.MustRegister(telemetry.RaftLog(node.Raft(), node.RaftStore(), node.LogStoreBytes)...)
	registry.MustRegister(telemetry.BuildInfo(""))
	s.API = api.New(api.Options{Cluster: node, Sessions: s.Sessions, Plugins: pm, Nodes: s.Nodes, Config: cfg, Logger: log.Named("api"),
		LeaderWait: leaderWait, Registry: registry, Gatherers: gatherers, LogSinks: logSinks(log), TLS: tlsFiles})
	s.http = &http.Server{Handler: s.API, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, ErrorLog: log.Named("http").StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true})}
	if cfg.ACL.Token == "" {
		log.Warn("acl.token is not set: the HTTP API is open to anyone who can reach " + ln.Addr().String())
	}
	go func() {
		err := s.http.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		s.done <- err
	}()
	node.Start()
	log.Info("server started", "node", cfg.NodeName, "http", cfg.Scheme()+"://"+ln.Addr().String(), "raft", cfg.RaftAddr(), "data_dir", cfg.DataDir)
	return s, nil
}

// logSinks is where `paddock monitor` streams attach: the root logger when
// it is an hclog.InterceptLogger (as cmd/paddock builds it), else nil.
func logSinks(log hclog.Logger) monitor.Sinks {
	if il, ok := log.(hclog.InterceptLogger); ok {
		return il
	}
	return nil
}

// loadTLS reads the tls block's files (nil when TLS is off).
func loadTLS(cfg *config.Config) (*certs.TLS, error) {
	if !cfg.TLS.Enabled() {
		return nil, nil
	}
	t, err := certs.Load(certs.Options{
		CAFile: cfg.TLS.CAFile, CertFile: cfg.TLS.CertFile, KeyFile: cfg.TLS.KeyFile,
		VerifyIncoming: cfg.TLS.VerifyIncoming, VerifyServerHostname: cfg.TLS.VerifyServerHostname,
	}, cfg.NodeName)
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	return t, nil
}

// HTTPAddr is the address the API listens on.
func (s *Server) HTTPAddr() string { return s.listener.Addr().String() }

// Wait blocks until ctx ends or the HTTP server fails, then shuts down.
func (s *Server) Wait(ctx context.Context) error {
	var err error
	select {
	case <-ctx.Done():
	case err = <-s.done:
	}
	if serr := s.Shutdown(); err == nil {
		err = serr
	}
	return err
}

// Shutdown stops the API and raft.
func (s *Server) Shutdown() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.http.Shutdown(ctx)
	if s.destroyAtExit.Load() {
		s.destroyExecutors(context.Background())
	}
	err := s.Node.Shutdown()
	// Plugin processes stop with the server; the executors they launched
	// are detached and keep running for the next start to recover.
	s.Plugins.Close()
	s.log.Info("server stopped")
	return err
}
