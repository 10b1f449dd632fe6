package profile

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"gonum.org/v1/gonum/stat"
)

func noisy(rng *rand.Rand, y, cv float64) float64 { return y * (1 + cv*rng.NormFloat64()) }

// Cypress section 3: the power law y = a·x^b is fitted by linear regression
// in log-log space and chosen over the linear fit when its R² is higher.
func TestPowerLawFitRecoversParametersAndWinsByR2(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	f := NewFitter(DefaultMinSamples)
	for range 5000 {
		x := 0.1 + 8*rng.Float64()
		mustAdd(t, f, x, noisy(rng, 110*math.Pow(x, 0.6), 0.05))
	}
	m, ok := f.Model()
	if !ok {
		t.Fatal("model not valid after 5000 samples")
	}
	if m.Family != PowerLaw {
		t.Fatalf("family = %v, want power-law (R² %v)", m.Family, m.R2)
	}
	within(t, "a", m.A, 110, 0.03)
	within(t, "b", m.B, 0.6, 0.03)
	within(t, "relative spread", m.RelStd, 0.05, 0.2)
}

func TestLinearFitRecoversParametersAndWinsByR2(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	f := NewFitter(DefaultMinSamples)
	for range 5000 {
		x := 1 + 63*rng.Float64()
		mustAdd(t, f, x, noisy(rng, 25+11*x, 0.05))
	}
	m, _ := f.Model()
	if m.Family != Linear {
		t.Fatalf("family = %v, want linear (R² %v)", m.Family, m.R2)
	}
	within(t, "a", m.A, 25, 0.1)
	within(t, "b", m.B, 11, 0.03)
}

// The online co-moment fit must agree with a batch least-squares fit.
func TestOnlineFitMatchesBatchLeastSquares(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	f := NewFitter(3)
	var xs, ys []float64
	for range 1000 {
		x := 1 + 100*rng.Float64()
		y := noisy(rng, 3+2*x, 0.3)
		if y <= 0 {
			continue
		}
		mustAdd(t, f, x, y)
		xs, ys = append(xs, x), append(ys, y)
	}
	a, b := stat.LinearRegression(xs, ys, nil, false)
	r2 := stat.RSquared(xs, ys, nil, a, b)
	la, lb, lr2, _ := f.lin.line()
	within(t, "intercept", la, a, 1e-9)
	within(t, "slope", lb, b, 1e-9)
	within(t, "R²", lr2, r2, 1e-9)
}

func TestQuantileIsAboveTheMeanAndCoversTheSamples(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	f := NewFitter(DefaultMinSamples)
	exec := func(x float64) float64 { return 9 * math.Pow(x, 0.75) }
	for range 20000 {
		x := 1 + 99*rng.Float64()
		mustAdd(t, f, x, noisy(rng, exec(x), 0.1))
	}
	m, _ := f.Model()
	x := 50.0
	q95 := m.Quantile(x, 0.95)
	if q95 <= m.Mean(x) {
		t.Fatalf("p95 %v not above mean %v", q95, m.Mean(x))
	}
	over := 0
	for range 20000 {
		if noisy(rng, exec(x), 0.1) > q95 {
			over++
		}
	}
	if frac := float64(over) / 20000; frac < 0.03 || frac > 0.07 {
		t.Fatalf("%.3f of samples above p95, want about 0.05", frac)
	}
}

func TestFitterNeedsSamplesAndRejectsBadOnes(t *testing.T) {
	f := NewFitter(10)
	for i := range 9 {
		mustAdd(t, f, float64(i+1), float64(i+1))
	}
	if _, ok := f.Model(); ok {
		t.Fatal("valid after 9 of 10 samples")
	}
	mustAdd(t, f, 10, 10)
	if _, ok := f.Model(); !ok {
		t.Fatal("not valid after 10 samples")
	}
	for _, s := range [][2]float64{{0, 1}, {1, 0}, {-1, 1}, {math.NaN(), 1}, {1, math.Inf(1)}} {
		if err := f.Add(s[0], s[1]); !errors.Is(err, ErrBadSample) {
			t.Errorf("Add%v = %v, want ErrBadSample", s, err)
		}
	}
	same := NewFitter(3)
	for range 10 {
		mustAdd(t, same, 4, 7)
	}
	if _, ok := same.Model(); ok {
		t.Fatal("a single input size cannot determine a slope")
	}
}

func TestClassesSplitWhereTheBatchSizeChanges(t *testing.T) {
	m := Model{Family: Linear, A: float64(10 * time.Millisecond), B: float64(time.Millisecond)}
	slo := 100 * time.Millisecond
	cs, err := Classes(m, slo, 1, 90)
	if err != nil {
		t.Fatal(err)
	}
	if cs[0].Lo != 1 || cs[len(cs)-1].Hi != 90 {
		t.Fatalf("classes %v do not span [1, 90]", cs)
	}
	for i, c := range cs {
		// Every size in the class has the class's batch size.
		for _, x := range []float64{c.Lo + 1e-6, (c.Lo + c.Hi) / 2, c.Hi} {
			if got := batchSize(slo, m.Mean(x)); got != c.Batch {
				t.Errorf("class %d %+v: size %v has batch %d", i, c, x, got)
			}
		}
		if i > 0 && (c.Lo != cs[i-1].Hi || c.Batch >= cs[i-1].Batch) {
			t.Errorf("class %d %+v does not follow %+v", i, c, cs[i-1])
		}
		if Find(cs, (c.Lo+c.Hi)/2) != i {
			t.Errorf("Find misplaces the middle of class %d", i)
		}
	}
	// exec(1)=11ms → batch 9; exec(90)=100ms → batch 1.
	if cs[0].Batch != 9 || cs[len(cs)-1].Batch != 1 {
		t.Fatalf("batch sizes %d..%d, want 9..1", cs[0].Batch, cs[len(cs)-1].Batch)
	}
	if _, err := Classes(m, 0, 1, 2); !errors.Is(err, ErrBadRange) {
		t.Fatalf("zero SLO: err = %v", err)
	}
	if _, err := Classes(m, slo, 3, 2); !errors.Is(err, ErrBadRange) {
		t.Fatalf("reversed range: err = %v", err)
	}
}

func mustAdd(t *testing.T, f *Fitter, x, y float64) {
	t.Helper()
	if err := f.Add(x, y); err != nil {
		t.Fatal(err)
	}
}

func within(t *testing.T, what string, got, want, rel float64) {
	t.Helper()
	if math.Abs(got-want) > rel*math.Abs(want) {
		t.Errorf("%s = %v, want %v ± %.0f%%", what, got, want, rel*100)
	}
}

// A light function has hundreds of batch sizes across its range; the
// classes stay few, cover the range, and no class promises a batch larger
// than its heaviest member allows.
func TestClassesOfALightFunctionAreCappedAndConservative(t *testing.T) {
	m := Model{Family: Linear, A: float64(time.Millisecond), B: float64(time.Millisecond)}
	slo := time.Second
	cs, err := Classes(m, slo, 1, 900)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) > MaxClasses || cs[0].Lo != 1 || cs[len(cs)-1].Hi != 900 {
		t.Fatalf("%d classes spanning [%v, %v]", len(cs), cs[0].Lo, cs[len(cs)-1].Hi)
	}
	for i, c := range cs {
		if got := batchSize(slo, m.Mean(c.Hi)*(1-1e-9)); got < c.Batch {
			t.Errorf("class %d %+v: its heaviest size only fits %d", i, c, got)
		}
		if i > 0 && c.Lo != cs[i-1].Hi {
			t.Errorf("gap before class %d", i)
		}
	}
}
