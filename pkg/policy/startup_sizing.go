package policy

import (
	"time"

	"gantry.dev/gantry/pkg/profile"
)

// Sizing before the first window closes (docs/simulator.md, "Sizing at
// startup"; gantry since 3 December, ablation gantry-no-startup-size).
//
// The SLO sizing runs at window boundaries, on the rate the predictor
// learnt from closed windows: for the whole first window (10 s) a
// function holds what the driver started it with and what the reactive
// rule adds, and a request that queues there meets a pool no sizing
// chose. On sentiment-analysis at 20 requests/s (seed 1) 5 of gantry's
// 46 misses an hour fell in the first 8 s, on the simulator's prewarm
// (1.25 times the load) where the windows' sizing holds 13-15; the other
// 41 would have beaten `commercial`'s 42. This rule sizes each function at every tick
// of the first window, once each function has run
// profile.DefaultMinSamples requests (before, the estimate is the SLO
// rule's worst case, and the sizing would ask for a container per
// queued request), for the rate measured so far. It raises the target
// only of a function whose queue holds a request at that tick: where
// nothing waits, what the function runs with is enough, and sizing it
// anyway (for the count plus one standard deviation) traded spawns for
// nothing on the stable cells, prewarmed at 1.25 times their load: 5635
// spawns on the 30 cells of seed 1 against 5283, above `cypress`'s 5406,
// at the same compliance. It leaves a chain sized jointly alone: its
// functions sized each on its own SLO share get more than the joint
// split gives them at the window (the script chain-joint: b 7 where the
// split gives 5), and on the stable cells that cost 50 spawns and 0.1%
// of the containers (5333 spawns, 1.0082 times the oracle against 1.0073)
// for the chains' fewer misses at 5 and 20 requests/s (document-summary
// 20/s seed 1: 14 against 27), which they did not need to meet
// `commercial`. The target only rises within the first window, so a
// quiet second does not retire what a busy first one asked for; from the
// first window on the sizing is the window's, as without the rule.
type startupSizing struct {
	// done: the first window has been sized; the rule is over.
	done bool
}

// startupSize sizes every function for the rate seen so far, at a tick
// before the first window closes.
func (c *core) startupSize(now time.Time, window bool, views []View) {
	s := &c.startup
	if !c.p.startupSizing || s.done || !c.p.sloSizing || c.jointChain() {
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
	rate := c.winCount / elapsed
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
		if views[f].Queued == 0 {
			n = 0 // no request waits: what the function runs with is enough
		}
		if !c.targetOK || n > fs.target {
			fs.target = n
		}
	}
	c.targetOK = true
}
