package liverun

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"gantry.dev/gantry/pkg/loadgen"
)

// UpReport is a side-by-side run, in the shape ../shared/conventions.md
// fixes for `gantry up --json` and report.json.
type UpReport struct {
	App       string      `json:"app"`
	Trace     string      `json:"trace"`
	Rate      float64     `json:"rate"`
	DurationS float64     `json:"duration_s"`
	Seed      uint64      `json:"seed"`
	Runs      []PolicyRun `json:"runs"`
	Verdict   string      `json:"verdict"`

	// What else the run was, for the report's reader.
	Dist string `json:"dist"`
	// SLOFactor is the SLO over the app's largest execution time, for
	// replay functions.
	SLOFactor    float64 `json:"slo_factor,omitempty"`
	Functions    string  `json:"functions"`
	StartDelayMs float64 `json:"start_delay_ms"`
	Capacity     int     `json:"capacity"`
	WarmupS      float64 `json:"warmup_s"`
	Interrupted  bool    `json:"interrupted,omitempty"`

	// arrivals is the measured trace's requests per second.
	arrivals []float64
	sloMs    float64
	// stopped waits for the gateways of an interrupted run to stop.
	stopped func()
}

// Wait returns once the run's gateways have stopped: an interrupted run
// stops them while its report is written.
func (r *UpReport) Wait() { waitStopped(r.stopped) }

func waitStopped(stopped func()) {
	if stopped != nil {
		stopped()
	}
}

// PolicyRun is one policy's gateway over the measured phase.
type PolicyRun struct {
	Policy            string           `json:"policy"`
	Requests          int64            `json:"requests"`
	Errors            int64            `json:"errors"`
	ErrorsByKind      map[string]int64 `json:"errors_by_kind"`
	SLOMs             float64          `json:"slo_ms"`
	SLOCompliance     float64          `json:"slo_compliance"`
	ContainersSpawned int64            `json:"containers_spawned"`
	AvgContainers     float64          `json:"avg_containers"`
	P50Ms             float64          `json:"p50_ms"`
	P95Ms             float64          `json:"p95_ms"`
	P99Ms             float64          `json:"p99_ms"`
	ThroughputRPS     float64          `json:"throughput_rps"`
	// MinLive and MaxLive bound the live instances sampled while measured.
	MinLive int `json:"min_live"`
	MaxLive int `json:"max_live"`

	live    []LivePoint
	latency []time.Duration
	// samples are the measured phase's answered requests, for requests.csv.
	samples []loadgen.Sample
}

// SLOTarget is the compliance a policy must reach, with no error, to hold
// the SLO in the verdict.
const SLOTarget = 0.999

// Holds reports whether the run held the SLO: SLOTarget or better, no error.
func (r PolicyRun) Holds() bool {
	return r.SLOCompliance >= SLOTarget && r.Errors == 0 && r.Requests > 0
}

func newUpReport(cfg UpConfig, st streamSpec, results []armResult) *UpReport {
	rep := &UpReport{App: cfg.App, Trace: cfg.Trace, Rate: cfg.Rate, DurationS: cfg.Duration.Seconds(), Seed: cfg.Seed,
		Dist: cfg.Dist, SLOFactor: cfg.SLOFactor, Functions: cfg.Functions, StartDelayMs: millis(cfg.StartDelay), Capacity: cfg.Capacity,
		WarmupS: max(cfg.Warmup, 0).Seconds(), arrivals: st.load.Trace.PerSecond, sloMs: millis(st.slo)}
	for _, a := range results {
		run := policyRun(a.spec.name, a.streams[0], a)
		rep.Runs = append(rep.Runs, run)
		rep.Interrupted = rep.Interrupted || a.interrupted
	}
	rep.Verdict = verdict(rep.Runs, rep.sloMs)
	return rep
}

// policyRun is one stream's figures on one arm.
func policyRun(name string, sr streamResult, a armResult) PolicyRun {
	s := sr.res.Summary()
	run := PolicyRun{Policy: name, Requests: s.Requests, Errors: s.Errors, ErrorsByKind: s.ErrorsByKind,
		SLOMs: s.SLOMs, SLOCompliance: s.SLOCompliance, ContainersSpawned: a.spawned, AvgContainers: a.avgLive,
		P50Ms: s.P50Ms, P95Ms: s.P95Ms, P99Ms: s.P99Ms, ThroughputRPS: s.ThroughputRPS,
		MinLive: a.minLive, MaxLive: a.maxLive, live: a.live, samples: sr.samples}
	if run.ErrorsByKind == nil {
		run.ErrorsByKind = map[string]int64{}
	}
	for _, smp := range sr.samples {
		if smp.Measured {
			run.latency = append(run.latency, smp.Latency)
		}
	}
	return run
}

// verdict says which policy held the SLO with the fewest mean live
// instances, or that none did and which came closest.
func verdict(runs []PolicyRun, sloMs float64) string {
	slo := time.Duration(sloMs * float64(time.Millisecond))
	var held []PolicyRun
	for _, r := range runs {
		if r.Holds() {
			held = append(held, r)
		}
	}
	if len(held) == 0 {
		if len(runs) == 0 {
			return "no policy ran"
		}
		best := slices.MaxFunc(runs, func(a, b PolicyRun) int {
			if a.SLOCompliance != b.SLOCompliance {
				return cmpFloat(a.SLOCompliance, b.SLOCompliance)
			}
			return cmpFloat(b.AvgContainers, a.AvgContainers)
		})
		return fmt.Sprintf("no policy held the SLO (%.1f%% of requests within %v, no errors); closest: %s, %.2f%% with %d errors and %.1f mean live instances",
			100*SLOTarget, slo, best.Policy, 100*best.SLOCompliance, best.Errors, best.AvgContainers)
	}
	slices.SortStableFunc(held, func(a, b PolicyRun) int { return cmpFloat(a.AvgContainers, b.AvgContainers) })
	w := held[0]
	msg := fmt.Sprintf("%s held the SLO (%.1f%% of requests within %v, no errors) with the fewest instances: %.1f mean live",
		w.Policy, 100*SLOTarget, slo, w.AvgContainers)
	var others []string
	for _, r := range held[1:] {
		others = append(others, fmt.Sprintf("%s %.1f", r.Policy, r.AvgContainers))
	}
	if len(others) > 0 {
		msg += "; also held it: " + strings.Join(others, ", ")
	}
	var missed []string
	for _, r := range runs {
		if !r.Holds() {
			missed = append(missed, r.Policy)
		}
	}
	if len(missed) > 0 {
		msg += "; missed it: " + strings.Join(missed, ", ")
	}
	return msg
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// WriteJSON prints the report as one JSON object.
func (r *UpReport) WriteJSON(w io.Writer) error {
	return writeJSON(w, r)
}

// WriteText prints the table and the verdict for a terminal.
func (r *UpReport) WriteText(w io.Writer) error {
	_, err := io.WriteString(w, r.markdown())
	return err
}

func (r *UpReport) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# gantry up: %s, %d policies side by side\n\n", r.App, len(r.Runs))
	fmt.Fprintf(&b, "Load: %s trace at %g requests/s, %s input sizes, %.0f s measured after %.0f s of warm-up, seed %d; "+
		"%s functions, instance start delay %v, capacity %s per gateway. SLO %v end to end%s.\n\n",
		r.Trace, r.Rate, r.Dist, r.DurationS, r.WarmupS, r.Seed, r.Functions,
		time.Duration(r.StartDelayMs*float64(time.Millisecond)), capacityText(r.Capacity),
		time.Duration(r.sloMs*float64(time.Millisecond)), sloFactorText(r.SLOFactor))
	b.WriteString(r.table())
	fmt.Fprintf(&b, "\n**Verdict:** %s.\n", r.Verdict)
	if r.Interrupted {
		b.WriteString("\nInterrupted before the trace ended: the figures cover what finished.\n")
	}
	return b.String()
}

func sloFactorText(f float64) string {
	if f == 0 {
		return ""
	}
	return fmt.Sprintf(" (%g × the largest execution time)", f)
}

func capacityText(c int) string {
	if c == 0 {
		return "unbounded"
	}
	return fmt.Sprint(c)
}

// table is the one table of the report: a row per policy.
func (r *UpReport) table() string {
	var b strings.Builder
	b.WriteString("| policy | requests | errors | SLO compliance | mean live instances | live min–max | instances spawned | p50 | p95 | p99 |\n")
	b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, run := range r.Runs {
		fmt.Fprintf(&b, "| %s | %d | %s | %.2f%% | %.2f | %d–%d | %d | %.0f ms | %.0f ms | %.0f ms |\n",
			run.Policy, run.Requests, errorsText(run), 100*run.SLOCompliance, run.AvgContainers,
			run.MinLive, run.MaxLive, run.ContainersSpawned, run.P50Ms, run.P95Ms, run.P99Ms)
	}
	return b.String()
}

// errorsText is the error count with its kinds.
func errorsText(run PolicyRun) string {
	if run.Errors == 0 {
		return "0"
	}
	var kinds []string
	for _, k := range slices.Sorted(maps.Keys(run.ErrorsByKind)) {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, run.ErrorsByKind[k]))
	}
	return fmt.Sprintf("%d (%s)", run.Errors, strings.Join(kinds, ", "))
}

// Files WriteDir writes.
const (
	UpReportFile    = "report.md"
	UpJSONFile      = "report.json"
	UpInstancesPlot = "instances.png"
	UpLatencyPlot   = "latency.png"
	// UpRequestsFile has every measured request of every policy, so that
	// a miss can be traced to its moment and its input size.
	UpRequestsFile = "requests.csv"
)

// WriteDir writes report.md, report.json, requests.csv, instances.png and
// latency.png.
func (r *UpReport) WriteDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	// The two plots are drawn at once: after SIGINT they are most of
	// what stands between the signal and the exit.
	var instErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		instErr = plotInstances(filepath.Join(dir, UpInstancesPlot), r.instanceSeries(), r.arrivals,
			fmt.Sprintf("Live instances of %s, every policy on the same arrivals", r.App))
	}()
	latErr := plotLatencyTails(filepath.Join(dir, UpLatencyPlot), r.latencySeries(), r.sloMs)
	<-done
	if err := errors.Join(instErr, latErr); err != nil {
		return err
	}
	if err := r.writeRequests(filepath.Join(dir, UpRequestsFile)); err != nil {
		return err
	}
	md := r.markdown() + fmt.Sprintf("\n![live instances](%s)\n\n![latency](%s)\n", UpInstancesPlot, UpLatencyPlot)
	return writeReportFiles(dir, UpReportFile, md, UpJSONFile, r)
}

func (r *UpReport) instanceSeries() []namedLive {
	out := make([]namedLive, len(r.Runs))
	for i, run := range r.Runs {
		out[i] = namedLive{name: run.Policy, live: run.live}
	}
	return out
}

func (r *UpReport) latencySeries() []namedLatency {
	out := make([]namedLatency, len(r.Runs))
	for i, run := range r.Runs {
		out[i] = namedLatency{name: run.Policy, latency: run.latency}
	}
	return out
}

// writeRequests writes one CSV row per measured request of every policy:
// its intended send time from the measured start, input size, latency,
// HTTP status and kind, and whether it met the SLO.
func (r *UpReport) writeRequests(path string) error {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	_ = w.Write([]string{"policy", "offset_s", "size", "latency_ms", "status", "kind", "within_slo"})
	for _, run := range r.Runs {
		for _, s := range run.samples {
			if !s.Measured {
				continue
			}
			within := s.Kind == loadgen.KindOK && millis(s.Latency) <= r.sloMs
			_ = w.Write([]string{run.Policy, strconv.FormatFloat(s.Offset.Seconds(), 'f', 3, 64),
				strconv.FormatFloat(s.Size, 'g', 6, 64), strconv.FormatFloat(millis(s.Latency), 'f', 1, 64),
				strconv.Itoa(s.Status), s.Kind, strconv.FormatBool(within)})
		}
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}
