package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"gantry.dev/gantry/examples/functions"
	"gantry.dev/gantry/pkg/loadgen"
	"gantry.dev/gantry/pkg/trace"
	"gantry.dev/gantry/pkg/workload"
)

type loadFlags struct {
	gateway, function, app, url, workload string
	trace, traceFile, azureFunction, dist string
	payload, out, stack                   string
	rate, minSize, maxSize, unitBytes     float64
	duration, timeout, slo                time.Duration
	seed                                  uint64
	maxInFlight, pool                     int
	json, quiet                           bool
}

// Files written under --out.
const (
	loadCSVFile     = "requests.csv"
	loadPlotFile    = "latency.png"
	loadSummaryFile = "summary.json"
)

// loadAppPool is the default pool per size bucket for app payloads, which
// build real images, audio and PDFs and are too slow to build per request.
const loadAppPool = 1

func newLoadCmd() *cobra.Command {
	f := &loadFlags{}
	cmd := &cobra.Command{
		Use:   "load",
		Short: "Open-loop load generator: replay a trace against a gateway and report latency, SLO compliance and errors",
		Long: `Replays a trace's per-second rates as Poisson arrivals against an OpenFaaS-compatible
gateway (POST /function/NAME or /app/NAME) or any URL. Latency runs from each request's
intended send time, so a stalled server cannot hide behind a slowed-down client; an arrival
that finds --max-inflight requests out is counted as a client_overload error.`,
		Example: `  gantry load --function image-compression --trace wiki --rate 50 --duration 2m
  gantry load --app document-summary --payload document-summary --out out/load
  gantry load --url http://127.0.0.1:8080/function/resize --workload image-compression --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runLoad(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.gateway, "gateway", "http://127.0.0.1:8080", "gateway base URL, with --function or --app")
	fl.StringVar(&f.function, "function", "", "invoke POST /function/NAME on the gateway")
	fl.StringVar(&f.app, "app", "", "invoke the chain POST /app/NAME on the gateway")
	fl.StringVar(&f.url, "url", "", "invoke this full URL instead of a gateway path")
	fl.StringVar(&f.workload, "workload", "", fmt.Sprintf("app model for input sizes and the SLO %v (default: the function, app or payload name when it is one)", workload.Names()))
	fl.StringVar(&f.trace, "trace", "poisson", fmt.Sprintf("arrival trace generator %v", trace.Names()))
	fl.StringVar(&f.traceFile, "trace-file", "", "replay arrivals from a file: per-second counts (CSV) or the Azure Functions 2019 format")
	fl.StringVar(&f.azureFunction, "azure-function", "", "HashFunction to replay from an Azure Functions file (default: all rows summed)")
	fl.Float64Var(&f.rate, "rate", 10, "mean request rate (requests/s); with --trace-file, rescales the file to this mean")
	fl.DurationVar(&f.duration, "duration", time.Minute, fmt.Sprintf("length of the run, 1s to %v; with --trace-file, truncates the file", loadgen.MaxDuration))
	fl.StringVar(&f.dist, "dist", "heavy", fmt.Sprintf("input-size distribution %v", workload.DistNames()))
	fl.Float64Var(&f.minSize, "min-size", 0, "smallest input size in the workload's unit (default: the workload's, else 1)")
	fl.Float64Var(&f.maxSize, "max-size", 0, "largest input size (default: the workload's, else 1)")
	fl.StringVar(&f.payload, "payload", "header", "request bodies: zeros (size x unit bytes), header (X-Input-Size, tiny body), an app name for valid inputs, or replay:APP")
	fl.Float64Var(&f.unitBytes, "unit-bytes", 0, "bytes per unit of input size for --payload zeros (default: from the workload's unit, KB = 1024 as the gateway counts)")
	fl.IntVar(&f.pool, "pool", 0, fmt.Sprintf("payloads pre-generated per size bucket (%d buckets); 0 builds each body per request (default: %d for app payloads, else 0)", loadgen.DefaultBuckets, loadAppPool))
	fl.Uint64Var(&f.seed, "seed", 1, "random seed for the trace, arrivals, sizes and payloads")
	fl.IntVar(&f.maxInFlight, "max-inflight", loadgen.DefaultMaxInFlight, fmt.Sprintf("bound on concurrent requests, 1 to %d; arrivals beyond it count as client_overload", loadgen.MaxInFlightLimit))
	fl.DurationVar(&f.timeout, "timeout", loadgen.DefaultTimeout, fmt.Sprintf("per-request timeout, at most %v", loadgen.MaxTimeout))
	fl.DurationVar(&f.slo, "slo", 0, "latency SLO (default: the function's or app's, from --stack or else from the gateway's /system/function/NAME or /system/apps/NAME; required with --url)")
	fl.StringVar(&f.stack, "stack", "", "stack file the gateway serves: the SLO of --function or --app comes from it instead of the gateway")
	fl.BoolVar(&f.json, "json", false, `print one JSON object {"requests","ok","errors","errors_by_kind",...} on stdout`)
	fl.StringVar(&f.out, "out", "", fmt.Sprintf("write %s (one row per request), %s and %s into this directory", loadCSVFile, loadPlotFile, loadSummaryFile))
	fl.BoolVar(&f.quiet, "quiet", false, "no progress line on stderr (there is none when stderr is not a terminal)")
	return cmd
}

func runLoad(cmd *cobra.Command, f *loadFlags) error {
	if err := checkLoadFlags(cmd, f); err != nil {
		return err
	}
	cfg, err := loadConfig(cmd, f)
	if err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return usageError{err}
	}
	finishOut, err := openLoadOut(f.out, &cfg)
	if err != nil {
		return err
	}
	if stderr, ok := cmd.ErrOrStderr().(*os.File); cfg.Pool > 0 && !f.quiet && ok && isTerminal(stderr) {
		fmt.Fprintf(cmd.ErrOrStderr(), "pre-generating %d payload(s) per size bucket before the run\n", cfg.Pool)
	}
	stopBar := loadProgress(cmd.ErrOrStderr(), f.quiet, &cfg)
	res, err := loadgen.Run(cmd.Context(), cfg)
	stopBar()
	if err != nil {
		return err
	}
	if err := finishOut(res); err != nil {
		return err
	}
	return emitLoad(cmd, f, res)
}

// checkLoadFlags bounds every flag before anything is allocated or sent.
func checkLoadFlags(cmd *cobra.Command, f *loadFlags) error {
	if err := checkLoadTarget(cmd, f); err != nil {
		return err
	}
	changed := cmd.Flags().Changed
	seconds := float64(f.duration / time.Second)
	switch {
	case badFloat(f.rate) || f.rate <= 0 || f.rate > loadgen.MaxRequests:
		return usagef("--rate must be a number of requests per second in (0, %d], got %v", loadgen.MaxRequests, f.rate)
	case f.duration < time.Second || f.duration > loadgen.MaxDuration:
		return usagef("--duration must be from 1s to %v, got %v", loadgen.MaxDuration, f.duration)
	case f.traceFile == "" && f.rate*seconds > loadgen.MaxRequests:
		return usagef("--rate %v for %v expects %.0f requests, more than the %d limit", f.rate, f.duration, f.rate*seconds, loadgen.MaxRequests)
	case f.maxInFlight < 1 || f.maxInFlight > loadgen.MaxInFlightLimit:
		return usagef("--max-inflight must be from 1 to %d, got %d", loadgen.MaxInFlightLimit, f.maxInFlight)
	case f.timeout <= 0 || f.timeout > loadgen.MaxTimeout:
		return usagef("--timeout must be positive and at most %v, got %v", loadgen.MaxTimeout, f.timeout)
	case changed("slo") && (f.slo <= 0 || f.slo > loadgen.MaxSLO):
		return usagef("--slo must be positive and at most %v, got %v", loadgen.MaxSLO, f.slo)
	case (changed("min-size") && !loadPositive(f.minSize)) || (changed("max-size") && !loadPositive(f.maxSize)):
		return usagef("--min-size and --max-size must be positive, got %v and %v", f.minSize, f.maxSize)
	case changed("unit-bytes") && !loadPositive(f.unitBytes):
		return usagef("--unit-bytes must be positive, got %v", f.unitBytes)
	case changed("pool") && (f.pool < 0 || f.pool*loadgen.DefaultBuckets > loadgen.MaxPoolPayloads):
		return usagef("--pool must be from 0 to %d, got %d", loadgen.MaxPoolPayloads/loadgen.DefaultBuckets, f.pool)
	case f.traceFile != "" && changed("trace"):
		return usagef("set --trace or --trace-file, not both")
	case f.traceFile == "" && changed("azure-function"):
		return usagef("--azure-function needs --trace-file")
	}
	return nil
}

func loadPositive(v float64) bool { return !badFloat(v) && v > 0 }

// checkLoadTarget wants exactly one of --function, --app and --url.
func checkLoadTarget(cmd *cobra.Command, f *loadFlags) error {
	set := 0
	for _, v := range []string{f.function, f.app, f.url} {
		if v != "" {
			set++
		}
	}
	switch {
	case set != 1:
		return usagef("set exactly one of --function, --app and --url")
	case f.url != "" && cmd.Flags().Changed("gateway"):
		return usagef("--gateway goes with --function or --app, not --url")
	case f.url == "" && !httpURL(f.gateway):
		return usagef("--gateway must be an absolute http or https URL such as http://127.0.0.1:8080, got %q", f.gateway)
	}
	return nil
}

// httpURL reports whether s is an absolute http(s) URL with a host.
func httpURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// loadURL is the request target.
func loadURL(f *loadFlags) string {
	base := strings.TrimSuffix(f.gateway, "/")
	switch {
	case f.function != "":
		return base + "/function/" + url.PathEscape(f.function)
	case f.app != "":
		return base + "/app/" + url.PathEscape(f.app)
	}
	return f.url
}

// loadConfig resolves names into a loadgen.Config; the numbers were
// bounded by checkLoadFlags.
func loadConfig(cmd *cobra.Command, f *loadFlags) (loadgen.Config, error) {
	target, err := loadTarget(cmd, f)
	if err != nil {
		return loadgen.Config{}, err
	}
	app, known, err := loadWorkload(f, target.app)
	if err != nil {
		return loadgen.Config{}, err
	}
	cfg := loadgen.Config{URL: loadURL(f), Seed: f.seed, MaxInFlight: f.maxInFlight, Timeout: f.timeout}
	if cfg.Trace, err = loadTrace(cmd, f); err != nil {
		return cfg, err
	}
	if cfg.Dist, err = workload.LookupDist(f.dist); err != nil {
		return cfg, usageError{err}
	}
	cfg.MinSize, cfg.MaxSize = loadSizes(cmd, f, app, known)
	cfg.SLO = target.slo
	cfg.Payload, cfg.Pool, err = loadPayload(cmd, f, app, known, cfg.MaxSize)
	return cfg, err
}

// loadWorkload picks the app model of the input sizes and payloads:
// --workload, else the target's, its app's or the payload's name when it
// names an app.
func loadWorkload(f *loadFlags, targetApp string) (app workload.App, known bool, err error) {
	if f.workload != "" {
		app, err = workload.Lookup(f.workload)
		if err != nil {
			return app, false, usageError{err}
		}
		return app, true, nil
	}
	payloadApp := strings.TrimPrefix(f.payload, "replay:")
	for _, name := range []string{f.function, f.app, targetApp, payloadApp} {
		if a, lookupErr := workload.Lookup(name); lookupErr == nil {
			return a, true, nil
		}
	}
	return workload.App{}, false, nil
}

func loadTrace(cmd *cobra.Command, f *loadFlags) (trace.Trace, error) {
	if f.traceFile == "" {
		tr, err := trace.Generate(f.trace, f.rate, f.duration, f.seed)
		if err != nil {
			return tr, asUsage(err)
		}
		return tr, nil
	}
	tr, err := trace.ReadFile(f.traceFile, f.azureFunction)
	if err != nil {
		return tr, asUsage(err) // a malformed file is the user's input: exit 2 with its line
	}
	if cmd.Flags().Changed("rate") && tr.Mean() > 0 {
		tr = tr.Scale(f.rate / tr.Mean())
	}
	if cmd.Flags().Changed("duration") {
		tr = tr.Truncate(f.duration)
	}
	return tr, nil
}

func loadSizes(cmd *cobra.Command, f *loadFlags, app workload.App, known bool) (lo, hi float64) {
	lo, hi = 1, 1
	if known {
		lo, hi = app.MinSize, app.MaxSize
	}
	if cmd.Flags().Changed("min-size") {
		lo = f.minSize
	}
	if cmd.Flags().Changed("max-size") {
		hi = f.maxSize
	}
	return lo, hi
}

// loadPayload resolves --payload: a built-in, or an app's generator from
// examples/functions, whose real inputs are pooled by default because
// building them costs more than sending them.
func loadPayload(cmd *cobra.Command, f *loadFlags, app workload.App, known bool, maxSize float64) (loadgen.Payload, int, error) {
	pool := f.pool
	unit := f.unitBytes
	if !cmd.Flags().Changed("unit-bytes") {
		unit = loadgen.UnitBytes(app.SizeUnit) // 1 when no app is known
	}
	p, err := loadgen.Builtin(f.payload, unit)
	if err == nil {
		if f.payload == "zeros" && maxSize*unit > loadgen.MaxBodyBytes {
			return nil, 0, usagef("--payload zeros: --max-size %v x %v bytes is over the %d-byte body limit", maxSize, unit, loadgen.MaxBodyBytes)
		}
		return p, pool, nil
	}
	if !errors.Is(err, loadgen.ErrUnknownPayload) {
		return nil, 0, usageError{err}
	}
	gen, err := functions.Payload(f.payload)
	if err != nil {
		return nil, 0, usagef("--payload: %v (built in: %v)", err, loadgen.BuiltinNames())
	}
	if !cmd.Flags().Changed("pool") && !strings.HasPrefix(f.payload, "replay:") {
		pool = loadAppPool
	}
	return loadgen.Payload(gen), pool, nil
}

// openLoadOut creates the --out directory and the streaming CSV before the
// run, so that a bad path fails before any load is sent. The returned func
// finishes the files once the result is in.
func openLoadOut(dir string, cfg *loadgen.Config) (finish func(*loadgen.Result) error, err error) {
	if dir == "" {
		return func(*loadgen.Result) error { return nil }, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	file, err := os.Create(filepath.Join(dir, loadCSVFile))
	if err != nil {
		return nil, err
	}
	w := loadgen.NewCSVWriter(file)
	cfg.OnSample = w.Write
	return func(res *loadgen.Result) error {
		err := errors.Join(w.Flush(), file.Close())
		if err != nil {
			return err
		}
		if err := loadgen.WritePlot(filepath.Join(dir, loadPlotFile), res); err != nil {
			return err
		}
		return writeLoadSummary(filepath.Join(dir, loadSummaryFile), res)
	}, nil
}

func writeLoadSummary(path string, res *loadgen.Result) error {
	data, err := json.MarshalIndent(res.Summary(), "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// loadProgress draws a progress bar of the run's time on w, with requests
// sent and done, unless quiet. The returned func ends the bar's line.
func loadProgress(w io.Writer, quiet bool, cfg *loadgen.Config) (stop func()) {
	// The bar redraws itself with carriage returns: in a log file or a
	// pipe it is noise, so it goes only to a terminal (../shared's rule
	// for progress).
	if f, ok := w.(*os.File); quiet || !ok || !isTerminal(f) {
		return func() {}
	}
	total := cfg.Trace.Duration()
	bar := progressbar.NewOptions64(total.Milliseconds(),
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(200*time.Millisecond),
		progressbar.OptionShowElapsedTimeOnFinish(),
	)
	cfg.Progress = func(sent, done int64, elapsed, total time.Duration) {
		bar.Describe(fmt.Sprintf("sent %d, done %d", sent, done))
		_ = bar.Set64(min(elapsed, total).Milliseconds())
	}
	return func() {
		_ = bar.Exit()
		fmt.Fprintln(w)
	}
}

// emitLoad prints the result: JSON or a table on stdout. An interrupted
// run still reports, then exits 1 because it did not run the whole trace.
func emitLoad(cmd *cobra.Command, f *loadFlags, res *loadgen.Result) error {
	var err error
	if f.json {
		err = json.NewEncoder(cmd.OutOrStdout()).Encode(res.Summary())
	} else {
		err = loadgen.WriteText(cmd.OutOrStdout(), res)
	}
	if err != nil {
		return err
	}
	if f.out != "" {
		fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s, %s and %s in %s\n", loadCSVFile, loadPlotFile, loadSummaryFile, f.out)
	}
	if res.Interrupted {
		return fmt.Errorf("interrupted after %v: the report covers the requests sent until then", res.Duration.Round(time.Millisecond))
	}
	return nil
}
