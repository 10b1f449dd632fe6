package sim

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"gantry.dev/gantry/pkg/policy"
	"gantry.dev/gantry/pkg/workload"
)

// The joint sizing of a chain (pkg/policy/chain_sizing.go) gives each
// function a fraction of every request's end-to-end slack; a request
// misses end to end only if some function makes it wait past its
// fraction, so the end-to-end miss share is at most the sum of the
// functions' shares (the union bound), each from the same least-slack
// M/G/n+D model as a single function. Each function is sized for all of
// ε, which the bound alone would allow k·ε end to end (k functions): the
// sizing relies on the bound overstating the misses more than k-fold.
// Against the simulator under gantry's own order: fixed pools of n_i
// containers per function of audio-translation (heavy sizes, Poisson
// 250/s, a 1 ms cold start) with fractions of the slack near those the
// split picks on a chain of that shape (0.55, 0.30, 0.15; pkg/policy's
// TestJointChainSizingSplitsTheEndToEndSlack: 0.5, 0.3, 0.2). Stated
// tolerance: the measured end-to-end miss share is at most the
// predicted sum over k, plus 3 binomial standard deviations (2 simulated minutes measured 0.020%
// against a sum of 0.26% at (100, 36, 14), 13 times below it, and none
// against 0.066% at (102, 37, 15)).
func TestChainSizingBoundsEndToEndMisses(t *testing.T) {
	app, err := workload.Lookup("audio-translation")
	if err != nil {
		t.Fatal(err)
	}
	const rate = 250.0
	frac := []float64{0.55, 0.30, 0.15}
	d := dist(t, "heavy")
	mixes := chainMixes(app, d, frac)
	dur := 2 * time.Minute
	if testing.Short() {
		dur = time.Minute
	}
	for _, ns := range [][]int{{100, 36, 14}, {102, 37, 15}} {
		var want float64
		for f, n := range ns {
			want += policy.MissProb(n, rate, mixes[f])
		}
		want = min(1, want)
		scale := make([]ScaleBounds, len(ns))
		for f, n := range ns {
			scale[f] = ScaleBounds{Min: n, Max: n}
		}
		cfg := Config{App: app, Dist: d, Trace: constantTrace(rate, dur), Policy: "gantry", Seed: 5,
			Scale: scale, Nodes: 6, CoresPerNode: 48, ColdBoot: true, ColdStart: time.Millisecond}
		r, err := Run(cfg)
		if err != nil {
			t.Fatal(err)
		}
		got := 1 - r.SLOCompliance
		sd := math.Sqrt(want * (1 - want) / float64(r.Requests))
		t.Logf("n %v: predicted (sum over the functions) %.6f, measured end to end %.6f (%d requests)", ns, want, got, r.Requests)
		if k := float64(len(ns)); got > want/k+3*sd {
			t.Errorf("n %v: measured end-to-end miss share %.6f, above the predicted sum over k (%.6f / %v)", ns, got, want, k)
		}
	}
}

// chainMixes is each function's least-slack service mix with its
// fraction of every request's end-to-end slack (the app SLO less the
// chain's executions), from the true execution-time models at 4096
// sampled sizes carried down the chain by the mean output sizes.
func chainMixes(app workload.App, d workload.Distribution, frac []float64) []policy.ServiceMix {
	const k = 4096
	rng := rand.New(rand.NewPCG(1, 2))
	slo := app.SLO.Seconds()
	n := len(app.Chain)
	sum, sum2 := make([]float64, n), make([]float64, n)
	var e2e []float64
	for range k {
		size := d.Sample(rng, app.MinSize, app.MaxSize)
		var total float64
		for f, fn := range app.Chain {
			x := fn.ExecMean(size).Seconds()
			sum[f] += x
			sum2[f] += x * x
			total += x
			size = fn.OutputMean(size)
		}
		if slo > total {
			e2e = append(e2e, slo-total)
		}
	}
	mixes := make([]policy.ServiceMix, n)
	for f := range n {
		m := sum[f] / k
		mixes[f] = policy.ServiceMix{Mean: m, SCV: max(0, sum2[f]/k/(m*m)-1), LeastSlack: true}
		for _, s := range e2e {
			mixes[f].Slacks = append(mixes[f].Slacks, frac[f]*s)
		}
	}
	return mixes
}
