// Package workload describes the applications Gantry is evaluated on: each
// app is a chain of functions whose execution time and output size depend on
// the input size, plus the input-size distributions that requests are drawn
// from. The models are ground truth for the simulator; the policy core never
// reads them and has to learn them by profiling.
package workload

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// ErrUnknownApp is returned by Lookup for a name that is not in Names().
var ErrUnknownApp = errors.New("unknown app")

// ErrUnknownDist is returned by LookupDist for a name that is not in DistNames().
var ErrUnknownDist = errors.New("unknown input-size distribution")

// ErrBadSize is returned when an input size is not a positive finite number.
var ErrBadSize = errors.New("input size must be a positive finite number")

// Function is one serverless function with its ground-truth behaviour.
type Function struct {
	Name string
	// SizeSensitive is false when execution time does not depend on the
	// input size (send-message), so policies may treat it with a plain mean.
	SizeSensitive bool
	// ExecMean is the ground-truth mean execution time at an input size.
	ExecMean func(size float64) time.Duration
	// ExecNoise is the relative standard deviation of the execution time.
	ExecNoise float64
	// OutputMean is the mean output size, which is the next function's input.
	OutputMean  func(size float64) float64
	OutputNoise float64
	// ExecModel and OutputModel describe the models in words, for reports.
	ExecModel, OutputModel string
}

// Exec samples one execution time. It is log-normal around ExecMean so that
// it is always positive and its mean stays ExecMean.
func (f Function) Exec(size float64, rng *rand.Rand) time.Duration {
	return f.exec(size, newSpread(f.ExecNoise), rng)
}

func (f *Function) exec(size float64, s spread, rng *rand.Rand) time.Duration {
	mean := float64(f.ExecMean(size))
	d := time.Duration(mean * s.factor(rng))
	return max(d, MinExec)
}

// MinExec is the shortest execution time Exec draws: a sample below it is
// raised to it.
const MinExec = time.Microsecond

// Output samples one output size, always positive.
func (f Function) Output(size float64, rng *rand.Rand) float64 {
	return f.output(size, newSpread(f.OutputNoise), rng)
}

func (f *Function) output(size float64, s spread, rng *rand.Rand) float64 {
	out := f.OutputMean(size) * s.factor(rng)
	return max(out, minSize)
}

// Sampler draws one function's execution times and output sizes, the
// same draws as Function.Exec and Function.Output from the same random
// numbers, with the log-normal spreads worked out once instead of at
// every draw (a logarithm and a square root each: a twentieth of the
// simulator's cost per request).
type Sampler struct {
	f         Function
	exec, out spread
}

// Sampler returns f's sampler.
func (f Function) Sampler() Sampler {
	return Sampler{f: f, exec: newSpread(f.ExecNoise), out: newSpread(f.OutputNoise)}
}

// Exec is Function.Exec.
func (s *Sampler) Exec(size float64, rng *rand.Rand) time.Duration {
	return s.f.exec(size, s.exec, rng)
}

// Output is Function.Output.
func (s *Sampler) Output(size float64, rng *rand.Rand) float64 {
	return s.f.output(size, s.out, rng)
}

// minSize keeps every sampled size strictly positive so that log-space fits
// downstream never see zero.
const minSize = 1e-6

// lognormalFactor returns a factor with mean 1 and relative spread about cv.
func lognormalFactor(cv float64, rng *rand.Rand) float64 {
	return newSpread(cv).factor(rng)
}

// spread is a log-normal factor's parameters for a relative spread cv:
// σ = √ln(1+cv²), and σ²/2, which keeps the factor's mean at 1. A cv of
// 0 or less draws nothing and gives 1.
type spread struct {
	on          bool
	sigma, half float64
}

func newSpread(cv float64) spread {
	if cv <= 0 {
		return spread{}
	}
	sigma := math.Sqrt(math.Log1p(cv * cv))
	return spread{on: true, sigma: sigma, half: sigma * sigma / 2}
}

func (s spread) factor(rng *rand.Rand) float64 {
	if !s.on {
		return 1
	}
	return math.Exp(s.sigma*rng.NormFloat64() - s.half)
}

// App is a chain of functions invoked in order; the output of one is the
// input of the next.
type App struct {
	Name  string
	Chain []Function
	// MinSize and MaxSize bound the input size of the first function.
	MinSize, MaxSize float64
	// SizeUnit names the unit of the first function's input size.
	SizeUnit string
	// SLO is 1.2 x the app's end-to-end mean execution time at MaxSize.
	SLO time.Duration
}

// sloFactor is the paper's SLO rule: ~20% above the maximum execution time.
const sloFactor = 1.2

// MaxExec is the end-to-end mean execution time of the chain at MaxSize,
// following the mean output sizes from function to function.
func (a App) MaxExec() time.Duration {
	return a.ExecAt(a.MaxSize)
}

// ExecAt is the end-to-end mean execution time for a first-function input size.
func (a App) ExecAt(size float64) time.Duration {
	var total time.Duration
	for _, f := range a.Chain {
		total += f.ExecMean(size)
		size = f.OutputMean(size)
	}
	return total
}

// CheckSize reports whether size is a usable input size for this app.
func (a App) CheckSize(size float64) error {
	if math.IsNaN(size) || math.IsInf(size, 0) || size <= 0 {
		return fmt.Errorf("%w: %v", ErrBadSize, size)
	}
	return nil
}

// WithSizeRange returns the app with another first-function input-size range
// and the SLO recomputed by the paper's rule for the new maximum.
func (a App) WithSizeRange(minSize, maxSize float64) (App, error) {
	if err := a.CheckSize(minSize); err != nil {
		return App{}, fmt.Errorf("minimum %w", err)
	}
	if err := a.CheckSize(maxSize); err != nil {
		return App{}, fmt.Errorf("maximum %w", err)
	}
	if minSize >= maxSize {
		return App{}, fmt.Errorf("%w: minimum %v must be below maximum %v", ErrBadSize, minSize, maxSize)
	}
	// The execution time at the maximum is checked before the SLO is
	// derived from it: a size of 1e10 gives requests that run for months
	// (or overflow a Duration), which no run can drain.
	if !a.execWithin(maxSize, MaxAppExec) {
		return App{}, fmt.Errorf("%w: maximum %v %s gives a mean end-to-end execution time beyond %v; the largest maximum within it is %.4g",
			ErrBadSize, maxSize, a.SizeUnit, MaxAppExec, a.sizeForExec(minSize, maxSize, MaxAppExec))
	}
	return newApp(a.Name, a.SizeUnit, minSize, maxSize, a.Chain...), nil
}

// MaxAppExec bounds an app's mean end-to-end execution time at its
// maximum input size (and so its SLO, 1.2 times that): the simulator
// drains a run for at most a day after its trace ends.
const MaxAppExec = time.Hour

// execWithin reports whether the mean end-to-end execution time at size
// is positive and at most limit. Each stage is checked on its own, since
// a stage's float-to-Duration conversion overflows (to a negative value)
// far out of range.
func (a App) execWithin(size float64, limit time.Duration) bool {
	var total time.Duration
	for _, f := range a.Chain {
		d := f.ExecMean(size)
		if d <= 0 || d > limit {
			return false
		}
		total += d
		size = f.OutputMean(size)
	}
	return total <= limit
}

// sizeForExec is the largest size in [lo, hi] whose end-to-end execution
// time stays within limit, by bisection (execution time grows with size),
// for the error message's suggestion.
func (a App) sizeForExec(lo, hi float64, limit time.Duration) float64 {
	for range 200 {
		mid := lo + (hi-lo)/2
		if a.execWithin(mid, limit) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

func newApp(name, unit string, minSize, maxSize float64, chain ...Function) App {
	a := App{Name: name, Chain: chain, MinSize: minSize, MaxSize: maxSize, SizeUnit: unit}
	a.SLO = time.Duration(sloFactor * float64(a.MaxExec())).Round(time.Millisecond)
	return a
}

// Lookup returns the app with the given name.
func Lookup(name string) (App, error) {
	build, ok := catalog[name]
	if !ok {
		return App{}, fmt.Errorf("%w %q (known: %v)", ErrUnknownApp, name, Names())
	}
	return build(), nil
}

// Names lists the apps in a stable order.
func Names() []string {
	names := make([]string, 0, len(catalog))
	for n := range catalog {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
