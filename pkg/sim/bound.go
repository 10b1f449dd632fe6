package sim

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"gantry.dev/gantry/pkg/bound"
	"gantry.dev/gantry/pkg/workload"
)

// Bound is what the run's realised requests allow, whatever the policy
// (docs/simulator.md, "The clairvoyant bound"). Areas are container·ns;
// divided by a run's simulated span they are mean containers.
type Bound struct {
	// WorkArea is the total execution time of every request at every
	// function: the container-time of the busy cores.
	WorkArea float64
	// Area is a lower bound on the container-time of any policy that
	// meets the SLO of every request.
	Area float64
	// Functions holds the per-function bounds, in chain order.
	Functions []bound.Result
}

// realize replays the requests the engine will see: the same arrival
// times and input sizes (from the same seeded streams, in the same
// order) and, through keyedSource, the same execution times and output
// sizes at every function. visit is called once per request with its
// arrival time and its execution time at each function (reused buffer).
func realize(ctx context.Context, cfg *Config, visit func(id, arrival int64, exec []int64)) error {
	e := &engine{cfg: *cfg}
	e.arrRng = rand.New(rand.NewPCG(cfg.Seed, 1))
	sizeRng := rand.New(rand.NewPCG(cfg.Seed, 2))
	execKey, outKey := &keyedSource{}, &keyedSource{}
	execRng, outRng := rand.New(execKey), rand.New(outKey)
	exec := make([]int64, len(cfg.App.Chain))
	draws := samplers(cfg.App)
	var id int64
	for t, ok := e.nextArrival(0); ok; t, ok = e.nextArrival(t) {
		if id%checkEvery == 0 && ctx.Err() != nil {
			return fmt.Errorf("sim: stopped computing the bound after %v of %v: %w", time.Duration(t), cfg.Trace.Duration(), context.Cause(ctx))
		}
		size := cfg.Dist.Sample(sizeRng, cfg.App.MinSize, cfg.App.MaxSize)
		if !(size > 0) || math.IsInf(size, 0) {
			return fmt.Errorf("%w: distribution %q drew input size %v", ErrBadConfig, cfg.Dist.Name(), size)
		}
		for f := range draws {
			fn := &draws[f]
			execKey.reset(cfg.Seed, id, int32(f), streamExec)
			exec[f] = int64(fn.Exec(size, execRng))
			outKey.reset(cfg.Seed, id, int32(f), streamOutput)
			size = fn.Output(size, outRng)
		}
		visit(id, t, exec)
		id++
	}
	return nil
}

// samplers are the draws of each function of app's chain.
func samplers(app workload.App) []workload.Sampler {
	out := make([]workload.Sampler, len(app.Chain))
	for i, f := range app.Chain {
		out[i] = f.Sampler()
	}
	return out
}

// computeBound streams the realised requests into one bound accumulator
// per function, without running the engine (a test checks that the
// engine's own accumulation, fed as requests arrive, agrees). A request's job at function f may start once it has run
// at every function before f (no earlier than its arrival plus their
// execution times) and must end early enough for the functions after f
// to finish within the app SLO.
func computeBound(ctx context.Context, cfg *Config) (Bound, error) {
	accs := newBoundAccs(cfg)
	slo := int64(cfg.App.SLO)
	err := realize(ctx, cfg, func(_, arrival int64, exec []int64) {
		var before, total int64
		for _, p := range exec {
			total += p
		}
		for f, p := range exec {
			after := total - before - p
			accs[f].Add(bound.Job{Release: arrival + before, Deadline: arrival + slo - after, Exec: p})
			before += p
		}
	})
	if err != nil {
		return Bound{}, err
	}
	return boundOf(accs), nil
}

// newBoundAccs is one bound accumulator per function of the run. The
// engine feeds them as requests arrive (drawChain); computeBound replays
// the requests without the engine, and the two must agree.
func newBoundAccs(cfg *Config) []*bound.Acc {
	horizon := cfg.Trace.Duration() + cfg.App.SLO + time.Second
	slos, _ := functionSLOs(cfg.App)
	warm := prewarmCounts(cfg)
	accs := make([]*bound.Acc, len(cfg.App.Chain))
	for f := range accs {
		accs[f] = bound.New(cfg.ColdStart, horizon, slos[f], warm[f])
	}
	return accs
}

func boundOf(accs []*bound.Acc) Bound {
	var b Bound
	for _, a := range accs {
		r := a.Result()
		b.Functions = append(b.Functions, r)
		b.WorkArea += r.Work
		b.Area += r.Area
	}
	return b
}

// prewarmCounts is how many warm containers each function starts with
// (none under ColdBoot); see prewarm.
func prewarmCounts(cfg *Config) []int {
	out := make([]int, len(cfg.App.Chain))
	if cfg.ColdBoot {
		return out
	}
	per := cfg.Trace.PerSecond
	n := min(len(per), int(cfg.Window/time.Second))
	rate := 0.0
	for _, v := range per[:max(1, n)] {
		rate += v / float64(max(1, n))
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 5))
	const samples = 2000
	busy := make([]float64, len(out))
	for range samples {
		size := cfg.Dist.Sample(rng, cfg.App.MinSize, cfg.App.MaxSize)
		for i, f := range cfg.App.Chain {
			busy[i] += float64(f.ExecMean(size)) / samples
			size = f.OutputMean(size)
		}
	}
	for i := range out {
		out[i] = int(math.Ceil(rate * busy[i] / float64(time.Second) * prewarmHeadroom))
	}
	return out
}
