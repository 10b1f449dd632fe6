package liverun

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image/color"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"gantry.dev/gantry/pkg/policy"
	"gantry.dev/gantry/pkg/sim"
	"gantry.dev/gantry/pkg/trace"
	"gantry.dev/gantry/pkg/workload"
)

// The rule a comparison is judged by (Judge): the live platform, its mean
// over the live runs, agrees with the simulator's expectation, its mean
// over SimSeeds seeds, when mean live instances are within
// InstancesTolerance of it relatively and SLO compliance within
// SLOPointsTolerance percentage points. Compliance is judged in points, not
// relatively: near 100% a relative 10% would accept 90% against 99.9%.
const (
	InstancesTolerance = 0.10
	SLOPointsTolerance = 0.5
)

// ToleranceRule states the rule in words, as the reports print it.
var ToleranceRule = fmt.Sprintf("within tolerance: the live mean over the runs is within %.0f%% (relative) of the simulator's expected "+
	"mean live instances and within %.1f percentage points of its expected SLO compliance", 100*InstancesTolerance, SLOPointsTolerance)

// judgeSlack absorbs the rounding of the differences, so that a figure
// exactly at a bound (11 against 10 instances) is within on every machine.
const judgeSlack = 1e-9

// Verdict is the rule applied to one live figure against one simulated.
type Verdict struct {
	// InstancesRelDiff is (live − sim) / sim of mean live instances; nil
	// (JSON null) when only the simulator's is 0.
	InstancesRelDiff *float64 `json:"instances_rel_diff"`
	// SLOPointsDiff is live − sim SLO compliance in percentage points.
	SLOPointsDiff float64 `json:"slo_points_diff"`
	Within        bool    `json:"within_tolerance"`
}

// Judge applies the tolerance rule to live against sim.
func Judge(live, sim Side) Verdict {
	v := Verdict{InstancesRelDiff: rel(live.AvgContainers, sim.AvgContainers),
		SLOPointsDiff: 100 * (live.SLOCompliance - sim.SLOCompliance)}
	v.Within = v.InstancesRelDiff != nil && math.Abs(*v.InstancesRelDiff) <= InstancesTolerance+judgeSlack &&
		math.Abs(v.SLOPointsDiff) <= SLOPointsTolerance+judgeSlack
	return v
}

// OracleRefusal is why a comparison does not run the oracle.
const OracleRefusal = "the oracle is clairvoyant (it plans from the trace's future requests), a plan the live gateway cannot honour"

// LivePolicies are the policies a comparison runs: every named policy and
// gantry's ablations, but the oracle, whose plan is clairvoyant (it is
// computed from the trace's future requests), which the live gateway,
// seeing requests only as they come, cannot honour.
func LivePolicies() []string {
	return slices.DeleteFunc(append(policy.Names(), policy.Ablations()...), func(p string) bool { return p == "oracle" })
}

// DefaultSimSeeds is how many seeds the simulator's expectation is taken
// over. At a few requests per second one run's mean live instances vary by
// 10-20% from seed to seed (the panic rule and the first window's sizing
// act on counts of a few requests), so one draw against another says
// little; the mean over 20 seeds is within a few percent of the expectation.
const DefaultSimSeeds = 20

// DefaultCompareCapacity bounds the instances on both sides: above the
// simulator's peak at a few requests per second (at most 48 for gantry on
// email-categorization at 10/s over 40 seeds, BenchmarkSimSeedSpread), and
// low enough that a storm of process starts cannot take a 2-core machine
// down (see docs/platform.md, "Simulator against live").
const DefaultCompareCapacity = 64

// CompareConfig is one comparison of the live platform with the simulator.
type CompareConfig struct {
	// Config is the live run. Compare sets Replay and turns the warm-up
	// off (both sides cold-boot); Stack must be left nil. Capacity bounds
	// the instances on both sides: the live dispatcher's capacity, and a
	// simulated cluster of one node with that many cores. 0 leaves both
	// unbounded (the simulator's default cluster of 288 cores).
	Config
	// Runs is how many live runs, with seeds Seed, Seed+1, ..., are
	// averaged (default 1). The simulator runs the same seeds.
	Runs int
	// SimSeeds is how many seeds, from Seed on, the simulator's
	// expectation and spread are taken over (default DefaultSimSeeds, at
	// least Runs).
	SimSeeds int
}

// Comparison is the live platform and the simulator side by side.
type Comparison struct {
	App          string  `json:"app"`
	Policy       string  `json:"policy"`
	Trace        string  `json:"trace"`
	Dist         string  `json:"dist"`
	Rate         float64 `json:"rate"`
	DurationS    float64 `json:"duration_s"`
	Seed         uint64  `json:"seed"`
	Runs         int     `json:"runs"`
	SLOMs        float64 `json:"slo_ms"`
	StartDelayMs float64 `json:"start_delay_ms"`
	TickMs       float64 `json:"tick_ms"`
	WindowS      float64 `json:"window_s"`
	IdleTimeoutS float64 `json:"idle_timeout_s"`
	// Start says how both sides begin.
	Start string `json:"start"`

	// Live is the mean over the live runs, LiveRuns each run.
	Live     Side   `json:"live"`
	LiveRuns []Side `json:"live_runs"`
	// LiveMaxStep is, per live run, the largest rise of live instances
	// between two samples 250 ms apart: a scale-up far above the
	// simulator's peak marks a burst of starts the simulator did not make.
	LiveMaxStep []int `json:"live_max_step"`
	// Sim is the simulator's mean over the live runs' seeds.
	Sim Side `json:"sim"`
	// Diff is (live − sim) / sim for each figure.
	Diff Diff `json:"diff"`

	// SimExpected is the simulator over SimSeeds seeds: what one run's
	// figures are expected to be and how much they vary from draw to draw.
	SimExpected Spread `json:"sim_expected"`
	// DiffExpected is (live − expected) / expected.
	DiffExpected Diff `json:"diff_expected"`

	// Within, InstancesRelDiff and SLOPointsDiff are Judge's verdict on
	// Live against SimExpected.Mean (Rule says it in words).
	Within           bool     `json:"within_tolerance"`
	InstancesRelDiff *float64 `json:"instances_rel_diff"`
	SLOPointsDiff    float64  `json:"slo_points_diff"`
	Rule             string   `json:"tolerance_rule"`
	// SameSeeds is the same rule against Sim, the simulator on the live
	// runs' seeds: one draw against another, for information.
	SameSeeds Verdict `json:"same_seeds"`
	// Z is (live − expected) in standard errors of a mean of Runs
	// simulated runs: within ±2 the difference is what arrival draws
	// alone produce.
	Z ZScores `json:"z"`

	// What the difference may come from, measured.
	ColdStart ColdStartStats `json:"cold_start"`
	// OverheadMs is the median per-request cost the simulator does not
	// model (HTTP hops, dispatch, timer lateness), from calibration.
	OverheadMs float64 `json:"overhead_ms"`
	// LoadOffsetMs runs from the policy's start (its window and tick
	// origin) to the load's first instant, the largest over the runs; the
	// simulator's is 0.
	LoadOffsetMs float64 `json:"load_offset_ms"`
	// LoadAvg is the machine's 1-minute load average before and after.
	LoadAvg [2]float64 `json:"load_avg"`
	// Capacity is the bound on instances on both sides (0: none).
	Capacity int `json:"capacity"`
	// LiveErrorsByKind sums the live runs' errors by kind.
	LiveErrorsByKind map[string]int64 `json:"live_errors_by_kind"`
	// SimSpawnFailures is the simulator's mean starts refused at the
	// capacity, over its seeds.
	SimSpawnFailures float64 `json:"sim_spawn_failures"`
	// ExcessMs is how much longer the live median response is than the
	// simulator's expected one (0 if it is not): at the median few
	// requests wait, so this is mostly per-request cost the simulator
	// lacks, which on a busy machine far exceeds OverheadMs (CPU waits of
	// the gateway, the instances and their timers).
	ExcessMs float64 `json:"excess_ms"`
	// SimExcess is the simulator's expectation with ExcessMs spread evenly
	// over the chain's execution times: how much of the difference in the
	// other figures that excess accounts for.
	SimExcess Side `json:"sim_with_excess"`

	Functions []FunctionSide `json:"functions"`

	last *Report // the last live run, for its plots
}

// Side is one driver's figures; for several runs, their mean.
type Side struct {
	Requests          float64 `json:"requests"`
	Errors            float64 `json:"errors"`
	AvgContainers     float64 `json:"avg_containers"`
	ContainersSpawned float64 `json:"containers_spawned"`
	SLOCompliance     float64 `json:"slo_compliance"`
	P50Ms             float64 `json:"p50_ms"`
	P99Ms             float64 `json:"p99_ms"`
}

// fields lists a Side's figures so that runs can be aggregated figure by
// figure.
func (s *Side) fields() []*float64 {
	return []*float64{&s.Requests, &s.Errors, &s.AvgContainers, &s.ContainersSpawned, &s.SLOCompliance, &s.P50Ms, &s.P99Ms}
}

// Diff holds relative differences, live against sim; nil (JSON null)
// where the simulator's figure is 0 and the ratio has no value.
type Diff struct {
	AvgContainers     *float64 `json:"avg_containers"`
	ContainersSpawned *float64 `json:"containers_spawned"`
	SLOCompliance     *float64 `json:"slo_compliance"`
	P50               *float64 `json:"p50"`
	P99               *float64 `json:"p99"`
}

// Spread is the simulator's figures over seeds.
type Spread struct {
	Seeds int  `json:"seeds"`
	Mean  Side `json:"mean"`
	SD    Side `json:"sd"`
	Min   Side `json:"min"`
	Max   Side `json:"max"`
}

// ZScores are standardized differences; nil where the simulator's figure
// does not vary.
type ZScores struct {
	AvgContainers *float64 `json:"avg_containers"`
	SLOCompliance *float64 `json:"slo_compliance"`
}

// ColdStartStats describes the live instances' spawn-to-ready.
type ColdStartStats struct {
	// N instances became ready during the measured phases; MeanMs is the
	// simulator's ColdStart.
	N      int     `json:"n"`
	MeanMs float64 `json:"mean_ms"`
	SDMs   float64 `json:"sd_ms"`
	MinMs  float64 `json:"min_ms"`
	MaxMs  float64 `json:"max_ms"`
	// PlannedMs is what the live policy planned with (calibration).
	PlannedMs float64 `json:"planned_ms"`
}

// FunctionSide is one function's instances spawned on each side, means
// over the runs.
type FunctionSide struct {
	Name        string  `json:"name"`
	SLOMs       float64 `json:"slo_ms"`
	LiveSpawned float64 `json:"live_spawned"`
	SimSpawned  float64 `json:"sim_spawned"`
}

// ErrInterrupted is returned when the context ends before the live runs do.
var ErrInterrupted = errors.New("interrupted before the live runs ended; nothing to compare")

// MaxRuns bounds Runs and SimSeeds.
const MaxRuns = 100

func (c *CompareConfig) prepare() error {
	switch {
	case c.Capacity < 0:
		return fmt.Errorf("%w: capacity %d must not be negative", ErrBadConfig, c.Capacity)
	case c.Policy == "oracle":
		return fmt.Errorf("%w: %s", ErrBadConfig, OracleRefusal)
	case c.Runs < 0 || c.Runs > MaxRuns || c.SimSeeds < 0 || c.SimSeeds > MaxRuns:
		return fmt.Errorf("%w: runs %d and sim seeds %d must be in [1, %d]", ErrBadConfig, c.Runs, c.SimSeeds, MaxRuns)
	}
	c.Replay = true
	// Both sides cold-boot: see docs/platform.md, "Simulator against live".
	c.Warmup = -1
	// The core's defaults, passed explicitly to both drivers so that they
	// are equal by construction.
	c.Tick = orDefault(c.Tick, policy.DefaultTick)
	c.Window = orDefault(c.Window, policy.DefaultWindow)
	c.IdleTimeout = orDefault(c.IdleTimeout, policy.DefaultIdleTimeout)
	c.Runs = max(c.Runs, 1)
	if c.SimSeeds == 0 {
		c.SimSeeds = DefaultSimSeeds
	}
	// A multiple of Runs, so that every live run's trace weighs the same
	// in the expectation (traceSeed).
	c.SimSeeds = (max(c.SimSeeds, c.Runs) + c.Runs - 1) / c.Runs * c.Runs
	return nil
}

func orDefault(v, def time.Duration) time.Duration {
	if v == 0 {
		return def
	}
	return v
}

// Compare runs app in replay mode on the live platform Runs times, then the
// simulator on the same trace with the live runs' measured mean cold start
// and the dispatcher's tick, window and idle timeout, and sets them side by
// side.
func Compare(ctx context.Context, cc CompareConfig) (*Comparison, error) {
	if err := cc.prepare(); err != nil {
		return nil, err
	}
	cfg := cc.Config
	cfg.defaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	model, err := workload.Lookup(cfg.App)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadConfig, err)
	}
	if !slices.Contains(LivePolicies(), cfg.Policy) {
		return nil, fmt.Errorf("%w: %w %q (known: %v)", ErrBadConfig, policy.ErrUnknownPolicy, cfg.Policy, LivePolicies())
	}
	c := &Comparison{App: cfg.App, Policy: cfg.Policy, Trace: cfg.Trace, Dist: cfg.Dist, Rate: cfg.Rate,
		DurationS: cfg.Duration.Seconds(), Seed: cfg.Seed, Runs: cc.Runs, SLOMs: millis(model.SLO),
		StartDelayMs: millis(cfg.StartDelay), TickMs: millis(cfg.Tick), WindowS: cfg.Window.Seconds(),
		IdleTimeoutS: cfg.IdleTimeout.Seconds(), Start: "cold boot on both sides: no instance, no policy history",
		Capacity: cfg.Capacity, LiveErrorsByKind: map[string]int64{}, Functions: make([]FunctionSide, len(model.Chain))}
	c.LoadAvg[0] = loadAvg()
	var colds []time.Duration
	var planned, overhead []time.Duration
	for i := range cc.Runs {
		run := liveRun(cfg, i)
		if cfg.Progress != nil && cc.Runs > 1 {
			run.Progress = func(p Progress) {
				p.Phase = fmt.Sprintf("%s %d/%d", p.Phase, i+1, cc.Runs)
				cfg.Progress(p)
			}
		}
		rep, err := Run(ctx, run)
		if err != nil {
			return nil, err
		}
		if rep.Interrupted || ctx.Err() != nil {
			return nil, ErrInterrupted
		}
		facts := rep.replay
		colds = append(colds, facts.coldStarts...)
		planned = append(planned, facts.calib.ColdStart)
		overhead = append(overhead, facts.calib.Overhead)
		c.LoadOffsetMs = max(c.LoadOffsetMs, millis(facts.loadOffset))
		c.LiveRuns = append(c.LiveRuns, Side{Requests: float64(rep.Requests), Errors: float64(rep.Errors),
			AvgContainers: rep.AvgContainers, ContainersSpawned: float64(rep.ContainersSpawned),
			SLOCompliance: rep.SLOCompliance, P50Ms: rep.P50Ms, P99Ms: rep.P99Ms})
		for j, f := range rep.Functions {
			c.Functions[j].LiveSpawned += float64(f.Spawned) / float64(cc.Runs)
		}
		c.LiveMaxStep = append(c.LiveMaxStep, maxStep(rep.live))
		for k, n := range rep.ErrorsByKind {
			c.LiveErrorsByKind[k] += n
		}
		c.last = rep
	}
	c.LoadAvg[1] = loadAvg()
	if cfg.Progress != nil {
		cfg.Progress(Progress{Phase: "simulate"})
	}
	c.ColdStart = coldStartStats(colds, meanDuration(planned))
	c.OverheadMs = millis(meanDuration(overhead))
	coldStart := time.Duration(c.ColdStart.MeanMs * float64(time.Millisecond))
	c.Live = spread(c.LiveRuns).Mean

	var sims []Side
	for s := range cc.SimSeeds {
		res, err := simulate(cfg, model, coldStart, traceSeed(cfg.Seed, s, cc.Runs), cfg.Seed+uint64(s))
		if err != nil {
			return nil, err
		}
		sims = append(sims, simSide(res))
		c.SimSpawnFailures += float64(res.SpawnFailures) / float64(cc.SimSeeds)
		if s < cc.Runs {
			for j, f := range res.Functions {
				c.Functions[j].Name, c.Functions[j].SLOMs = f.Name, millis(f.SLO)
				c.Functions[j].SimSpawned += float64(f.ContainersSpawned) / float64(cc.Runs)
			}
		}
	}
	c.Sim = spread(sims[:cc.Runs]).Mean
	c.SimExpected = spread(sims)
	c.judge()
	c.ExcessMs = max(0, c.Live.P50Ms-c.SimExpected.Mean.P50Ms)
	excess := time.Duration(c.ExcessMs * float64(time.Millisecond) / float64(len(model.Chain)))
	var withExcess []Side
	for s := range cc.SimSeeds {
		res, err := simulate(cfg, withOverhead(model, excess), coldStart, traceSeed(cfg.Seed, s, cc.Runs), cfg.Seed+uint64(s))
		if err != nil {
			return nil, err
		}
		withExcess = append(withExcess, simSide(res))
	}
	c.SimExcess = spread(withExcess).Mean
	return c, nil
}

// judge sets the differences and verdicts from Live, Sim and SimExpected.
func (c *Comparison) judge() {
	c.Diff = diff(c.Live, c.Sim)
	c.DiffExpected = diff(c.Live, c.SimExpected.Mean)
	v := Judge(c.Live, c.SimExpected.Mean)
	c.Within, c.InstancesRelDiff, c.SLOPointsDiff, c.Rule = v.Within, v.InstancesRelDiff, v.SLOPointsDiff, ToleranceRule
	c.SameSeeds = Judge(c.Live, c.Sim)
	se := func(sd float64) float64 { return sd / math.Sqrt(float64(max(c.Runs, 1))) }
	c.Z = ZScores{AvgContainers: ratio(c.Live.AvgContainers-c.SimExpected.Mean.AvgContainers, se(c.SimExpected.SD.AvgContainers)),
		SLOCompliance: ratio(c.Live.SLOCompliance-c.SimExpected.Mean.SLOCompliance, se(c.SimExpected.SD.SLOCompliance))}
}

// liveRun is the configuration of live run i: seed Seed+i, which seeds its
// trace (trace.Generate in plan.load), its arrivals, its sizes and its
// policy.
func liveRun(cfg Config, i int) Config {
	cfg.Seed += uint64(i)
	return cfg
}

// traceSeed is the seed of the trace the simulator's seed number s
// replays: live run s mod runs's. A wiki or twitter trace's shape (its
// phase, its bursts) depends on the seed, so this is what makes the
// simulator replay the per-second rates the live runs replayed, the same
// ones for the same seeds, and each live run's equally often in the
// expectation when SimSeeds is a multiple of Runs. A Poisson trace is the
// same flat rate under every seed.
func traceSeed(base uint64, s, runs int) uint64 { return base + uint64(s%max(runs, 1)) }

// maxStep is the largest rise between consecutive samples.
func maxStep(pts []LivePoint) int {
	step := 0
	for i := 1; i < len(pts); i++ {
		step = max(step, pts[i].Live-pts[i-1].Live)
	}
	return step
}

func diff(live, sim Side) Diff {
	return Diff{AvgContainers: rel(live.AvgContainers, sim.AvgContainers),
		ContainersSpawned: rel(live.ContainersSpawned, sim.ContainersSpawned),
		SLOCompliance:     rel(live.SLOCompliance, sim.SLOCompliance),
		P50:               rel(live.P50Ms, sim.P50Ms), P99: rel(live.P99Ms, sim.P99Ms)}
}

// spread aggregates runs figure by figure (the percentiles are averaged
// per run, not pooled).
func spread(xs []Side) Spread {
	out := Spread{Seeds: len(xs)}
	mean, sd, lo, hi := out.Mean.fields(), out.SD.fields(), out.Min.fields(), out.Max.fields()
	for k := range mean {
		*lo[k], *hi[k] = math.Inf(1), math.Inf(-1)
	}
	n := float64(len(xs))
	for _, x := range xs {
		for k, v := range x.fields() {
			*mean[k] += *v / n
			*lo[k], *hi[k] = min(*lo[k], *v), max(*hi[k], *v)
		}
	}
	for _, x := range xs {
		for k, v := range x.fields() {
			d := *v - *mean[k]
			*sd[k] += d * d / n
		}
	}
	for k := range sd {
		*sd[k] = math.Sqrt(*sd[k])
	}
	return out
}

func meanDuration(xs []time.Duration) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	var sum time.Duration
	for _, x := range xs {
		sum += x
	}
	return sum / time.Duration(len(xs))
}

// simulate runs the simulator as a live run ran: the same trace (the
// generator, rate and length of the live measured phase, generated with
// traceSeed), size distribution and policy, a cold boot, and the
// dispatcher's timings; seed draws the arrivals, the sizes and the policy.
func simulate(cfg Config, model workload.App, coldStart time.Duration, traceSeed, seed uint64) (sim.Result, error) {
	dist, err := workload.LookupDist(cfg.Dist)
	if err != nil {
		return sim.Result{}, fmt.Errorf("%w: %v", ErrBadConfig, err)
	}
	tr, err := trace.Generate(cfg.Trace, cfg.Rate, cfg.Duration, traceSeed)
	if err != nil {
		return sim.Result{}, fmt.Errorf("%w: %v", ErrBadConfig, err)
	}
	sc := sim.Config{App: model, Dist: dist, Trace: tr, Policy: cfg.Policy, Seed: seed,
		ColdStart: coldStart, Tick: cfg.Tick, Window: cfg.Window, IdleTimeout: cfg.IdleTimeout, ColdBoot: true}
	if cfg.Capacity > 0 {
		// One node with a core per instance the live platform may hold:
		// the simulator refuses a start past it as the dispatcher holds
		// one back, and both retry as instances go.
		sc.Nodes, sc.CoresPerNode = 1, cfg.Capacity
		sc.ContainerMemoryMB = sim.DefaultContainerMemoryMB
		sc.MemoryPerNodeMB = cfg.Capacity * sim.DefaultContainerMemoryMB
	}
	return sim.Run(sc)
}

// withOverhead adds d to every function's mean execution time. The app's
// SLO is kept; the simulator's SLO split moves by d's share, which is
// negligible next to executions of tens of milliseconds and up.
func withOverhead(app workload.App, d time.Duration) workload.App {
	app.Chain = slices.Clone(app.Chain)
	for i := range app.Chain {
		mean := app.Chain[i].ExecMean
		app.Chain[i].ExecMean = func(size float64) time.Duration { return mean(size) + d }
	}
	return app
}

func simSide(r sim.Result) Side {
	return Side{Requests: float64(r.Requests), AvgContainers: r.AvgContainers, ContainersSpawned: float64(r.ContainersSpawned),
		SLOCompliance: r.SLOCompliance, P50Ms: millis(r.P50), P99Ms: millis(r.P99)}
}

func coldStartStats(xs []time.Duration, planned time.Duration) ColdStartStats {
	s := ColdStartStats{N: len(xs), PlannedMs: millis(planned)}
	if len(xs) == 0 {
		// No instance started in the measured phase: the calibration's
		// is the only measurement there is.
		s.MeanMs, s.MinMs, s.MaxMs = s.PlannedMs, s.PlannedMs, s.PlannedMs
		return s
	}
	var sum, sq float64
	s.MinMs, s.MaxMs = math.Inf(1), 0
	for _, x := range xs {
		v := millis(x)
		sum += v
		sq += v * v
		s.MinMs, s.MaxMs = min(s.MinMs, v), max(s.MaxMs, v)
	}
	n := float64(len(xs))
	s.MeanMs = sum / n
	s.SDMs = math.Sqrt(max(0, sq/n-s.MeanMs*s.MeanMs))
	return s
}

// rel is (a − b) / b: 0 when both are 0, nil when only b is.
func rel(a, b float64) *float64 {
	v := 0.0
	switch {
	case b != 0:
		v = (a - b) / b
	case a != 0:
		return nil
	}
	return &v
}

// ratio is a / b, nil when b is 0.
func ratio(a, b float64) *float64 {
	if b == 0 {
		return nil
	}
	v := a / b
	return &v
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// loadAvg is the 1-minute load average, 0 where /proc is missing.
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// WriteJSON prints the comparison as one JSON object.
func (c *Comparison) WriteJSON(w io.Writer) error {
	return writeJSON(w, c)
}

// WriteText prints the markdown report.
func (c *Comparison) WriteText(w io.Writer) error {
	_, err := io.WriteString(w, c.markdown())
	return err
}

func (c *Comparison) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Simulator against live: %s under %s\n\n", c.App, c.Policy)
	seeds := fmt.Sprintf("seed %d", c.Seed)
	if c.Runs > 1 {
		seeds = fmt.Sprintf("seeds %d-%d", c.Seed, c.Seed+uint64(c.Runs)-1)
	}
	bound := "no bound on instances"
	if c.Capacity > 0 {
		bound = fmt.Sprintf("at most %d instances", c.Capacity)
	}
	fmt.Fprintf(&b, "Trace %s at %g requests/s for %.0f s, %s input sizes, %s (%d live run(s)); SLO %.0f ms; start delay %.0f ms; "+
		"tick %.0f ms, window %.0f s, idle timeout %.0f s and %s on both sides; %s.\n\n",
		c.Trace, c.Rate, c.DurationS, c.Dist, seeds, c.Runs, c.SLOMs, c.StartDelayMs, c.TickMs, c.WindowS, c.IdleTimeoutS, bound, c.Start)
	e := c.SimExpected
	fmt.Fprintf(&b, "| figure | live | sim, same seeds | live vs sim | sim over %d seeds: mean ± sd (range) | live vs that mean | sim + %.1f ms excess |\n"+
		"|---|--:|--:|--:|--:|--:|--:|\n", e.Seeds, c.ExcessMs)
	type row struct {
		name                        string
		live, sim, mean, sd, lo, hi float64
		over                        float64
		diff, diffE                 *float64
		scale                       float64
		format                      string
		// points shows the differences as live − sim in percentage
		// points instead of relatively.
		points bool
	}
	rows := []row{
		{"mean live instances", c.Live.AvgContainers, c.Sim.AvgContainers, e.Mean.AvgContainers, e.SD.AvgContainers, e.Min.AvgContainers, e.Max.AvgContainers, c.SimExcess.AvgContainers, c.Diff.AvgContainers, c.DiffExpected.AvgContainers, 1, "%.2f", false},
		{"instances spawned", c.Live.ContainersSpawned, c.Sim.ContainersSpawned, e.Mean.ContainersSpawned, e.SD.ContainersSpawned, e.Min.ContainersSpawned, e.Max.ContainersSpawned, c.SimExcess.ContainersSpawned, c.Diff.ContainersSpawned, c.DiffExpected.ContainersSpawned, 1, "%.1f", false},
		{"SLO compliance (%)", c.Live.SLOCompliance, c.Sim.SLOCompliance, e.Mean.SLOCompliance, e.SD.SLOCompliance, e.Min.SLOCompliance, e.Max.SLOCompliance, c.SimExcess.SLOCompliance, c.Diff.SLOCompliance, c.DiffExpected.SLOCompliance, 100, "%.2f", true},
		{"p50 (ms)", c.Live.P50Ms, c.Sim.P50Ms, e.Mean.P50Ms, e.SD.P50Ms, e.Min.P50Ms, e.Max.P50Ms, c.SimExcess.P50Ms, c.Diff.P50, c.DiffExpected.P50, 1, "%.1f", false},
		{"p99 (ms)", c.Live.P99Ms, c.Sim.P99Ms, e.Mean.P99Ms, e.SD.P99Ms, e.Min.P99Ms, e.Max.P99Ms, c.SimExcess.P99Ms, c.Diff.P99, c.DiffExpected.P99, 1, "%.1f", false},
		{"requests", c.Live.Requests, c.Sim.Requests, e.Mean.Requests, e.SD.Requests, e.Min.Requests, e.Max.Requests, c.SimExcess.Requests, nil, nil, 1, "%.0f", false},
	}
	for _, r := range rows {
		f, k := r.format, r.scale
		d, dE := pct(r.diff), pct(r.diffE)
		if r.points {
			d, dE = points(100*(r.live-r.sim)), points(100*(r.live-r.mean))
		}
		fmt.Fprintf(&b, "| %s | "+f+" | "+f+" | %s | "+f+" ± "+f+" ("+f+"–"+f+") | %s | "+f+" |\n",
			r.name, k*r.live, k*r.sim, d, k*r.mean, k*r.sd, k*r.lo, k*r.hi, dE, k*r.over)
	}
	fmt.Fprintf(&b, "| live errors | %.0f%s | | | | | |\n\n", c.Live.Errors*float64(c.Runs), errorKinds(c.LiveErrorsByKind))
	b.WriteString(c.verdictText())
	if c.Runs > 1 {
		fmt.Fprintf(&b, "| live run | seed | mean live instances | spawned | largest rise in 250 ms | SLO compliance | p50 | p99 |\n|--:|--:|--:|--:|--:|--:|--:|--:|\n")
		for i, r := range c.LiveRuns {
			fmt.Fprintf(&b, "| %d | %d | %.2f | %.0f | %d | %.2f%% | %.1f ms | %.1f ms |\n", i+1, c.Seed+uint64(i), r.AvgContainers, r.ContainersSpawned,
				c.LiveMaxStep[i], 100*r.SLOCompliance, r.P50Ms, r.P99Ms)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "| function | SLO budget | spawned live | spawned sim, same seeds |\n|---|--:|--:|--:|\n")
	for _, f := range c.Functions {
		fmt.Fprintf(&b, "| %s | %.1f ms | %.1f | %.1f |\n", f.Name, f.SLOMs, f.LiveSpawned, f.SimSpawned)
	}
	cs := c.ColdStart
	fmt.Fprintf(&b, "\nWhere a difference can come from, measured:\n\n")
	fmt.Fprintf(&b, "- cold start (spawn to ready, %d instances): mean %.0f ms (the simulator's), sd %.0f ms, %.0f–%.0f ms; the live policy planned with %.0f ms (calibration)\n",
		cs.N, cs.MeanMs, cs.SDMs, cs.MinMs, cs.MaxMs, cs.PlannedMs)
	fmt.Fprintf(&b, "- per-request cost the simulator does not model (HTTP, dispatch, timer lateness): %.2f ms on an idle platform (median of %d calibration requests); "+
		"during the run the live median response was %.1f ms longer than the simulator's expected one, and the last column adds that to the simulator's executions\n",
		c.OverheadMs, calibrateRequests, c.ExcessMs)
	fmt.Fprintf(&b, "- the load started at most %.1f ms after the policy's clock; both sides plan first at 0 (the live autoscaler at its deployment), then every %.0f ms\n",
		c.LoadOffsetMs, c.TickMs)
	fmt.Fprintf(&b, "- machine load average (1 min): %.2f before, %.2f after\n", c.LoadAvg[0], c.LoadAvg[1])
	if c.Capacity > 0 {
		fmt.Fprintf(&b, "- both sides held at most %d instances; the simulator refused %.1f starts per run at that bound\n", c.Capacity, c.SimSpawnFailures)
	}
	return b.String()
}

// verdictText states the tolerance rule and how the comparison fares
// under it.
func (c *Comparison) verdictText() string {
	yes := map[bool]string{true: "yes", false: "no"}
	return fmt.Sprintf("**Within tolerance: %s.** Against the simulator's expectation (its mean over %d seeds), the live mean over %d run(s) "+
		"differs by %s in mean live instances (bound ±%.0f%%) and by %s in SLO compliance (bound ±%.1f points). "+
		"The rule: %s. Against the simulator on the same seeds (one draw against another, for information): %s and %s, %s. "+
		"The live mean's distance from the expectation is %s (mean live instances) and %s (SLO compliance) standard errors.\n\n",
		yes[c.Within], c.SimExpected.Seeds, c.Runs, pct(c.InstancesRelDiff), 100*InstancesTolerance, points(c.SLOPointsDiff), SLOPointsTolerance,
		ToleranceRule, pct(c.SameSeeds.InstancesRelDiff), points(c.SameSeeds.SLOPointsDiff), inOut(c.SameSeeds.Within),
		zText(c.Z.AvgContainers), zText(c.Z.SLOCompliance))
}

func points(v float64) string { return fmt.Sprintf("%+.2f points", v) }

// errorKinds lists errors by kind, " (kind n, ...)", or nothing.
func errorKinds(m map[string]int64) string {
	if len(m) == 0 {
		return ""
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

func inOut(in bool) string {
	if in {
		return "within"
	}
	return "outside"
}

func zText(z *float64) string {
	if z == nil {
		return "n/a"
	}
	return fmt.Sprintf("%+.1f", *z)
}

func pct(v *float64) string {
	if v == nil {
		return "n/a"
	}
	return fmt.Sprintf("%+.1f%%", 100**v)
}

// WriteDir writes report.md, comparison.json, bars.png and the last live
// run's latency.png and instances.png.
func (c *Comparison) WriteDir(dir string) error {
	md := c.markdown() + "\n![live against sim](bars.png)\n\n![live latency](latency.png)\n\n![live instances](instances.png)\n"
	if err := writeReportFiles(dir, "report.md", md, "comparison.json", c); err != nil {
		return err
	}
	if err := c.plotBars(filepath.Join(dir, "bars.png")); err != nil {
		return err
	}
	if c.last != nil && c.last.load != nil {
		return c.last.writePlots(dir)
	}
	return nil
}

// plotBars draws each figure as a percentage of the simulator's mean over
// its seeds, for the simulator on the live runs' seeds and for the live
// platform, with mean live instances' tolerance band (dashed), so figures
// of different units share one axis.
func (c *Comparison) plotBars(path string) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s under %s (100%% = simulator's mean over %d seeds)", c.App, c.Policy, c.SimExpected.Seeds)
	p.Y.Label.Text = fmt.Sprintf("%% of the simulator's mean (dashed: ±%.0f%%)", 100*InstancesTolerance)
	names := []string{"mean live", "spawned", "SLO compliance", "p50", "p99"}
	pick := func(s Side) []float64 {
		return []float64{s.AvgContainers, s.ContainersSpawned, s.SLOCompliance, s.P50Ms, s.P99Ms}
	}
	base := pick(c.SimExpected.Mean)
	series := []struct {
		label string
		vals  []float64
		col   color.Color
	}{
		{fmt.Sprintf("sim, %d seeds", c.SimExpected.Seeds), base, color.RGBA{R: 170, G: 170, B: 170, A: 255}},
		{"sim, same seeds", pick(c.Sim), color.RGBA{R: 90, G: 90, B: 90, A: 255}},
		{"live", pick(c.Live), color.RGBA{R: 40, G: 110, B: 200, A: 255}},
	}
	w := vg.Points(14)
	top := 150.0 // room for the legend above the bars
	for i, s := range series {
		vals := make(plotter.Values, len(names))
		for k := range names {
			if base[k] > 0 {
				vals[k] = 100 * s.vals[k] / base[k]
			}
			top = max(top, 1.15*vals[k])
		}
		bars, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return err
		}
		bars.Color = s.col
		bars.Offset = vg.Length(i-1) * w
		p.Add(bars)
		p.Legend.Add(s.label, bars)
	}
	for _, y := range []float64{100 * (1 - InstancesTolerance), 100 * (1 + InstancesTolerance)} {
		l, err := plotter.NewLine(plotter.XYs{{X: -0.5, Y: y}, {X: float64(len(names)) - 0.5, Y: y}})
		if err != nil {
			return err
		}
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		l.Color = color.RGBA{R: 200, A: 255}
		p.Add(l)
	}
	p.Legend.Top = true
	p.NominalX(names...)
	p.Y.Min, p.Y.Max = 0, top
	p.Add(plotter.NewGrid())
	return p.Save(7*vg.Inch, 4*vg.Inch, path)
}

// SummaryRow is one comparison in a summary: the live mean over its runs
// against the simulator's expectation, judged by Judge.
type SummaryRow struct {
	// Dir is the folder the comparison was read from; Error says why
	// there is no comparison in it (the other fields are then zero).
	Dir      string  `json:"dir"`
	Error    string  `json:"error,omitempty"`
	Policy   string  `json:"policy"`
	App      string  `json:"app"`
	Trace    string  `json:"trace"`
	Rate     float64 `json:"rate"`
	Runs     int     `json:"runs"`
	SimSeeds int     `json:"sim_seeds"`
	// SimInstances and SimSLO are the simulator's expectation, the live
	// ones the mean over the runs; SLO compliance is a fraction.
	SimInstances  float64 `json:"sim_instances"`
	LiveInstances float64 `json:"live_instances"`
	SimSLO        float64 `json:"sim_slo_compliance"`
	LiveSLO       float64 `json:"live_slo_compliance"`
	Verdict
	// LiveErrors is the live runs' errors, all runs together.
	LiveErrors float64 `json:"live_errors"`
}

// Summary is every comparison of a set of folders in one table.
type Summary struct {
	Rule   string       `json:"tolerance_rule"`
	Within int          `json:"within"`
	Rows   []SummaryRow `json:"rows"`
}

// Summarize reads comparison.json from each folder and judges each anew
// by the tolerance rule, so that comparisons written before the rule
// changed are judged by the same one. A folder without a readable
// comparison is a row with its Error, so that one failed run does not hide
// the others. Rows are ordered by app, trace and then policy.Names()'s
// order.
func Summarize(dirs []string) *Summary {
	s := &Summary{Rule: ToleranceRule}
	for _, dir := range dirs {
		row := SummaryRow{Dir: dir}
		c, err := readComparison(filepath.Join(dir, "comparison.json"))
		if err != nil {
			row.Error = err.Error()
			s.Rows = append(s.Rows, row)
			continue
		}
		row.Policy, row.App, row.Trace, row.Rate, row.Runs, row.SimSeeds = c.Policy, c.App, c.Trace, c.Rate, c.Runs, c.SimExpected.Seeds
		row.SimInstances, row.LiveInstances = c.SimExpected.Mean.AvgContainers, c.Live.AvgContainers
		row.SimSLO, row.LiveSLO = c.SimExpected.Mean.SLOCompliance, c.Live.SLOCompliance
		row.Verdict = Judge(c.Live, c.SimExpected.Mean)
		row.LiveErrors = c.Live.Errors * float64(c.Runs)
		if row.Within {
			s.Within++
		}
		s.Rows = append(s.Rows, row)
	}
	order := func(p string) int {
		if i := slices.Index(LivePolicies(), p); i >= 0 {
			return i
		}
		return len(LivePolicies())
	}
	slices.SortStableFunc(s.Rows, func(a, b SummaryRow) int {
		return cmp.Or(cmp.Compare(a.App, b.App), cmp.Compare(a.Trace, b.Trace), cmp.Compare(order(a.Policy), order(b.Policy)),
			cmp.Compare(a.Policy, b.Policy))
	})
	return s
}

func readComparison(path string) (*Comparison, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("no comparison.json (the run failed or has not run)")
		}
		return nil, err
	}
	var c Comparison
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("comparison.json: %v", err)
	}
	if c.Policy == "" || c.Runs < 1 || c.SimExpected.Seeds < 1 {
		return nil, fmt.Errorf("comparison.json: not a comparison (no policy, runs or simulator seeds)")
	}
	return &c, nil
}

// WriteJSON prints the summary as one JSON object.
func (s *Summary) WriteJSON(w io.Writer) error {
	return writeJSON(w, s)
}

// WriteText prints the summary's markdown table.
func (s *Summary) WriteText(w io.Writer) error {
	_, err := io.WriteString(w, s.markdown())
	return err
}

func (s *Summary) markdown() string {
	var b strings.Builder
	b.WriteString("# Simulator against live: every policy\n\n")
	fmt.Fprintf(&b, "The live figures are the mean over each comparison's runs, the simulator's its expectation (mean over its seeds); %s.\n\n", s.Rule)
	b.WriteString("| app | trace | rate | policy | runs | sim instances | live instances | relative diff | sim SLO | live SLO | points diff | within_tolerance |\n" +
		"|---|---|--:|---|--:|--:|--:|--:|--:|--:|--:|---|\n")
	for _, r := range s.Rows {
		if r.Error != "" {
			fmt.Fprintf(&b, "| | | | %s | | | | | | | | no result: %s |\n", r.Dir, r.Error)
			continue
		}
		within := map[bool]string{true: "yes", false: "**no**"}[r.Within]
		if r.LiveErrors > 0 {
			within += fmt.Sprintf(" (%.0f live errors)", r.LiveErrors)
		}
		fmt.Fprintf(&b, "| %s | %s | %g/s | %s | %d | %.2f | %.2f | %s | %.2f%% | %.2f%% | %+.2f | %s |\n",
			r.App, r.Trace, r.Rate, r.Policy, r.Runs, r.SimInstances, r.LiveInstances, pct(r.InstancesRelDiff),
			100*r.SimSLO, 100*r.LiveSLO, r.SLOPointsDiff, within)
	}
	fmt.Fprintf(&b, "\n%d of %d within tolerance.\n", s.Within, len(s.Rows))
	return b.String()
}

// WriteDir writes summary.md and summary.json into dir.
func (s *Summary) WriteDir(dir string) error {
	return writeReportFiles(dir, "summary.md", s.markdown(), "summary.json", s)
}
