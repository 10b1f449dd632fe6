package cli

import (
	"strings"

	"github.com/spf13/cobra"
)

// newBenchCmd is the parent of Gantry's benchmarks; each is a subcommand.
func newBenchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Run Gantry's benchmarks",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newBenchGatewayCmd())
	cmd.AddCommand(newBenchSimLiveCmd())
	cmd.AddCommand(newBenchColdStartCmd())
	// queue, orchestration and e2e need the Kubernetes libraries, so the
	// local build (build.go) has stand-ins that name make build.
	cmd.AddCommand(kubeBenchCommands()...)
	return cmd
}

func splitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}
