// Command gantry is the single entry point: the simulator, the control plane
// for tests, the RTResource controller and the benchmarks are subcommands.
package main

import (
	"os"

	"gantry.dev/gantry/internal/cli"
)

func main() {
	os.Exit(cli.Execute())
}
