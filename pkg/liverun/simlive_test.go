package liverun

import (
	"math"
	"testing"
	"time"
)

// The simulated side runs the trace the live side ran, bounded by the same
// capacity: a one-node cluster with a core per instance.
func TestSimulateHoldsTheCapacity(t *testing.T) {
	app := mustApp(t, "sentiment-analysis")
	cfg := Config{App: app.Name, Policy: "atoll", Trace: "poisson", Dist: "uniform", Rate: 40, Duration: 20 * time.Second,
		Seed: 3, Capacity: 4, Tick: DefaultTick, Window: DefaultWindow, IdleTimeout: DefaultIdleTimeout}
	res, err := simulate(cfg, app, time.Second, 3)
	if err != nil {
		t.Fatal(err)
	}
	if res.PeakContainers > 4 || res.SpawnFailures == 0 {
		t.Errorf("peak %v containers, %d refused starts: want at most 4 and some refused", res.PeakContainers, res.SpawnFailures)
	}
	cfg.Capacity = 0
	if res, err = simulate(cfg, app, time.Second, 3); err != nil {
		t.Fatal(err)
	}
	if res.PeakContainers <= 4 || res.SpawnFailures != 0 {
		t.Errorf("unbounded: peak %v containers, %d refused starts", res.PeakContainers, res.SpawnFailures)
	}
}

func TestSpreadAggregatesFigureByFigure(t *testing.T) {
	s := spread([]Side{{AvgContainers: 1, SLOCompliance: 0.9, P99Ms: 10}, {AvgContainers: 3, SLOCompliance: 1, P99Ms: 30}})
	if s.Seeds != 2 || s.Mean.AvgContainers != 2 || math.Abs(s.Mean.SLOCompliance-0.95) > 1e-12 || s.Mean.P99Ms != 20 {
		t.Errorf("mean %+v", s.Mean)
	}
	if s.SD.AvgContainers != 1 || s.Min.P99Ms != 10 || s.Max.P99Ms != 30 || s.Min.Requests != 0 {
		t.Errorf("sd %+v min %+v max %+v", s.SD, s.Min, s.Max)
	}
	if d := rel(11, 10); d == nil || math.Abs(*d-0.1) > 1e-12 || !inTolerance(d) {
		t.Errorf("rel(11, 10) = %v", d)
	}
	if rel(1, 0) != nil || inTolerance(rel(1, 0)) || *rel(0, 0) != 0 {
		t.Error("rel against 0")
	}
}

// withOverhead adds a fixed cost to every execution and leaves the app's
// SLO alone.
func TestWithOverhead(t *testing.T) {
	app := mustApp(t, "email-categorization")
	over := withOverhead(app, 10*time.Millisecond)
	for i := range app.Chain {
		if got, want := over.Chain[i].ExecMean(100), app.Chain[i].ExecMean(100)+10*time.Millisecond; got != want {
			t.Errorf("%s: %v, want %v", app.Chain[i].Name, got, want)
		}
	}
	if over.SLO != app.SLO || app.Chain[0].ExecMean(100) == over.Chain[0].ExecMean(100) {
		t.Error("the original app changed, or the SLO moved")
	}
}
