package predict

import (
	"errors"
	"math"
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
