package cli

import (
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"gantry.dev/gantry/pkg/dispatch"
	"gantry.dev/gantry/pkg/liverun"
	"gantry.dev/gantry/pkg/policy"
	"gantry.dev/gantry/pkg/trace"
	"gantry.dev/gantry/pkg/workload"
)

func newUpCmd() *cobra.Command {
	var (
		cfg     liverun.Config
		out     string
		asJSON  bool
		verbose bool
	)
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Gantry's main job: serve the example functions on this machine, drive an app with load, and report",
		Long: `up starts the gateway with the example functions (examples/stack.yml) on the local
process runtime, warms it up with the load, then measures: SLO compliance, instances
spawned and live, latency percentiles and every error, under the chosen policy.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := validateUp(&cfg, out); err != nil {
				return err
			}
			if verbose {
				cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
			}
			if !asJSON {
				cfg.Progress = progressLine
			}
			rep, err := liverun.Run(cmd.Context(), cfg)
			if !asJSON {
				fmt.Fprintln(os.Stderr)
			}
			if err != nil {
				return err
			}
			if out != "" {
				if err := rep.WriteDir(out); err != nil {
					return err
				}
			}
			if asJSON {
				return rep.WriteJSON(os.Stdout)
			}
			if err := rep.WriteText(os.Stdout); err != nil {
				return err
			}
			if out != "" {
				fmt.Printf("\nreport, JSON and plots in %s/\n", out)
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&cfg.Policy, "policy", "gantry", fmt.Sprintf("policy: one of %v", policy.Names()))
	fs.StringVar(&cfg.App, "app", liverun.DefaultApp, fmt.Sprintf("example app to drive: one of %v", workload.Names()))
	fs.StringVar(&cfg.Trace, "trace", "poisson", fmt.Sprintf("arrival trace: one of %v", trace.Names()))
	fs.Float64Var(&cfg.Rate, "rate", 20, fmt.Sprintf("mean requests per second, up to %d", liverun.MaxRate))
	fs.StringVar(&cfg.Dist, "dist", "uniform", fmt.Sprintf("input-size distribution: one of %v", workload.DistNames()))
	fs.DurationVar(&cfg.Duration, "duration", time.Minute, "measured length of the run")
	fs.DurationVar(&cfg.Warmup, "warmup", 15*time.Second, "unmeasured load first, so every policy starts warm (negative: none)")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "seed of the arrivals, sizes and payloads")
	fs.IntVar(&cfg.Capacity, "capacity", 0, "most instances at once (0: no bound)")
	fs.DurationVar(&cfg.StartDelay, "start-delay", 0, "added to each instance's start, to emulate a container's (e.g. 1.5s)")
	fs.StringVar(&out, "out", "out/up", "directory for report.md, report.json and plots (empty: none)")
	fs.BoolVar(&asJSON, "json", false, `print one JSON object {"policy","requests","errors","slo_compliance","containers_spawned","avg_containers","p50_ms","p99_ms",...}`)
	fs.BoolVar(&verbose, "verbose", false, "log the gateway's decisions to stderr")
	return cmd
}

func validateUp(cfg *liverun.Config, _ string) error {
	switch {
	case dispatch.CheckPolicy(cfg.Policy) != nil:
		return usagef("--policy: %v", dispatch.CheckPolicy(cfg.Policy))
	case !contains(workload.Names(), cfg.App):
		return usagef("--app %q is not one of %v", cfg.App, workload.Names())
	case !contains(trace.Names(), cfg.Trace):
		return usagef("--trace %q is not one of %v", cfg.Trace, trace.Names())
	case !contains(workload.DistNames(), cfg.Dist):
		return usagef("--dist %q is not one of %v", cfg.Dist, workload.DistNames())
	case !(cfg.Rate > 0) || cfg.Rate > liverun.MaxRate:
		return usagef("--rate must be in (0, %d], got %v", liverun.MaxRate, cfg.Rate)
	case cfg.Duration < time.Second || cfg.Duration > liverun.MaxDuration:
		return usagef("--duration must be in [1s, %v], got %v", liverun.MaxDuration, cfg.Duration)
	case cfg.Warmup > liverun.MaxDuration:
		return usagef("--warmup must be at most %v, got %v", liverun.MaxDuration, cfg.Warmup)
	case cfg.Capacity < 0 || cfg.Capacity > 10000:
		return usagef("--capacity must be in [0, 10000], got %d", cfg.Capacity)
	case cfg.StartDelay < 0 || cfg.StartDelay > 10*time.Minute:
		return usagef("--start-delay must be in [0, 10m], got %v", cfg.StartDelay)
	}
	return nil
}

// progressLine redraws one status line on stderr.
func progressLine(p liverun.Progress) {
	fmt.Fprintf(os.Stderr, "\r%-7s %5.0fs / %-5.0fs  sent %-7d done %-7d live instances %-4d",
		p.Phase, p.Elapsed.Seconds(), p.Total.Seconds(), p.Sent, p.Done, p.Live)
}
