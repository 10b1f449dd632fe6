package profile

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// ErrBadRange is returned by Classes for an empty or non-positive size range
// or a non-positive SLO.
var ErrBadRange = errors.New("profile: bad size range or SLO")

// MaxClasses caps the number of input-size classes. Past a few dozen the
// classes of a light function differ by a single request of batch size and
// only add prediction noise.
const MaxClasses = 32

// Class is a range of input sizes (Lo, Hi] sharing one batch size: how many
// such requests a container can serve back to back within the SLO.
type Class struct {
	Lo, Hi float64
	Batch  int
}

// Classes splits [lo, hi] into input-size classes for a model of execution
// time (in nanoseconds) and a function SLO, as Cypress does. A size x has
// batch size floor(slo / exec(x)), at least 1 (a request slower than the
// SLO still needs a container). Classes are returned lightest first. When
// the model does not grow with size there is a single class.
func Classes(m Model, slo time.Duration, lo, hi float64) ([]Class, error) {
	if !(lo > 0) || !(hi >= lo) || slo <= 0 || math.IsInf(hi, 0) {
		return nil, fmt.Errorf("%w: [%v, %v], SLO %v", ErrBadRange, lo, hi, slo)
	}
	batchAt := func(x float64) int { return batchSize(slo, m.Mean(x)) }
	if !m.Increasing() || batchAt(lo) == batchAt(hi) {
		return []Class{{Lo: lo, Hi: hi, Batch: batchAt(hi)}}, nil
	}
	var out []Class
	cur, b, last := lo, batchAt(lo), batchAt(hi)
	for b > last && len(out) < MaxClasses-1 {
		// The class ends where the execution time reaches slo/b.
		below, above := invert(m, float64(slo)/float64(b), cur, hi)
		out = append(out, Class{Lo: cur, Hi: below, Batch: b})
		cur, b = below, batchAt(above)
	}
	return append(out, Class{Lo: cur, Hi: hi, Batch: last}), nil
}

// batchSize is floor(slo / exec), at least 1.
func batchSize(slo time.Duration, exec float64) int {
	if exec <= 0 {
		return math.MaxInt32
	}
	return max(1, int(math.Min(float64(slo)/exec, math.MaxInt32)))
}

// invert brackets the x in [lo, hi] where the increasing model crosses y by
// bisection: m.Mean(below) <= y < m.Mean(above), 60 halvings apart.
func invert(m Model, y, lo, hi float64) (below, above float64) {
	for range 60 {
		mid := lo + (hi-lo)/2
		if m.Mean(mid) <= y {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo, hi
}

// Find returns the index of the class holding x; sizes outside the range
// fall in the first or last class.
func Find(classes []Class, x float64) int {
	lo, hi := 0, len(classes)-1
	for lo < hi {
		mid := (lo + hi) / 2
		if x <= classes[mid].Hi {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}
