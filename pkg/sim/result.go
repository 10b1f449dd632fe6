package sim

import "time"

// Result is the outcome of one run. Durations marshal as nanoseconds; the
// CLI converts to milliseconds for its own JSON schema.
type Result struct {
	App    string `json:"app"`
	Dist   string `json:"dist"`
	Trace  string `json:"trace"`
	Policy string `json:"policy"`

	Requests          int64 `json:"requests"`
	ColdStarts        int64 `json:"cold_starts"`
	ContainersSpawned int64 `json:"containers_spawned"`
	// SpawnFailures counts container starts refused because no node had a
	// free core and enough memory.
	SpawnFailures int64 `json:"spawn_failures"`
	// Rejected counts requests turned away at a full queue (Config.MaxQueue),
	// as the live gateway answers 429; they are in Requests and count as
	// SLO misses.
	Rejected int64 `json:"rejected"`
	// Infeasible counts the (synchronous) requests whose execution times
	// alone add up to more than the SLO: no policy can meet them, so
	// SLO compliance is at most 1 − Infeasible/Requests.
	Infeasible int64 `json:"infeasible"`

	AvgContainers  float64 `json:"avg_containers"`
	PeakContainers float64 `json:"peak_containers"`
	// AvgRunning is the time-averaged number of instances running a
	// request, counting an instance started for a request as running
	// during its cold start (SimFaaS's "running"); AvgIdle is the rest of
	// AvgContainers. ColdStartProb is ColdStarts over completed requests.
	AvgRunning    float64       `json:"avg_running"`
	AvgIdle       float64       `json:"avg_idle"`
	ColdStartProb float64       `json:"cold_start_prob"`
	SLO           time.Duration `json:"slo"`
	// WorkFloor is the mean busy cores: the total execution time of every
	// request at every function over this run's simulated span. No policy
	// holds fewer live containers. Bound is the clairvoyant lower bound on
	// mean live containers at 100% SLO compliance over the same span
	// (docs/simulator.md, "The clairvoyant bound"): no policy that meets
	// every request's SLO holds fewer. Both are 0 under Config.NoBound.
	WorkFloor float64 `json:"work_floor"`
	Bound     float64 `json:"bound"`
	// Latency is end to end, against the app SLO (of the synchronous
	// requests, when some are async).
	Latency
	// Async is the async requests' (Config.AsyncShare), against the async
	// deadline; nil when there are none.
	Async *AsyncResult `json:"async,omitempty"`

	// JobsPerContainer is requests served per average live container: the
	// paper's container utilization, measured so that a policy that
	// retires and respawns containers is not penalised for the churn.
	JobsPerContainer float64 `json:"jobs_per_container"`
	EnergyJ          float64 `json:"energy_j"`
	// SimulatedSeconds is the virtual time covered, including the drain of
	// requests still in flight when the trace ends.
	SimulatedSeconds float64 `json:"simulated_s"`
	WallSeconds      float64 `json:"wall_s"`

	Functions  []FunctionResult `json:"functions"`
	LatencyCDF []CDFPoint       `json:"latency_cdf"`
}

// FunctionResult holds the same metrics for one function of the chain. Its
// response times are per stage (queue + cold start + execution at that
// function) and its SLO is the function's share of the app SLO.
type FunctionResult struct {
	Name              string        `json:"name"`
	Requests          int64         `json:"requests"`
	Rejected          int64         `json:"rejected"`
	ColdStarts        int64         `json:"cold_starts"`
	ContainersSpawned int64         `json:"containers_spawned"`
	AvgContainers     float64       `json:"avg_containers"`
	PeakContainers    float64       `json:"peak_containers"`
	WorkFloor         float64       `json:"work_floor"`
	Bound             float64       `json:"bound"`
	SLO               time.Duration `json:"slo"`
	Latency
	JobsPerContainer float64 `json:"jobs_per_container"`
	EnergyJ          float64 `json:"energy_j"`
}

// Latency summarises response times, for a whole run or for one function.
// It is embedded without a JSON name, so its fields sit at the top level.
type Latency struct {
	// SLOCompliance is the fraction (0..1) of requests answered within the
	// SLO.
	SLOCompliance float64 `json:"slo_compliance"`

	P50  time.Duration `json:"p50"`
	P95  time.Duration `json:"p95"`
	P99  time.Duration `json:"p99"`
	P999 time.Duration `json:"p999"`

	// MeanQueue + MeanColdStart + MeanExec is the mean response time.
	MeanQueue     time.Duration `json:"mean_queue"`
	MeanColdStart time.Duration `json:"mean_cold_start"`
	MeanExec      time.Duration `json:"mean_exec"`
}

// CDFPoint is one point of the end-to-end latency CDF.
type CDFPoint struct {
	Millis   float64 `json:"ms"`
	Fraction float64 `json:"fraction"`
}

// AsyncResult is the async requests' share of a run.
type AsyncResult struct {
	Requests int64         `json:"requests"`
	Rejected int64         `json:"rejected"`
	Deadline time.Duration `json:"deadline"`
	Latency
}
