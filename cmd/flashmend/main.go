// Command flashmend is the single binary of the flashmend storage system. Every
// role (node, coordinator, local dev cluster, models, simulator, experiments,
// client tools) is a subcommand; see `flashmend help`.
package main

import (
	"os"

	"github.com/flashmend/flashmend/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
