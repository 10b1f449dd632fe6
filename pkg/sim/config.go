// Package sim is a deterministic discrete-event simulator of a serverless
// cluster. It replays a trace against one app, applies the decisions of a
// policy from pkg/policy, and reports SLO compliance, latency percentiles,
// containers and energy. The virtual clock is an int64 nanosecond offset;
// the policy sees it as time.Time so the same policy code can run live.
package sim

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"gantry.dev/gantry/pkg/policy"
	"gantry.dev/gantry/pkg/trace"
	"gantry.dev/gantry/pkg/workload"
)

// Defaults applied by Run when the matching Config field is zero. The
// cluster is the paper's real-system set-up (6 nodes x 48 cores, 192 GB)
// and the cold start Fifer's simulator constant (1.5 s); the idle
// timeout, window, tick and queue bound are the policy core's, which the
// live dispatcher runs with too.
const (
	DefaultNodes             = 6
	DefaultCoresPerNode      = 48
	DefaultMemoryPerNodeMB   = 192 * 1024
	DefaultContainerMemoryMB = 2048
	DefaultColdStart         = 1500 * time.Millisecond
	DefaultIdleTimeout       = policy.DefaultIdleTimeout
	DefaultWindow            = policy.DefaultWindow
	DefaultTick              = policy.DefaultTick
	DefaultMaxQueue          = policy.DefaultMaxQueue
)

// Bounds on the cluster a Config may describe, checked before anything is
// allocated (the trace's bounds are trace.MaxRate, MaxDuration and
// MaxRequests).
const (
	MaxNodes        = 100_000
	MaxCoresPerNode = 4096
	MaxColdStart    = time.Hour
	MaxQueueBound   = policy.MaxQueueBound
	MaxKeepAlive    = 24 * time.Hour
)

// ColdStartDists lists the cold-start distributions (Config.ColdStartDist):
// const, exp (exponential), uniform on (0, 2·mean], and lognormal with a
// coefficient of variation of 1.
func ColdStartDists() []string { return []string{"const", "exp", "uniform", "lognormal"} }

var (
	// ErrBadConfig is returned for a Config that cannot be simulated.
	ErrBadConfig = errors.New("sim: invalid config")
	// ErrInvariant is returned when the engine detects a broken internal
	// invariant (a request completing twice, a lost request). It indicates
	// a bug, never bad input.
	ErrInvariant = errors.New("sim: internal invariant broken")
	// ErrNoRequests is returned for a run in which no request arrived (a
	// rate too small for the trace's length): there is nothing to report,
	// and 0% compliance would read as a result.
	ErrNoRequests = errors.New("sim: no request arrived in the trace; raise the rate or the duration")
	// ErrColdStartDist marks an unknown cold-start distribution, or one
	// the policy cannot plan with.
	ErrColdStartDist = errors.New("bad cold-start distribution")
	// ErrKeepAlive marks a keep-alive out of range, or one the policy
	// would ignore.
	ErrKeepAlive = errors.New("bad keep-alive")
	// ErrColdStartTooLong marks a cold start at least as long as the trace.
	ErrColdStartTooLong = errors.New("cold start too long for the trace")
)

// Config describes one simulation run.
type Config struct {
	App   workload.App
	Dist  workload.Distribution
	Trace trace.Trace
	// Policy is one of policy.Names(). Custom, when set, is used instead;
	// it lets tests and experiments plug in a policy that has no name.
	Policy string
	Custom policy.Policy
	Seed   uint64

	Nodes, CoresPerNode int
	MemoryPerNodeMB     int
	ContainerMemoryMB   int

	// ColdStart, IdleTimeout and Window default to 1.5 s, 10 min and 10 s.
	// Tick is how often the policy's reactive part runs (default 500 ms).
	ColdStart, IdleTimeout, Window, Tick time.Duration

	// MaxQueue bounds each function's waiting requests (default
	// DefaultMaxQueue, at most MaxQueueBound; negative means unbounded). A
	// request that arrives at a full queue is rejected and counted in
	// Result.Rejected, as the live gateway answers 429; it counts against
	// SLO compliance.
	MaxQueue int

	// Scale bounds each function's instances, in chain order (empty: no
	// bounds), as a stack file's min_scale and max_scale do live: a plan
	// never retires below Min and always restores it, and no start goes
	// above Max (0: no ceiling).
	Scale []ScaleBounds
	// Criticality ranks the functions, in chain order (empty: all 0), as
	// a stack file's criticality does live: when the cluster is full, a
	// function takes room from a less critical one (policy.Preempts).
	Criticality []int

	// ColdStartDist is the distribution of each container's cold start,
	// with mean ColdStart: ColdStartDists() ("" is "const"). Under a
	// distribution other than const, the work floor and the clairvoyant
	// bound (which assume every start takes ColdStart) are not computed
	// and the oracle is refused.
	ColdStartDist string

	// KeepAlive, when positive, replaces policy.CommercialKeepAlive for a
	// policy with an exact keep-alive (commercial); it is refused for the
	// others, which would ignore it.
	KeepAlive time.Duration

	// SLOTarget is the share of requests the SLO must hold for, in
	// (0, 1) (0: policy.DefaultSLOTarget): gantry sizes for it
	// (policy.Spec.SLOTarget).
	SLOTarget float64

	// PredictedHeadroom and PredictedLead change what oracle-predicted is
	// told of the rate, to sweep the online frontier (slocurve.Frontier):
	// each second's expected rate becomes the highest within the next
	// PredictedLead, times 1 + PredictedHeadroom (a negative headroom
	// under-sizes, to find where it crosses a target). They are refused for
	// every other policy, which never reads the expected rate.
	PredictedHeadroom float64
	PredictedLead     time.Duration

	// ColdBoot starts the cluster empty. By default every function starts
	// with warm containers for the trace's initial load (see prewarm), so
	// results are not dominated by everyone's cold start at time zero.
	ColdBoot bool

	// AsyncShare is the fraction of arrivals that are async (0..1): each
	// has AsyncDeadline (default policy.DefaultAsyncDeadline) for the
	// whole chain instead of the app SLO (policy.AsyncBudget, Enter), as
	// the live gateway's /async-function requests do. Result.Latency
	// counts the synchronous ones, Result.Async the async ones.
	AsyncShare    float64
	AsyncDeadline time.Duration

	// NoBound skips computing Result.WorkFloor and Result.Bound (a second
	// pass over the realised requests).
	NoBound bool

	// Progress, when set, is called after every window of simulated time.
	Progress func(simulated, total time.Duration)
	// OnComplete, when set, is called once per finished request with its
	// id (0, 1, 2, ... in arrival order) and end-to-end response time.
	OnComplete func(id int64, response time.Duration)
}

func (c *Config) applyDefaults() {
	setDefault(&c.Nodes, DefaultNodes)
	setDefault(&c.CoresPerNode, DefaultCoresPerNode)
	setDefault(&c.MemoryPerNodeMB, DefaultMemoryPerNodeMB)
	setDefault(&c.ContainerMemoryMB, DefaultContainerMemoryMB)
	setDefault(&c.ColdStart, DefaultColdStart)
	setDefault(&c.IdleTimeout, DefaultIdleTimeout)
	setDefault(&c.Window, DefaultWindow)
	setDefault(&c.Tick, DefaultTick)
	setDefault(&c.MaxQueue, DefaultMaxQueue)
	setDefault(&c.AsyncDeadline, policy.DefaultAsyncDeadline)
}

func setDefault[T int | time.Duration](v *T, def T) {
	if *v == 0 {
		*v = def
	}
}

func (c *Config) validate() error {
	switch {
	case len(c.App.Chain) == 0:
		return fmt.Errorf("%w: app %q has no functions", ErrBadConfig, c.App.Name)
	case c.App.SLO <= 0:
		return fmt.Errorf("%w: app SLO %v must be positive", ErrBadConfig, c.App.SLO)
	case !(c.App.MinSize > 0) || c.App.MaxSize < c.App.MinSize:
		return fmt.Errorf("%w: size range [%v, %v] must be positive and ordered", ErrBadConfig, c.App.MinSize, c.App.MaxSize)
	case c.Dist == nil:
		return fmt.Errorf("%w: no input-size distribution", ErrBadConfig)
	case c.Custom == nil && c.Policy == "":
		return fmt.Errorf("%w: no policy", ErrBadConfig)
	}
	if err := c.Trace.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrBadConfig, err)
	}
	if err := c.validateAsync(); err != nil {
		return err
	}
	if !(c.SLOTarget >= 0 && c.SLOTarget < 1) {
		return fmt.Errorf("%w: SLO target %v must be in (0, 1), or 0 for the default", ErrBadConfig, c.SLOTarget)
	}
	// A run lasts until its last request completes, so with a cold start
	// as long as the trace each policy's span would be set by its own
	// cold starts, and mean live containers (container-time over span)
	// would not compare across policies.
	if d := c.Trace.Duration(); c.ColdStart >= d {
		return fmt.Errorf("%w: %w: cold start %v must be shorter than the trace (%v)", ErrBadConfig, ErrColdStartTooLong, c.ColdStart, d)
	}
	if err := c.validateScale(); err != nil {
		return err
	}
	if err := c.validateColdStart(); err != nil {
		return err
	}
	return c.validateCluster()
}

// validateColdStart checks the cold-start distribution and the keep-alive
// against the policy that would have to honour them.
func (c *Config) validateColdStart() error {
	if c.ColdStartDist != "" && !slices.Contains(ColdStartDists(), c.ColdStartDist) {
		return fmt.Errorf("%w: %w %q (known: %v)", ErrBadConfig, ErrColdStartDist, c.ColdStartDist, ColdStartDists())
	}
	if c.randomColdStart() && c.Custom == nil && IsOracle(c.Policy) {
		return fmt.Errorf("%w: %w: the oracle plans with a constant cold start; cold-start distribution %q", ErrBadConfig, ErrColdStartDist, c.ColdStartDist)
	}
	if err := c.validatePredicted(); err != nil {
		return err
	}
	if c.KeepAlive < 0 || c.KeepAlive > MaxKeepAlive {
		return fmt.Errorf("%w: %w: %v must be in [0, %v]", ErrBadConfig, ErrKeepAlive, c.KeepAlive, MaxKeepAlive)
	}
	if c.KeepAlive > 0 && c.Custom == nil {
		if caps, err := policy.CapsFor(c.Policy); err == nil && caps.Instances.KeepAlive <= 0 {
			return fmt.Errorf("%w: %w: policy %s has no fixed keep-alive (only commercial has)", ErrBadConfig, ErrKeepAlive, c.Policy)
		}
	}
	return nil
}

// randomColdStart reports whether cold starts are drawn from a
// distribution rather than all equal to ColdStart.
func (c *Config) randomColdStart() bool { return c.ColdStartDist != "" && c.ColdStartDist != "const" }

// ScaleBounds are one function's least and most instances.
type ScaleBounds struct{ Min, Max int }

func (c *Config) validateScale() error {
	if len(c.Scale) != 0 && len(c.Scale) != len(c.App.Chain) {
		return fmt.Errorf("%w: %d scale bounds for %d functions", ErrBadConfig, len(c.Scale), len(c.App.Chain))
	}
	if len(c.Criticality) != 0 && len(c.Criticality) != len(c.App.Chain) {
		return fmt.Errorf("%w: %d criticalities for %d functions", ErrBadConfig, len(c.Criticality), len(c.App.Chain))
	}
	for i, b := range c.Scale {
		if b.Min < 0 || b.Max < 0 || (b.Max > 0 && b.Max < b.Min) {
			return fmt.Errorf("%w: function %d: scale bounds [%d, %d]", ErrBadConfig, i, b.Min, b.Max)
		}
	}
	return nil
}

func (c *Config) validateCluster() error {
	for _, v := range []struct {
		name string
		val  int64
	}{
		{"nodes", int64(c.Nodes)}, {"cores per node", int64(c.CoresPerNode)},
		{"memory per node", int64(c.MemoryPerNodeMB)}, {"container memory", int64(c.ContainerMemoryMB)},
		{"cold start", int64(c.ColdStart)}, {"idle timeout", int64(c.IdleTimeout)},
		{"window", int64(c.Window)}, {"tick", int64(c.Tick)},
	} {
		if v.val < 0 {
			return fmt.Errorf("%w: %s must not be negative", ErrBadConfig, v.name)
		}
	}
	switch {
	case c.Nodes > MaxNodes || c.CoresPerNode > MaxCoresPerNode:
		return fmt.Errorf("%w: %d nodes x %d cores is beyond the bounds (%d nodes, %d cores per node)", ErrBadConfig, c.Nodes, c.CoresPerNode, MaxNodes, MaxCoresPerNode)
	case c.ColdStart > MaxColdStart:
		return fmt.Errorf("%w: cold start %v is longer than %v", ErrBadConfig, c.ColdStart, MaxColdStart)
	case c.MaxQueue > MaxQueueBound:
		return fmt.Errorf("%w: queue bound %d is above %d", ErrBadConfig, c.MaxQueue, MaxQueueBound)
	}
	if c.ContainerMemoryMB > c.MemoryPerNodeMB {
		return fmt.Errorf("%w: a %d MB container does not fit a %d MB node", ErrBadConfig, c.ContainerMemoryMB, c.MemoryPerNodeMB)
	}
	return nil
}

// Bounds of the rate oracle-predicted is told (Config.PredictedHeadroom,
// Config.PredictedLead).
const (
	MinPredictedHeadroom = -0.9
	MaxPredictedHeadroom = 10.0
	MaxPredictedLead     = time.Minute
	predictedPolicy      = "oracle-predicted"
)

// ErrPredicted marks a predicted-rate headroom or lead out of range, or
// given to a policy that does not read the expected rate.
var ErrPredicted = errors.New("bad predicted-rate headroom or lead")

func (c *Config) validatePredicted() error {
	switch {
	case !(c.PredictedHeadroom >= MinPredictedHeadroom && c.PredictedHeadroom <= MaxPredictedHeadroom):
		return fmt.Errorf("%w: %w: headroom %v must be in [%v, %v]", ErrBadConfig, ErrPredicted, c.PredictedHeadroom, MinPredictedHeadroom, MaxPredictedHeadroom)
	case c.PredictedLead < 0 || c.PredictedLead > MaxPredictedLead:
		return fmt.Errorf("%w: %w: lead %v must be in [0, %v]", ErrBadConfig, ErrPredicted, c.PredictedLead, MaxPredictedLead)
	case (c.PredictedHeadroom != 0 || c.PredictedLead > 0) && (c.Custom != nil || c.Policy != predictedPolicy):
		return fmt.Errorf("%w: %w: only %s reads the expected rate, not %s", ErrBadConfig, ErrPredicted, predictedPolicy, c.Policy)
	}
	return nil
}
