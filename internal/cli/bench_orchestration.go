//go:build !gantry_local

package cli

import (
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"gantry.dev/gantry/pkg/orchbench"
	"gantry.dev/gantry/pkg/rtcontroller"
)

// rq1ControllerArgs makes the paper's RQ1 criticalities 1..10 critical, so
// the services reach the reserve workers and SCHED_FIFO.
const rq1ControllerArgs = "--critical-from=1 --critical-to=10"

func newBenchOrchestrationCmd() *cobra.Command {
	var (
		opts        = orchbench.DefaultOptions()
		quick       bool
		asJSON      bool
		quiet       bool
		out         string
		controllers string
		cases       string
		ctlArgs     string
		gomaxprocs  int
		kn          knativeBenchFlags
	)
	cmd := &cobra.Command{
		Use:   "orchestration",
		Short: "PREEMPT-FaaS RQ1: how fast a critical scale-up is processed under control-plane churn, Gantry beside vanilla Kubernetes",
		Long: "Starts the local control plane (etcd, kube-apiserver, kube-scheduler, kube-controller-manager, kwok) " +
			"and the Gantry controller in-process, or uses --kubeconfig. N services with criticalities 1..N are " +
			"scaled from 0 to K replicas with Knative's JSON patch while single-pod objects are created and deleted " +
			"in another namespace, and three stages of every scale-up are timed from the moment the patch returns: " +
			"starts processing, pods created, pods running and ready. docs/benchmarks.md describes each method.",
		Example: `  gantry bench orchestration --quick
  gantry bench orchestration --json --out out/bench-orchestration
  gantry bench orchestration --controllers vanilla,gantry,gantry-fifo,gantry-5 --cases continuous:45
  gantry bench orchestration --knative --quick`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyBenchFlags(cmd, &opts, &kn, quick, ctlArgs, controllers, cases); err != nil {
				return err
			}
			if opts.Knative && out != "" {
				opts.KN.AuditDir = out
			}
			app, err := controllerAppConfig(ctlArgs)
			if err != nil {
				return usagef("bench orchestration: --controller-args: %v", err)
			}
			opts.Controller = app
			if err := opts.Validate(); err != nil {
				return usagef("bench orchestration: %v", err)
			}
			if gomaxprocs < 0 {
				return usagef("bench orchestration: --gomaxprocs must not be negative, got %d", gomaxprocs)
			}
			if gomaxprocs > 0 {
				// The in-process controller sets GOMAXPROCS for the whole
				// process unless the environment names it.
				runtime.GOMAXPROCS(gomaxprocs)
				if err := os.Setenv("GOMAXPROCS", strconv.Itoa(gomaxprocs)); err != nil {
					return err
				}
			}
			if !quiet {
				opts.Progress = cmd.ErrOrStderr()
			}
			rep, err := orchbench.Run(cmd.Context(), opts)
			if err != nil {
				return err
			}
			return emitBenchReport(cmd, "bench orchestration", rep, out, asJSON, rep.Interrupted)
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usagef("bench orchestration: %v", err) })
	f := cmd.Flags()
	f.BoolVar(&quick, "quick", false, "one repetition of continuous:20 and interval:20, vanilla and gantry, 40 s iterations (under 4 minutes); with --knative interval:20 and continuous:30, 30 s iterations")
	f.StringVar(&opts.Kubeconfig, "kubeconfig", "", "use this cluster instead of starting the local control plane")
	f.IntVar(&opts.Nodes, "nodes", opts.Nodes, "kwok nodes of the local control plane")
	f.StringVar(&opts.CRDPath, "crd", opts.CRDPath, "the RTResource CRD to install (default: the one built into gantry)")
	f.StringVar(&opts.ConfigDir, "config-dir", opts.ConfigDir, "folder holding rbac/ and apf/, applied so the in-process controller runs as its service account")
	f.StringVar(&controllers, "controllers", "", "comma-separated controllers: "+strings.Join(orchbench.Controllers, ",")+" (default vanilla,gantry)")
	f.StringVar(&cases, "cases", "", "comma-separated mode:burst cases, modes interval and continuous (default the paper's six: interval:5,10,20 and continuous:15,30,45)")
	f.IntVar(&opts.Services, "services", opts.Services, "critical services, criticalities 1..N")
	f.IntVar(&opts.Replicas, "replicas", opts.Replicas, "replicas each scale-up asks for, from 0")
	f.IntVar(&opts.Repetitions, "repetitions", opts.Repetitions, "iterations per controller and case (with --knative: rounds, each running every arm once, interleaved, on a new control plane)")
	f.DurationVar(&opts.Iteration, "iteration", opts.Iteration, "length of one iteration")
	f.DurationVar(&opts.Gap, "gap", opts.Gap, "mean pause between a service's scale-down and its next scale-up")
	f.DurationVar(&opts.IntervalPeriod, "interval-period", opts.IntervalPeriod, "time between bursts in interval mode")
	f.Float64Var(&opts.ChurnRate, "churn-rate", 0, "cap continuous interference at this many objects/s for every controller (0: back to back, as fast as each controller's apiserver absorbs)")
	f.DurationVar(&opts.StageTimeout, "stage-timeout", opts.StageTimeout, "a stage not seen within this is counted as missed")
	f.Uint64Var(&opts.Seed, "seed", opts.Seed, "seed of the scale-up schedule, the same for every controller")
	f.StringVar(&ctlArgs, "controller-args", rq1ControllerArgs, "flags of `gantry controller` for the in-process Gantry controller")
	f.IntVar(&gomaxprocs, "gomaxprocs", 0, "GOMAXPROCS of this process, the in-process controller's included (0: what `gantry controller` picks, ncpu + --max-workers, unless $GOMAXPROCS is set)")
	f.BoolVar(&asJSON, "json", false, `print {"runs":[{"controller","mode","burst","stage","n","p50_ms","p95_ms","p99_ms","mean_ms","std_ms","missed"}],"reductions":[{"mode","burst","stage","median_reduction"}]}`)
	f.StringVar(&out, "out", "", "write samples.csv, summary.csv, box and CDF plots and report.md into this directory")
	f.BoolVar(&quiet, "quiet", false, "no progress lines on stderr")
	kn.register(cmd, &opts)
	return cmd
}

// applyBenchFlags applies --quick, --knative and the lists the user
// named; a --repetitions the user named wins over --quick's one (the flag
// is bound to opts, which --quick overwrites, so its value is kept first).
func applyBenchFlags(cmd *cobra.Command, opts *orchbench.Options, kn *knativeBenchFlags, quick bool, ctlArgs, controllers, cases string) error {
	reps := opts.Repetitions
	if err := applyKnativeFlags(cmd, opts, kn, quick, ctlArgs); err != nil {
		return err
	}
	if cmd.Flags().Changed("repetitions") {
		opts.Repetitions = reps
	}
	return applyOrchestrationLists(cmd, opts, controllers, cases)
}

// applyOrchestrationLists sets the controllers and cases the user named;
// with --quick, naming them overrides --quick's choice.
func applyOrchestrationLists(cmd *cobra.Command, opts *orchbench.Options, controllers, cases string) error {
	if cmd.Flags().Changed("controllers") {
		opts.Controllers = splitList(controllers)
	}

	if !cmd.Flags().Changed("cases") {
		return nil
	}
	opts.Cases = nil
	for _, c := range splitList(cases) {
		mode, burst, ok := strings.Cut(c, ":")
		n, err := strconv.Atoi(burst)
		if !ok || err != nil {
			return usagef("bench orchestration: --cases wants mode:burst, got %q", c)
		}
		opts.Cases = append(opts.Cases, orchbench.Case{Mode: mode, Burst: n})
	}
	return nil
}

// controllerAppConfig builds the controller configuration exactly as
// `gantry controller` does from the same flags.
func controllerAppConfig(args string) (rtcontroller.AppConfig, error) {
	var f controllerFlags
	cmd := &cobra.Command{Use: "controller"}
	f.register(cmd)
	if err := cmd.ParseFlags(strings.Fields(args)); err != nil {
		return rtcontroller.AppConfig{}, err
	}
	if err := f.validate(); err != nil {
		return rtcontroller.AppConfig{}, err
	}
	if f.knative || f.knativeFlagSet() != "" {
		return rtcontroller.AppConfig{}, usagef("--knative is not for the in-process controller")
	}
	return f.app, nil
}
