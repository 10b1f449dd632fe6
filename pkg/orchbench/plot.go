package orchbench

import (
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

const (
	plotW = 7 * vg.Inch
	plotH = 4 * vg.Inch
	// floorMs keeps zero samples (an event before the patch's response)
	// on the logarithmic axis.
	floorMs = 0.1
)

// writePlots draws, like the paper's Figure 6, one box plot per mode and
// stage (bursts on x, one box per controller) and one CDF per case and
// stage, and returns the file names.
func (r *Report) writePlots(dir string) ([]string, error) {
	var files []string
	modes := r.modes()
	for _, mode := range Modes {
		bursts := modes[mode]
		if len(bursts) == 0 {
			continue
		}
		for st := range numStages {
			name := fmt.Sprintf("box-%s-%s.png", mode, st)
			if err := r.boxPlot(mode, bursts, st).Save(plotW, plotH, filepath.Join(dir, name)); err != nil {
				return files, err
			}
			files = append(files, name)
			for _, b := range bursts {
				name := fmt.Sprintf("cdf-%s-%d-%s.png", mode, b, st)
				if err := r.cdfPlot(mode, b, st).Save(plotW, plotH, filepath.Join(dir, name)); err != nil {
					return files, err
				}
				files = append(files, name)
			}
		}
	}
	return files, nil
}

func (r *Report) boxPlot(mode string, bursts []int, st Stage) *plot.Plot {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s, %s churn", st, mode)
	p.X.Label.Text = "interfering objects per burst"
	p.Y.Label.Text = "ms after the scale patch returned (log)"
	p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	ctls := r.Options.Controllers
	width := vg.Points(float64(60 / max(1, len(ctls))))
	labels := make([]string, len(bursts))
	for bi, b := range bursts {
		labels[bi] = strconv.Itoa(b)
		for ci, ctl := range ctls {
			vals := floored(r.values(ctl, Case{mode, b}, st))
			if len(vals) == 0 {
				continue
			}
			loc := float64(bi) + (float64(ci)-float64(len(ctls)-1)/2)*0.8/float64(len(ctls))
			box, err := plotter.NewBoxPlot(width, loc, plotter.Values(vals))
			if err != nil {
				continue
			}
			box.FillColor = plotutil.Color(ci)
			p.Add(box)
			if bi == 0 {
				p.Legend.Add(ctl, swatch{plotutil.Color(ci)})
			}
		}
	}
	p.NominalX(labels...)
	p.X.Min, p.X.Max = -0.5, float64(len(bursts))-0.5
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	positiveRange(&p.Y)
	return p
}

// positiveRange keeps a logarithmic axis of a plot without samples (an
// arm and case with no scale-up) on positive values: gonum's log scale
// panics on its default range of -1..1.
func positiveRange(a *plot.Axis) {
	if a.Min <= 0 || math.IsInf(a.Min, 0) || math.IsNaN(a.Min) {
		a.Min = floorMs
	}
	if a.Max <= a.Min || math.IsInf(a.Max, 0) || math.IsNaN(a.Max) {
		a.Max = a.Min * 10
	}
}

func (r *Report) cdfPlot(mode string, burst int, st Stage) *plot.Plot {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s, %s churn at %d", st, mode, burst)
	p.X.Label.Text = "ms after the scale patch returned (log)"
	p.Y.Label.Text = "fraction of scale-ups"
	p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	p.Y.Min, p.Y.Max = 0, 1
	for ci, ctl := range r.Options.Controllers {
		vals := floored(r.values(ctl, Case{mode, burst}, st))
		if len(vals) == 0 {
			continue
		}
		line, err := plotter.NewLine(cdfXYs(vals))
		if err != nil {
			continue
		}
		line.Color = plotutil.Color(ci)
		line.Width = vg.Points(1.5)
		p.Add(line)
		p.Legend.Add(ctl, line)
	}
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	positiveRange(&p.X)
	return p
}

// cdfXYs is the empirical CDF as a step line.
func cdfXYs(vals []float64) plotter.XYs {
	s := slices.Clone(vals)
	slices.Sort(s)
	xys := make(plotter.XYs, 0, 2*len(s))
	for i, v := range s {
		xys = append(xys, plotter.XY{X: v, Y: float64(i) / float64(len(s))}, plotter.XY{X: v, Y: float64(i+1) / float64(len(s))})
	}
	return xys
}

func floored(vals []float64) []float64 {
	out := make([]float64, len(vals))
	for i, v := range vals {
		out[i] = math.Max(v, floorMs)
	}
	return out
}

// swatch is a box plot's legend entry: a box plot draws no thumbnail.
type swatch struct{ c color.Color }

func (s swatch) Thumbnail(c *draw.Canvas) {
	r := c.Rectangle
	c.FillPolygon(s.c, []vg.Point{r.Min, {X: r.Max.X, Y: r.Min.Y}, r.Max, {X: r.Min.X, Y: r.Max.Y}})
}
