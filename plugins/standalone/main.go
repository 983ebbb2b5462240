// Command paddock-runtime-standalone is the standalone runtime plugin: each
// session's agentctl runs as a detached local process. Built into
// bin/plugins/ and loaded by the supervisor through go-plugin.
package main

import (
	"github.com/paddockhq/paddock/plugins/standalone/localexec"
	"github.com/paddockhq/paddock/shared/runtime"
)

func main() {
	logger := runtime.PluginLogger("standalone")
	runtime.ServeLogger(localexec.New(logger), logger)
}
