package orchbench

import (
	"strings"
	"testing"
)

// Each repetition gets its own medians and reduction, beside the pooled
// runs; a repetition an arm has no sample of has no reduction.
func TestPerRepetitionMediansAndReductions(t *testing.T) {
	o := Options{Controllers: []string{Vanilla, Gantry}, Cases: []Case{{ModeInterval, 20}}, Repetitions: 2}
	s := func(ctl string, rep int, ms float64) Sample {
		return Sample{Controller: ctl, Mode: ModeInterval, Burst: 20, Rep: rep, Stage: StartsProcessing, Ms: ms}
	}
	samples := []Sample{s(Vanilla, 0, 100), s(Vanilla, 0, 300), s(Vanilla, 0, 200), s(Gantry, 0, 20), s(Vanilla, 1, 50)}
	got := perRepetition(o, samples, "audit", []Stage{StartsProcessing})
	if len(got) != 2 {
		t.Fatalf("%d rows, want one per repetition", len(got))
	}
	r1, r2 := got[0], got[1]
	if r1.Rep != 1 || r1.Source != "audit" || r1.VanillaN != 3 || r1.GantryN != 1 || *r1.VanillaP50Ms != 200 || *r1.GantryP50Ms != 20 || *r1.MedianReduction != 0.9 {
		t.Errorf("repetition 1: %+v", r1)
	}
	if r2.Rep != 2 || r2.GantryP50Ms != nil || r2.MedianReduction != nil || *r2.VanillaP50Ms != 50 {
		t.Errorf("repetition 2: %+v", r2)
	}
	rep := &Report{PerRepetition: got}
	var b strings.Builder
	rep.writeRepetitions(&b)
	if !strings.Contains(b.String(), "| 1 | interval | 20 | starts_processing | audit | 200 (3) | 20 (1) | 90.0% |") ||
		!strings.Contains(b.String(), "| 2 | interval | 20 | starts_processing | audit | 50 (1) | - (0) | - |") {
		t.Errorf("report.md rows:\n%s", b.String())
	}
	if perRepetition(Options{Controllers: []string{Gantry}, Repetitions: 1}, samples, "watch", []Stage{StartsProcessing}) != nil {
		t.Error("one arm alone got per-repetition reductions")
	}
}
