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
		cc        liverun.CompareConfig
		out       string
		asJSON    bool
		verbose   bool
		summarize bool
	)
	cmd := &cobra.Command{
		Use:   "simlive [--summarize DIR...]",
		Short: "Run one app through the live platform (model replay) and the simulator on the same trace, side by side",
		Long: `simlive serves the app on the live platform with every function replaced by
"gantry fn replay" (the simulator's execution-time and output-size models), drives it
with the trace, then runs the simulator on the same trace, size distribution, policy,
tick, window and idle timeout, with the live run's measured mean cold start. Both sides
start cold: no instance and no policy history. It reports mean live instances,
instances spawned, SLO compliance and p50/p99 on each side and their relative
differences (docs/platform.md, "Simulator against live").

within_tolerance compares the live figures, the mean over --runs, with the
simulator's expectation, its mean over --sim-seeds seeds: mean live instances
within 10% relative (instances_rel_diff) and SLO compliance within 0.5
percentage points (slo_points_diff). Every named policy runs but the oracle,
whose plan is clairvoyant.

With --summarize, it runs nothing: it reads comparison.json from each DIR,
judges each by the same rule and prints one table of every comparison (with
--out, summary.md and summary.json in that folder).`,
		Args: func(cmd *cobra.Command, args []string) error {
			if summarize {
				return summarizeArgs(cmd, args)
			}
			return cobra.NoArgs(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if summarize {
				return runSimLiveSummary(cmd, args, out, asJSON)
			}
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
	simLiveFlags(cmd, &cc)
	fs := cmd.Flags()
	fs.StringVar(&out, "out", "", "directory for report.md, comparison.json, bars.png and the live run's plots (empty: none); with --summarize, for summary.md and summary.json")
	fs.BoolVar(&asJSON, "json", false, `print one JSON object {"live":{...},"sim_expected":{...},"within_tolerance","instances_rel_diff","slo_points_diff",...}`)
	fs.BoolVar(&verbose, "verbose", false, "log the gateway's decisions and the instances' output to stderr")
	fs.BoolVar(&summarize, "summarize", false, "run nothing: summarize the comparison.json of each folder given as an argument in one table")
	return cmd
}

// simLiveRunFlags are the flags of a run, which --summarize refuses
// (TestBenchSimLiveSummarizeRefusesRunFlags checks the list is whole).
var simLiveRunFlags = []string{"app", "policy", "trace", "rate", "dist", "duration", "start-delay", "seed", "capacity",
	"runs", "sim-seeds", "tick", "window", "idle-timeout", "verbose"}

// simLiveFlags binds the comparison's flags to cc.
func simLiveFlags(cmd *cobra.Command, cc *liverun.CompareConfig) {
	fs := cmd.Flags()
	fs.StringVar(&cc.App, "app", "email-categorization", fmt.Sprintf("app to replay: one of %v", workload.Names()))
	fs.StringVar(&cc.Policy, "policy", "gantry", fmt.Sprintf("policy: one of %v or a gantry ablation, not oracle", namedLivePolicies()))
	fs.StringVar(&cc.Trace, "trace", "poisson", fmt.Sprintf("arrival trace: one of %v (twitter is bursty); the live load replays its per-second rates", trace.Names()))
	fs.Float64Var(&cc.Rate, "rate", 5, fmt.Sprintf("mean requests per second, up to %d", liverun.MaxRate))
	fs.StringVar(&cc.Dist, "dist", "uniform", fmt.Sprintf("input-size distribution: one of %v", workload.DistNames()))
	fs.DurationVar(&cc.Duration, "duration", time.Minute, "length of the trace")
	fs.DurationVar(&cc.StartDelay, "start-delay", 1500*time.Millisecond, "added to each live instance's start, to emulate a container's")
	fs.Uint64Var(&cc.Seed, "seed", 1, "seed of the trace, the arrivals, the sizes and the policy")
	fs.IntVar(&cc.Capacity, "capacity", liverun.DefaultCompareCapacity, "most instances at once on both sides (0: none; the simulator's cluster then has 288 cores)")
	fs.IntVar(&cc.Runs, "runs", 1, "live runs to average, with seeds seed, seed+1, ...")
	fs.IntVar(&cc.SimSeeds, "sim-seeds", liverun.DefaultSimSeeds, "seeds, from --seed on, of the simulator's expectation and spread (rounded up to a multiple of --runs)")
	fs.DurationVar(&cc.Tick, "tick", policy.DefaultTick, "autoscaler tick on both sides")
	fs.DurationVar(&cc.Window, "window", policy.DefaultWindow, "proactive window on both sides")
	fs.DurationVar(&cc.IdleTimeout, "idle-timeout", policy.DefaultIdleTimeout, "idle instances stop after this on both sides")
}

// namedLivePolicies is policy.Names() without the oracle.
func namedLivePolicies() []string {
	return slices.DeleteFunc(policy.Names(), func(p string) bool { return p == "oracle" })
}

// summarizeArgs checks --summarize's use: at least one folder, and none of
// the flags of a run, which it would ignore.
func summarizeArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("--summarize needs at least one folder with a comparison.json")
	}
	var ignored []string
	for _, name := range simLiveRunFlags {
		if cmd.Flags().Changed(name) {
			ignored = append(ignored, "--"+name)
		}
	}
	if len(ignored) > 0 {
		return fmt.Errorf("--summarize runs nothing and takes only --out and --json, not %s", strings.Join(ignored, ", "))
	}
	return nil
}

func runSimLiveSummary(cmd *cobra.Command, dirs []string, out string, asJSON bool) error {
	s := liverun.Summarize(dirs)
	if out != "" {
		if err := s.WriteDir(out); err != nil {
			return err
		}
	}
	if asJSON {
		return s.WriteJSON(cmd.OutOrStdout())
	}
	if err := s.WriteText(cmd.OutOrStdout()); err != nil {
		return err
	}
	if out != "" {
		fmt.Fprintf(cmd.OutOrStdout(), "\nsummary.md and summary.json in %s/\n", out)
	}
	return nil
}

func validateSimLive(cc *liverun.CompareConfig) error {
	switch {
	case cc.Policy == "oracle":
		return usagef("--policy oracle: %s; use one of %v", liverun.OracleRefusal, namedLivePolicies())
	case !slices.Contains(liverun.LivePolicies(), cc.Policy):
		return usagef("--policy %q is not one of %v or a gantry ablation %v", cc.Policy, namedLivePolicies(), policy.Ablations())
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
