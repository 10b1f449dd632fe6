package policy

import "time"

// The seasonal prediction's level and its own errors (docs/simulator.md,
// "Recurring onsets"). While a period holds, each window's rate is
// predicted from the same window one period earlier (periodic.go). Two
// rules make that prediction, and the margin the sizing keeps for its
// error, fit a recurring load whose level drifts:
//
//   - Level (parts.seasonalLevel). The count one period ago is scaled by
//     how the load moved over the period: the arrivals of the last
//     levelSpan seconds over those of the same seconds one period
//     earlier. A diurnal base moves by up to a fifth in a 3-minute period
//     of the Azure-format spikes (a 40-minute sine of amplitude one
//     half), which the bare count one period ago misses by as much; the
//     ratio follows it with the noise of two counts of a minute (2% at
//     100/s). The ratio is bounded to [1/maxLevel, maxLevel], so a burst
//     in the last minute that did not recur cannot multiply every window.
//   - Own errors (parts.seasonalDisp). The sizing averages its miss share
//     over the rate prediction's error (sizing.go, predictionSD), read
//     from the dispersion of the window counts about the prediction they
//     were sized for. That estimate is an EWMA over about 40 windows, so
//     when the period is found it holds the EWMA's errors at every step
//     before (a step to 3x missed by a window's worth of arrivals is a
//     dispersion of thousands), and sized every window after for errors
//     the seasonal prediction does not make: gantry held twice the
//     oracle's containers between the spikes. The seasonal prediction's
//     dispersion is kept apart: when a period is found it is measured
//     on the windows of the history the prediction could have been made
//     for (a backtest of what it would have predicted), then on each
//     window it sizes, and the sizing reads it while the period holds.
//     When the period is forgotten the EWMA's dispersion, which went on
//     counting every window, is read again.
const (
	levelSpan = 60 // seconds
	maxLevel  = 2.0
	// minLevelCount is the fewest arrivals in a level span the ratio is
	// taken from (below it the level is 1): a count of 100 has a 10%
	// Poisson error.
	minLevelCount = 100
)

// seasonalCount predicts the arrivals in the w seconds from second a as
// those of the same seconds one period earlier, times the level's drift
// over the period; false when the period or the history does not reach.
func (c *core) seasonalCount(a, w int64) (float64, bool) {
	p := &c.period
	from := a - p.period
	if p.period == 0 || from < 0 || from+w > p.sec || p.sec-from > histSeconds || w <= 0 {
		return 0, false
	}
	n := c.histSum(from, from+w)
	if !c.p.seasonalLevel {
		return n, true
	}
	span := int64(levelSpan)
	if a-span-p.period < 0 || p.sec-(a-span-p.period) > histSeconds || a > p.sec {
		return n, true
	}
	now, then := c.histSum(a-span, a), c.histSum(a-span-p.period, a-p.period)
	if now < minLevelCount || then < minLevelCount {
		return n, true
	}
	return n * min(maxLevel, max(1/maxLevel, now/then)), true
}

// histSum is the arrivals in seconds [from, to) of the history.
func (c *core) histSum(from, to int64) float64 {
	sum := 0.0
	for k := from; k < to; k++ {
		sum += c.period.hist[k%histSeconds]
	}
	return sum
}

// backtestSeasonal measures, when a period is found, the dispersion of
// the closed windows' counts about what the seasonal prediction would
// have said at their start: the estimate the sizing reads from then on.
func (c *core) backtestSeasonal() {
	p := &c.period
	p.sdisp, p.sdispN = 0, 0
	w := int64(c.spec.Window / time.Second)
	if !c.p.seasonalDisp || !c.started || w <= 0 {
		return
	}
	// The window open now began at end; the closed ones before it.
	end := c.secondOf(c.nextWindow) - w
	var wins [][2]float64 // (got, want), newest first
	for a := end - w; a >= 0 && a+w <= p.sec; a -= w {
		want, ok := c.seasonalCount(a, w)
		if !ok || want <= 0 {
			break
		}
		wins = append(wins, [2]float64{c.histSum(a, a+w), want})
	}
	for i := len(wins) - 1; i >= 0; i-- {
		c.addSeasonalError(wins[i][0], wins[i][1])
	}
}

// observeSeasonal feeds the closing window's error to the seasonal
// dispersion, when the seasonal prediction sized it.
func (c *core) observeSeasonal() {
	p := &c.period
	want := c.rate * c.spec.Window.Seconds()
	if !c.p.seasonalDisp || !p.used || p.period == 0 || want <= 0 {
		return
	}
	c.addSeasonalError(c.winCount, want)
}

// addSeasonalError adds one window's squared error over its prediction:
// the mean of the first windows, then an EWMA over about 40 (as the
// EWMA's slow dispersion, sizing.go).
func (c *core) addSeasonalError(got, want float64) {
	p := &c.period
	e := got - want
	p.sdisp += max(slowDispersionAlpha, 1/float64(p.sdispN+1)) * (e*e/want - p.sdisp)
	p.sdispN++
}

// seasonalDispersion is the seasonal prediction's dispersion while a
// period holds and it has been measured.
func (c *core) seasonalDispersion() (float64, bool) {
	p := &c.period
	if !c.p.seasonalDisp || !c.p.seasonal || p.period == 0 || p.sdispN < dispersionWindows {
		return 0, false
	}
	return p.sdisp, true
}

// noteSeasonalDrop marks a predicted step down: the window opening now
// is predicted at rate r, at most 1/onsetRatio of the window before (the
// onsets' own test, mirrored). For one rent-or-buy age from then, idle
// containers above the target retire at once (retireAtStepEnd).
func (c *core) noteSeasonalDrop(now time.Time, r float64) {
	if c.p.stepEnd && c.period.used && r*onsetRatio <= c.rate {
		c.period.dropUntil = now.Add(IdleAgeLimit(c.coldStart))
	}
}

// retireAtStepEnd is how many idle containers to retire at once after a
// predicted step down (parts.stepEnd). Retirement by idle age (retire.go)
// waits out the rent-or-buy age because the next request may come at
// any moment; once a period holds, the next step is known to be about a
// period away, far past that age (the onsets are at least minOnsetGap
// apart), so a container the step needed costs more kept than started
// again: every idle one above the target retires, as long as no request
// waits and the next onset is more than a rent-or-buy age away.
func (c *core) retireAtStepEnd(now time.Time, v *View, target int) int {
	p := &c.period
	limit := IdleAgeLimit(c.coldStart)
	if !c.p.stepEnd || p.period == 0 || !now.Before(p.dropUntil) || v.Queued > 0 || v.Live <= target {
		return 0
	}
	if next := c.spec.Start.Add(time.Duration(p.next) * time.Second); next.Sub(now) <= limit+c.coldStart {
		return 0
	}
	return min(v.Idle, v.Live-target)
}
