package policy

import (
	"math"
	"time"

	"gantry.dev/gantry/pkg/profile"
)

// Sizing before the first window closes (docs/simulator.md, "Sizing at
// startup"; variant gantry-startup-size).
//
// The SLO sizing runs at window boundaries, on the rate the predictor
// learnt from closed windows: for the whole first window (10 s) a
// function holds what the driver started it with and what the reactive
// rule adds, and a request that queues there is a miss no sizing
// predicted. On sentiment-analysis at 20 requests/s (seed 1) 5 of
// gantry's 46 misses an hour fell in the first 8 s, where its 41 others
// would have beaten `commercial`'s 42. This rule sizes each function at
// every tick of the first window, as soon as each function has run
// profile.DefaultMinSamples requests (before, the estimate is the SLO
// rule's worst case, and the sizing would ask for a container per
// queued request), for the rate measured so far raised by one standard
// deviation of its Poisson count (N + √N arrivals over the time elapsed: a count of
// twenty is the rate to ±22%, and the predictor's own error, which the
// later sizings average over, is not known yet). The target only rises
// within the first window, so a quiet second does not retire what a
// busy first one asked for; from the first window on the sizing is the
// window's, as without the rule.
type startupSizing struct {
	// done: the first window has been sized; the rule is over.
	done bool
}

// startupSize sizes every function for the rate seen so far, at a tick
// before the first window closes.
func (c *core) startupSize(now time.Time, window bool) {
	s := &c.startup
	if !c.p.startupSizing || s.done || !c.p.sloSizing {
		return
	}
	if window {
		s.done = true
		return
	}
	elapsed := now.Sub(c.nextWindow.Add(-c.spec.Window)).Seconds()
	if elapsed <= 0 || c.winCount <= 0 {
		return
	}
	rate := (c.winCount + math.Sqrt(c.winCount)) / elapsed
	targets := make([]int, len(c.fns))
	for f := range c.fns {
		mix, ok := c.serviceMix(f)
		if !ok || c.fns[f].exec.Count() < profile.DefaultMinSamples {
			return // the execution times are not profiled yet
		}
		targets[f] = sizeForSpread(rate, 0, mix, 1-c.sloTarget(), maxSizing)
	}
	for f, n := range targets {
		fs := &c.fns[f]
		if !c.targetOK || n > fs.target {
			fs.target = n
		}
	}
	c.targetOK = true
}
