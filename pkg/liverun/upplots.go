package liverun

import (
	"fmt"
	"math"
	"os"
	"slices"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// namedLive is one line of the instances plot.
type namedLive struct {
	name string
	live []LivePoint
}

// namedLatency is one curve of the latency plot.
type namedLatency struct {
	name    string
	latency []time.Duration
}

// plotInstances draws every arm's live instances over the measured phase
// on the same axes, with the arrivals per second beneath on the same time
// axis, so that each policy's scaling can be read against the bursts.
func plotInstances(path string, series []namedLive, arrivals []float64, title string) error {
	top := plot.New()
	top.Title.Text = title
	top.Y.Label.Text = "live instances (starting or ready)"
	top.Y.Min = 0
	top.Legend.Top = true
	top.Legend.Left = true
	top.Add(plotter.NewGrid())
	for i, s := range series {
		pts := make(plotter.XYs, len(s.live))
		for k, l := range s.live {
			pts[k] = plotter.XY{X: l.Offset.Seconds(), Y: float64(l.Live)}
		}
		if len(pts) == 0 {
			continue
		}
		line, err := plotter.NewLine(pts)
		if err != nil {
			return fmt.Errorf("plot %s: %w", s.name, err)
		}
		line.Color = plotutil.Color(i)
		line.Width = vg.Points(1.5)
		top.Add(line)
		top.Legend.Add(s.name, line)
	}
	bottom := plot.New()
	bottom.X.Label.Text = "time since the measured phase began (s)"
	bottom.Y.Label.Text = "arrivals (requests/s)"
	bottom.Y.Min = 0
	bottom.Add(plotter.NewGrid())
	if len(arrivals) > 0 {
		steps := make(plotter.XYs, 0, 2*len(arrivals))
		for sec, v := range arrivals {
			steps = append(steps, plotter.XY{X: float64(sec), Y: v}, plotter.XY{X: float64(sec + 1), Y: v})
		}
		line, err := plotter.NewLine(steps)
		if err != nil {
			return fmt.Errorf("plot arrivals: %w", err)
		}
		line.Color = plotutil.Color(len(series))
		bottom.Add(line)
	}
	end := max(float64(len(arrivals)), top.X.Max)
	top.X.Min, top.X.Max, bottom.X.Min, bottom.X.Max = 0, end, 0, end
	top.Y.Max *= 1.6 // room for the legend above the lines
	return saveStacked(path, []*plot.Plot{top, bottom}, 8*vg.Inch, 6*vg.Inch)
}

// saveStacked draws plots one above the other, their axes aligned.
func saveStacked(path string, plots []*plot.Plot, w, h vg.Length) error {
	img := vgimg.New(w, h)
	dc := draw.New(img)
	rows := make([][]*plot.Plot, len(plots))
	for i, p := range plots {
		rows[i] = []*plot.Plot{p}
	}
	tiles := draw.Tiles{Rows: len(plots), Cols: 1, PadTop: vg.Points(4), PadBottom: vg.Points(4),
		PadLeft: vg.Points(4), PadRight: vg.Points(8), PadY: vg.Points(8)}
	canvases := plot.Align(rows, tiles, dc)
	for i, p := range plots {
		p.Draw(canvases[i][0])
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("save %s: %w", path, err)
	}
	return f.Close()
}

// plotLatencyTails draws, per arm, the fraction of requests slower than each
// latency on a log scale, against the SLO (a vertical line) and the
// verdict's target (a horizontal line at 1 − SLOTarget): a policy holds the
// SLO where its curve passes the SLO below the target line.
func plotLatencyTails(path string, series []namedLatency, sloMs float64) error {
	p := plot.New()
	p.Title.Text = "Latency distribution per policy against the SLO"
	p.X.Label.Text = "end-to-end latency (ms)"
	p.Y.Label.Text = "fraction of requests slower"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Add(plotter.NewGrid())
	floor := 1.0
	maxMs := sloMs
	for i, s := range series {
		if len(s.latency) == 0 {
			continue
		}
		pts := tailPoints(s.latency)
		floor = min(floor, pts[len(pts)-1].Y)
		maxMs = max(maxMs, pts[len(pts)-1].X)
		line, err := plotter.NewLine(pts)
		if err != nil {
			return fmt.Errorf("plot %s: %w", s.name, err)
		}
		line.Color = plotutil.Color(i)
		line.Width = vg.Points(1.5)
		p.Add(line)
		p.Legend.Add(s.name, line)
	}
	floor = min(floor, (1-SLOTarget)/2)
	p.Y.Min, p.Y.Max = floor, 1
	p.X.Min, p.X.Max = 0, 1.05*maxMs
	target := 1 - SLOTarget
	if err := addRefLine(p, plotter.XYs{{X: 0, Y: target}, {X: p.X.Max, Y: target}},
		fmt.Sprintf("%.1f%% target", 100*SLOTarget)); err != nil {
		return err
	}
	if sloMs > 0 {
		if err := addRefLine(p, plotter.XYs{{X: sloMs, Y: floor}, {X: sloMs, Y: 1}},
			fmt.Sprintf("SLO %v", time.Duration(sloMs*float64(time.Millisecond)))); err != nil {
			return err
		}
	}
	p.Legend.Top = true
	if err := p.Save(8*vg.Inch, 4.5*vg.Inch, path); err != nil {
		return fmt.Errorf("save %s: %w", path, err)
	}
	return nil
}

// tailPoints is the complementary distribution of lat: for each distinct
// latency, the fraction of requests slower than it, ending at 1/n so that a
// log scale can show the slowest request.
func tailPoints(lat []time.Duration) plotter.XYs {
	l := slices.Clone(lat)
	slices.Sort(l)
	n := float64(len(l))
	// At most ~2000 points: every request in the tail, a sample elsewhere.
	step := max(1, len(l)/2000)
	pts := plotter.XYs{{X: 0, Y: 1}}
	for i := 0; i < len(l); i++ {
		tail := len(l) - i
		if tail > 200 && i%step != 0 {
			continue
		}
		pts = append(pts, plotter.XY{X: millis(l[i]), Y: math.Max(float64(tail-1), 1) / n})
	}
	return pts
}

func addRefLine(p *plot.Plot, pts plotter.XYs, label string) error {
	line, err := plotter.NewLine(pts)
	if err != nil {
		return err
	}
	line.Dashes = []vg.Length{vg.Points(4), vg.Points(4)}
	p.Add(line)
	p.Legend.Add(label, line)
	return nil
}
