package orchbench

import (
	"fmt"
	"slices"
	"strings"
)

// RepetitionStats is one stage of one case in one repetition, both arms
// side by side: one --quick run's medians move severalfold between
// identical runs, so a reduction means something only if it holds in
// each repetition, not just pooled.
type RepetitionStats struct {
	Rep   int    `json:"rep"` // 1..N
	Mode  string `json:"mode"`
	Burst int    `json:"burst"`
	Stage string `json:"stage"`
	// Source is "audit" (the API server's audit log, the paper's timing)
	// or "watch" (the benchmark's watches).
	Source          string   `json:"source"`
	VanillaN        int      `json:"vanilla_n"`
	GantryN         int      `json:"gantry_n"`
	VanillaP50Ms    *float64 `json:"vanilla_p50_ms"`
	GantryP50Ms     *float64 `json:"gantry_p50_ms"`
	MedianReduction *float64 `json:"median_reduction"`
}

// perRepetition gives each repetition's medians of stages, by case, from
// samples timed by source; nil unless both arms ran.
func perRepetition(o Options, samples []Sample, source string, stages []Stage) []RepetitionStats {
	if !slices.Contains(o.Controllers, Vanilla) || !slices.Contains(o.Controllers, Gantry) {
		return nil
	}
	vals := func(ctl string, c Case, rep int, st Stage) []float64 {
		var out []float64
		for _, s := range samples {
			if s.Controller == ctl && s.Mode == c.Mode && s.Burst == c.Burst && s.Rep == rep && s.Stage == st {
				out = append(out, s.Ms)
			}
		}
		return out
	}
	p50 := func(xs []float64) *float64 {
		if len(xs) == 0 {
			return nil
		}
		return finiteOrNil(Summarize(xs).P50)
	}
	var out []RepetitionStats
	for rep := range o.Repetitions {
		for _, c := range o.Cases {
			for _, st := range stages {
				v, g := vals(Vanilla, c, rep, st), vals(Gantry, c, rep, st)
				out = append(out, RepetitionStats{Rep: rep + 1, Mode: c.Mode, Burst: c.Burst, Stage: st.String(), Source: source,
					VanillaN: len(v), GantryN: len(g), VanillaP50Ms: p50(v), GantryP50Ms: p50(g),
					MedianReduction: finiteOrNil(MedianReduction(v, g))})
			}
		}
	}
	return out
}

// writeRepetitions adds the per-repetition medians to report.md.
func (r *Report) writeRepetitions(b *strings.Builder) {
	if len(r.PerRepetition) == 0 {
		return
	}
	b.WriteString("\n## Each repetition (p50 ms, vanilla / Gantry, and Gantry's reduction)\n\n| rep | mode | burst | stage | timing | vanilla (n) | Gantry (n) | reduction |\n|---:|---|---:|---|---|---:|---:|---:|\n")
	opt := func(x *float64, f string) string {
		if x == nil {
			return "-"
		}
		return fmt.Sprintf(f, *x)
	}
	for _, s := range r.PerRepetition {
		red := "-"
		if s.MedianReduction != nil {
			red = fmt.Sprintf("%.1f%%", 100**s.MedianReduction)
		}
		fmt.Fprintf(b, "| %d | %s | %d | %s | %s | %s (%d) | %s (%d) | %s |\n", s.Rep, s.Mode, s.Burst, s.Stage, s.Source,
			opt(s.VanillaP50Ms, "%.0f"), s.VanillaN, opt(s.GantryP50Ms, "%.0f"), s.GantryN, red)
	}
}
