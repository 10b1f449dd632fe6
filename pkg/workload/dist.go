package workload

import (
	"fmt"
	"math/rand/v2"
	"slices"
)

// Distribution draws first-function input sizes from [min, max].
type Distribution interface {
	Name() string
	Sample(rng *rand.Rand, min, max float64) float64
}

// majorityShare is the fraction of requests in the favoured tercile. The
// paper says 50-55%; we take the middle.
const majorityShare = 0.525

// tercileDist puts majorityShare of the mass uniformly in one tercile and
// spreads the rest uniformly over the other two.
type tercileDist struct {
	name string
	// favoured is the tercile index: 0 lightest, 1 middle, 2 heaviest.
	favoured int
}

func (d tercileDist) Name() string { return d.name }

func (d tercileDist) Sample(rng *rand.Rand, min, max float64) float64 {
	t := d.favoured
	if rng.Float64() >= majorityShare {
		// Pick one of the other two terciles with equal probability.
		t = (d.favoured + 1 + rng.IntN(2)) % 3
	}
	width := (max - min) / 3
	return min + width*(float64(t)+rng.Float64())
}

type uniformDist struct{}

func (uniformDist) Name() string { return "uniform" }

func (uniformDist) Sample(rng *rand.Rand, min, max float64) float64 {
	return min + (max-min)*rng.Float64()
}

var dists = map[string]Distribution{
	"heavy":   tercileDist{name: "heavy", favoured: 2},
	"medial":  tercileDist{name: "medial", favoured: 1},
	"light":   tercileDist{name: "light", favoured: 0},
	"uniform": uniformDist{},
}

// LookupDist returns the distribution with the given name.
func LookupDist(name string) (Distribution, error) {
	d, ok := dists[name]
	if !ok {
		return nil, fmt.Errorf("%w %q (known: %v)", ErrUnknownDist, name, DistNames())
	}
	return d, nil
}

// DistNames lists the distributions: the paper's three first, then uniform.
func DistNames() []string {
	names := []string{"heavy", "medial", "light", "uniform"}
	return slices.Clip(names)
}
