package report

import (
	"fmt"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
)

// TraceSeries is an arrival trace to draw: expected arrivals per second.
type TraceSeries struct {
	Name      string
	PerSecond []float64
}

// TracesFile is the plot of the arrival traces, inside plots/.
const TracesFile = "traces.png"

// drawTraces plots every trace's rate over time on one chart.
func drawTraces(dir, ylabel string, traces []TraceSeries) (string, error) {
	p := plot.New()
	p.Title.Text = "Arrival traces"
	p.X.Label.Text = "time (s)"
	p.Y.Label.Text = ylabel
	if ylabel == "" {
		p.Y.Label.Text = "requests per second"
	}
	for i, t := range traces {
		if len(t.PerSecond) == 0 {
			return "", fmt.Errorf("trace %s is empty", t.Name)
		}
		xys := make(plotter.XYs, len(t.PerSecond))
		for s, v := range t.PerSecond {
			xys[s] = plotter.XY{X: float64(s), Y: finite(v)}
		}
		line, err := plotter.NewLine(xys)
		if err != nil {
			return "", err
		}
		line.Color = plotutil.Color(i)
		p.Add(line)
		p.Legend.Add(t.Name, line)
	}
	p.Y.Min = 0
	// Headroom above the peaks for the legend.
	p.Y.Max *= 1 + 0.1*float64(len(traces))
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	if err := p.Save(plotW, plotH, filepath.Join(dir, TracesFile)); err != nil {
		return "", fmt.Errorf("save %s: %w", TracesFile, err)
	}
	return filepath.ToSlash(filepath.Join(PlotsDir, TracesFile)), nil
}
