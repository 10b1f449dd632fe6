package sim

import (
	"math"
	"testing"
	"time"

	"gantry.dev/gantry/pkg/policy/policytest"
	"gantry.dev/gantry/pkg/trace"
)

// The fixed pool found in hindsight reaches each target, grows with it,
// and the engine itself, holding that pool (policytest.Fixed), measures
// the compliance the hindsight pass computed.
func TestFixedPoolsReachTheirTargetsAsTheEngineMeasures(t *testing.T) {
	tr, err := trace.Generate("twitter", 80, 2*time.Minute, 4)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{App: paperApp(t, "image-compression"), Dist: dist(t, "heavy"), Trace: tr, Seed: 4,
		ColdStart: time.Millisecond, MaxQueue: -1}
	targets := []float64{0.5, 0.99, 0.999, 0.9999}
	pts, err := FixedPools(t.Context(), cfg, targets)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range pts {
		if p.Compliance < targets[i] || (i > 0 && p.Containers < pts[i-1].Containers) {
			t.Errorf("target %v: pool %v at %.5f (previous %v)", targets[i], p.Containers, p.Compliance, pts[max(0, i-1)].Containers)
		}
		cfg.Custom = policytest.Fixed(int(p.Containers))
		res, err := Run(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(res.SLOCompliance-p.Compliance) > 1e-3 || math.Abs(res.AvgContainers-p.Containers) > 0.01*p.Containers {
			t.Errorf("pool of %v: the engine measures %.5f compliance with %.2f live, the hindsight pass %.5f", p.Containers, res.SLOCompliance, res.AvgContainers, p.Compliance)
		}
	}
	if pts[3].Containers <= pts[0].Containers {
		t.Errorf("99.99%% needs no more containers than 50%%: %v", pts)
	}
}
