// Package profile implements input size-sensitive profiling: online
// least-squares fits of a function's execution time (or output size) on its
// input size, choosing between a linear and a power-law model by R², as in
// Cypress section 3. Memory is constant: the fits keep running co-moments,
// not samples.
package profile

import (
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/stat/distuv"
)

// ErrBadSample is returned for a sample that is not positive and finite:
// the power-law fit works in log space.
var ErrBadSample = errors.New("profile: sample must be positive and finite")

// Family is the shape of a fitted model.
type Family uint8

const (
	Linear   Family = iota // y = A + B·x
	PowerLaw               // y = A·x^B
)

func (f Family) String() string {
	if f == PowerLaw {
		return "power-law"
	}
	return "linear"
}

// Model is a fitted model plus the spread of its relative residuals, so that
// callers can ask for an upper quantile as well as the mean.
type Model struct {
	Family Family
	A, B   float64
	// R2 is the coefficient of determination, in log-log space for the
	// power law as the paper computes it.
	R2 float64
	N  int64
	// RelMean and RelStd describe y/ŷ - 1 over the samples seen since the
	// model first became valid.
	RelMean, RelStd float64
}

// Mean predicts y at x.
func (m Model) Mean(x float64) float64 {
	if m.Family == PowerLaw {
		return m.A * math.Pow(x, m.B)
	}
	return m.A + m.B*x
}

// Quantile predicts the q-quantile of y at x (q in (0,1)), assuming normal
// relative residuals. It never returns less than the bias-corrected mean.
func (m Model) Quantile(x, q float64) float64 {
	z := max(0, distuv.UnitNormal.Quantile(q))
	return m.Mean(x) * (1 + m.RelMean + z*m.RelStd)
}

// Increasing reports whether the model grows with x, which Classes needs.
func (m Model) Increasing() bool { return m.B > 0 }

// comoments accumulates means and co-moments with Welford's update, which
// stays accurate for millions of samples where raw power sums would not.
type comoments struct {
	n             float64
	mx, my        float64
	cxx, cxy, cyy float64
}

func (c *comoments) add(x, y float64) {
	c.n++
	dx := x - c.mx
	c.mx += dx / c.n
	dy := y - c.my
	c.my += dy / c.n
	c.cxx += dx * (x - c.mx)
	c.cxy += dx * (y - c.my)
	c.cyy += dy * (y - c.my)
}

// line returns intercept, slope and R² of y on x.
func (c *comoments) line() (a, b, r2 float64, ok bool) {
	if c.n < 2 || c.cxx <= 0 {
		return 0, 0, 0, false
	}
	b = c.cxy / c.cxx
	a = c.my - b*c.mx
	r2 = 1
	if c.cyy > 0 {
		r2 = c.cxy * c.cxy / (c.cxx * c.cyy)
	}
	return a, b, r2, true
}

// welford is a running mean and variance.
type welford struct{ n, mean, m2 float64 }

func (w *welford) add(v float64) {
	w.n++
	d := v - w.mean
	w.mean += d / w.n
	w.m2 += d * (v - w.mean)
}

func (w *welford) std() float64 {
	if w.n < 2 {
		return 0
	}
	return math.Sqrt(w.m2 / (w.n - 1))
}

// DefaultMinSamples is how many samples a Fitter needs before its model is
// valid.
const DefaultMinSamples = 20

// refitEvery bounds the cost of Add: the cached model is refreshed every
// this many samples (and at every sample while warming up).
const refitEvery = 32

// Fitter fits y on x online. The zero value is not ready; use NewFitter.
type Fitter struct {
	min      int64
	lin, log comoments
	rel      welford
	cached   Model
	valid    bool
	sinceFit int
}

// NewFitter returns a fitter whose model is valid after minSamples samples
// with at least two distinct x values (minSamples < 3 is raised to 3).
func NewFitter(minSamples int) *Fitter {
	return &Fitter{min: int64(max(3, minSamples))}
}

// Add records one observation.
func (f *Fitter) Add(x, y float64) error {
	if !(x > 0) || !(y > 0) || math.IsInf(x, 0) || math.IsInf(y, 0) {
		return fmt.Errorf("%w: (%v, %v)", ErrBadSample, x, y)
	}
	// The residual is taken against the model fitted before this sample,
	// so the spread is an honest out-of-sample error.
	if f.valid {
		if p := f.cached.Mean(x); p > 0 {
			f.rel.add(y/p - 1)
		}
	}
	f.lin.add(x, y)
	f.log.add(math.Log(x), math.Log(y))
	f.sinceFit++
	if !f.valid || f.sinceFit >= refitEvery {
		f.refit()
	}
	return nil
}

func (f *Fitter) refit() {
	f.sinceFit = 0
	if int64(f.lin.n) < f.min {
		return
	}
	m, ok := f.best()
	if !ok {
		return
	}
	m.RelMean, m.RelStd = f.rel.mean, f.rel.std()
	f.cached, f.valid = m, true
}

// best fits both families and keeps the one with the higher R².
func (f *Fitter) best() (Model, bool) {
	la, lb, lr2, lok := f.lin.line()
	pa, pb, pr2, pok := f.log.line()
	n := int64(f.lin.n)
	switch {
	case pok && (!lok || pr2 > lr2):
		return Model{Family: PowerLaw, A: math.Exp(pa), B: pb, R2: pr2, N: n}, true
	case lok:
		return Model{Family: Linear, A: la, B: lb, R2: lr2, N: n}, true
	}
	return Model{}, false
}

// Model returns the current fit and whether it is valid (enough samples
// spanning at least two input sizes).
func (f *Fitter) Model() (Model, bool) {
	if f.valid && f.sinceFit > 0 {
		f.refit()
	}
	return f.cached, f.valid
}

// Count is the number of samples seen.
func (f *Fitter) Count() int64 { return int64(f.lin.n) }

// MeanY is the plain mean of y, the figure static batching uses.
func (f *Fitter) MeanY() float64 { return f.lin.my }
