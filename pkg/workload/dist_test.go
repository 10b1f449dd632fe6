package workload

import (
	"errors"
	"math/rand/v2"
	"testing"
)

// Cypress section 5: heavy, medial and light put 50-55% of the requests in
// the top, middle and bottom tercile of the size range.
func TestDistributionsPutFiftyToFiftyFivePercentInTheirTercile(t *testing.T) {
	cases := map[string]int{"heavy": 2, "medial": 1, "light": 0}
	const lo, hi, n = 10.0, 40.0, 200000
	for name, tercile := range cases {
		d, err := LookupDist(name)
		if err != nil {
			t.Fatal(err)
		}
		counts := sampleTerciles(t, d, lo, hi, n)
		share := float64(counts[tercile]) / n
		if share < 0.50 || share > 0.55 {
			t.Errorf("%s: %.3f in tercile %d, want 0.50-0.55", name, share, tercile)
		}
		for i, c := range counts {
			if i != tercile && (float64(c)/n < 0.2 || float64(c)/n > 0.275) {
				t.Errorf("%s: tercile %d has %.3f, want the rest spread evenly", name, i, float64(c)/n)
			}
		}
	}
}

func TestUniformSpreadsEvenly(t *testing.T) {
	d, _ := LookupDist("uniform")
	counts := sampleTerciles(t, d, 0, 3, 90000)
	for i, c := range counts {
		if c < 29000 || c > 31000 {
			t.Errorf("tercile %d: %d of 90000", i, c)
		}
	}
}

func sampleTerciles(t *testing.T, d Distribution, lo, hi float64, n int) [3]int {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 11))
	var counts [3]int
	for range n {
		s := d.Sample(rng, lo, hi)
		if s < lo || s > hi {
			t.Fatalf("%s sampled %v outside [%v, %v]", d.Name(), s, lo, hi)
		}
		counts[min(2, int((s-lo)/(hi-lo)*3))]++
	}
	return counts
}

func TestDistributionIsDeterministicGivenSeed(t *testing.T) {
	d, _ := LookupDist("heavy")
	a, b := rand.New(rand.NewPCG(3, 4)), rand.New(rand.NewPCG(3, 4))
	for range 1000 {
		if d.Sample(a, 1, 2) != d.Sample(b, 1, 2) {
			t.Fatal("same seed gave different sizes")
		}
	}
}

func TestLookupDistUnknownIsSentinel(t *testing.T) {
	if _, err := LookupDist("chunky"); !errors.Is(err, ErrUnknownDist) {
		t.Fatalf("err = %v, want ErrUnknownDist", err)
	}
	for _, n := range DistNames() {
		if _, err := LookupDist(n); err != nil {
			t.Errorf("DistNames lists %q but LookupDist fails: %v", n, err)
		}
	}
}
