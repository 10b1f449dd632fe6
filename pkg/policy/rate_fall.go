package policy

import "gantry.dev/gantry/pkg/predict"

// The fall-aware rate (docs/simulator.md, "The fall-aware rate, tried
// and not kept"): the variant gantry-fast-fall, not gantry. The
// load predictor is an EWMA of the window counts with weight α = 1/2
// (ewmaAlpha). A burst of the Twitter trace rises within 3 s and then
// decays exponentially with a time constant of 10 to 50 s (pkg/trace,
// addBursts): from one 10-s window to the next the count falls to 37-82%
// of the one before. The EWMA trails that fall: after a window at twice
// the base rate it still predicts 1.5 times the base, and it sizes the
// containers for a rate the load left a window ago. Traced on
// image-compression with heavy sizes at 288 cores, seed 1: in the
// windows after the burst at t = 390 s the prediction stood 14-28
// requests a second above the arrivals for 40 s. Its over-predictions
// also enter the dispersion the sizing averages over (predictionSD), so
// a fall raised the margin of the windows after it.
//
// A rise is the burst detector's (burst.go): it acts on arrival, within
// the window. A fall has no such rule; the idle-age retirement retires
// what the target no longer asks for, but the target is the EWMA's. So
// the predictor follows a fall faster than a rise: a window whose count
// lies more than fallZ Poisson standard deviations (√prediction) below
// the prediction moves it with weight fallAlpha instead of α
// (predict.FallEWMA). On a constant rate such a window is noise in 3.6%
// of the windows (the count's own noise and the EWMA's together; one
// window in 28, one every 4.6 minutes at 10-s windows), and the
// prediction then moves 0.9 instead of 0.5 of the way to that count: a
// prediction about 0.8 of a count's standard deviation lower than the
// EWMA's, for about a window (the next window is a rise back, at weight
// α). A rise keeps the EWMA's weight: a single high window is as
// likely a burst's onset that the detector already acted on as a new
// level.
//
// The fall weight applies only while the load is not steady (steadyLoad):
// on steady load there is no burst to decay from, and there the false
// falls (3.6% of the windows of a constant Poisson rate, measured by
// predict's TestFallEWMAFalseFallsOnAConstantRate) each lowered the
// target for a window and started again what it had retired: applied on
// every load it spawned 3% more containers on the stable cells for the
// same live count (docs/experiments.md).
//
// gantry leaves it out: on Twitter at 288 cores it took 2.2% of the
// containers for 0.010 points of SLO compliance (0.036 on the worst
// cell), at 6384 cores 2.9% for 0.10 points, and on the held-out stable
// cells of seed 2 it spawned 15% more (the Wiki ramps are not steady
// load). The margin it takes away after a burst covers the next onset.
const (
	// fallAlpha is the weight of a window that fell below the prediction.
	fallAlpha = 0.9
	// fallZ is how many Poisson standard deviations below the prediction
	// a window must fall for fallAlpha to apply.
	fallZ = 2.0
)

// observeLoad feeds the closing window's count to the load predictor:
// with the fall weight while the load is not steady, the EWMA's alone
// while it is.
func (c *core) observeLoad(v float64) {
	if f, ok := c.load.(*predict.FallEWMA); ok && c.steadyLoad() {
		f.EWMA.Observe(v)
		return
	}
	c.load.Observe(v)
}
