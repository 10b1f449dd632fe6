package experiment

import (
	"context"
	"errors"
	"testing"
	"time"

	"gantry.dev/gantry/pkg/policy"
	"gantry.dev/gantry/pkg/sim"
)

// An interrupt (the command's context ending) stops the run and hands back
// the runs that had finished, in job order, so --out can keep them.
func TestRunKeepsTheFinishedRunsWhenInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	jobs := smallJobs(t, policy.Names())
	third := jobs[2].Config.Policy
	interrupting := func(cfg sim.Config) (sim.Result, error) {
		if cfg.Policy == third {
			cancel()
			return sim.Result{}, context.Canceled
		}
		return fakeSim(cfg)
	}
	recs, err := Run(ctx, jobs, Options{Workers: 1, Simulate: interrupting})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if len(recs) != 2 || recs[0].Policy != jobs[0].Config.Policy || recs[1].Policy != jobs[1].Config.Policy {
		t.Fatalf("kept %v, want the two runs that finished before %s", recs, third)
	}
}

// Without a Simulate of its own, Run hands its context to the simulator,
// which stops at its next tick instead of finishing the trace.
func TestRunStopsARunningSimulation(t *testing.T) {
	jobs := smallJobs(t, []string{"gantry"})
	tr := jobs[0].Config.Trace
	tr.PerSecond = make([]float64, int(time.Hour/time.Second))
	for i := range tr.PerSecond {
		tr.PerSecond[i] = 200
	}
	jobs[0].Config.Trace = tr
	ctx, cancel := context.WithCancel(context.Background())
	jobs[0].Config.OnComplete = func(id int64, _ time.Duration) {
		if id == 1000 {
			cancel()
		}
	}
	_, err := Run(ctx, jobs, Options{Workers: 1})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}
