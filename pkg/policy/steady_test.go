package policy

import (
	"math"
	"testing"
	"time"
)

// feedWindows closes one window per count, each sized for want arrivals,
// into the dispersion estimates (observeDispersion), past the warm-up.
func feedWindows(c *core, want float64, counts []float64) {
	c.rate, c.targetOK, c.loadWindows = want/c.spec.Window.Seconds(), true, warmupWindows+1
	for _, n := range counts {
		c.winCount = n
		c.observeDispersion()
	}
}

// countAt is the window count whose squared error over want is d.
func countAt(want, d float64) float64 { return want + math.Sqrt(d*want) }

// The steadiness test's slow estimate starts as the mean of the windows
// seen (steady.go): the load of the seed-2 Poisson cells, a first counted
// window 2.1σ out, six ordinary ones and then one 3.6σ high, stays steady
// under gantry, where the slow EWMA started at the first window still
// read it, and with the fast estimate called the load unsteady
// (gantry-no-steady-mean). A bursty load is unsteady under both.
func TestSteadinessTestStartsFromTheMeanOfTheWindowsSeen(t *testing.T) {
	const want = 2500.0
	seed2 := []float64{countAt(want, 4.5), want, countAt(want, 4.9), countAt(want, 0.3),
		countAt(want, 0.05), countAt(want, 0.5), countAt(want, 0.2), countAt(want, 12.9)}
	bursty := []float64{countAt(want, 40), want, countAt(want, 30), countAt(want, 0.3), countAt(want, 50), countAt(want, 20)}
	for _, tc := range []struct {
		policy string
		counts []float64
		steady bool
	}{
		{"gantry", seed2, true},
		{"gantry-no-steady-mean", seed2, false},
		{"gantry", bursty, false},
		{"gantry-no-steady-mean", bursty, false},
	} {
		c := mustNew(t, tc.policy, spec(FunctionSpec{Name: "f", SLO: time.Second})).(*core)
		feedWindows(c, want, tc.counts)
		if d, _ := c.dispersion(); c.steadyLoad() != tc.steady {
			t.Errorf("%s, %d windows: steady %v (fast %.2f, slow EWMA %.2f, mean %.2f), want %v",
				tc.policy, len(tc.counts), c.steadyLoad(), d, c.dispSlow, c.dispMean, tc.steady)
		}
	}
}

// The rate error the sizing averages over is at least the EWMA's own
// sampling error, α/(2-α)·λ/window, however low the measured dispersion
// reads (sizing.go, predictionSD); a larger measured one is used as it
// is, and gantry-no-rate-floor takes the measured one alone.
func TestRateErrorIsAtLeastTheEWMAsOwn(t *testing.T) {
	const rate = 250.0
	floor := math.Sqrt(ewmaAlpha / (2 - ewmaAlpha) * rate / 10)
	for _, tc := range []struct {
		policy string
		disp   float64
		want   float64
	}{
		{"gantry", 1.0, floor},
		{"gantry", 2.0, math.Sqrt(rate / 10)},
		{"gantry-no-rate-floor", 1.0, 0},
		{"gantry-no-rate-floor", 2.0, math.Sqrt(rate / 10)},
	} {
		c := mustNew(t, tc.policy, spec(FunctionSpec{Name: "f", SLO: time.Second})).(*core)
		c.dispN, c.dispSlow = dispersionWindows, tc.disp
		if got := c.predictionSD(rate); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s, dispersion %.1f: rate error %.4f/s, want %.4f/s", tc.policy, tc.disp, got, tc.want)
		}
	}
}

// The trend's gate reads the dispersion of the trend's own errors
// (steady_trend.go): on a ramp steep enough that the EWMA's lag alone
// lifts the EWMA's dispersion past 3 (8/s more every window from 200/s),
// gantry adds the trend by the end, where gating on the EWMA's errors
// (gantry-no-own-gate) keeps it off; after a step the trend's own
// errors are the step, and the trend stays off under both.
func TestTrendGateReadsTheTrendsOwnErrors(t *testing.T) {
	const windows = 24
	ramp, step := make([]float64, windows), make([]float64, windows)
	for i := range ramp {
		ramp[i], step[i] = 200+8*float64(i), 200
		if i >= windows-4 {
			step[i] = 400
		}
	}
	trendAtEnd := func(name string, rates []float64) (float64, float64) {
		p := mustNew(t, name, spec(FunctionSpec{Name: "f", SLO: time.Second, SizeSensitive: true}))
		drive(t, p, rates, nil)
		c := p.(*core)
		d, _ := c.dispersion()
		return c.trendRate(), d
	}
	if tr, d := trendAtEnd("gantry", ramp); tr <= 0 {
		t.Errorf("gantry, ramp: trend %.2f/s (EWMA dispersion %.2f), want it added", tr, d)
	}
	if tr, d := trendAtEnd("gantry-no-own-gate", ramp); tr != 0 || d < steadyDispersion {
		t.Errorf("gantry-no-own-gate, ramp: trend %.2f/s, EWMA dispersion %.2f; want the ramp's lag past %v to hold it off",
			tr, d, steadyDispersion)
	}
	for _, name := range []string{"gantry", "gantry-no-own-gate"} {
		if tr, _ := trendAtEnd(name, step); tr != 0 {
			t.Errorf("%s, 4 windows after a step: trend %.2f/s, want none", name, tr)
		}
	}
}
