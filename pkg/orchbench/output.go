package orchbench

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
)

// WriteDir writes every sample (samples.csv), the summary (summary.csv,
// reductions.csv, churn.csv, report.json), the box and CDF plots and
// report.md into dir.
func (r *Report) WriteDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	writers := []func(string) error{r.writeSamples, r.writeSummary, r.writeReductions, r.writeChurn, r.writeJSON}
	for _, w := range writers {
		if err := w(dir); err != nil {
			return err
		}
	}
	plots, err := r.writePlots(dir)
	if err != nil {
		return err
	}
	return r.writeMarkdown(dir, plots)
}

func writeCSV(path string, header []string, rows [][]string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	_ = w.Write(header)
	_ = w.WriteAll(rows) // WriteAll flushes
	return errorsJoin(w.Error(), f.Close())
}

func errorsJoin(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func ms(x float64) string { return strconv.FormatFloat(x, 'f', 3, 64) }

func (r *Report) writeSamples(dir string) error {
	rows := make([][]string, 0, len(r.Samples))
	for _, s := range r.Samples {
		rows = append(rows, []string{s.Controller, s.Mode, strconv.Itoa(s.Burst), strconv.Itoa(s.Rep + 1),
			strconv.Itoa(s.Service), s.Stage.String(), ms(s.Ms)})
	}
	return writeCSV(filepath.Join(dir, "samples.csv"),
		[]string{"controller", "mode", "burst", "rep", "service", "stage", "ms"}, rows)
}

func (r *Report) writeSummary(dir string) error {
	var rows [][]string
	for _, s := range r.Runs {
		rows = append(rows, []string{s.Controller, s.Mode, strconv.Itoa(s.Burst), s.Stage, strconv.Itoa(s.N),
			strconv.Itoa(s.Missed), ms(s.P50), ms(s.P95), ms(s.P99), ms(s.Mean), ms(s.Std)})
	}
	return writeCSV(filepath.Join(dir, "summary.csv"), []string{"controller", "mode", "burst", "stage", "n",
		"missed", "p50_ms", "p95_ms", "p99_ms", "mean_ms", "std_ms"}, rows)
}

func (r *Report) writeReductions(dir string) error {
	var rows [][]string
	for _, d := range r.Reductions {
		v := ""
		if d.MedianReduction != nil {
			v = strconv.FormatFloat(*d.MedianReduction, 'f', 4, 64)
		}
		rows = append(rows, []string{d.Mode, strconv.Itoa(d.Burst), d.Stage, v})
	}
	return writeCSV(filepath.Join(dir, "reductions.csv"), []string{"mode", "burst", "stage", "median_reduction"}, rows)
}

func (r *Report) writeChurn(dir string) error {
	var rows [][]string
	for _, c := range r.Churn {
		rows = append(rows, []string{c.Controller, c.Mode, strconv.Itoa(c.Burst), strconv.Itoa(c.Objects),
			strconv.FormatFloat(c.Seconds, 'f', 1, 64), strconv.FormatFloat(c.PerSecond, 'f', 2, 64)})
	}
	return writeCSV(filepath.Join(dir, "churn.csv"), []string{"controller", "mode", "burst", "objects", "seconds", "objects_per_s"}, rows)
}

func (r *Report) writeJSON(dir string) error {
	raw, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "report.json"), append(raw, '\n'), 0o644)
}

// modes are the report's modes in first-seen order, each with its bursts.
func (r *Report) modes() map[string][]int {
	out := map[string][]int{}
	for _, c := range r.Options.Cases {
		if !slices.Contains(out[c.Mode], c.Burst) {
			out[c.Mode] = append(out[c.Mode], c.Burst)
		}
	}
	for m := range out {
		slices.Sort(out[m])
	}
	return out
}

func (r *Report) run(ctl, mode string, burst int, st Stage) (RunStats, bool) {
	for _, s := range r.Runs {
		if s.Controller == ctl && s.Mode == mode && s.Burst == burst && s.Stage == st.String() {
			return s, true
		}
	}
	return RunStats{}, false
}

func (r *Report) reduction(mode string, burst int, st Stage) *float64 {
	for _, d := range r.Reductions {
		if d.Mode == mode && d.Burst == burst && d.Stage == st.String() {
			return d.MedianReduction
		}
	}
	return nil
}

func fmtMs(x float64) string { return fmt.Sprintf("%.1f", x) }
