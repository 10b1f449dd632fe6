package sim

import (
	"fmt"
	"math"
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
