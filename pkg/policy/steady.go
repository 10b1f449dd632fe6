package policy

import "time"

// Retiring the excess on steady load (docs/simulator.md, "Retirement by
// idle age"). The idle-age rule (retire.go) retires an instance once it
// has been idle past the rent-or-buy limit τ. On a steady stream of
// hundreds of requests a second that never happens: the busy count
// wanders by ±√a around the offered load a, so every instance above the
// target is taken now and then (the most recently freed instance takes a
// request), no instance stays idle for τ, and the live count sits at the
// highest target of the run. Traced on image-compression with heavy sizes
// at 250/s: the target averaged 104.9 and the live count 109.1.
//
// Those instances are not what rent-or-buy prices. Retiring one above the
// target does not risk a cold start for a request: the SLO sizing has
// already counted the queueing its absence causes. So on steady load
// (the window counts' dispersion below steadyDispersion, no burst excess
// in force) the rent-or-buy test applies to the excess, not to each
// instance: once the live count has stayed above the target for τ, idle
// instances above the target retire at the next tick with no requests
// queued, longest idle first, whatever their own idle age. A target that
// dips for one window and comes back within τ keeps its instances, so
// the rule churns no more than the target moves for longer than τ.

// retireSteadyExcess is how many of function f's idle instances above
// the target to retire now under the rule above.
func (c *core) retireSteadyExcess(f int, now time.Time, v *View, target int) int {
	fs := &c.fns[f]
	if !c.steadyLoad() || v.Live <= target || c.burst.excessNow(now) > 0 {
		fs.excessSince = time.Time{}
		return 0
	}
	if fs.excessSince.IsZero() {
		fs.excessSince = now
	}
	if v.Queued > 0 || now.Sub(fs.excessSince) < IdleAgeLimit(c.coldStart) {
		return 0
	}
	return min(v.Idle, v.Live-target)
}

// steadyLoad reports a steady load: the window counts' dispersion around
// their prediction is below steadyDispersion over about 6 windows (the
// fast estimate, dispersion) or over about 40 (the slow one the sizing
// reads, dispSlow). The fast estimate alone called one Poisson window
// beyond 2.7 standard deviations unsteady (0.3·z² lifts it past 3), which
// a 10-minute run at a constant rate meets with a chance of about one in
// three: traced on image-compression with heavy sizes at 250/s, seed 2,
// a window 2.8σ high at t = 100-110 s turned the backlog rule on and
// started 57 containers that retired 7 s later; on sentiment-analysis,
// Wiki, seed 2, three such windows started 242. A lone outlier moves the
// slow estimate by a twentieth of its d = z², so only a window beyond
// about 6σ, a burst, lifts both; a bursty load keeps both above 3.
//
// That holds once the slow estimate has about 20 windows behind it. An
// EWMA started at the first window's value is that one window until
// then: on the Poisson cells of seed 2 (250/s) the first counted window
// was 2.1σ out (d = 4.5), the slow estimate still read 3.99 at t = 100 s,
// and one window 3.2σ high then made both exceed 3; the backlog rule of
// unsteady load started 37-57 containers on each of the five cells
// (77 on email-categorization's two functions) that retired 7 s later:
// 292 of the 2347 spawns, where cypress spawned 2128 in all. So the test
// reads dispMean, the plain mean of the windows seen while they are
// fewer than 1/slowDispersionAlpha, then the same EWMA (a bias-corrected
// start). The sizing's rate error keeps reading dispSlow: started as a
// mean, it held 1.1% more containers on the Twitter cells and lowered
// the Wiki cells of seed 1 to 99.91%, for nothing on seed 2
// (docs/experiments.md, "Held-out seeds"; ablation gantry-no-steady-mean).
func (c *core) steadyLoad() bool {
	d, ok := c.dispersion()
	slow := c.dispSlow
	if c.p.steadyMean {
		slow = c.dispMean
	}
	return ok && (d < steadyDispersion || slow < steadyDispersion)
}
