package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"gantry.dev/gantry/pkg/coldstartbench"
)

func newBenchColdStartCmd() *cobra.Command {
	var (
		opts          = coldstartbench.DefaultOptions()
		asJSON, quiet bool
		fns, modes    string
		withGantry    bool
	)
	cmd := &cobra.Command{
		Use:   "coldstart",
		Short: "Cold starts on the local runtime: no process to the first byte of the answer, beside a minimal Go server",
		Long: "Serves each subject through Gantry's gateway on the local runtime, scaled to zero, and times a request " +
			"from sending it, when no process of the function exists, to the first byte of its answer (the gateway starts " +
			"the instance on the request's arrival). Subjects, measured side by side in rotating rounds: a minimal Go HTTP " +
			"server (built in the cache from a source the bench writes), the example functions run by the slim gantry-fn " +
			"runtime (built in the cache from the module's source) and by this binary's `gantry fn`; each with readiness " +
			"polling and with the socket passed (socket_activation). Reports p50/p99 per subject and the p50 over the floor's.",
		Example: `  gantry bench coldstart
  gantry bench coldstart --runs 200 --functions sentiment --json
  gantry bench coldstart --modes socket --gantry=false`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Functions, opts.Modes = splitList(fns), splitList(modes)
			if withGantry {
				self, err := os.Executable()
				if err != nil {
					return err
				}
				opts.Gantry = self
			}
			if opts.FnRuntime == "" {
				wd, _ := os.Getwd()
				opts.Module = coldstartbench.ModuleRoot(wd)
			}
			if err := opts.Validate(); err != nil {
				return usagef("bench coldstart: %v (run it in Gantry's source tree, or pass --fn-runtime)", err)
			}
			// Progress on stderr; with --json only when it is a terminal.
			if tty := isTerminal(os.Stderr); !quiet && (!asJSON || tty) {
				opts.Progress = cmd.ErrOrStderr()
			}
			rep, err := coldstartbench.Run(cmd.Context(), opts)
			if err != nil {
				return err
			}
			if asJSON {
				err = json.NewEncoder(cmd.OutOrStdout()).Encode(rep)
			} else {
				err = rep.WriteTable(cmd.OutOrStdout())
			}
			if err == nil && rep.Interrupted {
				err = fmt.Errorf("bench coldstart: interrupted; the figures above are partial")
			}
			return err
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usagef("bench coldstart: %v", err) })
	f := cmd.Flags()
	f.StringVar(&fns, "functions", strings.Join(opts.Functions, ","), "example functions to measure, each the first of an app's chain ('' for the floor alone)")
	f.IntVar(&opts.Runs, "runs", opts.Runs, "cold starts measured per subject and mode")
	f.StringVar(&modes, "modes", strings.Join(opts.Modes, ","), "poll (readiness polling), socket (the listening socket passed, LISTEN_FDS), or both")
	f.StringVar(&opts.Cache, "cache", coldstartbench.DefaultCache(), "where the floor server and gantry-fn are built")
	f.StringVar(&opts.FnRuntime, "fn-runtime", "", "a gantry-fn binary to measure instead of building one from the source tree")
	f.BoolVar(&withGantry, "gantry", true, "also measure the example functions run by this binary (gantry fn)")
	f.DurationVar(&opts.SampleTimeout, "sample-timeout", 30*time.Second, "bound on one cold start")
	f.BoolVar(&asJSON, "json", false, `print one JSON object {"runs","rows":[{"runtime","function","mode","samples","errors","p50_ms","p99_ms","max_ms","ready_p50_ms","warm_p50_ms","floor_ratio"}],"load_avg_1m","load_avg_1m_after","interrupted"}`)
	f.BoolVar(&quiet, "quiet", false, "no progress lines on stderr")
	return cmd
}
