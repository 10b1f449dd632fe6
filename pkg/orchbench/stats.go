package orchbench

import (
	"math"
	"slices"
)

// Summary is one sample set's distribution, in milliseconds.
type Summary struct {
	N    int     `json:"n"`
	P50  float64 `json:"p50_ms"`
	P95  float64 `json:"p95_ms"`
	P99  float64 `json:"p99_ms"`
	Mean float64 `json:"mean_ms"`
	Std  float64 `json:"std_ms"`
}

// Summarize computes the distribution of xs (milliseconds). Percentiles
// interpolate linearly between order statistics (R's type 7, numpy's
// default), so a small sample's p99 is not simply its maximum; the
// standard deviation is the sample one (n-1). An empty set is all zero.
func Summarize(xs []float64) Summary {
	if len(xs) == 0 {
		return Summary{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	mean := 0.0
	for _, x := range s {
		mean += x
	}
	mean /= float64(len(s))
	return Summary{
		N: len(s), P50: quantile(s, 0.50), P95: quantile(s, 0.95), P99: quantile(s, 0.99),
		Mean: mean, Std: stddev(s, mean),
	}
}

// quantile reads the q-quantile of sorted s by linear interpolation.
func quantile(s []float64, q float64) float64 {
	if len(s) == 1 {
		return s[0]
	}
	pos := q * float64(len(s)-1)
	lo := int(math.Floor(pos))
	if lo >= len(s)-1 {
		return s[len(s)-1]
	}
	frac := pos - float64(lo)
	return s[lo] + frac*(s[lo+1]-s[lo])
}

func stddev(s []float64, mean float64) float64 {
	if len(s) < 2 {
		return 0
	}
	sum := 0.0
	for _, x := range s {
		sum += (x - mean) * (x - mean)
	}
	return math.Sqrt(sum / float64(len(s)-1))
}

// MedianReduction is how much smaller the candidate's median is than the
// baseline's, as a fraction: 0.9 means the candidate's median is a tenth of
// the baseline's, a negative value means the candidate is slower. It is
// NaN when either set is empty or the baseline's median is zero, since no
// reduction is defined then.
func MedianReduction(baseline, candidate []float64) float64 {
	if len(baseline) == 0 || len(candidate) == 0 {
		return math.NaN()
	}
	b, c := Summarize(baseline).P50, Summarize(candidate).P50
	if b == 0 {
		return math.NaN()
	}
	return 1 - c/b
}
