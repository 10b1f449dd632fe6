package policy

import (
	"math"
	"time"
)

// Recurring onsets (docs/simulator.md, "Recurring onsets"). A rise faster
// than a cold start cannot be met by starting containers once it is seen:
// when the cold start exceeds the SLO, the requests of the first cold
// start of a step miss whatever the detector does. Real Function traces
// carry timer triggers, so many steps recur at a fixed period (the
// Azure-format spike trace steps to 3x every third minute). A step that
// recurs can be met ahead of time:
//
//   - Onsets. The arrivals at the chain's head are counted per second of
//     the clock. Second j is an onset when the mean of seconds j and j+1
//     is at least onsetRatio times the mean of the onsetBefore seconds
//     before j, and above it by onsetZ standard deviations of Poisson
//     noise (the variance of a mean of k seconds at rate λ is λ/k): on a
//     constant rate of 100/s or more the test fails with a probability
//     below 10⁻⁹ a second, and a slow rise (Wiki's day) never doubles
//     within a second. Onsets closer than minOnsetGap to the previous
//     one are the same step's.
//   - Period. When the last periodOnsets onsets are evenly spaced (their
//     gaps differ by at most periodTol), the period is their mean gap and
//     the next onset is expected one period after the last. The test is
//     its own significance test: bursts that come at random (Twitter's)
//     give gaps that agree within periodTol by chance with a probability
//     of about (2·periodTol/gap)² per onset, and a prediction that fails
//     (no onset within periodTol of it) forgets every onset, so three new
//     evenly spaced ones are needed before the rule acts again.
//   - Pre-warm. From one cold start plus prewarmSlack before the expected
//     onset, the burst excess (burst.go) is set to the rate the last
//     onsets rose to (the rate of the last onsetBefore seconds times the
//     smallest of their ratios) less the predicted rate, in force for a
//     window after the onset: every function is sized for it at once, so
//     the step finds its containers warm. The on-arrival detector then
//     compares arrivals with that raised rate and takes over after it.
//   - Seasonal prediction. While a period holds, each window's rate is
//     predicted as the rate of the same window one period earlier (the
//     per-second counts of the last histSeconds are kept), instead of
//     the EWMA: an EWMA lags each step's end by several windows and, by
//     its error at every step, inflates the dispersion the sizing's
//     margin reads; the rate a period ago knows when the step ends.
const (
	onsetRatio   = 1.5
	onsetZ       = 6.0
	onsetBefore  = 10
	minOnsetGap  = 30 * time.Second
	maxPeriod    = 15 * time.Minute
	periodOnsets = 3
	periodTol    = 2 * time.Second
	prewarmSlack = time.Second
	// secondsKept is the per-second counts' ring: the seconds before a
	// candidate onset, it and the one after.
	secondsKept = onsetBefore + 2
)

// periodState is the recurring-onset rule's memory.
type periodState struct {
	// sec is the index (seconds since Spec.Start) of the second being
	// counted, n its arrivals; counts holds the closed seconds by index
	// modulo secondsKept, closed how many have been.
	sec    int64
	n      float64
	counts [secondsKept]float64
	closed int64
	// The last onsets (second indices) and their ratios, oldest first.
	onsets []int64
	ratios []float64
	// next is the expected onset (a second index) while a period holds
	// (period > 0); warmed is the onset the pre-warm last acted for.
	period, next, warmed int64
	// prewarms counts the pre-warms acted on (tests, ablation).
	prewarms int64
	// hist holds the closed seconds' counts for the last histSeconds
	// (by index modulo histSeconds), for the seasonal prediction.
	hist []float64
	// The seasonal prediction's own errors (seasonal.go): sdisp is the
	// dispersion of the window counts about it over sdispN windows;
	// used is set while the open window was sized by it.
	sdisp  float64
	sdispN int
	used   bool
	// dropUntil ends the span after a predicted step down in which idle
	// containers above the target retire at once (seasonal.go).
	dropUntil time.Time
}

// histSeconds bounds the seasonal history: the longest period and a
// window of ten minutes past it.
const histSeconds = int64(maxPeriod/time.Second) + 600

// secondOf is the index of the second of the clock holding now.
func (c *core) secondOf(now time.Time) int64 {
	return int64(now.Sub(c.spec.Start) / time.Second)
}

// periodArrive counts one arrival at the chain's head.
func (c *core) periodArrive(now time.Time) {
	c.periodAdvance(now)
	c.period.n++
}

// periodAdvance closes the seconds that ended by now, testing each for an
// onset and each expected onset for a miss. A silence longer than the
// ring closes as empty seconds all the same, at a bounded cost.
func (c *core) periodAdvance(now time.Time) {
	p := &c.period
	s := c.secondOf(now)
	if s <= p.sec {
		return
	}
	if s-p.sec > secondsKept {
		// Skip the silence but the ring's worth of it (all zero).
		for k := p.sec; k < min(s-secondsKept, p.sec+histSeconds); k++ {
			c.recordSecond(k, 0)
		}
		p.sec, p.n = s-secondsKept, 0
		for i := range p.counts {
			p.counts[i] = 0
		}
	}
	for p.sec < s {
		p.counts[p.sec%secondsKept] = p.n
		c.recordSecond(p.sec, p.n)
		p.closed++
		p.n = 0
		c.testOnset(p.sec)
		p.sec++
	}
	if p.period > 0 && p.sec > p.next+int64(periodTol/time.Second)+2 &&
		(len(p.onsets) == 0 || p.onsets[len(p.onsets)-1] < p.next-int64(periodTol/time.Second)) {
		// The expected onset did not come: the period is forgotten.
		p.onsets, p.ratios, p.period, p.sdispN = p.onsets[:0], p.ratios[:0], 0, 0
	}
}

// testOnset tests whether second last-1 began a step, last being the
// second just closed.
func (c *core) testOnset(last int64) {
	p := &c.period
	j := last - 1
	if p.closed < secondsKept || j < 0 {
		return
	}
	pre := 0.0
	for k := j - onsetBefore; k < j; k++ {
		pre += p.counts[k%secondsKept]
	}
	pre /= onsetBefore
	post := (p.counts[j%secondsKept] + p.counts[last%secondsKept]) / 2
	sd := math.Sqrt(post/2 + pre/onsetBefore)
	if pre <= 0 || post < onsetRatio*pre || post-pre < onsetZ*sd {
		return
	}
	gap := int64(minOnsetGap / time.Second)
	if n := len(p.onsets); n > 0 && j-p.onsets[n-1] < gap {
		return
	}
	// The step began in second j, or in j+1 when j is still at the
	// level before it; its height is the higher of the two seconds.
	at, high := j, p.counts[j%secondsKept]
	if high < onsetRatio*pre {
		at = last
	}
	high = max(high, p.counts[last%secondsKept])
	if len(p.onsets) == periodOnsets {
		p.onsets, p.ratios = append(p.onsets[:0], p.onsets[1:]...), append(p.ratios[:0], p.ratios[1:]...)
	}
	p.onsets, p.ratios = append(p.onsets, at), append(p.ratios, high/pre)
	c.findPeriod()
}

// findPeriod sets the period when the last periodOnsets onsets are evenly
// spaced, and clears it otherwise.
func (c *core) findPeriod() {
	p := &c.period
	held := p.period
	p.period = 0
	defer func() {
		switch {
		case p.period == 0:
			p.sdispN = 0
		case held == 0:
			c.backtestSeasonal() // a new period: its predictor's errors so far
		}
	}()
	if len(p.onsets) < periodOnsets {
		return
	}
	lo, hi := int64(math.MaxInt64), int64(0)
	for i := 1; i < len(p.onsets); i++ {
		g := p.onsets[i] - p.onsets[i-1]
		lo, hi = min(lo, g), max(hi, g)
	}
	if hi-lo > int64(periodTol/time.Second) || hi > int64(maxPeriod/time.Second) {
		return
	}
	n := int64(len(p.onsets))
	p.period = int64(math.Round(float64(p.onsets[n-1]-p.onsets[0]) / float64(n-1)))
	p.next = p.onsets[n-1] + p.period
}

// periodPrewarm raises the burst excess ahead of an expected onset (the
// pre-warm above), once per onset.
func (c *core) periodPrewarm(now time.Time) {
	p := &c.period
	if p.period == 0 || p.warmed == p.next || !c.targetOK {
		return
	}
	onset := c.spec.Start.Add(time.Duration(p.next) * time.Second)
	if now.Before(onset.Add(-c.coldStart - prewarmSlack)) {
		return
	}
	p.warmed = p.next
	ratio := math.Inf(1)
	for _, r := range p.ratios {
		ratio = min(ratio, r)
	}
	before := 0.0
	for k := range secondsKept {
		if s := p.sec - 1 - int64(k); k < onsetBefore && s >= 0 {
			before += p.counts[s%secondsKept]
		}
	}
	ex := before/onsetBefore*ratio - c.rate
	b := &c.burst
	if ex <= b.excessNow(now) {
		return
	}
	b.excess, b.excessUntil = ex, onset.Add(c.spec.Window)
	for f := range c.fns {
		if k, ok := c.sloSize(f, c.rate+c.warmBuffer()+ex); ok {
			c.fns[f].burstTarget = k
		}
	}
	p.prewarms++
}

func (c *core) recordSecond(sec int64, n float64) {
	p := &c.period
	if p.hist == nil {
		p.hist = make([]float64, histSeconds)
	}
	p.hist[sec%histSeconds] = n
}

// seasonalRate is the rate one period before the coming window, while a
// period holds and that window is in the history (seasonal.go: scaled by
// the level's drift over the period under parts.seasonalLevel).
func (c *core) seasonalRate(now time.Time) (float64, bool) {
	w := int64(c.spec.Window / time.Second)
	n, ok := c.seasonalCount(c.secondOf(now), w)
	if !ok {
		return 0, false
	}
	return n / float64(w), true
}
