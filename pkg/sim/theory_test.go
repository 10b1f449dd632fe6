package sim

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"gantry.dev/gantry/pkg/policy"
	"gantry.dev/gantry/pkg/workload"
)

// The running instances of the commercial baseline with a negligible cold
// start form an M/G/∞ system: in steady state their number is Poisson with
// mean λ·E[S], whatever the service distribution. The time-averaged
// distribution over an hour must match that pmf point by point and in
// total variation, not only in mean.
func TestCommercialRunningInstancesArePoissonAsMGInfinity(t *testing.T) {
	// Uniform sizes 50-450 with 1 ms per unit: service uniform on
	// 50-450 ms, mean 250 ms, far from exponential.
	linear := func(s float64) time.Duration { return time.Duration(s * float64(time.Millisecond)) }
	fn := workload.Function{Name: "g", SizeSensitive: true, ExecMean: linear, OutputMean: func(s float64) float64 { return s }}
	app := workload.App{Name: "mginf", Chain: []workload.Function{fn}, MinSize: 50, MaxSize: 450, SLO: 2 * time.Second}
	for _, lambda := range []float64{8, 40} {
		cfg := Config{App: app, Dist: dist(t, "uniform"), Trace: constantTrace(lambda, time.Hour),
			Policy: "commercial", Seed: 11, ColdStart: time.Microsecond}
		cfg.applyDefaults()
		pol, err := policy.New(cfg.Policy, policySpec(&cfg))
		if err != nil {
			t.Fatal(err)
		}
		e, err := newEngine(context.Background(), cfg, pol)
		if err != nil {
			t.Fatal(err)
		}
		e.fns[0].m.runningTime = []float64{}
		if err := e.run(); err != nil {
			t.Fatal(err)
		}
		e.fns[0].m.advance(e.now)
		hist := e.fns[0].m.runningTime
		var total float64
		for _, v := range hist {
			total += v
		}
		mean := lambda * 0.25
		var tv, got float64
		for k := 0; k < len(hist) || k < int(4*mean)+10; k++ {
			p := 0.0
			if k < len(hist) {
				p = hist[k] / total
			}
			want := math.Exp(float64(k)*math.Log(mean) - mean - lgamma(k+1))
			tv += math.Abs(p-want) / 2
			got += float64(k) * p
			if math.Abs(p-want) > 0.01 {
				t.Errorf("λ=%v: P(%d running) = %.4f, Poisson(%.1f) gives %.4f", lambda, k, p, mean, want)
			}
		}
		t.Logf("λ=%v: time-averaged mean running %.3f (M/G/∞ %.3f), total variation from Poisson %.4f", lambda, got, mean, tv)
		if tv > 0.02 || math.Abs(got-mean) > 0.02*mean {
			t.Errorf("λ=%v: mean %.3f against %.3f, total variation %.4f from Poisson", lambda, got, mean, tv)
		}
	}
}

func lgamma(x int) float64 {
	v, _ := math.Lgamma(float64(x))
	return v
}

// Little's law is checked at the end of every run; a run whose accounting
// breaks it is an invariant error.
func TestLittlesLawIsCheckedOnEveryRun(t *testing.T) {
	for _, pol := range policy.Names() {
		if _, err := Run(Config{App: paperApp(t, "audio-translation"), Dist: dist(t, "light"),
			Trace: constantTrace(30, time.Minute), Policy: pol, Seed: 2, MaxQueue: 20}); err != nil {
			t.Errorf("%s: %v", pol, err)
		}
	}
	e := &engine{inFlightArea: 1e12, sojournNs: 1.001e12}
	if err := e.checkLittle(); !errors.Is(err, ErrInvariant) {
		t.Errorf("a 0.1%% gap passed: %v", err)
	}
}
