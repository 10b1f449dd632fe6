package loadgen

import (
	"math"
	"testing"
	"time"

	"gantry.dev/gantry/pkg/trace"
	"gantry.dev/gantry/pkg/workload"
)

func drawAll(cfg Config) []arrival {
	s := newSchedule(cfg.withDefaults())
	var out []arrival
	for a, ok := s.next(); ok; a, ok = s.next() {
		out = append(out, a)
	}
	return out
}

// Each second's count is Poisson with that second's rate: the total is near
// the trace's, quiet seconds stay quiet, and everything is in order.
func TestScheduleFollowsTheTracePerSecond(t *testing.T) {
	tr := trace.Trace{Name: "steps", PerSecond: []float64{100, 0, 300, 50, 0, 1000, 10, 0}}
	arrivals := drawAll(Config{Trace: tr, Seed: 1})
	perSec := make([]int, len(tr.PerSecond))
	for i, a := range arrivals {
		if i > 0 && a.offset < arrivals[i-1].offset {
			t.Fatalf("arrival %d at %v is before arrival %d at %v", i, a.offset, i-1, arrivals[i-1].offset)
		}
		perSec[int(a.offset/time.Second)]++
	}
	for i, rate := range tr.PerSecond {
		// Six standard deviations, plus one for tiny rates.
		if tol := 6*math.Sqrt(rate) + 1; math.Abs(float64(perSec[i])-rate) > tol {
			t.Errorf("second %d: %d arrivals at rate %v (tolerance %.0f)", i, perSec[i], rate, tol)
		}
	}
}

// Gaps between arrivals at a constant rate are exponential: mean 1/rate and
// coefficient of variation 1.
func TestScheduleGapsAreExponential(t *testing.T) {
	const rate = 1000.0
	arrivals := drawAll(Config{Trace: flat(rate, 20), Seed: 2})
	var sum, sumSq float64
	for i := 1; i < len(arrivals); i++ {
		g := float64(arrivals[i].offset - arrivals[i-1].offset)
		sum += g
		sumSq += g * g
	}
	n := float64(len(arrivals) - 1)
	mean := sum / n
	cv := math.Sqrt(sumSq/n-mean*mean) / mean
	if want := float64(time.Second) / rate; math.Abs(mean-want)/want > 0.05 {
		t.Errorf("mean gap %v, want %v", time.Duration(mean), time.Duration(want))
	}
	if math.Abs(cv-1) > 0.1 {
		t.Errorf("gap coefficient of variation %.3f, want about 1", cv)
	}
}

func TestScheduleIsSeededAndSizesStayInRange(t *testing.T) {
	heavy, err := workload.LookupDist("heavy")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Trace: flat(200, 3), Seed: 3, Dist: heavy, MinSize: 0.1, MaxSize: 8}
	a, b := drawAll(cfg), drawAll(cfg)
	if len(a) != len(b) {
		t.Fatalf("same seed, %d then %d arrivals", len(a), len(b))
	}
	heavyThird := 0
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("same seed, arrival %d differs: %+v vs %+v", i, a[i], b[i])
		}
		if a[i].size < cfg.MinSize || a[i].size > cfg.MaxSize {
			t.Errorf("size %v outside [%v, %v]", a[i].size, cfg.MinSize, cfg.MaxSize)
		}
		if a[i].size > 0.1+2*(8-0.1)/3 {
			heavyThird++
		}
	}
	if frac := float64(heavyThird) / float64(len(a)); frac < 0.4 || frac > 0.65 {
		t.Errorf("heavy distribution put %.2f of sizes in the top third, want about 0.525", frac)
	}
	cfg.Seed = 4
	if c := drawAll(cfg); len(c) == len(a) && c[0] == a[0] {
		t.Error("another seed gave the same schedule")
	}
}
