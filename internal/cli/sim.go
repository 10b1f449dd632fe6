package cli

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"gantry.dev/gantry/pkg/experiment"
	"gantry.dev/gantry/pkg/policy"
	"gantry.dev/gantry/pkg/report"
	"gantry.dev/gantry/pkg/sim"
	"gantry.dev/gantry/pkg/trace"
	"gantry.dev/gantry/pkg/workload"
)

type simFlags struct {
	app, dist, trace, traceFile, azureFunction string
	rate, peak, minSize, maxSize               float64
	duration, largeDuration, coldStart         time.Duration
	policies, out, experiment                  string
	seed                                       uint64
	nodes, coresPerNode, workers, maxQueue     int
	execDist                                   string
	execMean                                   time.Duration
	json                                       bool
	coldStartDist                              string
	keepAlive                                  time.Duration
	coldBoot                                   bool
	idleTimeout                                time.Duration
	sloTarget                                  float64
	sloCurve                                   string
	frontier                                   string
	predictedLead                              time.Duration
}

func newSimCmd() *cobra.Command {
	f := &simFlags{}
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Simulate policies on an app, input-size distribution and trace, or run the paper's experiment matrix",
		Example: `  gantry sim --app image-compression --dist light --trace wiki --policies atoll,cypress,gantry
  gantry sim --app audio-translation --trace-file examples/load.csv --json
  gantry sim --experiment paper --out out/paper`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.experiment != "" {
				return runPaper(cmd, f)
			}
			return runSim(cmd, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.app, "app", "image-compression", fmt.Sprintf("app to simulate %v, or %s (one function from --exec-dist and --exec-mean)", workload.Names(), workload.SyntheticApp))
	fl.StringVar(&f.execDist, "exec-dist", "exp", fmt.Sprintf("with --app synthetic: execution-time distribution %v", workload.SyntheticDists()))
	fl.DurationVar(&f.execMean, "exec-mean", 100*time.Millisecond, "with --app synthetic: mean execution time")
	fl.StringVar(&f.dist, "dist", "heavy", fmt.Sprintf("input-size distribution %v", workload.DistNames()))
	fl.StringVar(&f.trace, "trace", "poisson", fmt.Sprintf("arrival trace generator %v", trace.Names()))
	fl.StringVar(&f.traceFile, "trace-file", "", "replay arrivals from a file: per-second counts (CSV) or the Azure Functions 2019 per-minute format")
	fl.StringVar(&f.azureFunction, "azure-function", "", "HashFunction to replay from an Azure Functions file (default: all rows summed)")
	fl.Float64Var(&f.rate, "rate", experiment.PoissonRate, "mean request rate (requests/s); with --trace-file, rescales the file to this mean")
	fl.Float64Var(&f.peak, "peak", 0, "rescale the trace so that its peak is this rate (requests/s)")
	fl.Float64Var(&f.minSize, "min-size", 0, "smallest first-function input size, in the app's unit (default: the app's)")
	fl.Float64Var(&f.maxSize, "max-size", 0, "largest first-function input size; the SLO follows it (default: the app's)")
	fl.DurationVar(&f.duration, "duration", 10*time.Minute, "simulated time; with --experiment, per real-scale run")
	fl.DurationVar(&f.largeDuration, "large-duration", experiment.DefaultPaperLargeDuration, "with --experiment paper: simulated time of each large-scale run")
	fl.StringVar(&f.policies, "policies", "all", fmt.Sprintf("comma list of policies %v, or all", policy.Names()))
	fl.Uint64Var(&f.seed, "seed", 1, "random seed; the same seed gives the same results")
	fl.IntVar(&f.nodes, "nodes", sim.DefaultNodes, "cluster nodes")
	fl.IntVar(&f.coresPerNode, "cores-per-node", sim.DefaultCoresPerNode, "cores per node (one container per core)")
	fl.DurationVar(&f.coldStart, "cold-start", sim.DefaultColdStart, "container cold-start time")
	fl.StringVar(&f.coldStartDist, "cold-start-dist", "const", fmt.Sprintf("distribution of each cold start %v, with mean --cold-start (not const: no bound column, no oracle)", sim.ColdStartDists()))
	fl.DurationVar(&f.keepAlive, "keep-alive", policy.CommercialKeepAlive, "commercial's keep-alive: an idle instance expires this long after its last request (needs commercial in --policies)")
	fl.DurationVar(&f.idleTimeout, "idle-timeout", sim.DefaultIdleTimeout, "stop an instance idle this long, whatever the policy says (gantry serve's --idle-timeout; gantry up uses 30s)")
	fl.Float64Var(&f.sloTarget, "slo-target", 100*policy.DefaultSLOTarget, "percent of requests that must meet the SLO: gantry sizes each function for it")
	fl.StringVar(&f.sloCurve, "slo-curve", "", "comma list of SLO targets in percent (e.g. 90,99,99.9,99.99): run the one policy of --policies once per target and write slo-curve.json and slo-curve.png into --out")
	fl.StringVar(&f.frontier, "frontier", "", "comma list of headrooms in percent (e.g. -20,-10,0,10; negative under-sizes): the online frontier at --slo-target: the oracle, the best fixed pool reaching it, and oracle-predicted (the one policy of --policies) told the rate raised by each headroom; prints a table, and writes frontier.json into --out if given")
	fl.DurationVar(&f.predictedLead, "predicted-lead", 0, "with --frontier: oracle-predicted is told each second's rate as the highest within this lead (e.g. the cold start)")
	fl.BoolVar(&f.coldBoot, "cold-boot", false, "start the cluster empty instead of prewarmed for the trace's first window")
	fl.IntVar(&f.maxQueue, "max-queue", sim.DefaultMaxQueue, fmt.Sprintf("requests that may wait per function, as the gateway's max_queue; past it a request is rejected (HTTP 429 live) (at most %d)", sim.MaxQueueBound))
	fl.StringVar(&f.out, "out", "", "write results.csv, results.json, report.md and plots/ into this directory")
	fl.BoolVar(&f.json, "json", false, `print one JSON object {"runs":[...]} on stdout`)
	fl.StringVar(&f.experiment, "experiment", "", "run a preset matrix instead of one condition: paper, or ablation (issue 20's rules each undone, on the paper matrix and Azure-format spikes)")
	fl.IntVar(&f.workers, "workers", runtime.GOMAXPROCS(0), "simulations run in parallel")
	return cmd
}

// usageSentinels are the errors that mean the user asked for something that
// does not exist or makes no sense, so the exit code is 2.
var usageSentinels = []error{
	workload.ErrUnknownApp, workload.ErrUnknownDist, workload.ErrBadSize, trace.ErrUnknownTrace, policy.ErrUnknownPolicy,
	trace.ErrBadRate, trace.ErrBadDuration, trace.ErrTooLarge, trace.ErrMalformed, experiment.ErrBadSpec, experiment.ErrBadPlan,
	sim.ErrNoRequests, sim.ErrColdStartTooLong, sim.ErrColdStartDist, sim.ErrKeepAlive,
}

func asUsage(err error) error {
	for _, s := range usageSentinels {
		if errors.Is(err, s) {
			return usageError{err}
		}
	}
	return err
}

// checkFlags rejects values that no run can use, before any work starts.
func checkFlags(cmd *cobra.Command, f *simFlags) error {
	changed := cmd.Flags().Changed
	switch {
	case badFloat(f.rate) || f.rate <= 0:
		return usagef("--rate must be a positive number of requests per second, got %v", f.rate)
	case changed("peak") && (badFloat(f.peak) || f.peak <= 0):
		return usagef("--peak must be a positive number of requests per second, got %v", f.peak)
	case (changed("min-size") && !(f.minSize > 0)) || (changed("max-size") && !(f.maxSize > 0)):
		return usagef("--min-size and --max-size must be positive, got %v and %v", f.minSize, f.maxSize)
	case changed("peak") && changed("rate"):
		return usagef("set --rate or --peak, not both")
	case f.duration <= 0 || f.largeDuration <= 0:
		return usagef("--duration and --large-duration must be positive, got %v and %v", f.duration, f.largeDuration)
	case f.nodes <= 0 || f.coresPerNode <= 0:
		return usagef("--nodes and --cores-per-node must be positive, got %d and %d", f.nodes, f.coresPerNode)
	case f.coldStart <= 0:
		return usagef("--cold-start must be positive, got %v", f.coldStart)
	case !(f.sloTarget > 1 && f.sloTarget < 100):
		// A value of 1 or less is almost surely a fraction (0.999 for
		// 99.9%): taken as a percentage it would size for nearly no SLO.
		return usagef("--slo-target must be a percentage in (1, 100), e.g. 99.9, got %v", f.sloTarget)
	case f.idleTimeout <= 0 || f.idleTimeout > trace.MaxDuration:
		return usagef("--idle-timeout must be in (0, %v], got %v", trace.MaxDuration, f.idleTimeout)
	case f.workers <= 0:
		return usagef("--workers must be positive, got %d", f.workers)
	case f.maxQueue < 1 || f.maxQueue > sim.MaxQueueBound:
		return usagef("--max-queue must be in [1, %d], got %d", sim.MaxQueueBound, f.maxQueue)
	case f.app != workload.SyntheticApp && (changed("exec-dist") || changed("exec-mean")):
		return usagef("--exec-dist and --exec-mean need --app %s", workload.SyntheticApp)
	case f.app == workload.SyntheticApp && (changed("dist") || changed("min-size") || changed("max-size")):
		return usagef("--app %s takes its sizes from --exec-dist and --exec-mean, not --dist, --min-size or --max-size", workload.SyntheticApp)
	case f.traceFile != "" && changed("trace"):
		return usagef("set --trace or --trace-file, not both")
	case f.traceFile == "" && changed("azure-function"):
		return usagef("--azure-function needs --trace-file")
	case f.experiment == "" && changed("large-duration"):
		return usagef("--large-duration only applies to --experiment paper")
	case !slices.Contains(sim.ColdStartDists(), f.coldStartDist):
		return usagef("--cold-start-dist must be one of %v, got %q", sim.ColdStartDists(), f.coldStartDist)
	case changed("predicted-lead") && f.frontier == "":
		return usagef("--predicted-lead only applies to --frontier")
	case changed("keep-alive") && (f.keepAlive <= 0 || f.keepAlive > sim.MaxKeepAlive):
		return usagef("--keep-alive must be in (0, %v], got %v", sim.MaxKeepAlive, f.keepAlive)
	}
	if err := checkPolicyFlags(cmd, f); err != nil {
		return err
	}
	return checkBounds(cmd, f)
}

// checkPolicyFlags refuses the flags that the listed policies would
// ignore: a keep-alive only commercial honours, a cold-start distribution
// the oracle cannot plan with.
func checkPolicyFlags(cmd *cobra.Command, f *simFlags) error {
	policies, err := experiment.ParsePolicies(f.policies)
	if err != nil {
		return asUsage(err)
	}
	if cmd.Flags().Changed("keep-alive") && !slices.Contains(policies, "commercial") {
		return usagef("--keep-alive sets commercial's keep-alive; add commercial to --policies")
	}
	if f.coldStartDist != "const" && slices.ContainsFunc(policies, sim.IsOracle) {
		return usagef("--cold-start-dist %s: the oracle plans with a constant cold start; drop it from --policies", f.coldStartDist)
	}
	return nil
}

// checkBounds holds the flags to the simulator's bounds before anything is
// allocated: the rate, the peak, the durations, the expected requests of
// a run and the cluster.
func checkBounds(cmd *cobra.Command, f *simFlags) error {
	changed := cmd.Flags().Changed
	switch {
	case f.rate > trace.MaxRate || (changed("peak") && f.peak > trace.MaxRate):
		return usagef("--rate and --peak must be at most %v requests per second, got %v and %v", float64(trace.MaxRate), f.rate, f.peak)
	case f.duration > trace.MaxDuration || f.largeDuration > trace.MaxDuration:
		return usagef("--duration and --large-duration must be at most %v, got %v and %v", trace.MaxDuration, f.duration, f.largeDuration)
	case f.nodes > sim.MaxNodes || f.coresPerNode > sim.MaxCoresPerNode:
		return usagef("--nodes and --cores-per-node must be at most %d and %d, got %d and %d", sim.MaxNodes, sim.MaxCoresPerNode, f.nodes, f.coresPerNode)
	case f.coldStart > sim.MaxColdStart:
		return usagef("--cold-start must be at most %v, got %v", sim.MaxColdStart, f.coldStart)
	}
	// A generated trace's mean is --rate; a file's total is checked when it
	// is read (and again after --rate or --peak rescale it).
	if f.traceFile == "" && f.experiment == "" && !changed("peak") {
		if err := trace.CheckBounds(f.rate, f.duration); err != nil {
			return usageError{err}
		}
	}
	switch {
	case f.coldStart >= f.duration && f.duration >= time.Second && (f.traceFile == "" || changed("duration")):
		return usagef("--cold-start (%v) must be shorter than --duration (%v): a run lasts until its last cold start ends, so longer cold starts make each policy's span, and its mean live containers, differ", f.coldStart, f.duration)
	case f.experiment != "" && f.coldStart >= f.largeDuration:
		return usagef("--cold-start (%v) must be shorter than --large-duration (%v)", f.coldStart, f.largeDuration)
	}
	return nil
}

func badFloat(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) }

func runSim(cmd *cobra.Command, f *simFlags) error {
	if err := checkFlags(cmd, f); err != nil {
		return err
	}
	policies, err := experiment.ParsePolicies(f.policies)
	if err != nil {
		return asUsage(err)
	}
	spec := experiment.Spec{
		App: f.app, Dist: f.dist, Trace: f.trace, TraceFile: f.traceFile, AzureFunction: f.azureFunction,
		Rate: f.rate, Duration: f.duration, Policies: policies, Seed: f.seed,
		Nodes: f.nodes, CoresPerNode: f.coresPerNode, ColdStart: f.coldStart,
		MinSize: f.minSize, MaxSize: f.maxSize, MaxQueue: f.maxQueue,
		ExecDist: f.execDist, ExecMean: f.execMean,
		ColdStartDist: f.coldStartDist, ColdBoot: f.coldBoot, IdleTimeout: f.idleTimeout, SLOTarget: f.sloTarget / 100,
	}
	if cmd.Flags().Changed("keep-alive") {
		spec.KeepAlive = f.keepAlive
	}
	if cmd.Flags().Changed("peak") {
		spec.Peak = f.peak
	}
	if f.traceFile != "" {
		spec.Rate, spec.Duration = fileScaling(cmd, f)
	}
	jobs, err := spec.Jobs()
	if err != nil {
		return asUsage(err)
	}
	if err := prepareOut(f); err != nil {
		return err
	}
	if f.sloCurve != "" {
		return runSLOCurve(cmd, f, jobs)
	}
	if f.frontier != "" {
		return runFrontier(cmd, f, jobs)
	}
	records, err := experiment.Run(cmd.Context(), jobs, experiment.Options{Workers: f.workers, Progress: terminalOnly(cmd.ErrOrStderr())})
	if err != nil {
		// A run can still find the input unusable (no request arrived
		// in a replayed file): that is the user's to fix, so it exits 2.
		return asUsage(keepFinished(cmd, f, records, len(jobs), err))
	}
	doc := report.Document{Title: "Gantry simulation", Intro: jobs[0].Describe(), Records: records,
		PerFunction: true, Traces: experiment.Traces(jobs, false)}
	return emit(cmd, f, doc)
}

// fileScaling keeps a replayed file's own rate and length unless the user
// asked to change them.
func fileScaling(cmd *cobra.Command, f *simFlags) (rate float64, d time.Duration) {
	if cmd.Flags().Changed("rate") {
		rate = f.rate
	}
	if cmd.Flags().Changed("duration") {
		d = f.duration
	}
	return rate, d
}

func runPaper(cmd *cobra.Command, f *simFlags) error {
	if f.experiment != "paper" && f.experiment != "ablation" {
		return usagef("unknown experiment %q (known: paper, ablation)", f.experiment)
	}
	for _, name := range []string{"app", "dist", "trace", "trace-file", "rate", "peak", "nodes", "cores-per-node", "min-size", "max-size",
		"cold-start-dist", "keep-alive", "cold-boot", "idle-timeout", "slo-target"} {
		if cmd.Flags().Changed(name) {
			return usagef("--%s cannot be combined with --experiment paper, which fixes it", name)
		}
	}
	if err := checkFlags(cmd, f); err != nil {
		return err
	}
	if f.experiment == "ablation" {
		return runAblation(cmd, f)
	}
	plan, err := paperPlan(cmd, f)
	if err != nil {
		return err
	}
	jobs, err := experiment.PaperJobs(plan)
	if err != nil {
		return asUsage(err)
	}
	records, wall, err := runMatrix(cmd, f, jobs)
	if err != nil {
		return err
	}
	meta := experiment.PaperMeta{Plan: plan, Jobs: jobs, Runs: len(jobs), Wall: wall, Workers: f.workers}
	return emit(cmd, f, experiment.PaperDocument(records, meta))
}

func paperPlan(cmd *cobra.Command, f *simFlags) (experiment.PaperPlan, error) {
	plan := experiment.DefaultPaperPlan()
	policies, err := experiment.ParsePolicies(f.policies)
	if err != nil {
		return plan, asUsage(err)
	}
	plan.Policies, plan.Seed, plan.LargeDuration = policies, f.seed, f.largeDuration
	// Figure 2 ablates Cypress; without cypress in the run it has nothing
	// to compare against.
	plan.ChainAblation = slices.Contains(policies, "cypress")
	if cmd.Flags().Changed("duration") {
		plan.Duration = f.duration
	}
	if cmd.Flags().Changed("cold-start") {
		plan.ColdStart = f.coldStart
	}
	plan.MaxQueue = f.maxQueue
	return plan, nil
}

// keepFinished writes the runs that finished before a failure or an
// interrupt (SIGINT, SIGTERM) into --out, as a plain report, and returns
// the error that stopped the rest.
// runMatrix runs a preset matrix's jobs with progress on stderr, after
// preparing --out; an interrupted or failed run keeps what finished.
func runMatrix(cmd *cobra.Command, f *simFlags, jobs []experiment.Job) ([]report.Record, time.Duration, error) {
	if err := prepareOut(f); err != nil {
		return nil, 0, err
	}
	start := time.Now()
	records, err := experiment.Run(cmd.Context(), jobs, experiment.Options{Workers: f.workers, Progress: terminalOnly(cmd.ErrOrStderr())})
	if err != nil {
		return nil, 0, keepFinished(cmd, f, records, len(jobs), err)
	}
	wall := time.Since(start)
	fmt.Fprintf(cmd.ErrOrStderr(), "%d runs in %v\n", len(jobs), wall.Round(time.Second))
	return records, wall, nil
}

func keepFinished(cmd *cobra.Command, f *simFlags, records []report.Record, total int, err error) error {
	if errors.Is(err, context.Canceled) && cmd.Context().Err() != nil {
		// Said so: "gantry: context canceled" was all an interrupted sim printed.
		err = fmt.Errorf("interrupted (SIGINT or SIGTERM): %w", err)
	}
	if f.out == "" || len(records) == 0 {
		return err
	}
	doc := report.Document{Title: "Gantry simulation (stopped)",
		Intro:   fmt.Sprintf("Stopped after %d of %d runs: %v. These are the runs that finished; no plots are drawn for a stopped run.", len(records), total, err),
		Records: records, PerFunction: true, NoPlots: true}
	if werr := report.WriteDir(f.out, doc); werr != nil {
		return errors.Join(err, werr)
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "wrote the %d finished runs of %d to %s\n", len(records), total, filepath.Join(f.out, report.MarkdownFile))
	return err
}

// prepareOut fails fast on an unusable --out before any simulation runs.
func prepareOut(f *simFlags) error {
	if f.out == "" {
		return nil
	}
	return report.PrepareDir(f.out)
}

// emit writes the files, then either the JSON object or a table to stdout;
// everything else goes to stderr so that stdout stays machine-readable.
func emit(cmd *cobra.Command, f *simFlags, doc report.Document) error {
	if f.out != "" {
		if err := report.WriteDir(f.out, doc); err != nil {
			return err
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s\n", filepath.Join(f.out, report.MarkdownFile))
	}
	if f.json {
		return report.WriteSummaryJSON(cmd.OutOrStdout(), doc.Records)
	}
	return report.WriteTable(cmd.OutOrStdout(), doc.Records)
}
