package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

// Placeholder: replaced by the issue that builds "gantry cluster".
func newClusterCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "cluster",
		Hidden: true,
		RunE: func(*cobra.Command, []string) error {
			return errors.New("cluster: not built yet")
		},
	}
}
