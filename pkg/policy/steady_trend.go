package policy

// The trend of the predicted rate on steady load (docs/simulator.md,
// "Sizing from the SLO target"). The load predictor is an EWMA of the
// window counts with weight α. On a ramp that rises by s per window it
// lags: its level trails the latest window by s(1-α)/α, and the window
// it sizes for lies one more window ahead, so the prediction falls short
// by s/α, two windows of the ramp at α = 1/2. On the Wiki trace (a day
// compressed into ten minutes, slopes up to 5 requests/s per window at
// 302/s) that shortfall was 2-3% of the rate, which the SLO sizing,
// averaging over a zero-mean rate error, does not cover: traced on
// sentiment-analysis, heavy sizes, seed 2, the queue passed the
// least-slack frontier for 5-10 s at a time on the rises (t = 270-285 s,
// 335-345 s), with the target right for the rate the EWMA predicted and
// the arrivals 3% above it.
//
// Holt's trend corrects it: b, an EWMA (weight trendBeta) of the level's
// change per window, is the ramp's s once the ramp has lasted a few
// windows, and the prediction adds b/α. The correction applies only on
// steady load (a burst's rise and fall are the burst detector's) and
// only where the trend is told apart from noise: b² above trendZ² times
// its variance, an EWMA of the squared change around b times the EWMA's
// variance factor β/(2-β). On a constant rate the gate holds it off: on
// two Poisson cells of the matrix (seeds 1 and 2) nothing moved, where
// the ungated trend had cost the Poisson cells of seed 2 up to 0.5% more
// containers and 4-7% more spawns (docs/experiments.md).
const (
	// trendBeta is the trend's EWMA weight: it follows a change of
	// slope within about 1/trendBeta = 5 windows.
	trendBeta = 0.2
	// trendZ is how many standard deviations b must stand from 0.
	trendZ = 2
	// trendWindows are the levels seen before the trend is used.
	trendWindows = 3
)

// trendState is the trend's memory: the previous level, the trend b and
// the variance of the level's change around it; and the dispersion of
// the window counts around the trend's own prediction (observeTrendError).
type trendState struct {
	prev, slope, vari float64
	n                 int
	disp              float64
	dispN             int
}

// observeTrendError folds the closing window's count into the dispersion
// of the counts around what the trend predicted for it: the level plus
// b/α, whether or not the gate let the trend into the sizing. The gate
// (trendRate) reads this dispersion rather than the EWMA's own
// (dispersion), because on a ramp the EWMA's errors are the ramp's lag
// itself: at 5 requests/s per window and 280/s, a lag of two windows of
// the ramp is about 100 requests in 2800, a dispersion of 3.6, and that
// held the trend off for as long as the ramp lasted, the very windows it
// corrects. Traced on sentiment-analysis with heavy sizes, Wiki, seed 3:
// the rate rose from 261/s to 308/s over t = 60-160 s, the EWMA's
// dispersion stood at 3.1-4.5 from t = 110 s, the trend entered only at
// 160 s, and the containers ran 3-4 short with 100-200 requests queued
// for 90 s: 99.72% SLO compliance, 99.78% with this gate alone, 99.91%
// with it and the floor on the rate's error (sizing.go, predictionSD),
// the trend entering at 120 s. After a step the trend's own errors are
// the step, so the gate still holds it off there (ablation
// gantry-no-own-gate).
func (c *core) observeTrendError() {
	t := &c.trend
	if !c.p.loadTrend || t.n == 0 || !c.targetOK {
		return
	}
	pred := t.prev + t.slope/ewmaAlpha
	if pred <= 0 {
		return
	}
	e := c.winCount - pred
	d := e * e / pred
	if t.dispN == 0 {
		t.disp = d
	} else {
		t.disp += dispersionAlpha * (d - t.disp)
	}
	t.dispN++
}

// observeTrend folds the level the load predictor holds after a window
// into the trend.
func (c *core) observeTrend(level float64) {
	t := &c.trend
	if t.n > 0 {
		e := (level - t.prev) - t.slope
		t.slope += trendBeta * e
		t.vari += trendBeta * (e*e - t.vari)
	}
	t.prev = level
	t.n++
}

// trendRate is the rate (per second) the trend adds to the EWMA's
// prediction: b/α per window, or 0 before trendWindows levels, while b is
// within trendZ standard deviations of 0, or while the last few windows
// were not steady (the fast dispersion alone, not steadyLoad: a level
// that jumped, as after a load's partial first window, is no ramp).
func (c *core) trendRate() float64 {
	t := &c.trend
	if !c.p.loadTrend || t.n < trendWindows {
		return 0
	}
	d, ok := c.dispersion()
	if c.p.trendOwnGate {
		d, ok = max(1, t.disp), t.dispN >= dispersionWindows
	}
	if !ok || d >= steadyDispersion {
		return 0
	}
	if t.slope*t.slope <= trendZ*trendZ*t.vari*trendBeta/(2-trendBeta) {
		return 0
	}
	return t.slope / ewmaAlpha / c.spec.Window.Seconds()
}
