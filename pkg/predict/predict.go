// Package predict forecasts the next window's request count and input-size
// mix from per-window history. Predictors are pure: the caller observes one
// value per window and asks for the next.
package predict

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// ErrBadParam is returned by constructors for out-of-range parameters.
var ErrBadParam = errors.New("predict: bad parameter")

// Predictor forecasts the next window's value from the values observed at
// the end of each past window. now is the start of the window to predict;
// only the oracle uses it.
type Predictor interface {
	Observe(v float64)
	// Predict returns the forecast and whether there is enough history.
	Predict(now time.Time) (float64, bool)
}

// EWMA is an exponentially weighted moving average: after observing v the
// estimate becomes alpha·v + (1-alpha)·estimate. The first observation
// seeds it. It needs warmup observations before predicting.
type EWMA struct {
	alpha  float64
	warmup int
	seen   int
	value  float64
}

// NewEWMA returns an EWMA with weight alpha in (0, 1] on the newest value.
func NewEWMA(alpha float64, warmup int) (*EWMA, error) {
	if !(alpha > 0 && alpha <= 1) {
		return nil, fmt.Errorf("%w: EWMA alpha %v not in (0, 1]", ErrBadParam, alpha)
	}
	return &EWMA{alpha: alpha, warmup: max(1, warmup)}, nil
}

func (e *EWMA) Observe(v float64) {
	if e.seen == 0 {
		e.value = v
	} else {
		e.value += e.alpha * (v - e.value)
	}
	e.seen++
}

func (e *EWMA) Predict(time.Time) (float64, bool) { return e.value, e.seen >= e.warmup }

// LinReg fits a least-squares line through the last k observations and
// extrapolates one step, as Fifer's simulator does. Forecasts are clamped
// at zero.
type LinReg struct {
	hist []float64 // ring buffer of the last k values
	next int
	seen int
}

// NewLinReg keeps k >= 2 observations.
func NewLinReg(k int) (*LinReg, error) {
	if k < 2 {
		return nil, fmt.Errorf("%w: regression history %d < 2", ErrBadParam, k)
	}
	return &LinReg{hist: make([]float64, k)}, nil
}

func (l *LinReg) Observe(v float64) {
	l.hist[l.next] = v
	l.next = (l.next + 1) % len(l.hist)
	l.seen++
}

func (l *LinReg) Predict(time.Time) (float64, bool) {
	n := min(l.seen, len(l.hist))
	if n < 2 {
		return 0, false
	}
	// x = 0..n-1 oldest to newest; forecast at x = n.
	var sx, sy, sxx, sxy float64
	for i := range n {
		x, y := float64(i), l.at(i, n)
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	fn := float64(n)
	slope := (fn*sxy - sx*sy) / (fn*sxx - sx*sx)
	icept := (sy - slope*sx) / fn
	return math.Max(0, icept+slope*fn), true
}

// at returns the i-th oldest of the last n observations.
func (l *LinReg) at(i, n int) float64 {
	k := len(l.hist)
	return l.hist[((l.next-n+i)%k+k)%k]
}

// Oracle reads the future from the expected per-second arrival rates of the
// trace: its forecast is the expected count over the coming window.
type Oracle struct {
	perSecond []float64
	start     time.Time
	window    time.Duration
}

// NewOracle returns an oracle over a trace starting at start.
func NewOracle(perSecond []float64, start time.Time, window time.Duration) (*Oracle, error) {
	if window < time.Second {
		return nil, fmt.Errorf("%w: oracle window %v < 1s", ErrBadParam, window)
	}
	return &Oracle{perSecond: perSecond, start: start, window: window}, nil
}

func (*Oracle) Observe(float64) {}

func (o *Oracle) Predict(now time.Time) (float64, bool) {
	from := int(now.Sub(o.start) / time.Second)
	to := from + int(o.window/time.Second)
	sum := 0.0
	for s := max(0, from); s < min(to, len(o.perSecond)); s++ {
		sum += o.perSecond[s]
	}
	return sum, true
}

// Peak is the highest expected per-second rate in the coming window: the
// oracle's scalers size for the worst second, not the average.
func (o *Oracle) Peak(now time.Time) float64 {
	from := int(now.Sub(o.start) / time.Second)
	to := from + int(o.window/time.Second)
	peak := 0.0
	for s := max(0, from); s < min(to, len(o.perSecond)); s++ {
		peak = max(peak, o.perSecond[s])
	}
	return peak
}

// Fractions is an EWMA of the share of requests in each input-size class,
// Cypress's input-size-distribution prediction.
type Fractions struct {
	alpha  float64
	warmup int
	seen   int
	value  []float64
}

// NewFractions tracks k classes.
func NewFractions(k int, alpha float64, warmup int) (*Fractions, error) {
	if k < 1 || !(alpha > 0 && alpha <= 1) {
		return nil, fmt.Errorf("%w: %d classes, alpha %v", ErrBadParam, k, alpha)
	}
	return &Fractions{alpha: alpha, warmup: max(1, warmup), value: make([]float64, k)}, nil
}

// Observe records one window's per-class counts. A window without requests
// carries no information about the mix and is skipped.
func (f *Fractions) Observe(counts []float64) error {
	if len(counts) != len(f.value) {
		return fmt.Errorf("%w: %d counts for %d classes", ErrBadParam, len(counts), len(f.value))
	}
	total := 0.0
	for _, c := range counts {
		total += c
	}
	if total <= 0 {
		return nil
	}
	for i, c := range counts {
		if f.seen == 0 {
			f.value[i] = c / total
		} else {
			f.value[i] += f.alpha * (c/total - f.value[i])
		}
	}
	f.seen++
	return nil
}

// Predict copies the forecast shares (summing to 1) into dst.
func (f *Fractions) Predict(dst []float64) bool {
	copy(dst, f.value)
	return f.seen >= f.warmup
}

// FallEWMA is an EWMA that follows a fall faster than a rise: a value
// more than z Poisson standard deviations (√estimate) below the estimate
// moves it with weight alphaDown, any other value with weight alpha. The
// values are counts (their variance is their mean), so z is in units of
// a count's own noise. docs/simulator.md, "The fall-aware rate", has why.
type FallEWMA struct {
	EWMA
	alphaDown, z float64
	falls        int
}

// NewFallEWMA returns a FallEWMA; alpha and alphaDown in (0, 1], z ≥ 0
// and finite.
func NewFallEWMA(alpha, alphaDown, z float64, warmup int) (*FallEWMA, error) {
	e, err := NewEWMA(alpha, warmup)
	if err != nil {
		return nil, err
	}
	if !(alphaDown > 0 && alphaDown <= 1) || !(z >= 0) || math.IsInf(z, 0) {
		return nil, fmt.Errorf("%w: fall weight %v, threshold %v", ErrBadParam, alphaDown, z)
	}
	return &FallEWMA{EWMA: *e, alphaDown: alphaDown, z: z}, nil
}

func (f *FallEWMA) Observe(v float64) {
	if f.seen > 0 && v < f.value-f.z*math.Sqrt(max(0, f.value)) {
		f.value += f.alphaDown * (v - f.value)
		f.seen++
		f.falls++
		return
	}
	f.EWMA.Observe(v)
}

// Falls counts the values that moved the estimate with the fall weight:
// on a constant rate, its false alarms.
func (f *FallEWMA) Falls() int { return f.falls }
