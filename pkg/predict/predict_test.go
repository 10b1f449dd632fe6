package predict

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestEWMAFollowsItsRecurrence(t *testing.T) {
	e, err := NewEWMA(0.5, 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := e.Predict(t0); ok {
		t.Fatal("valid before any observation")
	}
	e.Observe(100)
	if v, ok := e.Predict(t0); ok || v != 100 {
		t.Fatalf("after one: %v %v, want 100 and not yet valid", v, ok)
	}
	e.Observe(200) // 100 + 0.5·(200-100)
	e.Observe(50)  // 150 + 0.5·(50-150)
	if v, ok := e.Predict(t0); !ok || v != 100 {
		t.Fatalf("got %v %v, want 100 valid", v, ok)
	}
	for range 200 {
		e.Observe(42)
	}
	if v, _ := e.Predict(t0); math.Abs(v-42) > 1e-9 {
		t.Fatalf("constant input converges to %v, want 42", v)
	}
	for _, a := range []float64{0, -0.1, 1.5, math.NaN()} {
		if _, err := NewEWMA(a, 1); !errors.Is(err, ErrBadParam) {
			t.Errorf("alpha %v: err = %v", a, err)
		}
	}
}

func TestLinRegExtrapolatesATrend(t *testing.T) {
	l, _ := NewLinReg(4)
	for _, v := range []float64{1000, 1, 2, 3, 4, 5} { // 1000 falls out of the window
		l.Observe(v)
	}
	if v, ok := l.Predict(t0); !ok || math.Abs(v-6) > 1e-9 {
		t.Fatalf("got %v %v, want 6", v, ok)
	}
	for _, v := range []float64{5, 3, 1, 0} {
		l.Observe(v)
	}
	if v, _ := l.Predict(t0); v != 0 {
		t.Fatalf("falling trend forecast %v, want clamped to 0", v)
	}
}

func TestOracleReadsTheComingWindow(t *testing.T) {
	o, _ := NewOracle([]float64{1, 2, 3, 4, 5, 6}, t0, 2*time.Second)
	if v, _ := o.Predict(t0.Add(3 * time.Second)); v != 9 {
		t.Fatalf("window at 3s = %v, want 4+5", v)
	}
	if p := o.Peak(t0.Add(4 * time.Second)); p != 6 {
		t.Fatalf("peak = %v", p)
	}
	if v, _ := o.Predict(t0.Add(10 * time.Second)); v != 0 {
		t.Fatalf("past the end = %v", v)
	}
}

func TestFractionsTrackTheClassMix(t *testing.T) {
	f, _ := NewFractions(3, 0.5, 1)
	_ = f.Observe([]float64{10, 0, 30})
	_ = f.Observe([]float64{0, 0, 0}) // empty window: no information
	_ = f.Observe([]float64{0, 20, 20})
	got := make([]float64, 3)
	if !f.Predict(got) {
		t.Fatal("not valid")
	}
	want := []float64{0.125, 0.25, 0.625}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-12 {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	if err := f.Observe([]float64{1}); !errors.Is(err, ErrBadParam) {
		t.Fatalf("wrong length: %v", err)
	}
}

// Cypress reports ~1e-3 ms per EWMA prediction.
func BenchmarkEWMA(b *testing.B) {
	e, _ := NewEWMA(0.3, 1)
	for b.Loop() {
		e.Observe(250)
		e.Predict(t0)
	}
}

func TestFallEWMAFollowsAFallFasterThanARise(t *testing.T) {
	f, err := NewFallEWMA(0.5, 0.9, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	f.Observe(100)
	f.Observe(200) // a rise: 100 + 0.5·100
	if v, _ := f.Predict(t0); v != 150 {
		t.Fatalf("after a rise: %v, want 150", v)
	}
	f.Observe(140) // 10 below, within 2·√150 ≈ 24.5: the EWMA's weight
	if v, _ := f.Predict(t0); v != 145 {
		t.Fatalf("after a small fall: %v, want 145", v)
	}
	f.Observe(45) // 100 below, past 2·√145: 145 − 0.9·100
	if v, _ := f.Predict(t0); math.Abs(v-55) > 1e-9 {
		t.Fatalf("after a fall: %v, want 55", v)
	}
	if f.Falls() != 1 {
		t.Fatalf("falls = %d, want 1", f.Falls())
	}
	for _, c := range [][3]float64{{0, 0.9, 2}, {0.5, 0, 2}, {0.5, 1.5, 2}, {0.5, 0.9, -1}, {0.5, 0.9, math.NaN()}, {0.5, 0.9, math.Inf(1)}} {
		if _, err := NewFallEWMA(c[0], c[1], c[2], 1); !errors.Is(err, ErrBadParam) {
			t.Errorf("%v: err = %v", c, err)
		}
	}
}

// On a constant rate a window falls past the threshold by chance alone:
// the count's own noise and the estimate's (an EWMA of Poisson counts
// has variance α/(2−α)·λ) put the difference at about √(4/3)·√λ, so
// z = 2 is about 1.7 of its standard deviations, 4% of the windows.
// docs/simulator.md states the rate measured here.
func TestFallEWMAFalseFallsOnAConstantRate(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const lambda, windows = 100.0, 20000
	f, _ := NewFallEWMA(0.5, 0.9, 2, 1)
	for range windows {
		f.Observe(poisson(rng, lambda))
	}
	share := float64(f.Falls()) / windows
	t.Logf("false falls: %d of %d windows (%.2f%%)", f.Falls(), windows, 100*share)
	if share < 0.02 || share > 0.07 {
		t.Fatalf("false falls in %.2f%% of windows, want 2-7%%", 100*share)
	}
	v, _ := f.Predict(t0)
	if math.Abs(v-lambda) > 5*math.Sqrt(lambda) {
		t.Fatalf("estimate %v strays from the rate %v", v, lambda)
	}
}

// poisson draws a Poisson count of mean lambda by counting exponential gaps.
func poisson(rng *rand.Rand, lambda float64) float64 {
	n, t := 0.0, rng.ExpFloat64()
	for t < lambda {
		n++
		t += rng.ExpFloat64()
	}
	return n
}
