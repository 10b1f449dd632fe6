package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"gantry.dev/gantry/pkg/liverun"
	"gantry.dev/gantry/pkg/policy"
	"gantry.dev/gantry/pkg/trace"
	"gantry.dev/gantry/pkg/workload"
)

// Scenarios `gantry up --scenario` runs besides the default comparison.
const scenarioCriticality = "criticality"

func newUpCmd() *cobra.Command {
	var (
		cfg      liverun.UpConfig
		policies string
		scenario string
		out      string
		asJSON   bool
		verbose  bool
	)
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Gantry's main job: the policies side by side, live, on one load; report SLO compliance, instances and latency",
		Long: `up serves the same app once per policy, each behind a gateway process of its own
(gantry serve, with its own instances, the same capacity and a temporary state
folder), and drives all of them with the same arrivals at the same time. The
default load is one where the decisions matter: the bursty twitter trace, the
app's model-replay functions (each sleeps for the profiled execution time of its
input size, so five gateways' instances do not compete for 2 cores), an SLO
of twice the largest execution time (--slo-factor 2) and instance starts that
cost what a container's does (--start-delay 500ms).
--functions real runs the real example functions instead.

It ends with one table (SLO compliance, mean live and spawned instances,
latency, errors per policy) and a verdict: which policy held the SLO (99.9% of
requests within it, no errors) with the fewest instances. --out writes
report.md, report.json, requests.csv, instances.png and latency.png.

--scenario criticality runs a critical function beside a low-criticality flood
on a capacity-bounded runtime, with and without criticality.`,
		Example: `  gantry up                                   # gantry, cypress, atoll, knative and commercial side by side, report in out/up/
  gantry up --policy gantry,cypress --seed 2  # two policies
  gantry up --json > report.json              # one JSON object on stdout
  gantry up --scenario criticality            # a critical function beside a flood, with and without criticality`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Policies = splitList(policies)
			if strings.TrimSpace(policies) != "" && len(cfg.Policies) != len(strings.Split(policies, ",")) {
				// "gantry," would run one policy where two were meant.
				return usagef("--policy %q names an empty policy; give names separated by single commas", policies)
			}
			if err := validateUp(cmd, &cfg, scenario); err != nil {
				return err
			}
			var logMu sync.Mutex
			if verbose {
				cfg.GatewayLog = lockedWriter{w: os.Stderr, mu: &logMu}
			}
			// Progress goes to stderr; with --json only when it is a
			// terminal, so that a script reading stdout sees nothing else.
			if tty := isTerminal(os.Stderr); !asJSON || tty {
				pp := &progressPrinter{w: os.Stderr, tty: tty && !verbose, mu: &logMu}
				cfg.Progress = pp.print
			}
			// A folder the report cannot go to is found before the run,
			// not after it.
			if out != "" {
				if err := writableDir(out); err != nil {
					return usagef("--out: %v", err)
				}
			}
			if scenario == scenarioCriticality {
				return runCriticality(cmd, cfg, out, asJSON)
			}
			rep, err := liverun.Up(cmd.Context(), cfg)
			if err != nil {
				return interrupted(cmd, err)
			}
			return emitUp(cmd.OutOrStdout(), rep, out, asJSON)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&policies, "policy", strings.Join(liverun.DefaultPolicies, ","),
		fmt.Sprintf("policies to compare, comma-separated, one gateway each: of %v", policy.Names()))
	fs.StringVar(&cfg.App, "app", liverun.DefaultUpApp, fmt.Sprintf("example app to drive: one of %v", workload.Names()))
	fs.StringVar(&cfg.Trace, "trace", liverun.DefaultUpTrace, fmt.Sprintf("arrival trace: one of %v", trace.Names()))
	fs.Float64Var(&cfg.Rate, "rate", liverun.DefaultUpRate, fmt.Sprintf("mean requests per second, up to %d", liverun.MaxRate))
	fs.StringVar(&cfg.Dist, "dist", "uniform", fmt.Sprintf("input-size distribution: one of %v", workload.DistNames()))
	fs.DurationVar(&cfg.Duration, "duration", liverun.DefaultUpDuration, "measured length of the run")
	fs.DurationVar(&cfg.Warmup, "warmup", liverun.DefaultUpWarmup, "unmeasured load first, so every policy starts warm (0 or negative: none)")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "seed of the arrivals, sizes and payloads (the same for every policy)")
	fs.IntVar(&cfg.Capacity, "capacity", liverun.DefaultUpCapacity, "most instances at once, per gateway (0: no bound)")
	fs.DurationVar(&cfg.StartDelay, "start-delay", liverun.DefaultUpStartDelay, "added to each instance's start, to emulate a container's")
	fs.DurationVar(&cfg.IdleTimeout, "idle-timeout", liverun.DefaultUpIdleTimeout, "every gateway stops an instance idle this long (the core's default, 10m, outlasts the run)")
	fs.Float64Var(&cfg.SLOFactor, "slo-factor", 0, fmt.Sprintf("with replay functions, the SLO is this many times the app's largest execution time (default %d; the Cypress paper's rule is 1.2)", liverun.DefaultUpSLOFactor))
	fs.StringVar(&cfg.Functions, "functions", liverun.FunctionsReplay,
		fmt.Sprintf("%s: the app's model-replay functions (they sleep for the profiled execution time); %s: the real example functions (CPU-bound)", liverun.FunctionsReplay, liverun.FunctionsReal))
	fs.StringVar(&scenario, "scenario", "", "criticality: a critical function beside a low-criticality flood, with and without criticality")
	fs.StringVar(&out, "out", "out/up", "directory for report.md, report.json and plots (empty: none)")
	fs.BoolVar(&asJSON, "json", false, `print one JSON object {"app","trace","rate","duration_s","seed","runs":[{"policy",...}],"verdict"} on stdout`)
	fs.BoolVar(&verbose, "verbose", false, "copy the gateways' logs to stderr, each line prefixed with its policy")
	return cmd
}

func validateUp(cmd *cobra.Command, cfg *liverun.UpConfig, scenario string) error {
	if len(cfg.Policies) == 0 {
		return usagef("--policy names no policy")
	}
	// liverun reads a zero as "the default": a zero given on the command
	// line would be accepted and ignored.
	fs := cmd.Flags()
	switch {
	case fs.Changed("slo-factor") && !(cfg.SLOFactor >= 1 && cfg.SLOFactor <= liverun.MaxSLOFactor):
		return usagef("--slo-factor must be in [1, %d], got %v", liverun.MaxSLOFactor, cfg.SLOFactor)
	case fs.Changed("idle-timeout") && cfg.IdleTimeout == 0:
		return usagef("--idle-timeout must be in [1s, 24h], got 0s")
	case fs.Changed("warmup") && cfg.Warmup == 0:
		cfg.Warmup = -1 // none, as a negative one
	}
	if scenario != "" && scenario != scenarioCriticality {
		return usagef("--scenario must be %s, got %q", scenarioCriticality, scenario)
	}
	if scenario == scenarioCriticality && cmd.Flags().Changed("slo-factor") {
		return usagef("--scenario criticality declares its own functions' SLOs; --slo-factor is for the comparison")
	}
	if scenario == scenarioCriticality && cmd.Flags().Changed("policy") && len(cfg.Policies) != 1 {
		return usagef("--scenario criticality runs one policy with and without criticality; got --policy %s", strings.Join(cfg.Policies, ","))
	}
	c := *cfg
	if c.Exe == "" {
		c.Exe = "gantry" // Validate does not look at it
	}
	if err := c.Validate(); err != nil {
		return usageError{err}
	}
	return nil
}

// emitUp prints the report (JSON or the table), writes --out, and exits 1
// after an interrupted run, which covers only what finished.
func emitUp(w io.Writer, rep *liverun.UpReport, out string, asJSON bool) error {
	defer rep.Wait()
	if out != "" {
		if err := rep.WriteDir(out); err != nil {
			return err
		}
	}
	var err error
	if asJSON {
		err = rep.WriteJSON(w)
	} else {
		err = rep.WriteText(w)
		if err == nil && out != "" {
			fmt.Fprintf(w, "\nreport, JSON and plots in %s/\n", out)
		}
	}
	if err != nil {
		return err
	}
	if rep.Interrupted {
		return fmt.Errorf("interrupted: the report covers the requests answered until then")
	}
	return nil
}

// interrupted says so when err is the signal's cancellation: the run
// stopped before its measured phase ended, with nothing to report.
func interrupted(cmd *cobra.Command, err error) error {
	if errors.Is(err, context.Canceled) && cmd.Context().Err() != nil {
		return errors.New("interrupted before the measured phase ended: nothing to report")
	}
	return err
}

// writableDir makes dir if needed and checks that a file can be written
// in it.
func writableDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".gantry-up-*")
	if err != nil {
		return err
	}
	f.Close()
	return os.Remove(f.Name())
}

// isTerminal reports whether f is a character device (a terminal).
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// lockedWriter serialises writes that share one stream with the progress.
type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// progressPrinter shows one line per arm. On a terminal it redraws the
// block in place every second; elsewhere (a log file, a CI job) it prints
// a block every progressLogEvery.
type progressPrinter struct {
	w     io.Writer
	tty   bool
	mu    *sync.Mutex
	drawn int
	last  time.Time
}

const progressLogEvery = 15 * time.Second

func (p *progressPrinter) print(arms []liverun.ArmProgress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.tty {
		if time.Since(p.last) < progressLogEvery {
			return
		}
		p.last = time.Now()
	}
	p.draw(arms)
}

func (p *progressPrinter) draw(arms []liverun.ArmProgress) {
	var b strings.Builder
	if p.tty && p.drawn > 0 {
		fmt.Fprintf(&b, "\x1b[%dA", p.drawn) // back to the block's first line
	}
	width, fnWidth := 0, 0
	for _, a := range arms {
		width = max(width, len(a.Name))
		for _, f := range a.Functions {
			fnWidth = max(fnWidth, len(f.Name))
		}
	}
	lines := 0
	line := func(text string) {
		b.WriteString(text)
		if p.tty {
			b.WriteString("\x1b[K") // clear what a longer line left
		}
		b.WriteByte('\n')
		lines++
	}
	for _, a := range arms {
		line(fmt.Sprintf("%-*s %s", width, a.Name, progressText(a)))
		for _, f := range a.Functions {
			line("  " + functionText(f, fnWidth))
		}
	}
	if p.tty && lines < p.drawn {
		// A gateway that stopped listing its functions leaves lines
		// below: clear them.
		for range p.drawn - lines {
			b.WriteString("\x1b[K\n")
		}
		fmt.Fprintf(&b, "\x1b[%dA", p.drawn-lines)
	}
	p.drawn = lines
	_, _ = io.WriteString(p.w, b.String())
}

// maxBar bounds a function's instance bar; past it the rest is a count.
const maxBar = 40

// functionText is one function's line under its policy's: the SLO it is
// bound to, its state, the requests running and queued, and its
// instances as a bar, one cell each: ■ ready, □ starting.
func functionText(f liverun.FunctionProgress, width int) string {
	ready := min(max(f.Available, 0), f.Replicas)
	starting := max(f.Replicas-ready, 0)
	bar := strings.Repeat("■", min(ready, maxBar)) + strings.Repeat("□", min(starting, maxBar-min(ready, maxBar)))
	if shown := min(ready+starting, maxBar); ready+starting > shown {
		bar += fmt.Sprintf(" +%d", ready+starting-shown)
	}
	slo := f.SLO
	if d, err := time.ParseDuration(slo); err == nil {
		// A chain's budgets are shares of its SLO: 89.992861ms reads as 90ms.
		slo = d.Round(time.Millisecond).String()
	}
	return fmt.Sprintf("%-*s  SLO %-7s %-8s running %4d  queued %4d  %s",
		width, f.Name, slo, f.State, f.Running, f.Queued, bar)
}

// progressText is one arm's line after its name: phase and time, requests done, live
// instances, the phase's p99 and SLO compliance, and errors.
func progressText(a liverun.ArmProgress) string {
	slo, p99 := "   –   ", "–"
	if a.Done > 0 {
		slo = fmt.Sprintf("%6.2f%%", 100*a.SLOCompliance)
		p99 = a.P99.Round(time.Millisecond).String()
	}
	return fmt.Sprintf("%-7s %4.0fs/%.0fs  done %6d  live %4d  p99 %7s  SLO %s  errors %d",
		a.Phase, a.Elapsed.Seconds(), a.Total.Seconds(), a.Done, a.Live,
		p99, slo, a.Errors)
}

// runCriticality runs --scenario criticality under one policy (default
// gantry) and prints or writes its report as emitUp does.
func runCriticality(cmd *cobra.Command, cfg liverun.UpConfig, out string, asJSON bool) error {
	if !cmd.Flags().Changed("policy") {
		cfg.Policies = []string{"gantry"}
	}
	if !cmd.Flags().Changed("capacity") {
		cfg.Capacity = liverun.CriticalityCapacity
	}
	if !cmd.Flags().Changed("duration") {
		cfg.Duration = time.Minute
	}
	if !cmd.Flags().Changed("start-delay") {
		cfg.StartDelay = liverun.CriticalityStartDelay
	}
	rep, err := liverun.Criticality(cmd.Context(), cfg)
	if err != nil {
		return interrupted(cmd, err)
	}
	defer rep.Wait()
	w := cmd.OutOrStdout()
	if out != "" {
		if err := rep.WriteDir(out); err != nil {
			return err
		}
	}
	if asJSON {
		err = rep.WriteJSON(w)
	} else if err = rep.WriteText(w); err == nil && out != "" {
		fmt.Fprintf(w, "\nreport, JSON and plots in %s/\n", out)
	}
	if err == nil && rep.Interrupted {
		err = fmt.Errorf("interrupted: the report covers the requests answered until then")
	}
	return err
}
