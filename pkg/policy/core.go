package policy

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"gantry.dev/gantry/pkg/batch"
	"gantry.dev/gantry/pkg/predict"
	"gantry.dev/gantry/pkg/profile"
)

// Tuning shared by the policies. The paper fixes none of these; they are
// documented in docs/simulator.md.
const (
	ewmaAlpha     = 0.5  // weight of the newest window
	warmupWindows = 2    // history before the proactive scaler acts
	linRegHistory = 6    // Fifer's regression over the last minute
	retireShare   = 0.25 // idling detection retires this share of the excess per window
	// Under parts.steadyRetire, while the window counts' dispersion is
	// below steadyDispersion, idling detection retires steadyRetireShare
	// of the excess over the current target (no keep-alive).
	steadyDispersion  = 3
	steadyRetireShare = 0.5
	// sloMaxExecRatio is the paper's SLO rule (1.2 x the maximum execution
	// time). Before a function has been profiled, a policy assumes each
	// request may take the maximum: SLO / 1.2.
	sloMaxExecRatio = 1.2
	poolSize        = 2048 // recent first-function sizes kept by gantry
	sizeBins        = 128  // resolution of the input-size-distribution prediction
	// Profiling takes every sample until a function has denseSamples, then
	// one in sparseEvery: the fit has converged by then, and the profiler
	// would otherwise be the costliest step per simulated request.
	denseSamples = 4096
	sparseEvery  = 8
)

// fnState is what a policy has learnt about one function.
type fnState struct {
	spec      FunctionSpec
	exec, out *profile.Fitter
	execM     profile.Model
	outM      profile.Model
	execOK    bool
	outOK     bool
	// execScale turns the mean into the quantile the policy packs on.
	execScale float64
	target    int
	held      int // the panic rule's hold (see heldTarget)
	// past holds the targets of the last keepWindows windows, newest at
	// pastNext-1: idling detection keeps the largest of them.
	past      [maxKeepWindows]int
	pastNext  int
	completed int64
	// mix is the mean execution time (seconds) the latest SLO sizing
	// used: a burst's excess rate times it is the load it adds.
	mix float64
	// burstTarget is the SLO sizing at the rate plus a burst's excess
	// (burstResize), the target while the excess is in force.
	burstTarget int
	// refused is set when the function's full queue refused a request
	// since the last Plan (Refused): its backlog rule applies.
	refused bool
	// excessSince is when the live instances last rose above the target
	// under steady load (steady.go); zero while they are not above it.
	excessSince time.Time
	// meanEWMA is the mean execution time (seconds) the SLO sizing
	// smooths over its sizings (sloSize).
	meanEWMA float64
	// share is the miss budget the time-shared rounding of a small
	// target keeps (sizing_share.go).
	share shareState
}

// core implements every named policy; parts says which mechanisms it uses.
type core struct {
	name string
	p    parts
	spec Spec
	fns  []fnState

	load   predict.Predictor
	oracle *predict.Oracle

	// Input-size-distribution prediction at the first function. Shares
	// are tracked on fine fixed bins and summed into classes when sizing:
	// an EWMA is linear, so this equals an EWMA per class, and it survives
	// the class boundaries moving as the model is refit.
	fractions *predict.Fractions
	binCount  []float64
	binShare  []float64

	pool     []float64 // ring of recent first-function sizes (gantry), or truth samples (oracle)
	poolNext int

	winCount float64
	panic    panicState
	burst    burstState
	period   periodState // recurring onsets (periodic.go)
	trend    trendState  // the predicted rate's trend (steady_trend.go)
	slacks   []float64   // scratch of serviceMix
	rate     float64     // the rate the latest proactive sizing used
	// disp is an EWMA of the windows' squared count errors over the
	// predicted count (observeDispersion), over dispN windows.
	disp  float64
	dispN int
	// dispSlow is the same estimate over about 40 windows: the SLO
	// sizing's rate error (predictionSD).
	dispSlow float64
	// dispMean is the slow estimate the steadiness test reads: the mean
	// of the windows seen, then an EWMA like dispSlow (steady.go).
	dispMean float64
	// loadWindows counts the windows closed since the first arrival,
	// the one it came in included (observeDispersion).
	loadWindows int
	loadSeen    bool

	started    bool
	nextWindow time.Time
	targetOK   bool

	packer batch.Packer
	items  []batch.Item
	rng    *rand.Rand // synthetic arrival times; seeded from Spec.Seed

	// coldStart is the cold start the Reactive and Look-Ahead Scalers plan
	// a new container with: Spec.ColdStart until the driver measures one
	// (SetColdStart, hooks.go).
	coldStart time.Duration
	// instant is what LookAhead and Plan decided at the latest instant.
	instant sameInstant
	// chainMemo keeps chained predictions until the models change.
	chainMemo map[chainKey]chainVal
	// chain is the joint split of a chain's slack (chain_sizing.go).
	chain chainSplit
	// budget is the misses counted against ε (miss_budget.go).
	budget missBudget
	// startup sizes the functions before the first window closes
	// (startup_sizing.go).
	startup startupSizing
}

func newCore(name string, p parts, spec Spec) (*core, error) {
	if err := validateSpec(spec, p.truth); err != nil {
		return nil, err
	}
	c := &core{name: name, p: p, spec: spec, fns: make([]fnState, len(spec.Functions)),
		rng:       rand.New(rand.NewPCG(spec.Seed, 0x73747265616d)),
		coldStart: spec.ColdStart,
		instant:   sameInstant{expect: make([]int, len(spec.Functions)), added: make([]int, len(spec.Functions))}}
	for i, f := range spec.Functions {
		c.fns[i] = fnState{spec: f, exec: profile.NewFitter(profile.DefaultMinSamples),
			out: profile.NewFitter(profile.DefaultMinSamples), execScale: 1}
	}
	if spec.KeepAlive > 0 {
		if p.instances == nil || p.instances.KeepAlive <= 0 {
			return nil, fmt.Errorf("%w: policy %s has no fixed keep-alive to set to %v", ErrBadSpec, name, spec.KeepAlive)
		}
		inst := *p.instances
		inst.KeepAlive = spec.KeepAlive
		c.p.instances = &inst
	}
	if err := c.initLoad(); err != nil {
		return nil, err
	}
	c.fractions, _ = predict.NewFractions(sizeBins, ewmaAlpha, 1) // constants are in range
	c.binCount, c.binShare = make([]float64, sizeBins), make([]float64, sizeBins)
	if p.truth {
		c.initTruthPool()
	}
	return c, nil
}

func validateSpec(s Spec, truth bool) error {
	switch {
	case len(s.Functions) == 0:
		return fmt.Errorf("%w: no functions", ErrBadSpec)
	case s.AppSLO <= 0 || s.Window < time.Second || s.ColdStart < 0:
		return fmt.Errorf("%w: SLO %v, window %v, cold start %v", ErrBadSpec, s.AppSLO, s.Window, s.ColdStart)
	case !(s.SLOTarget >= 0 && s.SLOTarget < 1):
		return fmt.Errorf("%w: SLO target %v must be in (0, 1), or 0 for the default", ErrBadSpec, s.SLOTarget)
	case !(s.MinSize > 0) || s.MaxSize < s.MinSize:
		return fmt.Errorf("%w: size range [%v, %v]", ErrBadSpec, s.MinSize, s.MaxSize)
	case truth && (s.Truth == nil || s.Truth.Rate == nil || s.Truth.ExecMean == nil ||
		s.Truth.OutputMean == nil || s.Truth.SampleSize == nil):
		return fmt.Errorf("%w: the oracle needs the full Truth", ErrBadSpec)
	}
	for i, f := range s.Functions {
		if f.SLO <= 0 {
			return fmt.Errorf("%w: function %d (%s) has SLO %v", ErrBadSpec, i, f.Name, f.SLO)
		}
	}
	return nil
}

func (c *core) initLoad() error {
	var err error
	switch c.p.load {
	case loadEWMA:
		warmup := warmupWindows
		if c.p.panic || c.p.sloSizing {
			// The panic rule guards against a burst, so one window of
			// history is enough to start sizing.
			warmup = 1
		}
		c.load, err = predict.NewEWMA(ewmaAlpha, warmup)
		if c.p.fastFall {
			c.load, err = predict.NewFallEWMA(ewmaAlpha, fallAlpha, fallZ, warmup) // rate_fall.go
		}
	case loadLinReg:
		c.load, err = predict.NewLinReg(linRegHistory)
	case loadOracle:
		perSecond := c.truthRates()
		c.oracle, err = predict.NewOracle(perSecond, c.spec.Start, c.spec.Window)
		c.load = c.oracle
	}
	return err
}

// truthRates samples Truth.Rate once per second for the oracle, up to the
// end of the trace (Rate < 0) or a week.
func (c *core) truthRates() []float64 {
	const seconds = 7 * 24 * 3600
	var out []float64
	for s := range seconds {
		r := c.spec.Truth.Rate(time.Duration(s) * time.Second)
		if r < 0 {
			break
		}
		out = append(out, r)
	}
	return out
}

func (c *core) initTruthPool() {
	rng := rand.New(rand.NewPCG(c.spec.Seed, 0x6f7261636c65))
	c.pool = make([]float64, poolSize)
	for i := range c.pool {
		c.pool[i] = c.spec.Truth.SampleSize(rng)
	}
}

func (c *core) Name() string { return c.name }
func (c *core) Order() Order { return c.p.order }
func (c *core) Caps() Caps   { return c.p.caps() }

// Estimate predicts a request's execution time at fn: the profiled model
// (scaled to the packing quantile), else the observed mean, else the
// worst case the SLO rule implies.
func (c *core) Estimate(fn int, size float64) time.Duration {
	return time.Duration(c.execAt(fn, size))
}

func (c *core) execAt(fn int, size float64) float64 {
	f := &c.fns[fn]
	switch {
	case c.p.truth:
		return float64(c.spec.Truth.ExecMean(fn, size))
	case f.execOK && f.spec.SizeSensitive:
		return math.Max(1, f.execM.Mean(size)*f.execScale)
	case f.exec.Count() > 0:
		return f.exec.MeanY() * f.execScale
	}
	return float64(f.spec.SLO) / sloMaxExecRatio
}

// meanExec is the plain average execution time static batching uses.
func (c *core) meanExec(fn int) float64 {
	if f := &c.fns[fn]; f.exec.Count() > 0 {
		return f.exec.MeanY()
	}
	return float64(c.fns[fn].spec.SLO) / sloMaxExecRatio
}

// outAt predicts the output size of fn for an input size: chained
// prediction.
func (c *core) outAt(fn int, size float64) float64 {
	f := &c.fns[fn]
	switch {
	case c.p.truth:
		return c.spec.Truth.OutputMean(fn, size)
	case f.outOK:
		return math.Max(1e-9, f.outM.Mean(size))
	case f.out.Count() > 0:
		return f.out.MeanY()
	}
	return size
}

func (c *core) Arrive(now time.Time, fn int, size float64, n Counts) int {
	burst := 0
	c.chargeStartup(fn, n)
	if fn == 0 {
		c.countArrival(size)
		switch {
		case c.p.arrivalBurst && c.p.noBurstAlarm:
			c.riseArrive(now) // the warm buffer's spans only (ablation)
		case c.p.arrivalBurst:
			if c.p.periodic {
				c.periodArrive(now)
			}
			c.burstArrive(now)
			burst = c.burstResize(now, fn, n)
		}
	}
	switch {
	case c.p.react == reactPerRequest:
		return max(0, n.Queued-n.Starting)
	case n.Live == 0 && n.Queued > 0:
		// Scaled to zero: start one container now rather than at the next
		// tick; the tick sizes the rest.
		return max(1, burst)
	}
	return burst
}

func (c *core) countArrival(size float64) {
	c.winCount++
	c.loadSeen = true
	c.panic.cum++
	c.binCount[c.bin(size)]++
	if c.p.empiricalMix && !c.p.truth {
		if len(c.pool) < poolSize {
			c.pool = append(c.pool, size)
			return
		}
		c.pool[c.poolNext] = size
		c.poolNext = (c.poolNext + 1) % poolSize
	}
}

// bin maps an input size to its bin; sizes outside the range clamp.
func (c *core) bin(size float64) int {
	width := c.spec.MaxSize - c.spec.MinSize
	if width <= 0 || math.IsNaN(size) {
		return 0
	}
	x := (size - c.spec.MinSize) / width * sizeBins
	return int(min(sizeBins-1, max(0, x))) // clamp before converting: int(+Inf) is undefined
}

// binCenter is the middle input size of bin i.
func (c *core) binCenter(i int) float64 {
	return c.spec.MinSize + (float64(i)+0.5)*(c.spec.MaxSize-c.spec.MinSize)/sizeBins
}

// Complete feeds the profilers.
func (c *core) Complete(fn int, size float64, exec time.Duration, output float64) error {
	if fn < 0 || fn >= len(c.fns) {
		return fmt.Errorf("%w: function %d of %d", ErrBadSpec, fn, len(c.fns))
	}
	f := &c.fns[fn]
	f.completed++
	if f.exec.Count() >= denseSamples && f.completed%sparseEvery != 0 {
		return checkSample(size, exec, output)
	}
	if err := f.exec.Add(size, float64(exec)); err != nil {
		return err
	}
	return f.out.Add(size, output)
}

// checkSample validates a sample the profiler skips, so bad input is
// reported whether or not it would have been used.
func checkSample(size float64, exec time.Duration, output float64) error {
	if !(size > 0) || exec <= 0 || !(output > 0) || math.IsInf(size, 0) || math.IsInf(output, 0) {
		return fmt.Errorf("%w: size %v, exec %v, output %v", profile.ErrBadSample, size, exec, output)
	}
	return nil
}
