package experiment

import (
	"math"
	"slices"

	"gantry.dev/gantry/pkg/report"
)

// index finds records by condition and policy.
type index map[key]report.Record

type key struct{ app, dist, trace, policy string }

func newIndex(records []report.Record) index {
	ix := index{}
	for _, r := range records {
		ix[key{r.App, r.Dist, r.Trace, r.Policy}] = r
	}
	return ix
}

// cond selects conditions: every combination of its apps, dists and traces.
type cond struct {
	apps, dists, traces []string
}

var (
	chainApps = []string{"email-categorization", "audio-translation", "document-summary"}
	stable    = []string{"poisson", "wiki"}
	heavy     = []string{"heavy"}
	light     = []string{"light"}
	allDists  = PaperDists
	largeOnly = []string{LargeTraceLabel}
	realTwit  = []string{"twitter"}
	allApps   = PaperApps
)

func (c cond) each(fn func(app, dist, trace string)) {
	for _, a := range c.apps {
		for _, d := range c.dists {
			for _, t := range c.traces {
				fn(a, d, t)
			}
		}
	}
}

// metric extracts one number from a record.
type metric func(report.Record) float64

// containers counts containers spawned over the run, as the paper's figures
// do; avgLive (paper_report.go) is the mean held at once.
func containers(r report.Record) float64 { return float64(r.ContainersSpawned) }
func compliance(r report.Record) float64 { return r.SLOCompliance }
func jobsPer(r report.Record) float64    { return r.JobsPerContainer }
func energy(r report.Record) float64     { return r.EnergyJ }
func response(r report.Record) float64   { return r.MeanQueueMs + r.MeanColdStartMs + r.MeanExecMs }

// vsBound and vsFloor are the mean live containers against the run's
// clairvoyant bound and work floor (NaN, so skipped, without them).
func vsBound(r report.Record) float64 {
	if r.Bound <= 0 {
		return math.NaN()
	}
	return r.VsBound()
}

func vsFloor(r report.Record) float64 {
	if r.WorkFloor <= 0 {
		return math.NaN()
	}
	return r.VsFloor()
}

// p99OverSLO is how far p99 exceeds the SLO, as a fraction (0 if within).
func p99OverSLO(r report.Record) float64 {
	if r.SLOMs <= 0 {
		return math.NaN()
	}
	return max(0, r.P99Ms/r.SLOMs-1)
}

// change is the mean over the condition's cells of (m(p) - m(ref)) / m(ref);
// ref may name several policies, whose values are averaged per cell (the
// paper's "Kraken/Fifer").
func (ix index) change(c cond, m metric, p string, ref ...string) (float64, bool) {
	var sum float64
	n := 0
	c.each(func(a, d, t string) {
		v, ok := ix.value(a, d, t, m, p)
		r, ok2 := ix.value(a, d, t, m, ref...)
		if ok && ok2 && r != 0 {
			sum += (v - r) / r
			n++
		}
	})
	return sum / float64(n), n > 0
}

// mean is the mean of m for policies over the condition's cells.
func (ix index) mean(c cond, m metric, policies ...string) (float64, bool) {
	var sum float64
	n := 0
	c.each(func(a, d, t string) {
		if v, ok := ix.value(a, d, t, m, policies...); ok {
			sum += v
			n++
		}
	})
	return sum / float64(n), n > 0
}

// minimum is the smallest value of m for policy over the condition's cells.
func (ix index) minimum(c cond, m metric, policy string) (float64, bool) {
	v := math.Inf(1)
	c.each(func(a, d, t string) {
		if x, ok := ix.value(a, d, t, m, policy); ok {
			v = min(v, x)
		}
	})
	return v, !math.IsInf(v, 1)
}

// maximum is the largest value of m for policy over the condition's cells.
func (ix index) maximum(c cond, m metric, policy string) (float64, bool) {
	v, ok := ix.minimum(c, func(r report.Record) float64 { return -m(r) }, policy)
	return -v, ok
}

// value averages m over the given policies in one cell; all must be present.
func (ix index) value(app, dist, trace string, m metric, policies ...string) (float64, bool) {
	var sum float64
	for _, p := range policies {
		r, ok := ix[key{app, dist, trace, p}]
		if !ok {
			return 0, false
		}
		v := m(r)
		if math.IsNaN(v) {
			return 0, false
		}
		sum += v
	}
	return sum / float64(len(policies)), len(policies) > 0
}

// policiesIn lists the policies present, in first-seen order.
func policiesIn(records []report.Record) []string {
	var out []string
	for _, r := range records {
		if !slices.Contains(out, r.Policy) {
			out = append(out, r.Policy)
		}
	}
	return out
}
