package trace

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Peak-to-mean ratios of the paper's traces (Cypress section 5): Wikipedia
// 331:302, Twitter 5450:3139.
const (
	WikiPeakToMean    = 331.0 / 302.0
	TwitterPeakToMean = 5450.0 / 3139.0
)

type generator func(seconds int, rng *rand.Rand) []float64

var generators = map[string]generator{
	"poisson": poissonShape,
	"wiki":    wikiShape,
	"twitter": twitterShape,
}

// Names lists the trace generators.
func Names() []string { return []string{"poisson", "wiki", "twitter"} }

// Generate builds a named trace with the given mean rate (requests per
// second) over duration, rounded down to whole seconds. The same seed always
// gives the same trace.
func Generate(name string, rate float64, duration time.Duration, seed uint64) (Trace, error) {
	gen, ok := generators[name]
	if !ok {
		return Trace{}, fmt.Errorf("%w %q (known: %v)", ErrUnknownTrace, name, Names())
	}
	if err := checkRate(rate); err != nil {
		return Trace{}, err
	}
	seconds := int(duration / time.Second)
	if seconds < 1 {
		return Trace{}, fmt.Errorf("%w: %v", ErrBadDuration, duration)
	}
	if err := CheckBounds(rate, duration); err != nil {
		return Trace{}, err
	}
	rng := rand.New(rand.NewPCG(seed, hashName(name)))
	shape := gen(seconds, rng)
	return Trace{Name: name, PerSecond: scaleToMean(shape, rate)}, nil
}

// hashName keeps the streams of different generators apart under one seed.
func hashName(name string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(name); i++ {
		h ^= uint64(name[i])
		h *= 1099511628211
	}
	return h
}

// poissonShape is a constant rate: the arrivals themselves are Poisson
// because the simulator draws exponential gaps from the expected rate.
func poissonShape(seconds int, _ *rand.Rand) []float64 {
	out := make([]float64, seconds)
	for i := range out {
		out[i] = 1
	}
	return out
}

// wikiShape is one day of Wikipedia-like load compressed into the trace: a
// daily sine with a weaker second harmonic (the evening shoulder) and 1%
// jitter, set to the paper's peak-to-mean ratio. Compressing the day lets a
// short simulation see the whole rise and fall.
func wikiShape(seconds int, rng *rand.Rand) []float64 {
	phase := rng.Float64() * 2 * math.Pi
	out := make([]float64, seconds)
	for i := range out {
		x := 2 * math.Pi * float64(i) / float64(seconds)
		out[i] = math.Sin(x+phase) + 0.3*math.Sin(2*(x+phase)+1) + 0.02*rng.NormFloat64()
	}
	return toPeakRatio(out, WikiPeakToMean)
}

// twitterShape is bursty: a slowly wandering base load with bursts that
// arrive at random, rise within a few seconds and decay over tens of
// seconds, set to the paper's peak-to-mean ratio.
func twitterShape(seconds int, rng *rand.Rand) []float64 {
	out := make([]float64, seconds)
	base := 0.0
	for i := range out {
		base = 0.98*base + 0.05*rng.NormFloat64()
		out[i] = base + 0.05*rng.NormFloat64()
	}
	addBursts(out, rng)
	return toPeakRatio(out, TwitterPeakToMean)
}

// burstEvery is the mean gap between bursts.
const burstEvery = 90.0

func addBursts(out []float64, rng *rand.Rand) {
	seconds := len(out)
	// At least one burst so that even a short trace is bursty.
	start := int(rng.Float64() * float64(seconds) * 0.5)
	for start < seconds {
		height := 0.5 + rng.ExpFloat64()
		decay := 10 + 40*rng.Float64()
		for i := start; i < seconds; i++ {
			age := float64(i - start)
			rise := math.Min(1, (age+1)/3)
			v := height * rise * math.Exp(-age/decay)
			if v < 1e-3 {
				break
			}
			out[i] += v
		}
		start += 1 + int(rng.ExpFloat64()*burstEvery)
	}
}

// toPeakRatio maps a shape linearly so that max/mean equals ratio and the
// mean is 1. A constant shape stays flat.
func toPeakRatio(shape []float64, ratio float64) []float64 {
	mean, peak := meanPeak(shape)
	out := make([]float64, len(shape))
	for i, v := range shape {
		out[i] = 1
		if peak > mean {
			out[i] = 1 + (v-mean)/(peak-mean)*(ratio-1)
		}
		// A deep trough below zero would be impossible load; clip it. The
		// clip raises the mean a little, which only the rare extreme seed hits.
		out[i] = max(out[i], 0)
	}
	return out
}

func scaleToMean(shape []float64, rate float64) []float64 {
	mean, _ := meanPeak(shape)
	out := make([]float64, len(shape))
	for i, v := range shape {
		out[i] = v * rate / mean
	}
	return out
}

func meanPeak(xs []float64) (mean, peak float64) {
	peak = math.Inf(-1)
	for _, v := range xs {
		mean += v
		peak = max(peak, v)
	}
	return mean / float64(len(xs)), peak
}
