//go:build !gantry_local

package cli

import (
	"os"
	"strings"

	"github.com/spf13/cobra"

	"gantry.dev/gantry/pkg/e2ebench"
)

func newBenchE2ECmd() *cobra.Command {
	var (
		opts          = e2ebench.DefaultOptions()
		quick         bool
		asJSON        bool
		quiet         bool
		out           string
		orchestrators string
		ctlArgs       string
	)
	cmd := &cobra.Command{
		Use:   "e2e",
		Short: "PREEMPT-FaaS RQ2: a critical function's end-to-end latency under control-plane churn, Gantry beside vanilla Kubernetes",
		Long: "Starts the local control plane with one process node and kwok nodes (kube-scheduler, kube-controller-manager " +
			"with its EndpointSlice controller, and the Gantry controller in-process for the gantry run), serves the " +
			"sentiment function through the gateway with the Kubernetes backend on the process node, and drives it " +
			"with the open-loop load generator at a rate that needs a scale-up from 1 instance, while the orchestration " +
			"benchmark's create/delete churn runs on the kwok nodes. Once as a Deployment (vanilla: the real " +
			"kube-controller-manager) and once as an RTResource (gantry). docs/benchmarks.md describes the method.",
		Example: `  gantry bench e2e --quick
  gantry bench e2e --json --out out/e2e
  gantry bench e2e --mode interval --burst 45 --rate 60 --duration 2m`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if quick {
				// --quick picks the case and the length; flags named
				// beside it win.
				given := opts
				opts = opts.Quick()
				fl := cmd.Flags()
				if fl.Changed("mode") {
					opts.Mode = given.Mode
				}
				if fl.Changed("burst") {
					opts.Burst = given.Burst
				}
				if fl.Changed("duration") {
					opts.Duration = given.Duration
				}
			}
			if cmd.Flags().Changed("orchestrators") {
				opts.Orchestrators = splitList(orchestrators)
			}
			app, err := controllerAppConfig(ctlArgs)
			if err != nil {
				return usagef("bench e2e: --controller-args: %v", err)
			}
			opts.Controller = app
			self, err := os.Executable()
			if err != nil {
				return err
			}
			opts.Program = self
			if err := opts.Validate(); err != nil {
				return usagef("bench e2e: %v", err)
			}
			if !quiet {
				opts.Progress = cmd.ErrOrStderr()
			}
			rep, err := e2ebench.Run(cmd.Context(), opts)
			if err != nil {
				return err
			}
			return emitBenchReport(cmd, "bench e2e", rep, out, asJSON, rep.Interrupted)
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usagef("bench e2e: %v", err) })
	f := cmd.Flags()
	f.BoolVar(&quick, "quick", false, "continuous churn at burst 20, 45 s of load for vanilla and gantry (under 5 minutes)")
	f.StringVar(&orchestrators, "orchestrators", "", "comma-separated: "+strings.Join(e2ebench.Orchestrators, ",")+" (default both)")
	f.StringVar(&opts.Mode, "mode", opts.Mode, "churn mode: continuous or interval")
	f.IntVar(&opts.Burst, "burst", opts.Burst, "interfering objects created and deleted per burst (1..500)")
	f.DurationVar(&opts.IntervalPeriod, "interval-period", opts.IntervalPeriod, "time between bursts in interval mode")
	f.Float64Var(&opts.Rate, "rate", opts.Rate, "open-loop Poisson arrivals per second (at most 500)")
	f.DurationVar(&opts.Duration, "duration", opts.Duration, "length of the load for each orchestrator (1s..30m)")
	f.Float64Var(&opts.Size, "size", opts.Size, "input size of every request, KB (1..64; sentiment runs 25 ms + 11 ms/KB)")
	f.IntVar(&opts.MaxScale, "max-scale", opts.MaxScale, "most instances the autoscaler may start (2..20)")
	f.DurationVar(&opts.SLO, "slo", opts.SLO, "the function's SLO, for SLO compliance")
	f.IntVar(&opts.Criticality, "criticality", opts.Criticality, "the function's criticality (0..99)")
	f.IntVar(&opts.Nodes, "nodes", opts.Nodes, "kwok nodes holding the churn's pods")
	f.StringVar(&opts.CRDPath, "crd", opts.CRDPath, "the RTResource CRD to install (default: the one built into gantry)")
	f.StringVar(&opts.ConfigDir, "config-dir", opts.ConfigDir, "folder holding rbac/ and apf/, applied so the in-process controller runs as its service account")
	f.StringVar(&ctlArgs, "controller-args", rq1ControllerArgs, "flags of `gantry controller` for the in-process Gantry controller")
	f.Uint64Var(&opts.Seed, "seed", opts.Seed, "seed of the arrivals")
	f.BoolVar(&asJSON, "json", false, `print {"runs":[{"orchestrator","mode","burst","requests","errors","p50_ms","p95_ms","p99_ms","slo_compliance"}]}`)
	f.StringVar(&out, "out", "", "write samples.csv, latency.png and report.md into this directory")
	f.BoolVar(&quiet, "quiet", false, "no progress lines on stderr")
	return cmd
}
