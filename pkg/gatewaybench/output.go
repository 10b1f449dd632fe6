package gatewaybench

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Files written by WriteDir.
const (
	PathsCSV   = "paths.csv"
	RoundsCSV  = "rounds.csv"
	PlotPNG    = "latency.png"
	ReportMD   = "report.md"
	ReportJSON = "report.json"
)

// WriteDir writes the report into dir (created if needed): one CSV row
// per path, one per path and round, the latency-percentile plot, the
// markdown report and the JSON object.
func (r *Report) WriteDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	steps := []struct {
		name  string
		write func(string) error
	}{
		{PathsCSV, r.writePathsCSV},
		{RoundsCSV, r.writeRoundsCSV},
		{PlotPNG, r.writePlot},
		{ReportMD, r.writeMarkdown},
		{ReportJSON, r.writeJSON},
	}
	for _, s := range steps {
		if err := s.write(filepath.Join(dir, s.name)); err != nil {
			return fmt.Errorf("write %s: %w", s.name, err)
		}
	}
	return nil
}

func writeCSV(file string, rows [][]string) error {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	_ = w.WriteAll(rows)
	if err := w.Error(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

func ff(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

func (r *Report) writePathsCSV(file string) error {
	rows := [][]string{{"path", "via", "requests", "ok", "errors", "errors_by_kind", "p50_us", "p90_us", "p99_us", "p999_us", "max_us", "added_p50_us", "added_p99_us", "cpu_per_request_us"}}
	for _, p := range r.Paths {
		rows = append(rows, []string{p.Path, p.Via, strconv.FormatInt(p.Requests, 10), strconv.FormatInt(p.OK, 10),
			strconv.FormatInt(p.Errors, 10), sortedKinds(p.ErrorsByKind), ff(p.P50us), ff(p.P90us), ff(p.P99us),
			ff(p.P999us), ff(p.MaxUs), ff(p.AddedP50us), ff(p.AddedP99us), ff(p.CPUPerRequestUs)})
	}
	return writeCSV(file, rows)
}

func (r *Report) writeRoundsCSV(file string) error {
	rows := [][]string{{"round", "position", "path", "requests", "errors", "p50_us", "p99_us", "max_us"}}
	for _, x := range r.Rounds {
		rows = append(rows, []string{strconv.Itoa(x.Round), strconv.Itoa(x.Position), x.Path,
			strconv.FormatInt(x.Requests, 10), strconv.FormatInt(x.Errors, 10), ff(x.P50us), ff(x.P99us), ff(x.MaxUs)})
	}
	return writeCSV(file, rows)
}

func (r *Report) writeJSON(file string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(file, append(b, '\n'), 0o644)
}

// nines maps a percentile to the plot's x axis, -log10(1 - q): 90 -> 1,
// 99 -> 2, 99.9 -> 3, so the tail gets as much room as the body.
func nines(q float64) float64 { return -math.Log10(1 - q/100) }

// writePlot draws latency against percentile for every path, on a log
// latency axis so the direct path's tens of microseconds and a gateway's
// milliseconds are both readable.
func (r *Report) writePlot(file string) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Latency by path, %.0f req/s, %.0f s each", r.RatePerS, r.DurationS)
	p.X.Label.Text = "percentile"
	p.Y.Label.Text = "latency (µs, log scale)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.X.Tick.Marker = plot.ConstantTicks([]plot.Tick{
		{Value: nines(50), Label: "50"}, {Value: nines(90), Label: "90"},
		{Value: nines(99), Label: "99"}, {Value: nines(99.9), Label: "99.9"},
	})
	var args []any
	for _, pr := range r.Paths {
		var xys plotter.XYs
		for i, q := range curvePercentiles {
			if i < len(pr.curve) && pr.curve[i] > 0 {
				xys = append(xys, plotter.XY{X: nines(q), Y: pr.curve[i]})
			}
		}
		if len(xys) > 0 {
			args = append(args, pr.Path, xys)
		}
	}
	if len(args) > 0 {
		if err := plotutil.AddLinePoints(p, args...); err != nil {
			return err
		}
	}
	grid := plotter.NewGrid()
	grid.Vertical.Color = color.Gray{Y: 220}
	grid.Horizontal.Color = color.Gray{Y: 220}
	p.Add(grid)
	// Lower right: latency only grows with the percentile, so that corner
	// stays clear of the lines.
	p.Legend.Top = false
	p.Legend.Left = false
	p.Legend.XOffs = -vg.Points(8)
	p.Legend.YOffs = vg.Points(8)
	return p.Save(7*vg.Inch, 4*vg.Inch, file)
}

func (r *Report) writeMarkdown(file string) error {
	var b strings.Builder
	b.WriteString("# Gateway overhead\n\n")
	fmt.Fprintf(&b, "Started %s. %.0f requests/s (Poisson) of %d-byte bodies, %.0f s on each path in %.0f s rounds whose order rotates, after a %.0f s warm-up per path; seed %d. GOMAXPROCS %d on %d CPUs, %s.\n\n",
		r.StartedAt.Format("2006-01-02 15:04 UTC"), r.RatePerS, r.BodyBytes, r.DurationS, r.RoundS, r.WarmupS, r.Seed,
		r.GOMAXPROCS, r.NumCPU, r.GoVersion)
	fmt.Fprintf(&b, "Load average (1, 5, 15 min): %s before, %s after.\n\n", fmtLoad(r.LoadAvgStart), fmtLoad(r.LoadAvgEnd))
	if r.Interrupted {
		b.WriteString("**Interrupted: partial figures.**\n\n")
	}
	if r.OpenFaaS.Measured {
		fmt.Fprintf(&b, "OpenFaaS gateway %s (`%s`).\n\n", r.OpenFaaS.Version, r.OpenFaaS.Binary)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "Note: %s.\n\n", strings.TrimSuffix(n, "."))
	}
	b.WriteString("| path | via | requests | errors | p50 µs | p90 µs | p99 µs | max µs | added p50 µs | added p99 µs | CPU µs/req |\n")
	b.WriteString("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, p := range r.Paths {
		errs := strconv.FormatInt(p.Errors, 10)
		if p.Errors > 0 {
			errs += " (" + sortedKinds(p.ErrorsByKind) + ")"
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %.1f | %.1f | %.1f | %.1f | %+.1f | %+.1f | %.1f |\n",
			p.Path, p.Via, p.Requests, errs, p.P50us, p.P90us, p.P99us, p.MaxUs, p.AddedP50us, p.AddedP99us, p.CPUPerRequestUs)
	}
	b.WriteString("\n| hop | measured as | p50 µs | p99 µs | round median p50 µs | round median p99 µs | CPU µs/req |\n|---|---|--:|--:|--:|--:|--:|\n")
	for _, h := range r.Hops {
		fmt.Fprintf(&b, "| %s | %s − %s | %+.1f | %+.1f | %+.1f | %+.1f | %+.1f |\n", h.Hop, h.Path, h.Base, h.P50us, h.P99us,
			h.RoundMedianP50us, h.RoundMedianP99us, h.CPUPerRequestUs)
	}
	b.WriteString("\n| target | result |\n|---|---|\n")
	for _, t := range r.Targets {
		fmt.Fprintf(&b, "| %s | %s |\n", t.Target, t.verdict())
	}
	fmt.Fprintf(&b, "\nLatency runs from each request's intended send time to the end of its response. ![latency by percentile](%s)\n", PlotPNG)
	return os.WriteFile(file, []byte(b.String()), 0o644)
}
