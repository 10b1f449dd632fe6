package coldstartbench

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is one run's figures; its JSON is `gantry bench coldstart --json`.
type Report struct {
	Runs int   `json:"runs"`
	Rows []Row `json:"rows"`
	// Load and LoadAfter are /proc/loadavg's 1-minute figure at the
	// start and the end (-1 where unknown): the machine's busyness
	// weighs on every figure.
	Load        float64 `json:"load_avg_1m"`
	LoadAfter   float64 `json:"load_avg_1m_after"`
	Interrupted bool    `json:"interrupted"`
}

// Row is one subject in one mode.
type Row struct {
	// Runtime is RuntimeFloor, RuntimeSlim or RuntimeGantry; Function
	// the example function ("" for the floor); Mode ModePoll or
	// ModeSocket.
	Runtime  string `json:"runtime"`
	Function string `json:"function"`
	Mode     string `json:"mode"`
	// Samples counts the cold starts measured, Errors the requests not
	// answered 200.
	Samples int `json:"samples"`
	Errors  int `json:"errors"`
	// LastError says why the last error was one.
	LastError string `json:"last_error,omitempty"`
	// The request's first byte, from sending it to a function with no
	// process: p50, p99, max, in milliseconds.
	P50ms float64 `json:"p50_ms"`
	P99ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
	// ReadyP50ms is the runtime's own spawn-to-ready (polling), or
	// spawn-to-exec with a passed socket.
	ReadyP50ms float64 `json:"ready_p50_ms"`
	// WarmP50ms is the same request sent again to the instance just
	// started: the function's own time and the gateway's, without the
	// start.
	WarmP50ms float64 `json:"warm_p50_ms"`
	// FloorRatio is P50ms over the floor's in the same mode.
	FloorRatio float64 `json:"floor_ratio"`
}

func (rep *Report) summarize(rows []*row) {
	floor := map[string]float64{}
	for _, r := range rows {
		r.Samples = len(r.samples)
		r.P50ms, r.P99ms, r.MaxMs = ms(quantile(r.samples, 0.5)), ms(quantile(r.samples, 0.99)), ms(quantile(r.samples, 1))
		r.ReadyP50ms, r.WarmP50ms = ms(quantile(r.ready, 0.5)), ms(quantile(r.warm, 0.5))
		if r.Runtime == RuntimeFloor {
			floor[r.Mode] = r.P50ms
		}
		rep.Rows = append(rep.Rows, r.Row)
	}
	for i := range rep.Rows {
		if f := floor[rep.Rows[i].Mode]; f > 0 {
			rep.Rows[i].FloorRatio = round(rep.Rows[i].P50ms/f, 100)
		}
	}
}

// quantile is the nearest-rank q-quantile (0 for no samples).
func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func ms(d time.Duration) float64 { return round(d.Seconds()*1000, 1000) }

func round(x, by float64) float64 { return float64(int64(x*by+0.5)) / by }

// loadAverage is the 1-minute load average, -1 where unknown.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	var l float64
	if _, err := fmt.Sscanf(string(b), "%g", &l); err != nil {
		return -1
	}
	return l
}

// WriteTable prints the short human table.
func (rep *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "runtime\tfunction\tmode\tsamples\terrors\tp50 ms\tp99 ms\tmax ms\tready p50 ms\twarm p50 ms\tp50 / floor\t")
	for _, r := range rep.Rows {
		fn := r.Function
		if fn == "" {
			fn = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t\n", r.Runtime, fn, r.Mode, r.Samples, r.Errors,
			r.P50ms, r.P99ms, r.MaxMs, r.ReadyP50ms, r.WarmP50ms, r.FloorRatio)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var note []string
	note = append(note, fmt.Sprintf("load average (1 min) %.2f at the start, %.2f at the end", rep.Load, rep.LoadAfter))
	if rep.Interrupted {
		note = append(note, "interrupted: partial figures")
	}
	_, err := fmt.Fprintln(w, strings.Join(note, "; "))
	return err
}
