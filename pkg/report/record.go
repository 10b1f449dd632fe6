// Package report turns simulation results into files people read: a CSV and
// a JSON of every run, a markdown report, and PNG plots. It knows nothing of
// the simulator; callers convert their results into Records.
package report

import (
	"encoding/json"
	"errors"
	"io"
)

// ErrNoRecords is returned when there is nothing to report.
var ErrNoRecords = errors.New("no runs to report")

// CDFPoint is one point of a latency CDF.
type CDFPoint struct {
	Millis   float64 `json:"ms"`
	Fraction float64 `json:"fraction"`
}

// FunctionRecord holds the metrics of one function of an app's chain.
type FunctionRecord struct {
	Name              string  `json:"name"`
	Requests          int64   `json:"requests"`
	Rejected          int64   `json:"rejected"`
	ColdStarts        int64   `json:"cold_starts"`
	ContainersSpawned int64   `json:"containers_spawned"`
	AvgContainers     float64 `json:"avg_containers"`
	PeakContainers    float64 `json:"peak_containers"`
	WorkFloor         float64 `json:"work_floor,omitempty"`
	Bound             float64 `json:"bound,omitempty"`
	P50Ms             float64 `json:"p50_ms"`
	P99Ms             float64 `json:"p99_ms"`
	MeanQueueMs       float64 `json:"mean_queue_ms"`
	MeanExecMs        float64 `json:"mean_exec_ms"`
	JobsPerContainer  float64 `json:"jobs_per_container"`
}

// Record is one simulated run of one policy, with every metric we report.
type Record struct {
	App    string `json:"app"`
	Dist   string `json:"dist"`
	Trace  string `json:"trace"`
	Policy string `json:"policy"`
	// Scale names the cluster set-up, e.g. "real" (6x48 cores) or "large".
	Scale             string  `json:"scale,omitempty"`
	Cores             int     `json:"cores,omitempty"`
	SLOMs             float64 `json:"slo_ms,omitempty"`
	Requests          int64   `json:"requests"`
	ContainersSpawned int64   `json:"containers_spawned"`
	AvgContainers     float64 `json:"avg_containers"`
	PeakContainers    float64 `json:"peak_containers"`
	// WorkFloor is the mean busy cores and Bound the clairvoyant lower
	// bound on mean live containers at 100% SLO compliance, both over
	// this run's span (sim.Result); 0 when not computed.
	WorkFloor float64 `json:"work_floor"`
	Bound     float64 `json:"bound"`
	// The yardsticks of the condition, the same on every record of it
	// (0 where not computed): the clairvoyant oracle's mean live
	// containers, the online frontier's two points, the best fixed pool
	// in hindsight at this run's SLO compliance (with the compliance it
	// reaches) and oracle-predicted (knows the rate, not the arrivals;
	// with its compliance). docs/simulator.md, "The online frontier".
	Oracle             float64 `json:"oracle"`
	FixedPool          float64 `json:"fixed_pool"`
	FixedPoolSLO       float64 `json:"fixed_pool_slo"`
	OraclePredicted    float64 `json:"oracle_predicted"`
	OraclePredictedSLO float64 `json:"oracle_predicted_slo"`
	SLOCompliance      float64 `json:"slo_compliance"`
	P50Ms              float64 `json:"p50_ms"`
	P95Ms              float64 `json:"p95_ms"`
	P99Ms              float64 `json:"p99_ms"`
	P999Ms             float64 `json:"p999_ms"`
	MeanQueueMs        float64 `json:"mean_queue_ms"`
	MeanColdStartMs    float64 `json:"mean_cold_start_ms"`
	MeanExecMs         float64 `json:"mean_exec_ms"`
	JobsPerContainer   float64 `json:"jobs_per_container"`
	EnergyJ            float64 `json:"energy_j"`
	ColdStarts         int64   `json:"cold_starts"`
	// SpawnFailures counts container starts refused for lack of a free core.
	SpawnFailures int64 `json:"spawn_failures"`
	// Rejected counts requests turned away at a full queue, as the live
	// gateway answers 429; they are in Requests and count as SLO misses.
	Rejected int64 `json:"rejected"`
	// Infeasible counts requests whose execution alone exceeds the SLO
	// (sim.Result): no policy meets them.
	Infeasible int64 `json:"infeasible"`
	// AvgRunning, AvgIdle and ColdStartProb are SimFaaS's instance
	// metrics (see sim.Result).
	AvgRunning    float64          `json:"avg_running"`
	AvgIdle       float64          `json:"avg_idle"`
	ColdStartProb float64          `json:"cold_start_prob"`
	WallS         float64          `json:"wall_s"`
	Functions     []FunctionRecord `json:"functions,omitempty"`
	LatencyCDF    []CDFPoint       `json:"latency_cdf,omitempty"`
}

// Summary is the fixed set of fields `gantry sim --json` prints per run.
type Summary struct {
	App               string  `json:"app"`
	Dist              string  `json:"dist"`
	Trace             string  `json:"trace"`
	Policy            string  `json:"policy"`
	Requests          int64   `json:"requests"`
	ContainersSpawned int64   `json:"containers_spawned"`
	AvgContainers     float64 `json:"avg_containers"`
	Bound             float64 `json:"bound"`
	WorkFloor         float64 `json:"work_floor"`
	// VsBound is AvgContainers over Bound, less one: the distance to
	// the clairvoyant bound (0 without a bound).
	VsBound float64 `json:"vs_bound"`
	// VsOracle is the headline: AvgContainers over the oracle's mean live
	// containers in the same condition; BoundVsOracle, FixedPoolVsOracle
	// and OraclePredictedVsOracle set the bound and the online frontier
	// (the best fixed pool in hindsight at this run's SLO compliance, and
	// oracle-predicted) against the same. 0 where there is no oracle.
	VsOracle                float64 `json:"vs_oracle"`
	BoundVsOracle           float64 `json:"bound_vs_oracle"`
	FixedPoolVsOracle       float64 `json:"fixed_pool_vs_oracle"`
	OraclePredictedVsOracle float64 `json:"oracle_predicted_vs_oracle"`
	SLOCompliance           float64 `json:"slo_compliance"`
	P50Ms                   float64 `json:"p50_ms"`
	P99Ms                   float64 `json:"p99_ms"`
	JobsPerContainer        float64 `json:"jobs_per_container"`
	EnergyJ                 float64 `json:"energy_j"`
	ColdStarts              int64   `json:"cold_starts"`
	Rejected                int64   `json:"rejected"`
	WallS                   float64 `json:"wall_s"`
}

// VsBound is the run's mean live containers over its clairvoyant bound,
// less one (0.12 is 12% above the bound); 0 when there is no bound.
func (r Record) VsBound() float64 { return Change(r.AvgContainers, r.Bound) }

// Ratio is v over the condition's oracle (0 without one): the headline
// scale, on which the oracle is 1.
func (r Record) Ratio(v float64) float64 {
	if r.Oracle <= 0 {
		return 0
	}
	return v / r.Oracle
}

// VsOracle is the run's mean live containers over the oracle's.
func (r Record) VsOracle() float64 { return r.Ratio(r.AvgContainers) }

// VsFloor is the same against the work floor (the mean busy cores).
func (r Record) VsFloor() float64 { return Change(r.AvgContainers, r.WorkFloor) }

// Summary projects a Record onto the --json fields.
func (r Record) Summary() Summary {
	return Summary{
		App: r.App, Dist: r.Dist, Trace: r.Trace, Policy: r.Policy,
		Requests: r.Requests, ContainersSpawned: r.ContainersSpawned,
		AvgContainers: r.AvgContainers, Bound: r.Bound, WorkFloor: r.WorkFloor, VsBound: r.VsBound(),
		VsOracle: r.VsOracle(), BoundVsOracle: r.Ratio(r.Bound), FixedPoolVsOracle: r.Ratio(r.FixedPool),
		OraclePredictedVsOracle: r.Ratio(r.OraclePredicted),
		SLOCompliance:           r.SLOCompliance,
		P50Ms:                   r.P50Ms, P99Ms: r.P99Ms, JobsPerContainer: r.JobsPerContainer,
		EnergyJ: r.EnergyJ, ColdStarts: r.ColdStarts, Rejected: r.Rejected, WallS: r.WallS,
	}
}

// WriteSummaryJSON writes exactly one JSON object, {"runs":[...]}, with the
// --json fields of every record, followed by a newline.
func WriteSummaryJSON(w io.Writer, records []Record) error {
	runs := make([]Summary, len(records))
	for i, r := range records {
		runs[i] = r.Summary()
	}
	return json.NewEncoder(w).Encode(struct {
		Runs []Summary `json:"runs"`
	}{runs})
}

// WriteFullJSON writes {"runs":[...]} with every field of every record.
func WriteFullJSON(w io.Writer, records []Record) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if records == nil {
		records = []Record{}
	}
	return enc.Encode(struct {
		Runs []Record `json:"runs"`
	}{records})
}
