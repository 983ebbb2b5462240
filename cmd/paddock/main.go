// Command paddock is the Paddock server and CLI: `paddock server …` runs a
// server; every other subcommand is a client of the HTTP API.
package main

import (
	"os"

	"github.com/paddockhq/paddock/cli"
)

func main() {
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "server" {
		os.Exit(runServer(args[1:]))
	}
	if len(args) > 1 && (args[0] == "help" || args[0] == "-h" || args[0] == "-help" || args[0] == "--help") && args[1] == "server" {
		os.Exit(runServer([]string{"-help"}))
	}
	os.Exit(cli.Run(args, os.Stdout, os.Stderr))
}
