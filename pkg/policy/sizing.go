package policy

import (
	"math"
	"time"
)

// Sizing from the SLO target (docs/simulator.md, "Sizing from the SLO
// target"). A function with n warm containers, Poisson arrivals at rate λ
// and execution times S of mean m and squared coefficient of variation
// c² is an M/G/n queue with offered load a = λm. A request of execution
// time x meets its SLO when it waits at most its slack SLO - x, so the
// share of requests that miss because they waited is
//
//	P(miss) = E_x[ P(W > SLO - x) ] ≈ C(n, a) · E_x[ exp(-θ (SLO - x)) ],
//	θ = (n - a) / (m · sqrt((1 + c²)/2)),
//
// C(n, a) the Erlang-C probability of waiting at all (insensitive to the
// service distribution to first order) and the conditional wait
// exponential with the M/M/n mean m/(n-a), exact for exponential service
// (c² = 1). For less variable service the wait is shorter: the
// Lee-Longton (Kingman) factor (1+c²)/2 on the mean wait predicted 1.3 to
// 3 times fewer misses than the simulator measured at c² = 0.27
// (sentiment-analysis, TestSizingModelMatchesSimulatedMisses), because
// the tail decays more slowly than the mean shrinks; its square root
// matches the simulator within that test's tolerance. The sizing
// picks the smallest n with P(miss) ≤ ε, ε = 1 - the SLO target. At a
// large load (a > sqrtStaffingLoad) Erlang C is replaced by its
// Halfin-Whitt limit with β = (n - a)/√a: square-root staffing.

// DefaultSLOTarget is the share of requests that must meet their SLO
// when nothing says otherwise (Spec.SLOTarget, the stack's slo_target,
// `--slo-target`).
const DefaultSLOTarget = 0.999

// sqrtStaffingLoad is the offered load above which Erlang C is replaced
// by the Halfin-Whitt approximation: there the two agree to within a few
// percent of the delay probability, and the recursion would cost O(n) per
// candidate.
const sqrtStaffingLoad = 500

// maxSlackSamples bounds the slacks the miss probability averages over:
// a sorted, evenly spaced selection of the pool's.
const maxSlackSamples = 256

// ServiceMix describes the execution times a function's requests will
// take: their mean and squared coefficient of variation, and each
// request's slack (its SLO minus its execution time), in seconds.
type ServiceMix struct {
	Mean, SCV float64
	// Slacks are the positive slacks of the requests; Late is the share
	// of requests whose execution alone exceeds the SLO (no sizing can
	// save them, so they do not count against ε).
	Slacks []float64
	Late   float64
}

// erlangC is the probability that an arrival waits in an M/M/n queue
// with offered load a < n.
func erlangC(n int, a float64) float64 {
	if float64(n) <= a {
		return 1
	}
	if a > sqrtStaffingLoad {
		beta := (float64(n) - a) / math.Sqrt(a)
		phi := math.Exp(-beta*beta/2) / math.Sqrt(2*math.Pi)
		Phi := 0.5 * math.Erfc(-beta/math.Sqrt2)
		return 1 / (1 + beta*Phi/phi)
	}
	b := 1.0 // Erlang B by its stable recursion
	for k := 1; k <= n; k++ {
		b = a * b / (float64(k) + a*b)
	}
	return float64(n) * b / (float64(n) - a*(1-b))
}

// MissProb is the predicted share of requests that wait past their slack
// with n containers at arrival rate rate (per second), among those whose
// execution fits the SLO.
func MissProb(n int, rate float64, mix ServiceMix) float64 {
	if len(mix.Slacks) == 0 || mix.Mean <= 0 {
		return 0
	}
	a := rate * mix.Mean
	if float64(n) <= a {
		return 1
	}
	theta := (float64(n) - a) / mix.Mean / math.Sqrt((1+mix.SCV)/2)
	var s float64
	for _, sl := range mix.Slacks {
		s += math.Exp(-theta * sl)
	}
	return min(1, erlangC(n, a)*s/float64(len(mix.Slacks)))
}

// SizeFor is the fewest containers whose predicted miss share is at most
// eps at this rate, and at most limit (the answer is limit when even that
// is not enough).
func SizeFor(rate float64, mix ServiceMix, eps float64, limit int) int {
	if rate <= 0 || mix.Mean <= 0 || len(mix.Slacks) == 0 {
		return 0
	}
	a := rate * mix.Mean
	lo := max(1, int(math.Floor(a))+1)
	if lo >= limit {
		return limit
	}
	// P(miss) falls with n: search the first n that meets eps, doubling
	// the step, then bisecting.
	step, hi := 1, lo
	for MissProb(hi, rate, mix) > eps {
		lo = hi + 1
		hi += step
		step *= 2
		if hi >= limit {
			if MissProb(limit, rate, mix) > eps {
				return limit
			}
			hi = limit
			break
		}
	}
	for lo < hi {
		mid := (lo + hi) / 2
		if MissProb(mid, rate, mix) <= eps {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return hi
}

// maxSizing bounds the containers the SLO sizing asks for one function.
const maxSizing = 1 << 20

// serviceMix is function f's service mix under the current models: each
// recent first-function input size carried down the chain, its mean
// execution time, the model's residual spread.
func (c *core) serviceMix(f int) (ServiceMix, bool) {
	fs := &c.fns[f]
	if len(c.pool) == 0 {
		return ServiceMix{}, false
	}
	slo := fs.spec.SLO.Seconds()
	relVar := 0.0
	if fs.execOK {
		relVar = fs.execM.RelStd * fs.execM.RelStd
	}
	step := max(1, len(c.pool)/maxSlackSamples)
	c.slacks = c.slacks[:0]
	var sum, sum2 float64
	var n, late int
	for i := 0; i < len(c.pool); i += step {
		x := c.execAt(f, c.chainSize(c.pool[i], f)) / fs.execScale / float64(time.Second)
		sum += x
		sum2 += x * x * (1 + relVar)
		n++
		if sl := slo - x; sl > 0 {
			c.slacks = append(c.slacks, sl)
		} else {
			late++
		}
	}
	m := sum / float64(n)
	if m <= 0 {
		return ServiceMix{}, false
	}
	return ServiceMix{Mean: m, SCV: max(0, sum2/float64(n)/(m*m)-1), Slacks: c.slacks,
		Late: float64(late) / float64(n)}, true
}

// sloTarget is the share of requests to meet the SLO, in (0, 1).
func (c *core) sloTarget() float64 {
	if t := c.spec.SLOTarget; t > 0 && t < 1 {
		return t
	}
	return DefaultSLOTarget
}

// sloSize is the containers function f needs at this rate for the SLO
// target: the M/G/n sizing above, or false before there is a service
// mix to size with.
func (c *core) sloSize(f int, rate float64) (int, bool) {
	mix, ok := c.serviceMix(f)
	if !ok {
		return 0, false
	}
	c.fns[f].mix = mix.Mean
	return SizeFor(rate, mix, 1-c.sloTarget(), maxSizing), true
}

// predictionZ is how many standard deviations of the rate prediction's
// own error the SLO sizing adds to the predicted rate.
const predictionZ = 2.0

// predictionMargin is the rate the sizing adds for the error of the rate
// prediction beyond Poisson noise: the measured dispersion D of the
// window counts around their prediction (observeDispersion) is Poisson's
// 1 plus the prediction's error, so sqrt((D-1)·rate/window) is that
// error's standard deviation as a rate. The M/G/n model covers the
// Poisson part; at a large load, where it runs containers near full, an
// under-predicted rate otherwise overloads them.
func (c *core) predictionMargin(rate float64) float64 {
	d, ok := c.dispersion()
	if !ok || d <= 1 {
		return 0
	}
	return predictionZ * math.Sqrt((d-1)*rate/c.spec.Window.Seconds())
}
