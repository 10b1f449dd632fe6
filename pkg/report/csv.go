package report

import (
	"encoding/csv"
	"io"
	"strconv"
)

var csvHeader = []string{
	"app", "dist", "trace", "policy", "scale", "cores", "slo_ms",
	"requests", "containers_spawned", "avg_containers", "peak_containers",
	"slo_compliance", "p50_ms", "p95_ms", "p99_ms", "p999_ms",
	"mean_queue_ms", "mean_cold_start_ms", "mean_exec_ms",
	"jobs_per_container", "energy_j", "cold_starts", "spawn_failures", "rejected", "avg_running", "avg_idle", "cold_start_prob", "wall_s",
	"work_floor", "bound",
	"oracle", "vs_oracle", "fixed_pool", "fixed_pool_slo", "oracle_predicted", "oracle_predicted_slo", "infeasible",
}

// WriteCSV writes one row per record, with a header.
func WriteCSV(w io.Writer, records []Record) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(csvHeader); err != nil {
		return err
	}
	for _, r := range records {
		if err := cw.Write(csvRow(r)); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

func csvRow(r Record) []string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', 10, 64) }
	i := func(v int64) string { return strconv.FormatInt(v, 10) }
	return []string{
		r.App, r.Dist, r.Trace, r.Policy, r.Scale, strconv.Itoa(r.Cores), f(r.SLOMs),
		i(r.Requests), i(r.ContainersSpawned), f(r.AvgContainers), f(r.PeakContainers),
		f(r.SLOCompliance), f(r.P50Ms), f(r.P95Ms), f(r.P99Ms), f(r.P999Ms),
		f(r.MeanQueueMs), f(r.MeanColdStartMs), f(r.MeanExecMs),
		f(r.JobsPerContainer), f(r.EnergyJ), i(r.ColdStarts), i(r.SpawnFailures), i(r.Rejected), f(r.AvgRunning), f(r.AvgIdle), f(r.ColdStartProb), f(r.WallS),
		f(r.WorkFloor), f(r.Bound),
		f(r.Oracle), f(r.VsOracle()), f(r.FixedPool), f(r.FixedPoolSLO), f(r.OraclePredicted), f(r.OraclePredictedSLO), i(r.Infeasible),
	}
}
