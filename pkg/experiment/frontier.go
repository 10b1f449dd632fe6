package experiment

import (
	"context"
	"fmt"
	"sync"

	"gantry.dev/gantry/pkg/report"
	"gantry.dev/gantry/pkg/sim"
)

// The yardsticks set beside every run (docs/simulator.md, "The online
// frontier"): the clairvoyant oracle, whose mean live containers are the
// headline's unit, and the online frontier: the best fixed pool in
// hindsight at each run's SLO compliance, and oracle-predicted, which
// knows the rate but not the arrivals. A condition whose runs include the
// oracle or oracle-predicted reuses them; the others run once more.
const (
	oracleName    = "oracle"
	predictedName = "oracle-predicted"
)

// frontier fills the yardsticks of every record, one condition at a time
// on workers goroutines. It stops when ctx ends.
func frontier(ctx context.Context, jobs []Job, records []report.Record, workers int) error {
	groups := conditions(jobs)
	next := make(chan int)
	errs := make([]error, len(groups))
	var wg sync.WaitGroup
	for range min(workers, len(groups)) {
		wg.Go(func() {
			for g := range next {
				errs[g] = yardsticks(ctx, jobs, records, groups[g])
			}
		})
	}
	feed(ctx, next, len(groups))
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return err
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// conditions groups job indices by condition (the same requests).
func conditions(jobs []Job) [][]int {
	index := map[string]int{}
	var out [][]int
	for i, j := range jobs {
		c := j.Config
		k := fmt.Sprintf("%s/%s/%s/%s/%d/%d/%v", c.App.Name, c.Dist.Name(), label(j), j.Scale, c.Seed, c.Nodes, c.ColdStart)
		g, ok := index[k]
		if !ok {
			g = len(out)
			index[k] = g
			out = append(out, nil)
		}
		out[g] = append(out[g], i)
	}
	return out
}

// yardsticks computes one condition's and writes them on its records.
func yardsticks(ctx context.Context, jobs []Job, records []report.Record, idx []int) error {
	base := jobs[idx[0]].Config
	base.Progress, base.OnComplete, base.KeepAlive = nil, nil, 0
	var oracle, predicted report.Record
	targets := make([]float64, len(idx))
	for k, i := range idx {
		targets[k] = records[i].SLOCompliance
		switch records[i].Policy {
		case oracleName:
			oracle = records[i]
		case predictedName:
			predicted = records[i]
		}
	}
	var err error
	// The oracle plans with a constant cold start; with a drawn one it
	// has no plan, and the headline has no unit.
	if oracle.Policy == "" && (base.ColdStartDist == "" || base.ColdStartDist == "const") {
		if oracle, err = runRef(ctx, base, oracleName); err != nil {
			return err
		}
	}
	if predicted.Policy == "" {
		if predicted, err = runRef(ctx, base, predictedName); err != nil {
			return err
		}
	}
	pools, err := sim.FixedPools(ctx, base, targets)
	if err != nil {
		return fmt.Errorf("%s/%s/%s: the fixed pool: %w", base.App.Name, base.Dist.Name(), label(jobs[idx[0]]), err)
	}
	for k, i := range idx {
		r := &records[i]
		r.Oracle = oracle.AvgContainers
		r.OraclePredicted, r.OraclePredictedSLO = predicted.AvgContainers, predicted.SLOCompliance
		r.FixedPool, r.FixedPoolSLO = pools[k].Containers, pools[k].Compliance
	}
	return nil
}

func runRef(ctx context.Context, cfg sim.Config, name string) (report.Record, error) {
	cfg.Policy, cfg.Custom = name, nil
	res, err := sim.RunContext(ctx, cfg)
	if err != nil {
		return report.Record{}, fmt.Errorf("%s/%s: %s for the yardsticks: %w", cfg.App.Name, cfg.Dist.Name(), name, err)
	}
	return FromResult(res), nil
}
