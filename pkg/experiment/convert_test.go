package experiment

import (
	"testing"
	"time"

	"gantry.dev/gantry/pkg/sim"
)

func TestFromResultConvertsDurationsToMilliseconds(t *testing.T) {
	r := sim.Result{
		App: "a", Dist: "d", Trace: "t", Policy: "p", Requests: 10, ColdStarts: 2, ContainersSpawned: 3, SpawnFailures: 1,
		AvgContainers: 1.5, PeakContainers: 3, SLO: 800 * time.Millisecond,
		Latency: sim.Latency{SLOCompliance: 0.9,
			P50: 100 * time.Millisecond, P95: 150 * time.Millisecond, P99: 1500 * time.Microsecond, P999: 2 * time.Second,
			MeanQueue: time.Millisecond, MeanColdStart: 2 * time.Millisecond, MeanExec: 3 * time.Millisecond},
		JobsPerContainer: 3.3, EnergyJ: 42, WallSeconds: 0.5,
		Functions:  []sim.FunctionResult{{Name: "f", Requests: 10, Latency: sim.Latency{P99: 7 * time.Millisecond}}},
		LatencyCDF: []sim.CDFPoint{{Millis: 5, Fraction: 1}},
	}
	rec := FromResult(r)
	if rec.SLOMs != 800 || rec.P50Ms != 100 || rec.P95Ms != 150 || rec.P99Ms != 1.5 || rec.P999Ms != 2000 {
		t.Errorf("latencies: %+v", rec)
	}
	if rec.MeanQueueMs != 1 || rec.MeanColdStartMs != 2 || rec.MeanExecMs != 3 {
		t.Errorf("breakdown: %+v", rec)
	}
	if rec.Requests != 10 || rec.ColdStarts != 2 || rec.ContainersSpawned != 3 || rec.SpawnFailures != 1 ||
		rec.AvgContainers != 1.5 || rec.PeakContainers != 3 || rec.SLOCompliance != 0.9 ||
		rec.JobsPerContainer != 3.3 || rec.EnergyJ != 42 || rec.WallS != 0.5 {
		t.Errorf("counters: %+v", rec)
	}
	if len(rec.Functions) != 1 || rec.Functions[0].P99Ms != 7 || len(rec.LatencyCDF) != 1 || rec.LatencyCDF[0].Millis != 5 {
		t.Errorf("functions/CDF: %+v", rec)
	}
}
