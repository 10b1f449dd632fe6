package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

// Placeholder: replaced by the issue that builds "gantry bench".
func newBenchCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "bench",
		Hidden: true,
		RunE: func(*cobra.Command, []string) error {
			return errors.New("bench: not built yet")
		},
	}
}
