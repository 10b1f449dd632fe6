package policy

import (
	"math/rand/v2"
	"testing"
	"time"
)

// After a step down from 120/s to 40/s, gantry-fast-fall's predicted
// rate takes 0.9 of the fall at the first window below (rate_fall.go),
// where gantry's EWMA takes half; before the step, at a constant 120/s,
// both predict the same.
func TestFastFallFollowsAStepDown(t *testing.T) {
	run := func(name string) (before, after float64) {
		c := mustNew(t, name, spec(FunctionSpec{Name: "f", SLO: time.Second})).(*core)
		rng := rand.New(rand.NewPCG(3, 9))
		views, out := make([]View, 1), make([]Decision, 1)
		var at, next time.Duration
		for at < 80*time.Second {
			if at >= next {
				c.Plan(t0.Add(next), views, out)
				if next == 60*time.Second {
					before = c.rate
				}
				next += 500 * ms
				continue
			}
			c.Arrive(t0.Add(at), 0, 50, views[0].Counts)
			if err := c.Complete(0, 50, 200*ms, 50); err != nil {
				t.Fatal(err)
			}
			rate := 120.0
			if at >= 60*time.Second {
				rate = 40
			}
			at += time.Duration(rng.ExpFloat64() / rate * float64(time.Second))
		}
		return before, c.rate
	}
	fb, fa := run("gantry-fast-fall")
	sb, sa := run("gantry")
	t.Logf("gantry-fast-fall %.1f → %.1f/s, gantry %.1f → %.1f/s", fb, fa, sb, sa)
	if fb != sb {
		t.Errorf("at a constant 120/s the predictions differ: %.2f and %.2f", fb, sb)
	}
	// One window (10 s) after the step: the EWMA stands at 120 − 80/2 =
	// 80/s, the fast fall at 120 − 0.9·80 = 48/s.
	if fa > 52 || sa < 72 {
		t.Errorf("a window after a step to 40/s: gantry-fast-fall predicts %.1f/s (want ≤ 52), gantry %.1f/s (want ≥ 72)", fa, sa)
	}
}
