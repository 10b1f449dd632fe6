package e2ebench

import (
	"encoding/csv"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"gantry.dev/gantry/pkg/loadgen"
)

// Row is one orchestrator's client-side figures; its JSON is the
// `--json` row.
type Row struct {
	Orchestrator  string  `json:"orchestrator"`
	Mode          string  `json:"mode"`
	Burst         int     `json:"burst"`
	Requests      int64   `json:"requests"`
	Errors        int64   `json:"errors"`
	P50Ms         float64 `json:"p50_ms"`
	P95Ms         float64 `json:"p95_ms"`
	P99Ms         float64 `json:"p99_ms"`
	SLOCompliance float64 `json:"slo_compliance"`
	// ChurnObjects is how many interfering objects were created meanwhile.
	ChurnObjects int `json:"-"`
}

func newRun(orch string, opts Options, res *loadgen.Result) Row {
	s := res.Summary()
	return Row{Orchestrator: orch, Mode: opts.Mode, Burst: opts.Burst, Requests: s.Requests, Errors: s.Errors,
		P50Ms: s.P50Ms, P95Ms: s.P95Ms, P99Ms: s.P99Ms, SLOCompliance: s.SLOCompliance}
}

// Report is a whole run. Only Runs is in its JSON.
type Report struct {
	Runs        []Row    `json:"runs"`
	Options     Options  `json:"-"`
	Samples     []Sample `json:"-"`
	Interrupted bool     `json:"-"`
}

// The paper's RQ2 figures: the RNN function at the highest stress load
// (PREEMPT-FaaS, Figure 9), ms.
const (
	PaperVanillaP50 = 761.45
	PaperGantryP50  = 145.21
	PaperVanillaP95 = 7913.29
	PaperGantryP95  = 5716.75
)

// Reduction is how much lower candidate is than baseline, as a fraction
// (0.28 = 28% lower); NaN when baseline is not positive.
func Reduction(baseline, candidate float64) float64 {
	if !(baseline > 0) {
		return math.NaN()
	}
	return (baseline - candidate) / baseline
}

func (r *Report) run(orch string) (Row, bool) {
	for _, x := range r.Runs {
		if x.Orchestrator == orch {
			return x, true
		}
	}
	return Row{}, false
}

// WriteTable prints the runs side by side and, with both orchestrators,
// Gantry's reductions beside the paper's.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "orchestrator\tmode\tburst\trequests\terrors\tp50 ms\tp95 ms\tp99 ms\tSLO compliance\tchurn objects\t")
	for _, x := range r.Runs {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%.1f\t%.1f\t%.1f\t%.1f%%\t%d\t\n", x.Orchestrator, x.Mode, x.Burst,
			x.Requests, x.Errors, x.P50Ms, x.P95Ms, x.P99Ms, 100*x.SLOCompliance, x.ChurnObjects)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if line := r.reductionLine(); line != "" {
		_, err := fmt.Fprintln(w, line)
		return err
	}
	return nil
}

func (r *Report) reductionLine() string {
	v, ok1 := r.run(Vanilla)
	g, ok2 := r.run(Gantry)
	if !ok1 || !ok2 {
		return ""
	}
	return fmt.Sprintf("gantry vs vanilla: p50 %s lower, p95 %s lower (paper, RNN at the highest churn: p50 %s, p95 %s lower)",
		pct(Reduction(v.P50Ms, g.P50Ms)), pct(Reduction(v.P95Ms, g.P95Ms)),
		pct(Reduction(PaperVanillaP50, PaperGantryP50)), pct(Reduction(PaperVanillaP95, PaperGantryP95)))
}

func pct(f float64) string {
	if math.IsNaN(f) {
		return "n/a"
	}
	return fmt.Sprintf("%.0f%%", 100*f)
}

// WriteDir writes samples.csv, latency.png and report.md into dir.
func (r *Report) WriteDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := r.writeCSV(filepath.Join(dir, "samples.csv")); err != nil {
		return err
	}
	if err := r.plot().Save(7*vg.Inch, 4*vg.Inch, filepath.Join(dir, "latency.png")); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "report.md"))
	if err != nil {
		return err
	}
	if err := r.WriteMarkdown(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func (r *Report) writeCSV(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	_ = w.Write([]string{"orchestrator", "offset_s", "latency_ms", "measured", "status", "kind"})
	for _, s := range r.Samples {
		_ = w.Write([]string{s.Orchestrator, strconv.FormatFloat(s.OffsetS, 'f', 3, 64),
			strconv.FormatFloat(s.LatencyMs, 'f', 3, 64), strconv.FormatBool(s.Measured), strconv.Itoa(s.Status), s.Kind})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// plot is the CDF of every measured request's latency, one line per
// orchestrator, with the SLO marked.
func (r *Report) plot() *plot.Plot {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s end to end under %s churn at burst %d", functionName, r.Options.Mode, r.Options.Burst)
	p.X.Label.Text = "client-side latency, ms (log)"
	p.Y.Label.Text = "fraction of requests"
	p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	colors := map[string]color.Color{Vanilla: color.RGBA{R: 200, A: 255}, Gantry: color.RGBA{B: 200, A: 255}}
	for _, orch := range Orchestrators {
		var vals []float64
		for _, s := range r.Samples {
			if s.Orchestrator == orch && s.Measured {
				vals = append(vals, max(s.LatencyMs, 0.1))
			}
		}
		if len(vals) == 0 {
			continue
		}
		slices.Sort(vals)
		xys := make(plotter.XYs, len(vals))
		for i, v := range vals {
			xys[i] = plotter.XY{X: v, Y: float64(i+1) / float64(len(vals))}
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			continue
		}
		l.Color = colors[orch]
		p.Add(l)
		p.Legend.Add(orch, l)
	}
	if slo := float64(r.Options.SLO) / float64(time.Millisecond); slo > 0 {
		if l, err := plotter.NewLine(plotter.XYs{{X: slo, Y: 0}, {X: slo, Y: 1}}); err == nil {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(4)}
			p.Add(l)
			p.Legend.Add("SLO", l)
		}
	}
	p.Legend.Top, p.Legend.Left = false, false
	p.Legend.YOffs = vg.Inch / 3
	return p
}

// WriteMarkdown writes the report: the setup, the table and the paper's
// RQ2 figures beside ours.
func (r *Report) WriteMarkdown(w io.Writer) error {
	o := r.Options
	fmt.Fprintf(w, "# gantry bench e2e\n\n")
	fmt.Fprintf(w, "Function `%s` (`%s`, concurrency 1, 1..%d instances, criticality %d, SLO %v) served through the gateway "+
		"with the Kubernetes backend on a process node; %.0f requests/s (Poisson, open loop) of %g KB for %v; "+
		"%s churn at burst %d on kwok nodes.\n\n",
		functionName, o.Command, o.MaxScale, o.Criticality, o.SLO, o.Rate, o.Size, o.Duration, o.Mode, o.Burst)
	if r.Interrupted {
		fmt.Fprintf(w, "**Interrupted: the figures are partial.**\n\n")
	}
	fmt.Fprintln(w, "| orchestrator | mode | burst | requests | errors | p50 ms | p95 ms | p99 ms | SLO compliance | churn objects |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, x := range r.Runs {
		fmt.Fprintf(w, "| %s | %s | %d | %d | %d | %.1f | %.1f | %.1f | %.1f%% | %d |\n", x.Orchestrator, x.Mode, x.Burst,
			x.Requests, x.Errors, x.P50Ms, x.P95Ms, x.P99Ms, 100*x.SLOCompliance, x.ChurnObjects)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| | vanilla p50 | gantry p50 | p50 lower by | vanilla p95 | gantry p95 | p95 lower by |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|")
	fmt.Fprintf(w, "| PREEMPT-FaaS RQ2 (RNN, highest stress load) | %.2f | %.2f | %s | %.2f | %.2f | %s |\n",
		PaperVanillaP50, PaperGantryP50, pct(Reduction(PaperVanillaP50, PaperGantryP50)),
		PaperVanillaP95, PaperGantryP95, pct(Reduction(PaperVanillaP95, PaperGantryP95)))
	v, ok1 := r.run(Vanilla)
	g, ok2 := r.run(Gantry)
	if ok1 && ok2 {
		fmt.Fprintf(w, "| this run | %.1f | %.1f | %s | %.1f | %.1f | %s |\n",
			v.P50Ms, g.P50Ms, pct(Reduction(v.P50Ms, g.P50Ms)), v.P95Ms, g.P95Ms, pct(Reduction(v.P95Ms, g.P95Ms)))
	}
	_, err := fmt.Fprintln(w, "\nThe paper's target: p95 at least 28% and p50 at least 81% lower than vanilla. ![latency CDF](latency.png)")
	return err
}
