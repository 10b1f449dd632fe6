package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"gantry.dev/gantry/pkg/policy"
	"gantry.dev/gantry/pkg/workload"
)

// The SLO sizing's model (policy.MissProb, an M/G/n approximation) must
// predict the share of requests that wait past their slack in the
// simulator: a fixed pool of n containers (min = max = n) under Poisson
// arrivals, FIFO, for n = 4…8 at a load of 3.06, whose predicted miss
// shares (14%, 2.2%, 0.39%, 0.07%, 0.012%) span the ε grid the sizing
// picks from. Stated tolerance:
// the measured share is within a factor of 1.6 of the predicted one, or
// within 3 binomial standard deviations of it (which dominates at the
// smallest ε, where a run sees a few dozen misses).
func TestSizingModelMatchesSimulatedMisses(t *testing.T) {
	app, err := workload.Lookup("sentiment-analysis")
	if err != nil {
		t.Fatal(err)
	}
	const rate = 8.0
	mix := sentimentMix(t, app)
	dur := time.Hour
	if testing.Short() {
		dur = 20 * time.Minute
	}
	for _, n := range []int{4, 5, 6, 7, 8} {
		want := policy.MissProb(n, rate, mix)
		cfg := Config{App: app, Dist: dist(t, "uniform"), Trace: constantTrace(rate, dur),
			Policy: "isbatch", Seed: 3, Scale: []ScaleBounds{{Min: n, Max: n}}, Nodes: 1, CoresPerNode: 64}
		r, err := Run(cfg)
		if err != nil {
			t.Fatal(err)
		}
		got := 1 - r.SLOCompliance
		sd := math.Sqrt(want * (1 - want) / float64(r.Requests))
		t.Logf("n %d: predicted %.5f, measured %.5f (%d requests)", n, want, got, r.Requests)
		if !(got <= 1.6*want+3*sd && got >= want/1.6-3*sd) {
			t.Errorf("n %d: measured miss share %.5f, the model predicts %.5f", n, got, want)
		}
	}
}

// sentimentMix is the service mix of sentiment-analysis under uniform
// input sizes, from its true execution-time model.
func sentimentMix(t *testing.T, app workload.App) policy.ServiceMix {
	t.Helper()
	fn := app.Chain[0]
	slo := app.SLO.Seconds()
	const k = 512
	var mix policy.ServiceMix
	var sum, sum2 float64
	for i := range k {
		size := app.MinSize + (float64(i)+0.5)/k*(app.MaxSize-app.MinSize)
		x := fn.ExecMean(size).Seconds()
		sum += x
		sum2 += x * x
		if slo > x {
			mix.Slacks = append(mix.Slacks, slo-x)
		}
	}
	mix.Mean = sum / k
	mix.SCV = sum2/k/(mix.Mean*mix.Mean) - 1
	if mix.Mean <= 0 {
		t.Fatal(fmt.Sprint("no service mix for ", app.Name))
	}
	return mix
}

// The least-slack model (policy.MissProb with LeastSlack: the heavy-
// traffic EDF tail with the late requests set aside, M/G/n+D) must
// predict the share of requests that wait past their slack under
// gantry's own run order: a fixed pool of n containers (min = max = n,
// started at once with a 1 ms cold start) under Poisson arrivals, with
// heavy sizes: image-compression at the paper matrix's 250/s (about 95
// busy containers) and at 55/s (about 21), and, with another service
// mix (a model-load intercept, slacks short for most requests),
// sentiment-analysis at 300/s (about 136), for n whose predicted miss
// shares span the ε grid (1% to 0.01%). Stated tolerance (the sizing's
// modelTolerance): the measured share is at most 4 times the predicted
// one and at least half of it, or within 3 binomial standard deviations
// of those (which dominates at the smallest ε). Measured: up to 1.96
// times on image-compression, 3.78 on sentiment-analysis; at 20/s on
// sentiment-analysis (issue 20's low-rate cell) 0.87, 0.61 and 0.36
// times at n = 12, 13, 14 (one hour; the last below half, within 3
// standard deviations of it): the model errs on the safe side there. The FIFO
// model, logged beside, predicts 40 to 150 times the measured share on
// image-compression at 250/s.
func TestSizingModelMatchesLeastSlackMisses(t *testing.T) {
	for _, c := range []struct {
		app  string
		rate float64
		ns   []int
		dur  time.Duration
	}{
		{"image-compression", 250, []int{96, 98, 100}, 4 * time.Minute},
		{"image-compression", 55, []int{23, 24, 26}, 8 * time.Minute},
		{"sentiment-analysis", 300, []int{138, 139, 140}, 4 * time.Minute},
		// issue 20's low-rate cell (about 9 busy containers): the light-load
		// tail, which the sizing uses there without the tolerance
		{"sentiment-analysis", 20, []int{12, 13, 14}, time.Hour},
	} {
		app, err := workload.Lookup(c.app)
		if err != nil {
			t.Fatal(err)
		}
		d := dist(t, "heavy")
		mix := sampledMix(t, app, d, true)
		fifo := mix
		fifo.LeastSlack = false
		for _, n := range c.ns {
			want := policy.MissProb(n, c.rate, mix)
			cfg := Config{App: app, Dist: d, Trace: constantTrace(c.rate, c.dur), Policy: "gantry", Seed: 5,
				Scale: []ScaleBounds{{Min: n, Max: n}}, Nodes: 6, CoresPerNode: 48, ColdBoot: true, ColdStart: time.Millisecond}
			r, err := Run(cfg)
			if err != nil {
				t.Fatal(err)
			}
			got := 1 - r.SLOCompliance
			sd := math.Sqrt(want * (1 - want) / float64(r.Requests))
			t.Logf("%s %v/s, n %d: predicted %.6f (FIFO model %.6f), measured %.6f (%d requests)",
				c.app, c.rate, n, want, policy.MissProb(n, c.rate, fifo), got, r.Requests)
			if !(got <= 4*want+3*sd && got >= want/2-3*sd) {
				t.Errorf("%s %v/s, n %d: measured miss share %.6f, the least-slack model predicts %.6f", c.app, c.rate, n, got, want)
			}
		}
	}
}

// sampledMix is the service mix of an app's first function under an
// input-size distribution, from its true execution-time model at 4096
// sampled sizes.
func sampledMix(t *testing.T, app workload.App, d workload.Distribution, leastSlack bool) policy.ServiceMix {
	t.Helper()
	fn := app.Chain[0]
	slo := app.SLO.Seconds()
	const k = 4096
	rng := rand.New(rand.NewPCG(1, 2))
	mix := policy.ServiceMix{LeastSlack: leastSlack}
	var sum, sum2 float64
	for range k {
		x := fn.ExecMean(d.Sample(rng, app.MinSize, app.MaxSize)).Seconds()
		sum += x
		sum2 += x * x
		if slo > x {
			mix.Slacks = append(mix.Slacks, slo-x)
		}
	}
	mix.Mean = sum / k
	mix.SCV = sum2/k/(mix.Mean*mix.Mean) - 1
	return mix
}
