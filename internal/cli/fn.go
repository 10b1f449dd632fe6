package cli

import (
	"errors"

	"github.com/spf13/cobra"

	"gantry.dev/gantry/examples/functions/fnrun"
)

func newFnCmd() *cobra.Command {
	f := &fnrun.Flags{}
	cmd := &cobra.Command{
		Use:   "fn NAME",
		Short: "Serve one example function over HTTP in OpenFaaS of-watchdog's HTTP mode",
		Long: `Serve one example function: POST / runs it on the request body, GET /_/health
answers 200 once ready, and SIGTERM drains in-flight requests before exiting.
X-Input-Size and X-Output-Size carry input and output sizes (examples/README.md).
A listening socket passed systemd-style (LISTEN_FDS) is served instead of --addr.
The local runtime runs the slim gantry-fn binary instead of this one when it
finds it (examples/functions/cmd/gantry-fn): same flags, a faster start.`,
		Example: `  PORT=8081 gantry fn sentiment
  gantry fn image-compress --addr 127.0.0.1:8082
  gantry fn replay --app audio-translation --function speech-to-text --addr 127.0.0.1:8083
  gantry fn --list`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			err := f.Main(cmd.Context(), args, cmd.OutOrStdout(), cmd.ErrOrStderr())
			if ue := (fnrun.UsageError{}); errors.As(err, &ue) {
				return usageError{ue.Err}
			}
			return err
		},
	}
	f.Register(cmd.Flags())
	return cmd
}
