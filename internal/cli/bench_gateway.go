package cli

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"gantry.dev/gantry/pkg/gatewaybench"
)

// serveForFlag makes `gantry bench gateway` the Gantry gateway child of a
// run instead of a run; serveInstanceFlag the echo instance child of a
// --sustain run.
const (
	serveForFlag      = gatewaybench.ServeGantryFlag
	serveInstanceFlag = gatewaybench.ServeInstanceFlag
)

func newBenchGatewayCmd() *cobra.Command {
	var (
		opts          = gatewaybench.DefaultOptions()
		asJSON        bool
		quiet         bool
		out           string
		gantryProcess bool
		serveFor      string
		serveInstance bool
		sustain       float64
	)
	cmd := &cobra.Command{
		Use:   "gateway",
		Short: "Latency Gantry's gateway adds, beside the OpenFaaS gateway's, under the same open-loop load",
		Long: "Starts one in-process echo instance and sends the same open-loop load, in rotating rounds, " +
			"to it directly, through Gantry's gateway (in a process of its own, and in-process), through a " +
			"minimal OpenFaaS provider alone, and through " +
			"the OpenFaaS gateway in front of that provider (when its binary exists: hack/build-openfaas.sh; it binds " +
			":8080 and :8082, fixed in its source, so they must be free). Reports p50/p90/p99/max per path, " +
			"the latency each adds over the direct path, and each hop's share.",
		Example: `  gantry bench gateway
  gantry bench gateway --rate 1000 --duration 10s --out out/bench-gateway
  gantry bench gateway --openfaas '' --json     # Gantry's gateway only
  gantry bench gateway --sustain 5000 --duration 30s --gomaxprocs 2   # throughput, CPU per process, the gateway's heap over time`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if serveFor != "" {
				// The child side of the gantry path, started by the run below.
				return gatewaybench.ServeGantry(cmd.Context(), serveFor, cmd.OutOrStdout())
			}
			if serveInstance {
				return gatewaybench.ServeInstance(cmd.Context(), cmd.OutOrStdout())
			}
			if sustain > 0 {
				return runSustain(cmd, opts, sustain, out, asJSON, quiet)
			}
			if err := opts.Validate(); err != nil {
				return usagef("bench gateway: %v", err)
			}
			if gantryProcess {
				self, err := os.Executable()
				if err != nil {
					return fmt.Errorf("bench gateway: finding this binary to run Gantry's gateway as a process: %w", err)
				}
				opts.Gantry = []string{self, "bench", "gateway", "--" + serveForFlag}
			}
			if !quiet {
				opts.Log = cmd.ErrOrStderr()
			}
			rep, err := gatewaybench.Run(cmd.Context(), opts)
			if err != nil {
				return err
			}
			return emitBenchReport(cmd, "bench gateway", rep, out, asJSON, rep.Interrupted)
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usagef("bench gateway: %v", err) })
	f := cmd.Flags()
	f.Float64Var(&opts.Rate, "rate", opts.Rate, fmt.Sprintf("requests/s on each path, Poisson arrivals, at most %d", gatewaybench.MaxRate))
	f.DurationVar(&opts.Duration, "duration", opts.Duration, fmt.Sprintf("measured load on each path, a whole number of rounds, at most %v", gatewaybench.MaxDuration))
	f.DurationVar(&opts.Round, "round", opts.Round, "load on one path before the next takes over (whole seconds)")
	f.DurationVar(&opts.Warmup, "warmup", opts.Warmup, "unmeasured load on each path first (whole seconds, 0 for none)")
	f.Uint64Var(&opts.Seed, "seed", opts.Seed, "seed of the arrivals; every path gets the same schedule in a round")
	f.IntVar(&opts.BodyBytes, "body-bytes", opts.BodyBytes, "request body size; the instance echoes it")
	f.IntVar(&opts.MaxInFlight, "max-inflight", opts.MaxInFlight, "bound on concurrent requests; arrivals past it count as errors")
	f.IntVar(&opts.GOMAXPROCS, "gomaxprocs", 0, "GOMAXPROCS for this process and the OpenFaaS gateway (0: this process's, passed on)")
	f.IntVar(&opts.GOGC, "gogc", 0, "GOGC for both gateway processes (0: Go's default, 100)")
	f.StringVar(&opts.OpenFaaS, "openfaas", opts.OpenFaaS, "OpenFaaS gateway binary (built by hack/build-openfaas.sh); '' skips its path")
	f.StringVar(&opts.OpenFaaSLog, "openfaas-log", "", "keep the OpenFaaS gateway's output in this file (default: a temporary file, removed)")
	f.DurationVar(&opts.ReadyWait, "ready-wait", opts.ReadyWait, "how long the OpenFaaS gateway may take to answer")
	f.BoolVar(&asJSON, "json", false, `print one JSON object {"paths":[{"path","p50_us","p90_us","p99_us","max_us","added_p50_us","added_p99_us",...}],"hops","targets","openfaas",...}`)
	f.StringVar(&out, "out", "", "write paths.csv, rounds.csv, latency.png, report.md and report.json into this directory")
	f.BoolVar(&quiet, "quiet", false, "no progress lines on stderr")
	f.BoolVar(&gantryProcess, "gantry-process", true, "also run Gantry's gateway in a process of its own, as `gantry serve` and the OpenFaaS gateway run (the in-process one is always measured)")
	f.StringVar(&serveFor, serveForFlag, "", "internal: serve Gantry's gateway for the instance at this address and print its URL")
	_ = f.MarkHidden(serveForFlag)
	f.BoolVar(&serveInstance, serveInstanceFlag, false, "internal: serve the echo instance and print its URL")
	_ = f.MarkHidden(serveInstanceFlag)
	f.Float64Var(&sustain, "sustain", 0, "instead of the comparison: send this many requests/s through Gantry's gateway for --duration "+
		"(30s unless given), the load generator, the gateway and the echo instance in three processes; report completed requests/s, "+
		"each process's CPU and the gateway's heap every second (--out: report.json, timeline.csv)")
	return cmd
}

// runSustain is `gantry bench gateway --sustain RATE`.
func runSustain(cmd *cobra.Command, opts gatewaybench.Options, rate float64, out string, asJSON, quiet bool) error {
	so := gatewaybench.DefaultSustainOptions()
	so.Rate = rate
	f := cmd.Flags()
	if f.Changed("duration") {
		so.Duration = opts.Duration
	}
	if f.Changed("warmup") {
		so.Warmup = opts.Warmup
	}
	if f.Changed("max-inflight") {
		so.MaxInFlight = opts.MaxInFlight
	}
	so.BodyBytes, so.GOMAXPROCS, so.Seed, so.ReadyWait = opts.BodyBytes, opts.GOMAXPROCS, opts.Seed, opts.ReadyWait
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("bench gateway: finding this binary to run the gateway and instance processes: %w", err)
	}
	so.Command = []string{self, "bench", "gateway"}
	if err := so.Validate(); err != nil {
		return usagef("bench gateway: %v", err)
	}
	if !quiet {
		so.Log = cmd.ErrOrStderr()
	}
	rep, err := gatewaybench.Sustain(cmd.Context(), so)
	if err != nil {
		return err
	}
	return emitBenchReport(cmd, "bench gateway --sustain", rep, out, asJSON, rep.Interrupted)
}
