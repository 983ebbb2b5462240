package runtime

import (
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"golang.org/x/sys/unix"
)

// Handshake is the one handshake every Paddock runtime plugin and host share.
// ProtocolVersion is go-plugin's wire protocol version; the plugin API version
// is negotiated separately through Info (see APIVersion).
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  1,
	MagicCookieKey:   "PADDOCK_RUNTIME_PLUGIN",
	MagicCookieValue: "9c1f6a52-paddock-runtime-plugin",
}

// PluginLogFileEnv names the environment variable through which a host tells
// a plugin its log file. The host copies the plugin's stderr into that file
// while it lives; once the host is gone (stderr is a broken pipe) the plugin's
// logger appends to the file itself.
const PluginLogFileEnv = "PADDOCK_PLUGIN_LOG_FILE"

// NodeAddrEnv names the environment variable through which a host tells its
// plugins the address its node serves on (the server's bind_addr). An
// executor that other nodes must reach (agentctl's endpoint) listens there
// by default, not on loopback: every node of a cluster talks to it.
const NodeAddrEnv = "PADDOCK_NODE_ADDR"

// NodeAddr is the host's node address from NodeAddrEnv, or "127.0.0.1".
func NodeAddr() string {
	if a := os.Getenv(NodeAddrEnv); a != "" {
		return a
	}
	return "127.0.0.1"
}

// PluginLogger returns the logger a plugin should use: JSON lines on stderr,
// which go-plugin forwards into the host's log under the plugin's name. When
// stderr breaks (the host died) and PluginLogFileEnv is set, the log file
// takes stderr's place (fd 2, so panics land there too); the plugin never dies
// of SIGPIPE.
func PluginLogger(name string) hclog.Logger {
	signal.Ignore(syscall.SIGPIPE)
	return hclog.New(&hclog.LoggerOptions{
		Name:       name,
		Level:      hclog.Trace,
		Output:     &stderrLog{stderr: os.Stderr, file: os.Getenv(PluginLogFileEnv)},
		JSONFormat: true,
	})
}

// stderrLog writes to the plugin's original stderr (captured before go-plugin
// replaces os.Stderr) and, on the first write error, moves fd 2 onto the log
// file and retries there.
type stderrLog struct {
	mu     sync.Mutex
	stderr *os.File
	file   string
	moved  bool
}

func (w *stderrLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := w.stderr.Write(p); err == nil || w.moved || w.file == "" {
		return len(p), nil // a lost log line must never stop the plugin
	}
	w.moved = true
	f, err := os.OpenFile(w.file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return len(p), nil
	}
	defer f.Close()
	if unix.Dup2(int(f.Fd()), int(w.stderr.Fd())) != nil {
		_, _ = f.Write(p)
		return len(p), nil
	}
	_, _ = w.stderr.Write(p)
	return len(p), nil
}

// Serve runs impl as a runtime plugin until the host tells it to stop. It is
// the one call a plugin's main makes. Started by hand (not by a host) it
// prints a short explanation and exits 1.
func Serve(impl Runtime) {
	ServeLogger(impl, PluginLogger("runtime"))
}

// ServeLogger is Serve with the logger go-plugin itself uses.
func ServeLogger(impl Runtime, logger hclog.Logger) {
	// A host that dies closes our stderr pipe; never die of SIGPIPE because
	// of it, the executors this plugin manages outlive the host.
	signal.Ignore(syscall.SIGPIPE)
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: Handshake,
		Plugins:         plugin.PluginSet{PluginName: &GRPCPlugin{Impl: impl}},
		GRPCServer:      plugin.DefaultGRPCServer,
		Logger:          logger,
	})
}
