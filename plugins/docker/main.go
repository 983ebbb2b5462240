// Command paddock-runtime-docker is the docker runtime plugin: each session's
// agentctl runs as the entry process of its own container. Built into
// bin/plugins/ and loaded by the supervisor through go-plugin.
package main

import (
	"github.com/paddockhq/paddock/plugins/docker/dockerexec"
	"github.com/paddockhq/paddock/shared/runtime"
)

func main() {
	logger := runtime.PluginLogger("docker")
	runtime.ServeLogger(dockerexec.New(logger), logger)
}
