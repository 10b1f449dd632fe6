package loadgen

import (
	"bufio"
	"encoding/csv"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// WriteText prints a short human-readable summary of r.
func WriteText(w io.Writer, r *Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	s := r.Summary()
	fmt.Fprintf(tw, "requests\t%d\tok %d, errors %d\n", s.Requests, s.OK, s.Errors)
	for _, k := range slices.Sorted(maps.Keys(s.ErrorsByKind)) {
		fmt.Fprintf(tw, "  %s\t%d\t\n", k, s.ErrorsByKind[k])
	}
	fmt.Fprintf(tw, "duration\t%.1f s\tthroughput %.1f ok/s\n", s.DurationS, s.ThroughputRPS)
	fmt.Fprintf(tw, "SLO %.0f ms\t%.2f%%\twithin SLO\n", s.SLOMs, 100*s.SLOCompliance)
	fmt.Fprintf(tw, "latency ms\tp50 %.1f\tp90 %.1f  p95 %.1f  p99 %.1f  p99.9 %.1f  max %.1f  mean %.1f\n",
		s.P50Ms, s.P90Ms, s.P95Ms, s.P99Ms, s.P999Ms, s.MaxMs, s.MeanMs)
	// The latencies are of every request that got an answer or timed out,
	// failed ones too: a reader of the line above must not take them for
	// the OK requests' alone.
	fmt.Fprintf(tw, "  of\t%d requests\t%s\n", s.Measured, latencyScope(s))
	if r.Interrupted {
		fmt.Fprintf(tw, "interrupted\tbefore the trace ended\t\n")
	}
	return tw.Flush()
}

// latencyScope says which requests the latency line covers.
func latencyScope(s Summary) string {
	failed := s.Measured - s.OK
	if failed <= 0 {
		return "all OK"
	}
	return fmt.Sprintf("%d OK and %d failed (HTTP errors, timeouts, connection errors); unsent requests have no latency", s.OK, failed)
}

// CSVHeader is the first row CSVWriter writes.
var CSVHeader = []string{"offset_ms", "latency_ms", "status", "kind", "size"}

// CSVWriter streams samples as CSV rows, one per request, so that a long run
// never holds them all in memory. Use its Write as Config.OnSample. Errors
// are sticky and reported by Flush.
type CSVWriter struct {
	buf *bufio.Writer
	w   *csv.Writer
	err error
	row []string
}

// NewCSVWriter writes the header row and returns the writer.
func NewCSVWriter(w io.Writer) *CSVWriter {
	buf := bufio.NewWriterSize(w, 1<<16)
	c := &CSVWriter{buf: buf, w: csv.NewWriter(buf), row: make([]string, len(CSVHeader))}
	c.err = c.w.Write(CSVHeader)
	return c
}

// Write adds one sample; an unmeasured latency is left empty and a missing
// status is 0.
func (c *CSVWriter) Write(s Sample) {
	if c.err != nil {
		return
	}
	c.row[0] = strconv.FormatFloat(ms(s.Offset), 'f', -1, 64)
	c.row[1] = ""
	if s.Measured {
		c.row[1] = strconv.FormatFloat(ms(s.Latency), 'f', -1, 64)
	}
	c.row[2] = strconv.Itoa(s.Status)
	c.row[3] = s.Kind
	c.row[4] = strconv.FormatFloat(s.Size, 'g', 6, 64)
	c.err = c.w.Write(c.row)
}

// Flush writes out buffered rows and returns the first error seen.
func (c *CSVWriter) Flush() error {
	c.w.Flush()
	if c.err == nil {
		c.err = c.w.Error()
	}
	if err := c.buf.Flush(); c.err == nil {
		c.err = err
	}
	return c.err
}

// WritePlot draws latency over time to a PNG (or any format gonum/plot
// knows by the file's extension): the mean and maximum latency of the
// requests due in each second, against the SLO.
func WritePlot(path string, r *Result) error {
	p := plot.New()
	p.Title.Text = "Latency over time"
	p.X.Label.Text = "intended send time (s)"
	p.Y.Label.Text = "latency (ms)"
	p.Y.Min = 0
	mean, maxes := timelineXYs(r.Timeline)
	if err := plotutil.AddLines(p, "mean", mean, "max", maxes); err != nil {
		return fmt.Errorf("plot latency: %w", err)
	}
	if r.SLO > 0 && len(r.Timeline) > 0 {
		addSLO(p, ms(r.SLO), float64(len(r.Timeline)))
	}
	// Headroom above the highest line keeps the SLO and the maxima clear
	// of the title and the legend.
	p.Y.Max = 1.2 * max(ms(r.SLO), ms(r.Max), p.Y.Max)
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	if err := p.Save(7*vg.Inch, 4*vg.Inch, path); err != nil {
		return fmt.Errorf("save %s: %w", path, err)
	}
	return nil
}

// timelineXYs places each second's values at its middle; seconds without a
// measured request are left out rather than drawn as zero latency.
func timelineXYs(tl []Second) (mean, maxes plotter.XYs) {
	for i, s := range tl {
		if s.MaxLatency == 0 {
			continue
		}
		x := float64(i) + 0.5
		mean = append(mean, plotter.XY{X: x, Y: ms(s.MeanLatency)})
		maxes = append(maxes, plotter.XY{X: x, Y: ms(s.MaxLatency)})
	}
	return mean, maxes
}

func addSLO(p *plot.Plot, sloMs, end float64) {
	line, err := plotter.NewLine(plotter.XYs{{X: 0, Y: sloMs}, {X: end, Y: sloMs}})
	if err != nil {
		return // two finite points always make a line
	}
	line.Dashes = []vg.Length{vg.Points(4), vg.Points(4)}
	p.Add(line)
	p.Legend.Add(fmt.Sprintf("SLO %s", time.Duration(sloMs*float64(time.Millisecond))), line)
}
