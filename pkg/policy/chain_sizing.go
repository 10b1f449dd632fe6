package policy

import (
	"math"
	"time"
)

// Joint sizing of a chain (docs/simulator.md, "Sizing a chain jointly").
//
// Sized one function at a time, each function of a chain has its share of
// the app SLO (SplitSLO: in proportion to its longest execution) and
// bounds by ε the requests that wait past that share minus their own
// execution. The share is a worst case: it assumes every earlier
// function took its whole share, so a function whose execution is nearly
// its share (audio-translation's send-message, 45 ms of a 54 ms share)
// is sized for a slack of a few milliseconds, although the request that
// reaches it has, on average, hundreds of milliseconds of the app's SLO
// left (the drivers' deadline at function i is the arrival plus the
// cumulative budget up to i, so time an earlier function did not use is
// slack here).
//
// Jointly, a request of first-function size s, with execution x_i at
// function i, has the end-to-end slack S = SLO - Σ x_i. It misses only if
// its waits sum past S, so it misses only if some function i makes it
// wait past a fraction f_i of S (Σ f_i = 1): by the union bound the
// chain's miss share is at most Σ_i P(W_i > f_i·S). The sizing gives
// function i the slacks f_i·S of the pooled requests and sizes it with
// the same M/G/n model as a single function (sizing.go). The fractions
// are multiples of 1/chainUnits, at least one step each, chosen to
// minimise the chain's containers: a dynamic program over the functions
// (bestSplit) on each function's containers at each number of steps,
// made continuous (sizeSmooth) so that a step that brings a function
// closer to its next whole container counts. Where the heavy-traffic
// model holds, the containers above the load at function i grow as
// m_i/(f_i·S) (sizing.go: the wait's decay rate is (n - a)/m), so the
// split lands near f_i ∝ √m_i, the minimum of Σ m_i/f_i under Σ f_i = 1:
// the short tail gets far more than its SLO share left it, the long head
// less.
//
// Each function is still sized for all of ε, as it was alone, so the
// union bound alone allows k·ε end to end. It is loose: under gantry's
// order the simulator's end-to-end misses were 13 times below the sum of
// the functions' predicted shares on audio-translation (k = 3), which
// TestChainSizingBoundsEndToEndMisses (pkg/sim) checks stays more than
// k. Splitting ε as well (ε/k each, or shares of ε chosen by the same
// program, so that the bound itself is ε; commit 39d0634) held 0.4-1.1%
// more containers on the two-function chains' stable cells of seed 2
// and 4-13% more on email-categorization at 1-20 requests/s, with 1.6-3.9
// times the spawns, for compliance already above the target
// (docs/experiments.md).

// chainUnits is the resolution of the split: each function's fraction of
// the end-to-end slack is a multiple of 1/chainUnits.
const chainUnits = 20

// splitHysteresis is the containers a new split must save over the
// latest one, both costed at the current rate and mix, to replace it:
// the optimum is flat, and a split that moved with each window's noise
// moved the targets with it (more spawns, no fewer containers).
const splitHysteresis = 0.5

// splitStride thins the sampled slacks the split is searched on.
const splitStride = 4

// chainSplit is the latest joint split of the chain's slack.
type chainSplit struct {
	// frac is each function's fraction of a request's end-to-end slack;
	// nil while the chain is sized one function at a time.
	frac []float64
	// steps is the latest split in steps, kept unless a new one saves
	// splitHysteresis containers.
	steps []int
	// Scratch of the split: the pooled requests' end-to-end slacks
	// (seconds), each function's mean and SCV, and the slacks of one
	// candidate fraction.
	e2e    []float64
	sub    []float64
	mean   []float64
	scv    []float64
	scaled []float64
	// memo[f][u] is the containers function f needs with u steps
	// (fractional, sizeSmooth; 0: not computed yet).
	memo [][]float64
}

// jointChain reports whether the chain's functions are sized jointly.
func (c *core) jointChain() bool {
	return c.p.jointChain && c.p.sloSizing && len(c.fns) > 1 && c.spec.AppSLO > 0
}

// chainStages fills the split's scratch from the pool: each sampled
// request's end-to-end slack, and each function's mean execution time and
// SCV over the whole pool (as serviceMix takes them). It returns the share
// of requests whose executions alone exceed the app SLO, and false before
// there is a pool.
func (c *core) chainStages() (float64, bool) {
	s := &c.chain
	k := len(c.fns)
	if len(c.pool) == 0 {
		return 0, false
	}
	if len(s.mean) != k {
		s.mean, s.scv = make([]float64, k), make([]float64, k)
	}
	slo := c.spec.AppSLO.Seconds()
	step := max(1, len(c.pool)/maxSlackSamples)
	sum, sum2 := s.mean, s.scv
	clear(sum)
	clear(sum2)
	s.e2e = s.e2e[:0]
	late := 0
	for i, size := range c.pool {
		var total float64
		for f := range k {
			fs := &c.fns[f]
			relVar := 0.0
			if fs.execOK {
				relVar = fs.execM.RelStd * fs.execM.RelStd
			}
			x := c.execAt(f, size) / fs.execScale / float64(time.Second)
			sum[f] += x
			sum2[f] += x * x * (1 + relVar)
			total += x
			if f+1 < k {
				size = c.outAt(f, size)
			}
		}
		switch sl := slo - total; {
		case sl <= 0:
			late++
		case i%step == 0:
			s.e2e = append(s.e2e, sl)
		}
	}
	n := float64(len(c.pool))
	for f := range k {
		m := sum[f] / n
		if m <= 0 {
			return 0, false
		}
		s.mean[f], s.scv[f] = m, max(0, sum2[f]/n/(m*m)-1)
	}
	return float64(late) / n, true
}

// jointMix is function f's service mix with fraction frac of each pooled
// request's end-to-end slack (e2e, filled by chainStages), its slacks
// written into dst.
func (c *core) jointMix(f int, frac float64, late float64, e2e, dst []float64) ServiceMix {
	s := &c.chain
	dst = dst[:0]
	for _, sl := range e2e {
		dst = append(dst, frac*sl)
	}
	return ServiceMix{Mean: s.mean[f], SCV: s.scv[f], Slacks: dst, Late: late,
		LeastSlack: c.p.order == LeastSlack && c.steadyLoad()}
}

// splitChain chooses the fractions of the end-to-end slack for a rate
// (the rate the window is sized for, before the warm buffer), or clears
// them when the chain is not sized jointly or there is nothing yet to
// size with.
func (c *core) splitChain(rate float64) {
	s := &c.chain
	s.frac = nil
	if !c.jointChain() || rate <= 0 {
		return
	}
	late, ok := c.chainStages()
	if !ok || len(s.e2e) == 0 {
		return
	}
	k := len(c.fns)
	// The split is searched on a quarter of the sampled slacks (every
	// fourth of the sorted pool's): some hundred sizings a window, each
	// four times cheaper; the sizing itself then uses them all.
	s.sub = s.sub[:0]
	for i := 0; i < len(s.e2e); i += splitStride {
		s.sub = append(s.sub, s.e2e[i])
	}
	sub := s.sub
	rate += c.warmBuffer()
	sd := c.predictionSD(c.rate)
	eps := 1 - c.sloTarget()
	if len(s.memo) != k {
		s.memo = make([][]float64, k)
	}
	for f := range k {
		s.memo[f] = append(s.memo[f][:0], make([]float64, max(chainUnits, k)+1)...)
		if fs := &c.fns[f]; fs.meanEWMA > 0 {
			// the mean the sizing will use (sloSize smooths it)
			s.mean[f] = fs.meanEWMA + ewmaAlpha*(s.mean[f]-fs.meanEWMA)
		}
	}
	units := bestSplit(k, max(chainUnits, k), func(f, u int) float64 {
		if n := s.memo[f][u]; n > 0 {
			return n
		}
		mix := c.jointMix(f, float64(u)/float64(max(chainUnits, k)), late, sub, s.scaled)
		s.scaled = mix.Slacks
		n := sizeSmooth(rate, sd, mix, eps)
		s.memo[f][u] = n + 1 // 0 means not computed
		return n + 1
	}, s.steps)
	s.steps = units
	frac := make([]float64, k)
	for f, u := range units {
		frac[f] = float64(u) / float64(max(chainUnits, k))
	}
	s.frac = frac
}

// sizeSmooth is sizeForSpread's answer made continuous: n - 1 plus the
// share of the way from n - 1 to n containers that ln P(miss) has to go
// to reach ln ε. The split compares sums of these: whole containers are
// flat over several steps of slack, and a greedy on them stops on the
// flats.
func sizeSmooth(rate, sd float64, mix ServiceMix, eps float64) float64 {
	n := sizeForSpread(rate, sd, mix, eps, maxSizing)
	if n <= 1 || n >= maxSizing {
		return float64(n)
	}
	p0, p1 := missSpread(n-1, rate, sd, mix), missSpread(n, rate, sd, mix)
	if !(p0 > eps && p1 > 0 && p1 < p0 && p0 < 1) {
		return float64(n)
	}
	return float64(n-1) + min(1, math.Log(p0/eps)/math.Log(p0/p1))
}

// bestSplit shares total steps among k functions, at least one each,
// so that the summed need (the containers each function needs at a
// number of steps) is least: a dynamic program over the functions, exact
// for any need. A greedy on marginal gains is not: the sizing's miss
// share switches between the FIFO tail and the least-slack tail (times
// its tolerance) as the slack grows, so a function's need is not convex
// in its steps, and a greedy stopped where a long function had too
// little slack (a tenth of it for audio-translation's head).
func bestSplit(k, total int, need func(f, steps int) float64, prev []int) []int {
	total = max(total, k)
	// best[f][t]: the least need of functions f.. sharing t steps.
	best := make([][]float64, k+1)
	choice := make([][]int, k)
	for f := range best {
		best[f] = make([]float64, total+1)
		for t := range best[f] {
			best[f][t] = math.Inf(1)
		}
	}
	best[k][0] = 0
	for f := k - 1; f >= 0; f-- {
		choice[f] = make([]int, total+1)
		for t := k - f; t <= total-f; t++ {
			for u := 1; u <= t-(k-f-1); u++ {
				if v := need(f, u) + best[f+1][t-u]; v < best[f][t] {
					best[f][t], choice[f][t] = v, u
				}
			}
		}
	}
	if len(prev) == k {
		var sum float64
		n := 0
		for f, u := range prev {
			sum += need(f, max(1, u))
			n += u
		}
		if n == total && sum-best[0][total] < splitHysteresis {
			return prev
		}
	}
	steps := make([]int, k)
	t := total
	for f := range k {
		steps[f] = choice[f][t]
		t -= steps[f]
	}
	return steps
}

// chainMix is function f's service mix under the joint split, or false
// when the chain is not split (serviceMix then applies).
func (c *core) chainMix(f int) (ServiceMix, bool) {
	s := &c.chain
	if s.frac == nil || f >= len(s.frac) {
		return ServiceMix{}, false
	}
	late, ok := c.chainStages()
	if !ok || len(s.e2e) == 0 {
		return ServiceMix{}, false
	}
	mix := c.jointMix(f, s.frac[f], late, s.e2e, c.slacks)
	c.slacks = mix.Slacks
	return mix, true
}
