package policy

import (
	"math/rand/v2"
	"testing"
	"time"
)

// periodicRun drives policy name with Poisson arrivals at rate(t) for d,
// planning every 500 ms, and returns the core and the instants of its
// pre-warms.
func periodicRun(t *testing.T, name string, d time.Duration, rate func(time.Duration) float64) (*core, []time.Duration) {
	t.Helper()
	s := spec(FunctionSpec{Name: "f", SLO: time.Second})
	s.ColdStart = 1500 * ms
	c := mustNew(t, name, s).(*core)
	rng := rand.New(rand.NewPCG(3, 9))
	views, out := make([]View, 1), make([]Decision, 1)
	var at, next time.Duration
	var warms []time.Duration
	for at < d {
		if at >= next {
			before := c.period.prewarms
			c.Plan(t0.Add(next), views, out)
			if c.period.prewarms > before {
				warms = append(warms, next)
			}
			next += 500 * ms
			continue
		}
		c.Arrive(t0.Add(at), 0, 50, views[0].Counts)
		if err := c.Complete(0, 50, 200*ms, 50); err != nil {
			t.Fatal(err)
		}
		// Thinning a 400/s stream keeps the arrivals Poisson at rate(t).
		at += time.Duration(rng.ExpFloat64() / 400 * float64(time.Second))
		for rng.Float64()*400 > rate(at) && at < d {
			at += time.Duration(rng.ExpFloat64() / 400 * float64(time.Second))
		}
	}
	return c, warms
}

// A step that recurs every 60 s (40/s to 160/s for 20 s) is pre-warmed
// from the fourth on, one cold start and prewarmSlack before it comes,
// sized for the rate it rose to; gantry-no-periodic never pre-warms.
func TestPeriodicStepsArePrewarmed(t *testing.T) {
	step := func(at time.Duration) float64 {
		if at%time.Minute >= 30*time.Second && at%time.Minute < 50*time.Second {
			return 160
		}
		return 40
	}
	c, warms := periodicRun(t, "gantry", 5*time.Minute, step)
	// Onsets at 30, 90, 150, 210 and 270 s: the period is known after
	// the third, so 210 s and 270 s are pre-warmed at 207.5 s and 267.5 s.
	if len(warms) != 2 || warms[0] != 207500*ms || warms[1] != 267500*ms {
		t.Fatalf("pre-warms at %v, want 207.5s and 267.5s", warms)
	}
	if c.period.period != 60 {
		t.Errorf("period %d s, want 60", c.period.period)
	}
	if _, none := periodicRun(t, "gantry-no-periodic", 5*time.Minute, step); len(none) != 0 {
		t.Errorf("gantry-no-periodic pre-warmed at %v", none)
	}
}

// The rule never acts on a constant rate, on steps at uneven gaps (bursts
// that come at random), nor after a recurring step stops: a prediction
// that fails forgets the period.
func TestPeriodicIgnoresConstantAndUnevenLoad(t *testing.T) {
	c, warms := periodicRun(t, "gantry", 10*time.Minute, func(time.Duration) float64 { return 200 })
	if len(warms) != 0 || len(c.period.onsets) != 0 {
		t.Errorf("constant 200/s: onsets %v, pre-warms %v; want none", c.period.onsets, warms)
	}
	starts := []time.Duration{30 * time.Second, 75 * time.Second, 145 * time.Second, 197 * time.Second, 287 * time.Second, 348 * time.Second}
	uneven := func(at time.Duration) float64 {
		for _, s := range starts {
			if at >= s && at < s+10*time.Second {
				return 160
			}
		}
		return 40
	}
	c, warms = periodicRun(t, "gantry", 7*time.Minute, uneven)
	if len(warms) != 0 || len(c.period.onsets) != 3 {
		t.Errorf("uneven steps: onsets %v (want the last 3 of 6), pre-warms %v (want none)", c.period.onsets, warms)
	}
	// Three steps 60 s apart, then none: one pre-warm for the fourth,
	// which does not come, and the period is forgotten.
	stops := func(at time.Duration) float64 {
		if at < 3*time.Minute && at%time.Minute >= 30*time.Second && at%time.Minute < 50*time.Second {
			return 160
		}
		return 40
	}
	c, warms = periodicRun(t, "gantry", 6*time.Minute, stops)
	if len(warms) != 1 || c.period.period != 0 || len(c.period.onsets) != 0 {
		t.Errorf("stopped steps: pre-warms %v (want one), period %d, onsets %v (want forgotten)", warms, c.period.period, c.period.onsets)
	}
}

// While a period holds, the window after a recurring step ends is sized
// for the rate of the same window one period before (40/s), where the
// EWMA still remembers the step (gantry-no-seasonal).
func TestSeasonalPredictionFollowsThePeriod(t *testing.T) {
	step := func(at time.Duration) float64 {
		if at%time.Minute >= 30*time.Second && at%time.Minute < 50*time.Second {
			return 160
		}
		return 40
	}
	// The last Plan is at 4m50.5s: the window from 4m50s was sized at
	// its start, just after the fifth step ended.
	c, _ := periodicRun(t, "gantry", 4*time.Minute+50600*ms, step)
	if c.period.period != 60 || c.rate < 30 || c.rate > 50 {
		t.Errorf("gantry: period %d s, rate %.1f/s after a step; want 60 s and about 40/s", c.period.period, c.rate)
	}
	e, _ := periodicRun(t, "gantry-no-seasonal", 4*time.Minute+50600*ms, step)
	if e.rate < 60 {
		t.Errorf("gantry-no-seasonal: rate %.1f/s after a step; want the EWMA's lag above 60/s", e.rate)
	}
}
