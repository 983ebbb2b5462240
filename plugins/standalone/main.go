// Command paddock-runtime-standalone is the standalone runtime plugin: each
// session's agentctl runs as a detached local process. Built into
// bin/plugins/ and loaded by the supervisor through go-plugin.
package main

import (
	"github.com/paddockhq/paddock/plugins/standalone/localexec"
	"github.com/paddockhq/paddock/shared/nice"
	"github.com/paddockhq/paddock/shared/runtime"
)

func main() {
	logger := runtime.PluginLogger("standalone")
	// The plugin leads a session of its own, and the agentctls it starts
	// stay in it (each in a process group of its own): where Linux
	// schedules by session (autogrouping), this node's agentctls then weigh
	// as one scheduling group against the server, as a service manager's
	// slice would, instead of each weighing as much as the whole server.
	if err := nice.LeadSession(); err != nil {
		logger.Warn("agentctls will each run in a scheduling group of their own", "error", err)
	}
	runtime.ServeLogger(localexec.New(logger), logger)
}
