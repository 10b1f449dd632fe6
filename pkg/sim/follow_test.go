package sim

import (
	"context"
	"errors"
	"testing"
	"time"

	"gantry.dev/gantry/pkg/trace"
)

// The oracle's planning stops on its context: a cancelled run of a
// million requests returns the context's error after at most one look's
// worth of jobs, not after planning them all.
func TestOraclePlanningStopsOnItsContext(t *testing.T) {
	tr, err := trace.Generate("poisson", 1000, 20*time.Minute, 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	_, err = RunContext(ctx, Config{App: paperApp(t, "audio-translation"), Dist: dist(t, "light"), Trace: tr, Policy: "oracle", Seed: 1})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want the context's", err)
	}
	t.Logf("stopped after %v", time.Since(start))
}

// On a cluster too small for its plan the oracle still accounts for every
// request: what the plan cannot place in time waits on a container of its
// function or is refused, and the engine's invariants (every arrival
// completes or is rejected, Little's law) hold.
func TestOracleOnAClusterTooSmallForItsPlan(t *testing.T) {
	tr := constantTrace(120, time.Minute)
	for _, app := range []string{"image-compression", "audio-translation"} {
		res, err := Run(Config{App: paperApp(t, app), Dist: dist(t, "heavy"), Trace: tr, Policy: "oracle", Seed: 2,
			Nodes: 1, CoresPerNode: 24, MaxQueue: 50})
		if err != nil {
			t.Fatalf("%s: %v", app, err)
		}
		if res.SLOCompliance >= 1 || res.PeakContainers > 24 {
			t.Errorf("%s: compliance %.4f with at most %v containers on 24 cores", app, res.SLOCompliance, res.PeakContainers)
		}
		t.Logf("%s: %.4f compliance, %d rejected, %.1f live", app, res.SLOCompliance, res.Rejected, res.AvgContainers)
	}
}
