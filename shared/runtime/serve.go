package runtime

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
)

// Handshake is the one handshake every Paddock runtime plugin and host share.
// ProtocolVersion is go-plugin's wire protocol version; the plugin API version
// is negotiated separately through Info (see APIVersion).
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  1,
	MagicCookieKey:   "PADDOCK_RUNTIME_PLUGIN",
	MagicCookieValue: "9c1f6a52-paddock-runtime-plugin",
}

// PluginLogger returns the logger a plugin should use: JSON lines on stderr,
// which go-plugin forwards into the host's log under the plugin's name.
func PluginLogger(name string) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:       name,
		Level:      hclog.Trace,
		Output:     os.Stderr,
		JSONFormat: true,
	})
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
