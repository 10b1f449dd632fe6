package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

// Placeholder: replaced by the issue that builds "gantry controller".
func newControllerCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "controller",
		Hidden: true,
		RunE: func(*cobra.Command, []string) error {
			return errors.New("controller: not built yet")
		},
	}
}
