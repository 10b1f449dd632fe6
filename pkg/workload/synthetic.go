package workload

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// SyntheticApp is the name of the single-function app built from flags.
const SyntheticApp = "synthetic"

// SyntheticDists lists the execution-time distributions of Synthetic.
func SyntheticDists() []string { return []string{"const", "exp", "uniform", "lognormal"} }

// Synthetic builds a single-function app whose execution time has
// distribution dist with mean mean, for users who model their own function
// from a few numbers and for cross-checks against queueing theory and
// other simulators. The input size is the execution time in milliseconds
// (the function's model is exactly 1 ms per unit, without noise), so a
// size-aware policy can learn it. The returned Distribution draws the
// sizes:
//
//   - const: always mean;
//   - exp: exponential with mean mean (coefficient of variation 1);
//   - uniform: uniform on (0, 2·mean];
//   - lognormal: log-normal with mean mean and coefficient of variation 1.
//
// Draws are clamped to [mean/1000, MaxSize] (MaxSize is 2·mean for
// uniform, mean for const, 30·mean otherwise: the clamp moves the mean by
// less than 0.01%). The SLO is 1.2 × the distribution's 99th percentile.
func Synthetic(dist string, mean time.Duration) (App, Distribution, error) {
	if mean < MinExec || mean > time.Hour {
		return App{}, nil, fmt.Errorf("%w: synthetic mean execution time %v must be in [%v, 1h] (%v is the simulator's shortest execution time)", ErrBadSize, mean, MinExec, MinExec)
	}
	m := float64(mean) / float64(time.Millisecond)
	var hi, p99 float64
	switch dist {
	case "const":
		hi, p99 = m, m
	case "exp":
		hi, p99 = 30*m, m*math.Log(100)
	case "uniform":
		hi, p99 = 2*m, 1.98*m
	case "lognormal":
		s := math.Sqrt(math.Ln2)
		hi, p99 = 30*m, m*math.Exp(-s*s/2+2.3263*s)
	default:
		return App{}, nil, fmt.Errorf("%w %q for the synthetic app (known: %v)", ErrUnknownDist, dist, SyntheticDists())
	}
	fn := Function{Name: SyntheticApp, SizeSensitive: dist != "const",
		ExecMean:   func(s float64) time.Duration { return time.Duration(s * float64(time.Millisecond)) },
		OutputMean: func(float64) float64 { return 1 },
		ExecModel:  fmt.Sprintf("%s, mean %v", dist, mean), OutputModel: "1"}
	app := App{Name: SyntheticApp, Chain: []Function{fn}, MinSize: m / 1000, MaxSize: hi, SizeUnit: "ms",
		SLO: time.Duration(1.2 * p99 * float64(time.Millisecond))}
	return app, synthDist{kind: dist, mean: m}, nil
}

type synthDist struct {
	kind string
	mean float64
}

func (d synthDist) Name() string { return d.kind }

func (d synthDist) Sample(rng *rand.Rand, lo, hi float64) float64 {
	var v float64
	switch d.kind {
	case "const":
		v = d.mean
	case "exp":
		v = rng.ExpFloat64() * d.mean
	case "uniform":
		v = rng.Float64() * 2 * d.mean
	case "lognormal":
		v = d.mean * lognormalFactor(1, rng)
	}
	return min(hi, max(lo, v))
}
