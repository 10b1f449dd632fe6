package policy

import (
	"math"
	"testing"
	"time"
)

// A step to 4x recurs every 60 s on a base that rises from 40/s to 120/s
// over six minutes. The window that opens at 4m50s, after the fifth step
// ended, is predicted at the base then (about 104/s): the count one
// period earlier, scaled by how the last minute's arrivals rose over the
// period (gantry), is within a few percent of it; the bare count one
// period earlier (gantry-no-season-level) is the base of a minute ago,
// over 10% low.
func TestSeasonalLevelFollowsADriftingBase(t *testing.T) {
	base := func(at time.Duration) float64 { return 40 + 80*at.Seconds()/360 }
	step := func(at time.Duration) float64 {
		if at%time.Minute >= 30*time.Second && at%time.Minute < 50*time.Second {
			return 4 * base(at)
		}
		return base(at)
	}
	at := 4*time.Minute + 50600*ms
	want := (base(290*time.Second) + base(300*time.Second)) / 2
	c, _ := periodicRun(t, "gantry", at, step)
	if c.period.period != 60 || math.Abs(c.rate-want) > 0.05*want {
		t.Errorf("gantry: period %d s, rate %.1f/s; want 60 s and within 5%% of %.1f/s", c.period.period, c.rate, want)
	}
	e, _ := periodicRun(t, "gantry-no-season-level", at, step)
	t.Logf("want %.1f/s: gantry %.1f/s, gantry-no-season-level %.1f/s", want, c.rate, e.rate)
	if e.period.period != 60 || e.rate > 0.9*want {
		t.Errorf("gantry-no-season-level: period %d s, rate %.1f/s; want the base a period ago, below %.1f/s", e.period.period, e.rate, 0.9*want)
	}
}

// A step from 40/s to 160/s for 20 s every 60 s: the EWMA misses each
// step by most of a window's arrivals, and its slow dispersion carries
// those errors for many windows. Once the period is found, gantry sizes
// for the seasonal prediction's own errors, measured back over the
// history and then on each window it sizes: a dispersion of a few
// (Poisson noise of two counts and the steps' edges), where the EWMA's
// reads hundreds; the rate error the sizing averages over shrinks with
// it. gantry-no-season-disp reads the EWMA's all along. When the steps
// stop and the period is forgotten, gantry reads the EWMA's again.
func TestSeasonalSizingReadsItsOwnErrors(t *testing.T) {
	step := func(at time.Duration) float64 {
		if at%time.Minute >= 30*time.Second && at%time.Minute < 50*time.Second {
			return 160
		}
		return 40
	}
	at := 4*time.Minute + 50600*ms
	c, _ := periodicRun(t, "gantry", at, step)
	d, ok := c.seasonalDispersion()
	if !ok || d > 10 || c.dispSlow < 50 {
		t.Fatalf("gantry: seasonal dispersion %.1f (ok %v), EWMA's %.1f; want below 10 and above 50", d, ok, c.dispSlow)
	}
	e, _ := periodicRun(t, "gantry-no-season-disp", at, step)
	if _, ok := e.seasonalDispersion(); ok {
		t.Error("gantry-no-season-disp measured a seasonal dispersion")
	}
	t.Logf("dispersion: seasonal %.2f, EWMA's %.1f; rate error %.2f/s against %.2f/s", d, c.dispSlow, c.predictionSD(c.rate), e.predictionSD(c.rate))
	if sd, esd := c.predictionSD(c.rate), e.predictionSD(c.rate); !(sd < esd/3) {
		t.Errorf("rate error the sizing averages over: gantry %.2f/s, gantry-no-season-disp %.2f/s; want under a third", sd, esd)
	}
	stops := func(at time.Duration) float64 {
		if at < 4*time.Minute {
			return step(at)
		}
		return 40
	}
	s, _ := periodicRun(t, "gantry", 6*time.Minute, stops)
	if _, ok := s.seasonalDispersion(); ok || s.period.period != 0 {
		t.Errorf("stopped steps: period %d s and a seasonal dispersion still read", s.period.period)
	}
}

// When the seasonal prediction steps down (the window from 4m50s, after
// the fifth 160/s step ended, is predicted at 40/s) and the next onset is
// a period away, gantry retires every idle container above the target
// at once, for one idle-age limit; not while a request waits, not after
// that span, and gantry-no-step-end never (idle-age retirement waits).
func TestStepEndRetiresIdleContainersAtOnce(t *testing.T) {
	step := func(at time.Duration) float64 {
		if at%time.Minute >= 30*time.Second && at%time.Minute < 50*time.Second {
			return 160
		}
		return 40
	}
	at := 4*time.Minute + 50600*ms
	now := t0.Add(at)
	c, _ := periodicRun(t, "gantry", at, step)
	v := View{Counts: Counts{Live: 30, Idle: 20}}
	if got := c.retireAtStepEnd(now, &v, 12); got != 18 {
		t.Errorf("gantry after a step down: retires %d of 20 idle above a target of 12 among 30, want 18", got)
	}
	if got := c.retireAtStepEnd(now.Add(IdleAgeLimit(c.coldStart)), &v, 12); got != 0 {
		t.Errorf("gantry one idle-age limit after the step down: retires %d, want 0", got)
	}
	q := View{Counts: Counts{Live: 30, Idle: 20, Queued: 1}}
	if got := c.retireAtStepEnd(now, &q, 12); got != 0 {
		t.Errorf("gantry with a request waiting: retires %d, want 0", got)
	}
	e, _ := periodicRun(t, "gantry-no-step-end", at, step)
	if got := e.retireAtStepEnd(now, &v, 12); got != 0 {
		t.Errorf("gantry-no-step-end: retires %d, want 0", got)
	}
	// At 4m30.6s the step has just begun: no step down.
	u, _ := periodicRun(t, "gantry", 4*time.Minute+30600*ms, step)
	if got := u.retireAtStepEnd(t0.Add(4*time.Minute+30600*ms), &v, 12); got != 0 {
		t.Errorf("gantry as a step begins: retires %d, want 0", got)
	}
}
