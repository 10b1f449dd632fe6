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

// Class is a range of input sizes (Lo, Hi] whose requests can be served
// Batch at a time by one container within the SLO: how many such requests
// fit back to back. When a class spans several batch sizes (see
// MaxClasses), Batch is the smallest, the one its heaviest member allows.
type Class struct {
	Lo, Hi float64
	Batch  int
}

// Classes splits [lo, hi] into input-size classes for a model of execution
// time (in nanoseconds) and a function SLO, as Cypress does. A size x has
// batch size floor(slo / exec(x)), at least 1 (a request slower than the
// SLO still needs a container). Each class holds the sizes sharing a batch
// size; when there would be more than MaxClasses, the batch sizes that
// start a class are spread geometrically, so light functions get a few
// wide classes where the batch size is large and exact ones where it is
// small. Classes are returned lightest first; a model that does not grow
// with size gives a single class.
func Classes(m Model, slo time.Duration, lo, hi float64) ([]Class, error) {
	if !(lo > 0) || !(hi >= lo) || slo <= 0 || math.IsInf(hi, 0) {
		return nil, fmt.Errorf("%w: [%v, %v], SLO %v", ErrBadRange, lo, hi, slo)
	}
	bLo, bHi := batchSize(slo, m.Mean(lo)), batchSize(slo, m.Mean(hi))
	if !m.Increasing() || bLo <= bHi {
		return []Class{{Lo: lo, Hi: hi, Batch: bHi}}, nil
	}
	var out []Class
	cur := lo
	for _, level := range levels(bLo, bHi) {
		// Sizes up to edge have a batch size of at least level.
		edge, _ := invert(m, float64(slo)/float64(level), cur, hi)
		if edge > cur || len(out) == 0 {
			out = append(out, Class{Lo: cur, Hi: edge, Batch: level})
			cur = edge
		}
	}
	return append(out, Class{Lo: cur, Hi: hi, Batch: bHi}), nil
}

// levels lists the batch sizes that close a class, largest first: every
// size from bLo down to bHi+1, or MaxClasses-1 of them spread
// geometrically.
func levels(bLo, bHi int) []int {
	n := bLo - bHi
	if n <= MaxClasses-1 {
		out := make([]int, 0, n)
		for b := bLo; b > bHi; b-- {
			out = append(out, b)
		}
		return out
	}
	ratio := math.Pow(float64(bLo)/float64(bHi+1), 1/float64(MaxClasses-2))
	var out []int
	for i := MaxClasses - 2; i >= 0; i-- {
		b := int(math.Round(float64(bHi+1) * math.Pow(ratio, float64(i))))
		if len(out) == 0 || b < out[len(out)-1] {
			out = append(out, b)
		}
	}
	return out
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
