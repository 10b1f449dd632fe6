package policy

import (
	"math"
	"time"

	"gantry.dev/gantry/pkg/batch"
	"gantry.dev/gantry/pkg/profile"
)

// Plan runs the scalers: at each window boundary the proactive scaler
// re-sizes every function for the predicted load and idling detection
// trims excess; at every tick the reactive (and look-ahead) scaler adds
// containers for requests that would otherwise wait too long. It does not
// start again what a LookAhead at the same instant started (hooks.go).
func (c *core) Plan(now time.Time, views []View, out []Decision) {
	if !c.started {
		c.started = true
		c.nextWindow = now.Add(c.spec.Window)
		if c.p.truth {
			c.resize(now)
		}
	}
	c.refreshModels()
	if c.p.arrivalBurst {
		c.riseAdvance(now) // the spans follow the clock (burst.go)
	}
	if c.p.arrivalBurst && c.p.periodic {
		c.periodAdvance(now) // so do the seconds (periodic.go)
	}
	window := false
	for !now.Before(c.nextWindow) {
		c.closeWindow()
		c.nextWindow = c.nextWindow.Add(c.spec.Window)
		window = true
	}
	if window {
		c.resize(now)
	}
	c.startupSize(now, window, views) // startup_sizing.go
	if c.p.arrivalBurst && c.p.periodic {
		c.periodPrewarm(now)
	}
	surge := c.surge(now)
	c.instant.begin(now, views)
	for f := range c.fns {
		out[f] = c.decide(f, now, views, window, surge)
	}
	c.instant.record(out[:len(c.fns)])
}

func (c *core) refreshModels() {
	clear(c.chainMemo) // the predictions it keeps were made with the old models
	for i := range c.fns {
		f := &c.fns[i]
		f.execM, f.execOK = f.exec.Model()
		f.outM, f.outOK = f.out.Model()
		if f.execOK && c.p.execQuantile > 0 {
			f.execScale = f.execM.Quantile(1, c.p.execQuantile) / f.execM.Mean(1)
		}
	}
}

// closeWindow feeds the finished window to the predictors.
func (c *core) closeWindow() {
	c.observeDispersion()
	c.observeSeasonal() // the seasonal prediction's own errors (seasonal.go)
	if c.loadSeen {
		c.loadWindows++
	}
	if c.load != nil {
		c.observeTrendError() // before Observe: the trend's prediction was for this window
		c.observeLoad(c.winCount)
		if lvl, ok := c.load.Predict(c.nextWindow); ok && c.p.loadTrend {
			c.observeTrend(lvl)
		}
	}
	c.winCount = 0
	_ = c.fractions.Observe(c.binCount) // lengths match by construction
	clear(c.binCount)
}

// resize is the proactive scaler: predict the next window's arrival rate,
// build the queue of requests arriving within one function SLO, and size
// each function for it.
func (c *core) resize(now time.Time) {
	c.targetOK = false
	if c.p.sizing == sizeNone {
		return
	}
	rate, ok := c.predictRate(now)
	if !ok {
		return
	}
	c.rate = rate
	c.reviewBudget(now) // miss_budget.go
	c.splitChain(rate)  // chain_sizing.go
	for f := range c.fns {
		n, ok := c.sizeFunction(f, rate)
		if !ok {
			return
		}
		down := len(c.fns) - 1 - f
		fs := &c.fns[f]
		fs.target = n + int(math.Ceil(float64(n)*c.p.chainExtra*float64(down)))
		fs.past[fs.pastNext%maxKeepWindows] = fs.target
		fs.pastNext++
	}
	c.targetOK = true
}

// maxKeepWindows bounds parts.keepWindows.
const maxKeepWindows = 8

// keptTarget is the largest target of function f's last keepWindows
// windows (its current target when keepWindows <= 1).
func (c *core) keptTarget(f int) int {
	fs := &c.fns[f]
	t := fs.target
	for k := 1; k < min(c.p.keepWindows, maxKeepWindows, fs.pastNext); k++ {
		t = max(t, fs.past[(fs.pastNext-1-k)%maxKeepWindows])
	}
	return t
}

// predictRate is the expected arrivals per second in the coming window.
func (c *core) predictRate(now time.Time) (float64, bool) {
	win := c.spec.Window.Seconds()
	if c.oracle != nil {
		return c.oracle.Peak(now), true
	}
	if c.p.periodic && c.p.seasonal {
		if r, ok := c.seasonalRate(now); ok {
			c.noteSeasonalDrop(now, r)
			c.period.used = true
			return r, true // the rate one period ago (periodic.go)
		}
	}
	c.period.used = false
	n, ok := c.load.Predict(now)
	if !ok {
		return 0, false
	}
	return max(0, n/win+c.trendRate()), true
}

// sizeFunction returns the containers function f needs for a rate.
func (c *core) sizeFunction(f int, rate float64) (int, bool) {
	slo := c.fns[f].spec.SLO
	n := rate * slo.Seconds()
	n += c.p.headroomZ * math.Sqrt(n)
	count := int(math.Ceil(n))
	if count == 0 {
		return 0, true
	}
	if c.p.batchOne {
		return count, true
	}
	if c.p.sizing == sizeStatic || (c.p.noChain && f > 0) {
		return batch.Static(count, slo, time.Duration(c.meanExec(f))), true
	}
	if c.p.sloSizing {
		return c.windowSize(f, rate+c.warmBuffer()) // sizing_share.go
	}
	if c.p.stream {
		return c.streamSize(f, rate)
	}
	if !c.predictedQueue(f, count) {
		return 0, false
	}
	batch.SortDecreasing(c.items)
	return batch.FirstFit(&c.packer, c.items), true
}

// predictedQueue fills c.items with count requests for function f, their
// sizes carried down the chain by chained prediction.
func (c *core) predictedQueue(f, count int) bool {
	c.items = c.items[:0]
	slo := c.fns[f].spec.SLO
	add := func(size float64, k int) {
		e := time.Duration(c.execAt(f, c.chainSize(size, f)))
		for range k {
			c.items = append(c.items, batch.Item{Exec: e, Deadline: slo})
		}
	}
	if c.p.empiricalMix || c.p.truth {
		if len(c.pool) == 0 {
			return false
		}
		for i := range count {
			add(c.pool[i%len(c.pool)], 1)
		}
		return true
	}
	classes, ok := c.classes()
	if !ok || !c.fractions.Predict(c.binShare) {
		return false
	}
	shares, reps := c.classMix(classes)
	for i, k := range apportion(shares, count) {
		add(reps[i], k)
	}
	return true
}

// classes are the first function's input-size classes under its latest
// model (Cypress section 3).
func (c *core) classes() ([]profile.Class, bool) {
	f := &c.fns[0]
	if !f.execOK {
		return nil, false
	}
	classes, err := profile.Classes(f.execM, f.spec.SLO, c.spec.MinSize, c.spec.MaxSize)
	return classes, err == nil
}

// classMix sums the predicted bin shares into classes and gives each class
// a representative size: the share-weighted mean of its bins.
func (c *core) classMix(classes []profile.Class) (shares, reps []float64) {
	shares, reps = make([]float64, len(classes)), make([]float64, len(classes))
	for i, s := range c.binShare {
		x := c.binCenter(i)
		k := profile.Find(classes, x)
		shares[k] += s
		reps[k] += s * x
	}
	for k, cl := range classes {
		if shares[k] > 0 {
			reps[k] /= shares[k]
		} else {
			reps[k] = (cl.Lo + cl.Hi) / 2
		}
	}
	return shares, reps
}

// chainSize maps a first-function input size to function f's input size.
func (c *core) chainSize(size float64, f int) float64 {
	for j := range f {
		size = c.outAt(j, size)
	}
	return size
}

// apportion splits n into integer counts proportional to shares by largest
// remainder, so the counts sum to exactly n.
func apportion(shares []float64, n int) []int {
	out := make([]int, len(shares))
	rem := make([]float64, len(shares))
	total := 0
	for i, s := range shares {
		x := s * float64(n)
		out[i] = int(x)
		rem[i] = x - float64(out[i])
		total += out[i]
	}
	for ; total < n; total++ {
		best := 0
		for i := range rem {
			if rem[i] > rem[best] {
				best = i
			}
		}
		out[best]++
		rem[best] = -1
	}
	return out
}

// streamHorizonSLOs caps the stream's length at this many function SLOs:
// long enough to reach a steady state, short enough to stay cheap at
// thousands of requests per second.
const streamHorizonSLOs = 20

// streamSize packs the predicted requests of the coming window in arrival
// order, each released at a Poisson arrival time with its own deadline, so
// a container is reused as soon as it is free. The count is what the
// stream needs, including its random bursts, rather than one container
// per SLO's worth of standing queue.
func (c *core) streamSize(f int, rate float64) (int, bool) {
	if len(c.pool) == 0 {
		return 0, false
	}
	slo := c.fns[f].spec.SLO
	horizon := min(c.spec.Window, streamHorizonSLOs*slo)
	c.items = c.items[:0]
	var t float64
	for i := 0; rate > 0; i++ {
		t += c.rng.ExpFloat64() / rate * float64(time.Second)
		if t >= float64(horizon) {
			break
		}
		rel := time.Duration(t)
		size := c.chainSize(c.pool[i%len(c.pool)], f)
		c.items = append(c.items, batch.Item{Exec: time.Duration(c.execAt(f, size)), Release: rel, Deadline: rel + slo})
	}
	c.packer.Reset(nil, 0, len(c.items))
	var work float64
	for _, it := range c.items {
		c.packer.Place(it)
		work += float64(it.Exec)
	}
	n := c.packer.Opened()
	if z := c.p.loadQuantileZ; z > 0 && len(c.items) > 0 {
		// The busy containers of a Poisson stream are Poisson with mean
		// the offered load a (M/G/inf), so a + z·sqrt(a) is about its
		// upper z-quantile: cap the packed count there.
		a := rate * work / float64(len(c.items)) / c.fns[f].execScale / float64(time.Second)
		if d, ok := c.dispersion(); ok {
			n = min(n, int(math.Ceil(a+z*math.Sqrt(d*a))))
		}
	}
	return n, true
}

// dispersionAlpha is the weight of the newest window in the dispersion
// estimate; dispersionWindows are needed before it is trusted.
const (
	dispersionAlpha   = 0.3
	dispersionWindows = 3
)

// observeDispersion feeds the closing window's prediction error to the
// dispersion estimate: the squared error of its count against the count
// the window was sized for, over that count. A Poisson count predicted by
// the EWMA gives about 1.33; a bursty trace gives much more.
//
// A window counts only once the prediction it was sized for had
// warmupWindows full windows of load behind it. The window the first
// arrival came in is partial whenever the load begins mid-window, as it
// always does under the live dispatcher (its windows run from the
// group's creation): the next window was sized for that part alone, and
// its error, a few times the count, squared over that count, is no
// dispersion of the load. Taken in, it was the whole estimate's first
// value, and its margin sized gantry up to a node's capacity for most of
// a minute on a flat 10/s (gantry up --seed 2), which the simulator,
// whose load begins with its windows, never showed.
func (c *core) observeDispersion() {
	alarmed := c.windowAlarmed() // burst.go
	want := c.rate * c.spec.Window.Seconds()
	if !c.targetOK || want <= 0 || c.loadWindows <= warmupWindows {
		return
	}
	e := c.winCount - want
	d := e * e / want
	c.dispMean += max(slowDispersionAlpha, 1/float64(c.dispN+1)) * (d - c.dispMean) // steady.go
	if c.dispN == 0 {
		c.disp, c.dispSlow = d, d
	} else {
		c.disp += dispersionAlpha * (d - c.disp)
		c.dispSlow += slowDispersionAlpha * (c.sizingDispersionSample(d, alarmed) - c.dispSlow)
	}
	c.dispN++
}

// dispersion is the measured variance of the window counts over their
// mean (at least 1, a Poisson count's), once enough windows are seen.
func (c *core) dispersion() (float64, bool) {
	if c.dispN < dispersionWindows {
		return 0, false
	}
	return max(1, c.disp), true
}
