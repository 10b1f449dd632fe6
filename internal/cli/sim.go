package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

// Placeholder: replaced by the issue that builds "gantry sim".
func newSimCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "sim",
		Hidden: true,
		RunE: func(*cobra.Command, []string) error {
			return errors.New("sim: not built yet")
		},
	}
}
