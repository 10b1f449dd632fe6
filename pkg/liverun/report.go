package liverun

import (
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"gantry.dev/gantry/pkg/loadgen"
)

// Report is what a live run measured, over the measured phase only.
type Report struct {
	Policy string  `json:"policy"`
	App    string  `json:"app"`
	Trace  string  `json:"trace"`
	Dist   string  `json:"dist"`
	Rate   float64 `json:"rate"`
	// Requests counts every arrival due, Errors those not answered 2xx.
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
	MaxMs             float64          `json:"max_ms"`
	ThroughputRPS     float64          `json:"throughput_rps"`
	DurationS         float64          `json:"duration_s"`
	Interrupted       bool             `json:"interrupted,omitempty"`
	Functions         []FunctionReport `json:"functions"`

	live []LivePoint
	load *loadgen.Result
	// from and to bound the measured phase on the wall clock.
	from, to time.Time
	// replay is what a replay run measured besides the report's figures.
	replay *replayFacts
}

// FunctionReport is one function of the app over the measured phase.
type FunctionReport struct {
	Name          string  `json:"name"`
	Spawned       int64   `json:"spawned"`
	Completed     int64   `json:"completed"`
	StartFailures int64   `json:"start_failures"`
	Crashes       int64   `json:"crashes"`
	MeanColdMs    float64 `json:"mean_cold_start_ms"`
}

func newReport(cfg Config, p *plan, res *loadgen.Result, before, after counters, live []LivePoint) *Report {
	s := res.Summary()
	elapsed := after.at.Sub(before.at).Seconds()
	r := &Report{Policy: cfg.Policy, App: p.app.Name, Trace: cfg.Trace, Dist: cfg.Dist, Rate: cfg.Rate,
		Requests: s.Requests, Errors: s.Errors, ErrorsByKind: s.ErrorsByKind, SLOMs: s.SLOMs,
		SLOCompliance: s.SLOCompliance, ContainersSpawned: after.spawned - before.spawned,
		P50Ms: s.P50Ms, P95Ms: s.P95Ms, P99Ms: s.P99Ms, MaxMs: s.MaxMs, ThroughputRPS: s.ThroughputRPS,
		DurationS: s.DurationS, Interrupted: res.Interrupted, live: live, load: res,
		from: before.at, to: after.at}
	if elapsed > 0 {
		r.AvgContainers = (after.instanceSeconds - before.instanceSeconds) / elapsed
	}
	for _, name := range p.app.Functions {
		a, b := after.perFunction[name], before.perFunction[name]
		fr := FunctionReport{Name: name, Spawned: a.Spawned - b.Spawned, Completed: a.Completed - b.Completed,
			StartFailures: a.StartFailures - b.StartFailures, Crashes: a.Crashes - b.Crashes}
		if n := a.Ready - b.Ready; n > 0 {
			fr.MeanColdMs = float64(a.ColdStartSum-b.ColdStartSum) / float64(n) / float64(time.Millisecond)
		}
		r.Functions = append(r.Functions, fr)
	}
	return r
}

// WriteJSON prints the report as one JSON object.
func (r *Report) WriteJSON(w io.Writer) error {
	return writeJSON(w, r)
}

// WriteText prints a short summary for a terminal.
func (r *Report) WriteText(w io.Writer) error {
	_, err := io.WriteString(w, r.markdown())
	return err
}

func (r *Report) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# gantry up: %s under %s\n\n", r.App, r.Policy)
	fmt.Fprintf(&b, "Load: %s trace, %.0f requests/s, %s input sizes, %.0f s measured.\n\n", r.Trace, r.Rate, r.Dist, r.DurationS)
	fmt.Fprintf(&b, "| metric | value |\n|---|--:|\n")
	rows := [][2]string{
		{"requests", fmt.Sprint(r.Requests)},
		{"errors", fmt.Sprint(r.Errors)},
		{fmt.Sprintf("SLO compliance (%.0f ms)", r.SLOMs), fmt.Sprintf("%.2f%%", 100*r.SLOCompliance)},
		{"instances spawned while measured", fmt.Sprint(r.ContainersSpawned)},
		{"mean live instances", fmt.Sprintf("%.2f", r.AvgContainers)},
		{"p50 / p95 / p99 latency", fmt.Sprintf("%.1f / %.1f / %.1f ms", r.P50Ms, r.P95Ms, r.P99Ms)},
		{"throughput", fmt.Sprintf("%.1f ok/s", r.ThroughputRPS)},
	}
	for _, row := range rows {
		fmt.Fprintf(&b, "| %s | %s |\n", row[0], row[1])
	}
	for _, k := range slices.Sorted(maps.Keys(r.ErrorsByKind)) {
		fmt.Fprintf(&b, "| error %s | %d |\n", k, r.ErrorsByKind[k])
	}
	fmt.Fprintf(&b, "\n| function | spawned | completed | mean cold start | start failures | crashes |\n|---|--:|--:|--:|--:|--:|\n")
	for _, f := range r.Functions {
		cold := "–" // no start while measured: no cold start to average
		if f.Spawned > 0 {
			cold = fmt.Sprintf("%.0f ms", f.MeanColdMs)
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %s | %d | %d |\n", f.Name, f.Spawned, f.Completed, cold, f.StartFailures, f.Crashes)
	}
	if r.Interrupted {
		b.WriteString("\nInterrupted before the trace ended: the figures cover what finished.\n")
	}
	return b.String()
}

// WriteDir writes report.md, report.json, latency.png and instances.png.
func (r *Report) WriteDir(dir string) error {
	md := r.markdown() + "\n![latency](latency.png)\n\n![instances](instances.png)\n"
	if err := writeReportFiles(dir, UpReportFile, md, UpJSONFile, r); err != nil {
		return err
	}
	return r.writePlots(dir)
}

// writePlots writes latency.png and instances.png into dir.
func (r *Report) writePlots(dir string) error {
	if err := loadgen.WritePlot(filepath.Join(dir, "latency.png"), r.load); err != nil {
		return err
	}
	return r.plotLive(filepath.Join(dir, "instances.png"))
}

func (r *Report) plotLive(path string) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Live instances of %s under %s", r.App, r.Policy)
	p.X.Label.Text = "time (s)"
	p.Y.Label.Text = "instances (starting or ready)"
	pts := make(plotter.XYs, len(r.live))
	for i, l := range r.live {
		pts[i] = plotter.XY{X: l.Offset.Seconds(), Y: float64(l.Live)}
	}
	line, err := plotter.NewLine(pts)
	if err != nil {
		return err
	}
	p.Add(line)
	p.Y.Min = 0
	return p.Save(7*vg.Inch, 4*vg.Inch, path)
}
