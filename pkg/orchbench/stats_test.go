package orchbench

import (
	"math"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestSummarizeInterpolatesPercentiles(t *testing.T) {
	// 1..100: type-7 quantiles are 1 + q*99.
	xs := make([]float64, 100)
	for i := range xs {
		xs[100-1-i] = float64(i + 1) // unsorted on purpose
	}
	s := Summarize(xs)
	if s.N != 100 || !near(s.P50, 50.5) || !near(s.P95, 95.05) || !near(s.P99, 99.01) || !near(s.Mean, 50.5) {
		t.Fatalf("got %+v", s)
	}
	// Sample standard deviation of 1..n is sqrt(n(n+1)/12).
	if want := math.Sqrt(100 * 101 / 12.0); !near(s.Std, want) {
		t.Fatalf("std %v, want %v", s.Std, want)
	}
	if xs[0] != 100 {
		t.Fatal("Summarize sorted its input in place")
	}
}

func TestSummarizeSmallSets(t *testing.T) {
	if s := Summarize(nil); s != (Summary{}) {
		t.Fatalf("empty: %+v", s)
	}
	if s := Summarize([]float64{7}); s.N != 1 || s.P50 != 7 || s.P99 != 7 || s.Std != 0 {
		t.Fatalf("one sample: %+v", s)
	}
	if s := Summarize([]float64{10, 20}); !near(s.P50, 15) || !near(s.P99, 19.9) || !near(s.Std, math.Sqrt(50)) {
		t.Fatalf("two samples: %+v", s)
	}
}

func TestMedianReduction(t *testing.T) {
	cases := []struct {
		name      string
		base, can []float64
		want      float64
	}{
		{"tenfold", []float64{900, 1000, 1100}, []float64{90, 100, 110}, 0.9},
		{"equal", []float64{5, 5}, []float64{5, 5}, 0},
		{"slower", []float64{100}, []float64{150}, -0.5},
		{"even count uses the mean of the middle two", []float64{100, 300}, []float64{10, 30}, 0.9},
	}
	for _, c := range cases {
		if got := MedianReduction(c.base, c.can); !near(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	for _, bad := range [][2][]float64{{nil, {1}}, {{1}, nil}, {{0, 0}, {1}}} {
		if got := MedianReduction(bad[0], bad[1]); !math.IsNaN(got) {
			t.Errorf("MedianReduction(%v, %v) = %v, want NaN", bad[0], bad[1], got)
		}
	}
}
