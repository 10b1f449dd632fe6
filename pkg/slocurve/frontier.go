package slocurve

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"gantry.dev/gantry/pkg/sim"
)

// FrontierFile is the file WriteFrontier creates in its folder.
const FrontierFile = "frontier.json"

// PredictedPoint is one oracle-predicted run of the frontier's sweep.
type PredictedPoint struct {
	// Headroom is the fraction the expected rate was raised by.
	Headroom      float64 `json:"headroom"`
	Compliance    float64 `json:"slo_compliance"`
	AvgContainers float64 `json:"avg_containers"`
	VsOracle      float64 `json:"vs_oracle"`
	Spawned       int64   `json:"containers_spawned"`
}

// Frontier is what an online policy that knows the rate needs to reach a
// compliance target on one condition (docs/experiments.md, "The online
// frontier at 99.9%"): the best fixed pool in hindsight at the target,
// and oracle-predicted told the rate Lead ahead with its headroom swept.
type Frontier struct {
	Target float64       `json:"slo_target"`
	Lead   time.Duration `json:"lead_ns"`
	// Oracle is the clairvoyant oracle's mean live containers, the unit.
	Oracle         float64 `json:"oracle"`
	FixedPool      float64 `json:"fixed_pool"`
	FixedPoolSLO   float64 `json:"fixed_pool_slo"`
	FixedPoolRatio float64 `json:"fixed_pool_vs_oracle"`
	// Predicted holds one point a headroom, in the order given; Reached
	// is the index of the point with the fewest containers that reaches
	// Target, or -1 when none does.
	Predicted []PredictedPoint `json:"predicted"`
	Reached   int              `json:"reached"`
}

// RunFrontier runs base's condition with the oracle, the fixed pool at
// target, and oracle-predicted once per headroom (fractions in
// [sim.MinPredictedHeadroom, sim.MaxPredictedHeadroom]) told the rate lead ahead. base's policy must
// be oracle-predicted.
func RunFrontier(ctx context.Context, base sim.Config, target float64, lead time.Duration, headrooms []float64) (Frontier, error) {
	switch {
	case len(headrooms) == 0 || len(headrooms) > MaxTargets:
		return Frontier{}, fmt.Errorf("%w: %d headrooms, want 1 to %d", ErrBadTargets, len(headrooms), MaxTargets)
	case !(target > 0 && target < 1):
		return Frontier{}, fmt.Errorf("%w: %v is not a fraction in (0, 1)", ErrBadTargets, target)
	case base.Policy != "oracle-predicted" || base.Custom != nil:
		return Frontier{}, fmt.Errorf("%w: the frontier sweeps oracle-predicted, not %q", ErrBadTargets, base.Policy)
	}
	for _, h := range headrooms {
		if !(h >= sim.MinPredictedHeadroom && h <= sim.MaxPredictedHeadroom) {
			return Frontier{}, fmt.Errorf("%w: headroom %v is not in [%v, %v]", ErrBadTargets, h, sim.MinPredictedHeadroom, sim.MaxPredictedHeadroom)
		}
	}
	f := Frontier{Target: target, Lead: lead, Reached: -1}
	ref := base
	ref.Policy = "oracle"
	o, err := sim.RunContext(ctx, ref)
	if err != nil {
		return f, fmt.Errorf("the oracle: %w", err)
	}
	f.Oracle = o.AvgContainers
	pools, err := sim.FixedPools(ctx, base, []float64{target})
	if err != nil {
		return f, fmt.Errorf("the fixed pool: %w", err)
	}
	f.FixedPool, f.FixedPoolSLO, f.FixedPoolRatio = pools[0].Containers, pools[0].Compliance, ratio(pools[0].Containers, f.Oracle)
	for _, h := range headrooms {
		cfg := base
		cfg.PredictedHeadroom, cfg.PredictedLead = h, lead
		r, err := sim.RunContext(ctx, cfg)
		if err != nil {
			return f, err
		}
		f.Predicted = append(f.Predicted, PredictedPoint{Headroom: h, Compliance: r.SLOCompliance,
			AvgContainers: r.AvgContainers, VsOracle: ratio(r.AvgContainers, f.Oracle), Spawned: r.ContainersSpawned})
		if r.SLOCompliance >= target && (f.Reached < 0 || r.AvgContainers < f.Predicted[f.Reached].AvgContainers) {
			f.Reached = len(f.Predicted) - 1
		}
	}
	return f, nil
}

func ratio(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return a / b
}

// WriteFrontier puts f in dir as FrontierFile.
func WriteFrontier(dir string, f Frontier) error {
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, FrontierFile), append(data, '\n'), 0o644)
}
