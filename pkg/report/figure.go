package report

import (
	"errors"
	"fmt"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// ErrEmptyFigure is returned for a figure with no categories or no series.
var ErrEmptyFigure = errors.New("figure has nothing to draw")

// Series is one set of bars in a grouped bar chart.
type Series struct {
	Name   string
	Values []float64
}

// Figure is a grouped bar chart described as data: one group of bars per
// category, one bar per series. WriteDir draws it and links it in report.md.
type Figure struct {
	// File is the PNG's name inside plots/.
	File          string
	Title, YLabel string
	Categories    []string
	Series        []Series
}

// groupWidth is the room each category gets, shared by its bars.
const groupWidth = 36

func (f Figure) draw(dir string) (string, error) {
	if len(f.Categories) == 0 || len(f.Series) == 0 {
		return "", fmt.Errorf("figure %s: %w", f.File, ErrEmptyFigure)
	}
	p := plot.New()
	p.Title.Text = f.Title
	p.Y.Label.Text = f.YLabel
	n := len(f.Series)
	w := vg.Points(groupWidth / float64(max(n, 1)))
	for i, s := range f.Series {
		if len(s.Values) != len(f.Categories) {
			return "", fmt.Errorf("figure %s: series %s has %d values for %d categories", f.File, s.Name, len(s.Values), len(f.Categories))
		}
		vals := make(plotter.Values, len(s.Values))
		for j, v := range s.Values {
			vals[j] = finite(v)
		}
		bars, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return "", err
		}
		bars.Color = plotutil.Color(i)
		bars.LineStyle.Width = 0
		bars.Offset = w * vg.Length(float64(i)-float64(n-1)/2)
		p.Add(bars)
		p.Legend.Add(s.Name, bars)
	}
	p.Add(plotter.NewGrid())
	p.NominalX(f.Categories...)
	p.Legend.Top = true
	leaveRoomForLegend(p, n)
	// Half a category of margin on each side keeps the outer bars whole.
	p.X.Min, p.X.Max = -0.5, float64(len(f.Categories))-0.5
	path := filepath.Join(dir, f.File)
	if err := p.Save(plotW, plotH, path); err != nil {
		return "", fmt.Errorf("save %s: %w", f.File, err)
	}
	return filepath.ToSlash(filepath.Join(PlotsDir, f.File)), nil
}

// leaveRoomForLegend raises the top of the y axis so that the legend, drawn
// at the top right, sits above the bars instead of over them, and lowers a
// negative bottom a little so the longest bar does not end on the axis.
func leaveRoomForLegend(p *plot.Plot, entries int) {
	lo, hi := min(p.Y.Min, 0), max(p.Y.Max, 0)
	span := hi - lo
	if span <= 0 {
		span = 1
	}
	if lo < 0 {
		lo -= span * 0.05
	}
	p.Y.Min, p.Y.Max = lo, hi+span*0.12*float64(entries)
}
