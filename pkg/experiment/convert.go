package experiment

import (
	"time"

	"gantry.dev/gantry/pkg/report"
	"gantry.dev/gantry/pkg/sim"
)

// FromResult converts a simulation result into a report record, with
// durations in milliseconds.
func FromResult(r sim.Result) report.Record {
	rec := report.Record{
		App: r.App, Dist: r.Dist, Trace: r.Trace, Policy: r.Policy,
		SLOMs:    millis(r.SLO),
		Requests: r.Requests, ContainersSpawned: r.ContainersSpawned,
		AvgContainers: r.AvgContainers, PeakContainers: r.PeakContainers,
		WorkFloor: r.WorkFloor, Bound: r.Bound,
		SLOCompliance: r.SLOCompliance,
		P50Ms:         millis(r.P50), P95Ms: millis(r.P95), P99Ms: millis(r.P99), P999Ms: millis(r.P999),
		MeanQueueMs: millis(r.MeanQueue), MeanColdStartMs: millis(r.MeanColdStart), MeanExecMs: millis(r.MeanExec),
		JobsPerContainer: r.JobsPerContainer, EnergyJ: r.EnergyJ,
		ColdStarts: r.ColdStarts, SpawnFailures: r.SpawnFailures, Rejected: r.Rejected, Infeasible: r.Infeasible,
		AvgRunning: r.AvgRunning, AvgIdle: r.AvgIdle, ColdStartProb: r.ColdStartProb, WallS: r.WallSeconds,
	}
	for _, f := range r.Functions {
		rec.Functions = append(rec.Functions, fromFunction(f))
	}
	for _, p := range r.LatencyCDF {
		rec.LatencyCDF = append(rec.LatencyCDF, report.CDFPoint{Millis: p.Millis, Fraction: p.Fraction})
	}
	return rec
}

func fromFunction(f sim.FunctionResult) report.FunctionRecord {
	return report.FunctionRecord{
		Name: f.Name, Requests: f.Requests, Rejected: f.Rejected, ColdStarts: f.ColdStarts,
		ContainersSpawned: f.ContainersSpawned, AvgContainers: f.AvgContainers, PeakContainers: f.PeakContainers,
		WorkFloor: f.WorkFloor, Bound: f.Bound,
		P50Ms: millis(f.P50), P99Ms: millis(f.P99),
		MeanQueueMs: millis(f.MeanQueue), MeanExecMs: millis(f.MeanExec),
		JobsPerContainer: f.JobsPerContainer,
	}
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
