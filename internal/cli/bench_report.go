package cli

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// benchReport is what the bench subcommands' reports share.
type benchReport interface {
	WriteDir(dir string) error
	WriteTable(w io.Writer) error
}

// emitBenchReport writes the report's files into out (if set), prints it as
// one JSON object or a table, and turns an interrupted run into an error
// after printing, so the partial figures are shown and the exit code says so.
func emitBenchReport(cmd *cobra.Command, name string, rep benchReport, out string, asJSON, interrupted bool) error {
	if out != "" {
		if err := rep.WriteDir(out); err != nil {
			return err
		}
	}
	var err error
	if asJSON {
		err = json.NewEncoder(cmd.OutOrStdout()).Encode(rep)
	} else {
		err = rep.WriteTable(cmd.OutOrStdout())
	}
	if err == nil && interrupted {
		err = fmt.Errorf("%s: interrupted; the figures above are partial", name)
	}
	return err
}
