// Command paddock-runtime-remote is the remote runtime plugin: each session's
// agentctl runs on another machine, started through that machine's
// `agentctl host` daemon. Built into bin/plugins/ and loaded by the
// supervisor through go-plugin.
package main

import (
	"github.com/paddockhq/paddock/plugins/remote/remoteexec"
	"github.com/paddockhq/paddock/shared/runtime"
)

func main() {
	logger := runtime.PluginLogger("remote")
	runtime.ServeLogger(remoteexec.New(logger), logger)
}
