package cli

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"gantry.dev/gantry/pkg/liverun"
	"gantry.dev/gantry/pkg/policy"
	"gantry.dev/gantry/pkg/trace"
	"gantry.dev/gantry/pkg/workload"
)

func newBenchSimLiveCmd() *cobra.Command {
	var (
		cc      liverun.CompareConfig
		out     string
		asJSON  bool
		verbose bool
	)
	cmd := &cobra.Command{
		Use:   "simlive",
		Short: "Run one app through the live platform (model replay) and the simulator on the same trace, side by side",
		Long: `simlive serves the app on the live platform with every function replaced by
"gantry fn replay" (the simulator's execution-time and output-size models), drives it
with the trace, then runs the simulator on the same trace, size distribution, policy,
tick, window and idle timeout, with the live run's measured mean cold start. Both sides
start cold: no instance and no policy history. It reports mean live instances,
instances spawned, SLO compliance and p50/p99 on each side and their relative
differences (docs/platform.md, "Simulator against live").`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := validateSimLive(&cc); err != nil {
				return err
			}
			if verbose {
				cc.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
				cc.InstanceLog = os.Stderr
			}
			if !asJSON {
				cc.Progress = simLiveProgress
			}
			c, err := liverun.Compare(cmd.Context(), cc)
			if !asJSON {
				fmt.Fprintln(os.Stderr)
			}
			if err != nil {
				if errors.Is(err, liverun.ErrBadConfig) {
					return usageError{err}
				}
				return err
			}
			if out != "" {
				if err := c.WriteDir(out); err != nil {
					return err
				}
			}
			if asJSON {
				return c.WriteJSON(cmd.OutOrStdout())
			}
			if err := c.WriteText(cmd.OutOrStdout()); err != nil {
				return err
			}
			if out != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "\nreport, JSON and plots in %s/\n", out)
			}
			return nil
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usagef("bench simlive: %v", err) })
	fs := cmd.Flags()
	fs.StringVar(&cc.App, "app", "email-categorization", fmt.Sprintf("app to replay: one of %v", workload.Names()))
	fs.StringVar(&cc.Policy, "policy", "gantry", fmt.Sprintf("policy: one of %v but oracle", policy.Names()))
	fs.StringVar(&cc.Trace, "trace", "poisson", fmt.Sprintf("arrival trace: one of %v", trace.Names()))
	fs.Float64Var(&cc.Rate, "rate", 5, fmt.Sprintf("mean requests per second, up to %d", liverun.MaxRate))
	fs.StringVar(&cc.Dist, "dist", "uniform", fmt.Sprintf("input-size distribution: one of %v", workload.DistNames()))
	fs.DurationVar(&cc.Duration, "duration", time.Minute, "length of the trace")
	fs.DurationVar(&cc.StartDelay, "start-delay", 1500*time.Millisecond, "added to each live instance's start, to emulate a container's")
	fs.Uint64Var(&cc.Seed, "seed", 1, "seed of the trace, the arrivals, the sizes and the policy")
	fs.IntVar(&cc.Capacity, "capacity", liverun.DefaultCompareCapacity, "most instances at once on both sides (0: none; the simulator's cluster then has 288 cores)")
	fs.IntVar(&cc.Runs, "runs", 1, "live runs to average, with seeds seed, seed+1, ...")
	fs.IntVar(&cc.SimSeeds, "sim-seeds", liverun.DefaultSimSeeds, "seeds, from --seed on, of the simulator's expectation and spread (at least --runs)")
	fs.DurationVar(&cc.Tick, "tick", liverun.DefaultTick, "autoscaler tick on both sides")
	fs.DurationVar(&cc.Window, "window", liverun.DefaultWindow, "proactive window on both sides")
	fs.DurationVar(&cc.IdleTimeout, "idle-timeout", liverun.DefaultIdleTimeout, "idle instances stop after this on both sides")
	fs.StringVar(&out, "out", "", "directory for report.md, comparison.json, bars.png and the live run's plots (empty: none)")
	fs.BoolVar(&asJSON, "json", false, `print one JSON object {"live":{...},"sim":{...},"diff":{...},"within_tolerance",...}`)
	fs.BoolVar(&verbose, "verbose", false, "log the gateway's decisions and the instances' output to stderr")
	return cmd
}

func validateSimLive(cc *liverun.CompareConfig) error {
	policies := slices.DeleteFunc(append(policy.Names(), policy.Ablations()...), func(p string) bool { return p == "oracle" })
	switch {
	case !slices.Contains(policies, cc.Policy):
		return usagef("--policy %q is not one of %v (the oracle needs the trace's ground truth, which the live platform lacks)", cc.Policy, policies)
	case !slices.Contains(workload.Names(), cc.App):
		return usagef("--app %q is not one of %v", cc.App, workload.Names())
	case !slices.Contains(trace.Names(), cc.Trace):
		return usagef("--trace %q is not one of %v", cc.Trace, trace.Names())
	case !slices.Contains(workload.DistNames(), cc.Dist):
		return usagef("--dist %q is not one of %v", cc.Dist, workload.DistNames())
	case !(cc.Rate > 0) || cc.Rate > liverun.MaxRate:
		return usagef("--rate must be in (0, %d], got %v", liverun.MaxRate, cc.Rate)
	case cc.Duration < time.Second || cc.Duration > liverun.MaxDuration:
		return usagef("--duration must be in [1s, %v], got %v", liverun.MaxDuration, cc.Duration)
	case cc.StartDelay < 0 || cc.StartDelay > 10*time.Minute:
		return usagef("--start-delay must be in [0, 10m], got %v", cc.StartDelay)
	case cc.Capacity < 0 || cc.Capacity > 10000:
		return usagef("--capacity must be in [0, 10000], got %d", cc.Capacity)
	case cc.Runs < 1 || cc.Runs > liverun.MaxRuns:
		return usagef("--runs must be in [1, %d], got %d", liverun.MaxRuns, cc.Runs)
	case cc.SimSeeds < 1 || cc.SimSeeds > liverun.MaxRuns:
		return usagef("--sim-seeds must be in [1, %d], got %d", liverun.MaxRuns, cc.SimSeeds)
	case cc.Tick <= 0 || cc.Tick > cc.Window:
		return usagef("--tick must be positive and at most --window, got %v", cc.Tick)
	case cc.Window < time.Second || cc.Window > time.Hour:
		return usagef("--window must be in [1s, 1h], got %v", cc.Window)
	case cc.IdleTimeout <= 0 || cc.IdleTimeout > 24*time.Hour:
		return usagef("--idle-timeout must be in (0, 24h], got %v", cc.IdleTimeout)
	}
	return nil
}

// simLiveProgress redraws one status line on stderr.
func simLiveProgress(p liverun.Progress) {
	if strings.HasPrefix(p.Phase, "measure") {
		fmt.Fprintf(os.Stderr, "\r%-13s %5.0fs / %-5.0fs  sent %-7d done %-7d live instances %-4d",
			p.Phase, p.Elapsed.Seconds(), p.Total.Seconds(), p.Sent, p.Done, p.Live)
		return
	}
	fmt.Fprintf(os.Stderr, "\r%-13s %-62s", p.Phase, "")
}
