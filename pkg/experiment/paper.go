package experiment

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"gantry.dev/gantry/pkg/policy"
	"gantry.dev/gantry/pkg/sim"
	"gantry.dev/gantry/pkg/trace"
	"gantry.dev/gantry/pkg/workload"
)

// ErrBadPlan is returned for a plan that cannot be run.
var ErrBadPlan = errors.New("invalid experiment plan")

// The paper's set-up (Cypress section 5).
const (
	// PoissonRate is the Poisson trace's mean rate on the real system.
	PoissonRate = 250.0
	// WikiMean is the Wiki trace's mean (peak 331) on the real system.
	WikiMean = 302.0
	// TwitterRealPeak is the Twitter trace's peak on the real system; the
	// simulator scales it up to TwitterLargePeak.
	TwitterRealPeak  = 250.0
	TwitterLargePeak = 5450.0
	// TwitterLargeMean is the large trace's mean from its 5450:3139 ratio.
	TwitterLargeMean = 3139.0

	RealNodes    = 6
	CoresPerNode = 48
	// LargeNodes gives 6384 cores, the paper's "~6.4k core cluster".
	LargeNodes = 133

	// The simulator constants of the paper's set-up (Fifer's): the matrix
	// sets them itself rather than take the core's defaults, which may
	// move for the live platform.
	PaperColdStart   = 1500 * time.Millisecond
	PaperTick        = 500 * time.Millisecond
	PaperWindow      = 10 * time.Second
	PaperIdleTimeout = 10 * time.Minute

	ScaleReal  = "real"
	ScaleLarge = "large"
	// LargeTraceLabel names the large-scale Twitter runs in reports.
	LargeTraceLabel = "twitter-large"
)

// PaperApps and PaperDists are the matrix's axes, in report order.
var (
	PaperApps   = []string{"image-compression", "sentiment-analysis", "email-categorization", "audio-translation", "document-summary"}
	PaperDists  = []string{"heavy", "medial", "light"}
	PaperTraces = []string{"poisson", "wiki", "twitter"}
)

// PaperPlan sizes the paper matrix.
type PaperPlan struct {
	// Duration is the simulated time of each real-scale run, and
	// LargeDuration of each large-scale run.
	Duration, LargeDuration time.Duration
	Seed                    uint64
	Policies                []string
	// ColdStart is passed to every run; zero means PaperColdStart.
	ColdStart time.Duration
	// MaxQueue is every function's queue bound; zero means sim's default.
	MaxQueue int
	// SkipLarge leaves out the large-scale Twitter runs.
	SkipLarge bool
	// ChainAblation adds the figure-2 schemes (No CP, CP; Cypress is
	// CP+LAS) on ChainAblationApp under the stable traces.
	ChainAblation bool
}

// ChainAblationApp is the multi-function app of the paper's figure 2,
// whose later function (text-translate) is where chained prediction
// matters.
const ChainAblationApp = "audio-translation"

// Default durations: chosen so that the whole matrix (420 runs) finishes
// within 10 minutes on 2 cores; docs/experiments.md gives the measurement.
const (
	DefaultPaperDuration      = 10 * time.Minute
	DefaultPaperLargeDuration = 5 * time.Minute
)

// DefaultPaperPlan is what `gantry sim --experiment paper` runs.
func DefaultPaperPlan() PaperPlan {
	return PaperPlan{
		Duration:      DefaultPaperDuration,
		LargeDuration: DefaultPaperLargeDuration,
		Seed:          1,
		Policies:      policy.Names(),
		ChainAblation: true,
	}
}

// PaperJobs expands the plan into jobs: the 5 apps x 3 distributions x
// {Poisson 250 rps, Wiki, Twitter} x policies on 6 x 48 cores, then the same
// apps and distributions under Twitter peaking at 5450 rps on ~6.4k cores.
// Every policy of one condition sees the same seed, so they face the same
// arrivals and input sizes.
func PaperJobs(p PaperPlan) ([]Job, error) {
	if err := p.validate(); err != nil {
		return nil, err
	}
	traces, err := paperTraces(p)
	if err != nil {
		return nil, err
	}
	var jobs []Job
	for _, st := range traces {
		for _, app := range PaperApps {
			for _, dist := range PaperDists {
				more, err := conditionJobs(p, app, dist, st)
				if err != nil {
					return nil, err
				}
				jobs = append(jobs, more...)
			}
		}
	}
	if p.ChainAblation {
		more, err := chainAblationJobs(p, traces)
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, more...)
	}
	return jobs, nil
}

// chainAblationJobs runs the figure-2 schemes other than Cypress itself
// (which the matrix already runs) on the stable traces.
func chainAblationJobs(p PaperPlan, traces []scaledTrace) ([]Job, error) {
	schemes := without(policy.ChainAblations(), "cypress")
	var jobs []Job
	for _, st := range traces {
		if !slices.Contains(stable, st.label) {
			continue
		}
		for _, dist := range PaperDists {
			more, err := conditionJobs(PaperPlan{Seed: p.Seed, ColdStart: p.ColdStart, MaxQueue: p.MaxQueue, Policies: schemes}, ChainAblationApp, dist, st)
			if err != nil {
				return nil, err
			}
			jobs = append(jobs, more...)
		}
	}
	return jobs, nil
}

func (p PaperPlan) validate() error {
	if p.Duration < time.Second || (!p.SkipLarge && p.LargeDuration < time.Second) {
		return fmt.Errorf("%w: durations must be at least 1s (got %v and %v)", ErrBadPlan, p.Duration, p.LargeDuration)
	}
	if len(p.Policies) == 0 {
		return fmt.Errorf("%w: no policies", ErrBadPlan)
	}
	for _, name := range p.Policies {
		if !slices.Contains(slices.Concat(policy.Names(), policy.Ablations(), policy.Extras(), sim.OracleAblations()), name) {
			return fmt.Errorf("%w: %w %q", ErrBadPlan, policy.ErrUnknownPolicy, name)
		}
	}
	return nil
}

// scaledTrace is one trace of the matrix with its cluster.
type scaledTrace struct {
	trace trace.Trace
	label string
	scale string
	nodes int
}

func paperTraces(p PaperPlan) ([]scaledTrace, error) {
	poisson, err := trace.Generate("poisson", PoissonRate, p.Duration, p.Seed)
	if err != nil {
		return nil, err
	}
	wiki, err := trace.Generate("wiki", WikiMean, p.Duration, p.Seed)
	if err != nil {
		return nil, err
	}
	twitter, err := trace.Generate("twitter", TwitterLargeMean, p.Duration, p.Seed)
	if err != nil {
		return nil, err
	}
	out := []scaledTrace{
		{poisson, "poisson", ScaleReal, RealNodes},
		{wiki, "wiki", ScaleReal, RealNodes},
		{twitter.ScaleToPeak(TwitterRealPeak), "twitter", ScaleReal, RealNodes},
	}
	if p.SkipLarge {
		return out, nil
	}
	large, err := trace.Generate("twitter", TwitterLargeMean, p.LargeDuration, p.Seed)
	if err != nil {
		return nil, err
	}
	return append(out, scaledTrace{large.ScaleToPeak(TwitterLargePeak), LargeTraceLabel, ScaleLarge, LargeNodes}), nil
}

func conditionJobs(p PaperPlan, appName, distName string, st scaledTrace) ([]Job, error) {
	app, err := workload.Lookup(appName)
	if err != nil {
		return nil, err
	}
	dist, err := workload.LookupDist(distName)
	if err != nil {
		return nil, err
	}
	cold := p.ColdStart
	if cold == 0 {
		cold = PaperColdStart
	}
	base := sim.Config{
		App: app, Dist: dist, Trace: st.trace, Seed: p.Seed,
		Nodes: st.nodes, CoresPerNode: CoresPerNode, ColdStart: cold, MaxQueue: p.MaxQueue,
		Tick: PaperTick, Window: PaperWindow, IdleTimeout: PaperIdleTimeout,
	}
	return PolicyJobs(base, p.Policies, st.label, st.scale), nil
}

// PolicyJobs makes one job per policy from a base configuration.
func PolicyJobs(base sim.Config, policies []string, traceLabel, scale string) []Job {
	jobs := make([]Job, len(policies))
	for i, name := range policies {
		cfg := base
		cfg.Policy = name
		jobs[i] = Job{Config: cfg, TraceLabel: traceLabel, Scale: scale}
	}
	return jobs
}
