package report

import (
	"fmt"
	"math"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

const (
	plotW = 7 * vg.Inch
	plotH = 4 * vg.Inch
	// cdfSpan is how far past the SLO the CDF's x axis reaches; beyond it
	// the curves are flat at 1 or are failures already visible in p99.
	cdfSpan = 3.0
)

type groupPlot struct {
	suffix string
	draw   func(Group) (*plot.Plot, error)
}

var (
	cdfOnly  = []groupPlot{{"latency-cdf", cdfPlot}}
	allPlots = []groupPlot{{"containers", containersPlot}, {"live", livePlot}, {"slo", sloPlot}, {"latency-cdf", cdfPlot}}
)

func writePlots(dir string, g Group, draws []groupPlot) ([]string, error) {
	var files []string
	for _, d := range draws {
		p, err := d.draw(g)
		if err != nil {
			return files, fmt.Errorf("plot %s %s: %w", g.Key(), d.suffix, err)
		}
		name := fmt.Sprintf("%s-%s.png", g.Key(), d.suffix)
		if err := p.Save(plotW, plotH, filepath.Join(dir, name)); err != nil {
			return files, fmt.Errorf("save %s: %w", name, err)
		}
		files = append(files, name)
	}
	return files, nil
}

func policyNames(g Group) []string {
	names := make([]string, len(g.Runs))
	for i, r := range g.Runs {
		names[i] = r.Policy
	}
	return names
}

func barPlot(g Group, title, ylabel string, value func(Record) float64) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title + " — " + g.Title()
	p.Y.Label.Text = ylabel
	vals := make(plotter.Values, len(g.Runs))
	for i, r := range g.Runs {
		vals[i] = finite(value(r))
	}
	bars, err := plotter.NewBarChart(vals, vg.Points(24))
	if err != nil {
		return nil, err
	}
	bars.Color = plotutil.Color(0)
	p.Add(bars, plotter.NewGrid())
	p.NominalX(policyNames(g)...)
	p.Y.Min = 0
	return p, nil
}

func containersPlot(g Group) (*plot.Plot, error) {
	return barPlot(g, "Containers spawned", "containers", func(r Record) float64 {
		return float64(r.ContainersSpawned)
	})
}

// livePlot shows the cores a policy holds: a policy that retires idle
// containers and starts new ones spawns far more than it ever keeps. With
// an oracle it is the headline: each policy's mean live containers over
// the oracle's, beside the best fixed pool in hindsight at that policy's
// SLO compliance, with the bound and oracle-predicted as lines.
func livePlot(g Group) (*plot.Plot, error) {
	r0 := g.Runs[0]
	if r0.Oracle <= 0 {
		return barPlot(g, "Mean live containers", "containers", func(r Record) float64 {
			return r.AvgContainers
		})
	}
	p := plot.New()
	p.Title.Text = "Mean live containers over the oracle's — " + g.Title()
	p.Y.Label.Text = "× the oracle's mean live containers"
	w := vg.Points(14)
	for i, s := range []struct {
		name  string
		value func(Record) float64
	}{{"policy", func(r Record) float64 { return r.VsOracle() }}, {"fixed pool at its SLO", func(r Record) float64 { return r.Ratio(r.FixedPool) }}} {
		vals := make(plotter.Values, len(g.Runs))
		for j, r := range g.Runs {
			vals[j] = finite(s.value(r))
		}
		bars, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return nil, err
		}
		bars.Color = plotutil.Color(i)
		bars.LineStyle.Width = 0
		bars.Offset = w * vg.Length(float64(i)-0.5)
		p.Add(bars)
		p.Legend.Add(s.name, bars)
	}
	for i, l := range []struct {
		name string
		v    float64
	}{{"bound", r0.Ratio(r0.Bound)}, {"oracle-predicted", r0.Ratio(r0.OraclePredicted)}} {
		if l.v <= 0 {
			continue
		}
		line, err := plotter.NewLine(plotter.XYs{{X: -0.5, Y: l.v}, {X: float64(len(g.Runs)) - 0.5, Y: l.v}})
		if err != nil {
			return nil, err
		}
		line.Dashes = plotutil.Dashes(i + 1)
		line.Color = plotutil.Color(i + 2)
		p.Add(line)
		p.Legend.Add(l.name, line)
	}
	p.Add(plotter.NewGrid())
	p.NominalX(policyNames(g)...)
	p.Legend.Top = true
	p.Y.Min = 0
	p.X.Min, p.X.Max = -0.5, float64(len(g.Runs))-0.5
	leaveRoomForLegend(p, 4)
	return p, nil
}

// sloPlot shows misses rather than compliance: compliance bars would all sit
// near 100% and hide the differences the paper cares about.
func sloPlot(g Group) (*plot.Plot, error) {
	return barPlot(g, "SLO compliance (misses)", "% of requests over the SLO (lower is better)",
		func(r Record) float64 { return 100 * (1 - r.SLOCompliance) })
}

func cdfPlot(g Group) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "Response-time CDF — " + g.Title()
	p.X.Label.Text = "response time (ms)"
	p.Y.Label.Text = "fraction of requests"
	p.Y.Min, p.Y.Max = 0, 1
	xmax := 0.0
	for i, r := range g.Runs {
		if len(r.LatencyCDF) == 0 {
			continue
		}
		line, err := plotter.NewLine(cdfXYs(r.LatencyCDF))
		if err != nil {
			return nil, err
		}
		line.Color = plotutil.Color(i)
		line.Dashes = plotutil.Dashes(i)
		p.Add(line)
		p.Legend.Add(r.Policy, line)
		xmax = max(xmax, r.P999Ms)
	}
	if slo := g.Runs[0].SLOMs; slo > 0 {
		addSLOLine(p, slo)
		xmax = min(max(xmax, slo*1.2), slo*cdfSpan)
	}
	if xmax > 0 {
		p.X.Min, p.X.Max = 0, xmax
	}
	p.Legend.Top = false
	p.Legend.Left = false
	p.Add(plotter.NewGrid())
	return p, nil
}

func addSLOLine(p *plot.Plot, slo float64) {
	xy := plotter.XYs{{X: slo, Y: 0}, {X: slo, Y: 1}}
	line, err := plotter.NewLine(xy)
	if err != nil {
		return
	}
	line.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
	p.Add(line)
	p.Legend.Add("SLO", line)
}

func cdfXYs(points []CDFPoint) plotter.XYs {
	xys := make(plotter.XYs, 0, len(points))
	for _, pt := range points {
		if isFinite(pt.Millis) && isFinite(pt.Fraction) {
			xys = append(xys, plotter.XY{X: pt.Millis, Y: pt.Fraction})
		}
	}
	if len(xys) == 0 {
		xys = append(xys, plotter.XY{})
	}
	return xys
}

func isFinite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

func finite(v float64) float64 {
	if !isFinite(v) {
		return 0
	}
	return v
}
