package workload

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func TestSyntheticDrawsTheRequestedMeanAndShape(t *testing.T) {
	for _, tc := range []struct {
		dist string
		cv   float64
	}{{"const", 0}, {"exp", 1}, {"uniform", 1 / math.Sqrt(3)}, {"lognormal", 1}} {
		app, d, err := Synthetic(tc.dist, 80*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(1, 2))
		const n = 400000
		var sum, sq float64
		for range n {
			s := d.Sample(rng, app.MinSize, app.MaxSize)
			e := float64(app.Chain[0].Exec(s, rng)) / float64(time.Millisecond)
			sum += e
			sq += e * e
		}
		mean := sum / n
		cv := math.Sqrt(sq/n-mean*mean) / mean
		if math.Abs(mean-80) > 0.01*80 || math.Abs(cv-tc.cv) > 0.03 {
			t.Errorf("%s: mean %.2f ms, cv %.3f; want 80 ms and %.3f", tc.dist, mean, cv, tc.cv)
		}
		if app.SLO < 80*time.Millisecond {
			t.Errorf("%s: SLO %v below the mean", tc.dist, app.SLO)
		}
	}
	if _, _, err := Synthetic("pareto", time.Second); !errors.Is(err, ErrUnknownDist) {
		t.Errorf("unknown distribution: %v", err)
	}
	if _, _, err := Synthetic("exp", 0); !errors.Is(err, ErrBadSize) {
		t.Errorf("zero mean: %v", err)
	}
}
