// Package trace produces request-arrival traces: per-second expected arrival
// counts, either generated (Poisson, Wikipedia-like diurnal, Twitter-like
// bursty) or replayed from a file. A trace carries expected counts; the
// simulator draws the actual arrivals from them with its own seeded RNG.
package trace

import (
	"errors"
	"fmt"
	"math"
	"time"
)

var (
	// ErrUnknownTrace is returned for a generator name not in Names().
	ErrUnknownTrace = errors.New("unknown trace")
	// ErrBadRate is returned for a rate that is not a positive finite number.
	ErrBadRate = errors.New("rate must be a positive finite number")
	// ErrBadDuration is returned for a duration shorter than one second.
	ErrBadDuration = errors.New("duration must be at least 1s")
	// ErrMalformed is returned for unreadable trace files; the message names the line.
	ErrMalformed = errors.New("malformed trace")
	// ErrTooLarge is returned for a rate, a duration or a total number of
	// expected requests beyond the simulator's bounds (MaxRate,
	// MaxDuration, MaxRequests). A file beyond them is ErrMalformed.
	ErrTooLarge = errors.New("beyond the simulator's bounds")
)

// Bounds on what a trace may ask of the simulator, checked before anything
// is allocated: a flag or a file beyond them is an error, not a machine
// brought down by a multi-gigabyte allocation or a run that never ends.
const (
	// MaxRate is the largest expected rate in any second (requests/s).
	MaxRate = 1e6
	// MaxDuration is the longest trace: one week, 604 800 seconds (4.8 MB
	// of per-second rates).
	MaxDuration = 7 * 24 * time.Hour
	// MaxRequests bounds the expected requests of a whole trace. At the
	// simulator's 1-3 million requests per CPU-second it is about 5-15
	// minutes of CPU per policy.
	MaxRequests = 1e9
)

// CheckBounds reports whether rate (requests/s) over d stays within
// MaxRate, MaxDuration and MaxRequests, before any trace is built.
func CheckBounds(rate float64, d time.Duration) error {
	switch {
	case rate > MaxRate:
		return fmt.Errorf("%w: rate %v requests/s is above %v", ErrTooLarge, rate, float64(MaxRate))
	case d > MaxDuration:
		return fmt.Errorf("%w: duration %v is longer than %v", ErrTooLarge, d, MaxDuration)
	case rate*d.Seconds() > MaxRequests:
		return fmt.Errorf("%w: %v requests/s over %v is %.3g expected requests, above %.0e", ErrTooLarge, rate, d, rate*d.Seconds(), float64(MaxRequests))
	}
	return nil
}

// Trace is the expected number of arrivals in each second.
type Trace struct {
	Name      string
	PerSecond []float64
}

// Peak is the largest per-second rate.
func (t Trace) Peak() float64 {
	peak := 0.0
	for _, v := range t.PerSecond {
		peak = max(peak, v)
	}
	return peak
}

// Mean is the average per-second rate.
func (t Trace) Mean() float64 {
	if len(t.PerSecond) == 0 {
		return 0
	}
	return t.Total() / float64(len(t.PerSecond))
}

// Total is the expected number of arrivals over the whole trace.
func (t Trace) Total() float64 {
	sum := 0.0
	for _, v := range t.PerSecond {
		sum += v
	}
	return sum
}

// Duration is the length of the trace.
func (t Trace) Duration() time.Duration {
	return time.Duration(len(t.PerSecond)) * time.Second
}

// ScaleToPeak returns a copy scaled so that its peak equals peak. An all-zero
// trace cannot be scaled and is returned unchanged; callers validate peak.
func (t Trace) ScaleToPeak(peak float64) Trace {
	cur := t.Peak()
	if cur <= 0 {
		return t.clone()
	}
	return t.Scale(peak / cur)
}

// Scale returns a copy with every rate multiplied by factor.
func (t Trace) Scale(factor float64) Trace {
	out := t.clone()
	for i := range out.PerSecond {
		out.PerSecond[i] *= factor
	}
	return out
}

// Truncate returns at most the first d of the trace.
func (t Trace) Truncate(d time.Duration) Trace {
	n := min(len(t.PerSecond), int(d/time.Second))
	out := t.clone()
	out.PerSecond = out.PerSecond[:n]
	return out
}

// Validate reports whether the trace can drive a simulation.
func (t Trace) Validate() error {
	if len(t.PerSecond) == 0 {
		return fmt.Errorf("%w: trace %q is empty", ErrMalformed, t.Name)
	}
	for i, v := range t.PerSecond {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return fmt.Errorf("%w: trace %q second %d has rate %v", ErrMalformed, t.Name, i, v)
		}
	}
	if t.Total() <= 0 {
		return fmt.Errorf("%w: trace %q has no arrivals", ErrMalformed, t.Name)
	}
	return t.checkSize()
}

// checkSize holds a built trace to the same bounds as CheckBounds.
func (t Trace) checkSize() error {
	switch {
	case t.Duration() > MaxDuration:
		return fmt.Errorf("%w: trace %q lasts %v, longer than %v", ErrTooLarge, t.Name, t.Duration(), MaxDuration)
	case t.Peak() > MaxRate:
		return fmt.Errorf("%w: trace %q peaks at %.3g requests/s, above %v", ErrTooLarge, t.Name, t.Peak(), float64(MaxRate))
	case t.Total() > MaxRequests:
		return fmt.Errorf("%w: trace %q expects %.3g requests, above %.0e", ErrTooLarge, t.Name, t.Total(), float64(MaxRequests))
	}
	return nil
}

func (t Trace) clone() Trace {
	return Trace{Name: t.Name, PerSecond: append([]float64(nil), t.PerSecond...)}
}

func checkRate(rate float64) error {
	if math.IsNaN(rate) || math.IsInf(rate, 0) || rate <= 0 {
		return fmt.Errorf("%w: %v", ErrBadRate, rate)
	}
	return nil
}
