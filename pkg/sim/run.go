package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"gantry.dev/gantry/pkg/policy"
)

// Run simulates one configuration until every request has completed.
func Run(cfg Config) (Result, error) { return RunContext(context.Background(), cfg) }

// RunContext is Run that stops when ctx ends: the engine checks ctx at
// every policy tick (500 ms of simulated time by default) and every
// checkEvery events, and returns an error wrapping context.Cause(ctx).
func RunContext(ctx context.Context, cfg Config) (Result, error) {
	cfg.applyDefaults()
	if err := cfg.validate(); err != nil {
		return Result{}, err
	}
	wall := time.Now()
	pol := cfg.Custom
	variant, isOracle := oracleVariants[cfg.Policy]
	isOracle = isOracle && pol == nil
	follow := isOracle && !variant.noFollow
	if pol == nil {
		spec := policySpec(&cfg)
		name := cfg.Policy
		if isOracle {
			name = "oracle"
			// The engine follows the plan itself (follow.go); the policy
			// is asked for nothing it would plan. Unfollowed, the policy
			// holds the plan's container counts.
			spec.Truth.Planned = make([][]policy.PlanStep, len(cfg.App.Chain))
			if variant.noFollow {
				var err error
				if spec.Truth.Planned, err = plannedSteps(ctx, &cfg); err != nil {
					return Result{}, err
				}
			}
		}
		var err error
		if pol, err = policy.New(name, spec); err != nil {
			return Result{}, err
		}
	}
	e, err := newEngine(ctx, cfg, pol)
	if err != nil {
		return Result{}, err
	}
	if follow {
		// The oracle plans the run every way it can and follows the plan
		// that holds the fewest containers (choosePlan).
		rule, err := choosePlan(ctx, &cfg, variant.firstFitOnly)
		if err != nil {
			return Result{}, err
		}
		e.follow = newFollower(ctx, &e.cfg, e, rule)
	}
	// The bound assumes every start takes ColdStart; with drawn cold
	// starts it is not a bound, so it is not reported.
	noBound := cfg.NoBound || cfg.randomColdStart()
	if !noBound {
		e.accs = newBoundAccs(&cfg)
	}
	if err := e.run(); err != nil {
		return Result{}, err
	}
	if e.arrivals == 0 {
		return Result{}, fmt.Errorf("%w (expected %.3g requests over %v)", ErrNoRequests, cfg.Trace.Total(), cfg.Trace.Duration())
	}
	res := e.result()
	if isOracle {
		res.Policy = cfg.Policy // an ablation's name, not the policy's
	}
	if !noBound && e.now > 0 {
		b := boundOf(e.accs)
		res.WorkFloor = b.WorkArea / float64(e.now)
		res.Bound = b.Area / float64(e.now)
		for i, f := range b.Functions {
			res.Functions[i].WorkFloor = f.Work / float64(e.now)
			res.Functions[i].Bound = f.Area / float64(e.now)
		}
	}
	res.WallSeconds = time.Since(wall).Seconds()
	return res, nil
}

// oracleVariant is how the oracle, or one of its ablations, runs.
type oracleVariant struct {
	// firstFitOnly plans first fit only, not the better of best and
	// first fit.
	firstFitOnly bool
	// noFollow holds the first-fit plan's live containers and lets the
	// engine dispatch, instead of following the plan to the job.
	noFollow bool
}

// oracleVariants are the oracle and its ablations (OracleAblations).
var oracleVariants = map[string]oracleVariant{
	"oracle":           {},
	"oracle-first-fit": {firstFitOnly: true},
	"oracle-no-follow": {firstFitOnly: true, noFollow: true},
}

// OracleAblations are the oracle with one of issue 20's rules undone:
// oracle-first-fit plans first fit only (no best fit); oracle-no-follow
// also stops following the plan to the job (the engine dispatches by
// least slack on the plan's container counts), the oracle as it was
// before. Run accepts them as policy names; docs/simulator.md.
func OracleAblations() []string { return []string{"oracle-first-fit", "oracle-no-follow"} }

// IsOracle reports whether name is the oracle or one of its ablations:
// they plan with a constant cold start.
func IsOracle(name string) bool {
	_, ok := oracleVariants[name]
	return ok
}

// policySpec is what a policy may know up front. Truth is only read by
// the oracle.
func policySpec(cfg *Config) policy.Spec {
	slos, _ := functionSLOs(cfg.App)
	spec := policy.Spec{
		App: cfg.App.Name, AppSLO: cfg.App.SLO,
		MinSize: cfg.App.MinSize, MaxSize: cfg.App.MaxSize,
		ColdStart: cfg.ColdStart, Window: cfg.Window, Tick: cfg.Tick, Start: epoch, Seed: cfg.Seed,
		KeepAlive: cfg.KeepAlive, SLOTarget: cfg.SLOTarget,
	}
	for i, f := range cfg.App.Chain {
		spec.Functions = append(spec.Functions, policy.FunctionSpec{Name: f.Name, SLO: slos[i], SizeSensitive: f.SizeSensitive})
	}
	app, dist, per := cfg.App, cfg.Dist, predictedRate(cfg)
	spec.Truth = &policy.Truth{
		Rate: func(d time.Duration) float64 {
			if s := int(d / time.Second); s < len(per) {
				return per[s]
			}
			return -1
		},
		ExecMean:   func(fn int, size float64) time.Duration { return app.Chain[fn].ExecMean(size) },
		OutputMean: func(fn int, size float64) float64 { return app.Chain[fn].OutputMean(size) },
		SampleSize: func(rng *rand.Rand) float64 { return dist.Sample(rng, app.MinSize, app.MaxSize) },
	}
	return spec
}

// predictedRate is the per-second expected rate the policy is told: the
// trace's, or for the frontier's sweep each second's highest within the
// lead, times 1 + headroom (Config.PredictedHeadroom).
func predictedRate(cfg *Config) []float64 {
	per := cfg.Trace.PerSecond
	if cfg.PredictedHeadroom == 0 && cfg.PredictedLead == 0 {
		return per
	}
	lead := int((cfg.PredictedLead + time.Second - 1) / time.Second)
	out := make([]float64, len(per))
	for s := range per {
		peak := 0.0
		for k := s; k <= min(s+lead, len(per)-1); k++ {
			peak = max(peak, per[k])
		}
		out[s] = peak * (1 + cfg.PredictedHeadroom)
	}
	return out
}

func (e *engine) result() Result {
	e.cl.advance(e.now)
	span := float64(e.now)
	res := Result{
		App: e.cfg.App.Name, Dist: e.cfg.Dist.Name(), Trace: e.cfg.Trace.Name, Policy: e.pol.Name(),
		Requests: e.arrivals, SpawnFailures: e.spawnFails, Rejected: e.rejected, Infeasible: e.infeasible, SLO: e.cfg.App.SLO,
		Latency: e.app.summary(),
		EnergyJ: e.cl.energyJ, SimulatedSeconds: span / 1e9,
		ColdStarts: e.app.coldStarts, LatencyCDF: e.app.cdf(),
	}
	var liveArea float64
	for i := range e.fns {
		e.fns[i].m.advance(e.now)
		liveArea += e.fns[i].m.liveArea
	}
	for i := range e.fns {
		fr := e.functionResult(i, span, liveArea)
		res.Functions = append(res.Functions, fr)
		res.ContainersSpawned += fr.ContainersSpawned
		res.AvgContainers += fr.AvgContainers
	}
	res.PeakContainers = float64(e.cl.peakLive)
	if span > 0 {
		var running float64
		for i := range e.fns {
			running += e.fns[i].m.busyArea + e.fns[i].m.boundArea
		}
		res.AvgRunning = running / span
		res.AvgIdle = max(0, res.AvgContainers-res.AvgRunning)
	}
	if n := e.app.n; n > 0 {
		res.ColdStartProb = float64(e.app.coldStarts) / float64(n)
	}
	res.Async = e.asyncResult()
	if res.AvgContainers > 0 {
		res.JobsPerContainer = float64(e.arrivals) / res.AvgContainers
	}
	return res
}

func (e *engine) functionResult(i int, span, liveArea float64) FunctionResult {
	rt := &e.fns[i]
	l := &rt.lat
	fr := FunctionResult{
		Name: rt.f.Name, Requests: l.n + l.rejected, Rejected: l.rejected, ColdStarts: l.coldStarts, ContainersSpawned: rt.m.spawned,
		PeakContainers: float64(rt.m.peak), SLO: time.Duration(rt.slo), Latency: l.summary(),
	}
	if span > 0 {
		fr.AvgContainers = rt.m.liveArea / span
	}
	if fr.AvgContainers > 0 {
		fr.JobsPerContainer = float64(rt.m.jobs) / fr.AvgContainers
	}
	// Busy and warm watts are the function's own; powered-node watts are
	// shared in proportion to its container-time.
	fr.EnergyJ = (rt.m.busyArea*CoreBusyWatts + rt.m.liveArea*ContainerIdleWatts) / 1e9
	if liveArea > 0 {
		fr.EnergyJ += e.cl.nodeEnergyJ * rt.m.liveArea / liveArea
	}
	return fr
}
