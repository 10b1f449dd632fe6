package experiment

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"gantry.dev/gantry/pkg/policy"
	"gantry.dev/gantry/pkg/sim"
	"gantry.dev/gantry/pkg/trace"
	"gantry.dev/gantry/pkg/workload"
)

// ErrBadSpec is returned for a single-condition spec that cannot be run.
var ErrBadSpec = errors.New("invalid simulation spec")

// Spec is one condition (app, distribution, trace, cluster) run under
// several policies: what `gantry sim` without --experiment runs.
type Spec struct {
	App, Dist string
	// Trace names a generator; TraceFile, when set, replays a file instead
	// (AzureFunction picks the row of an Azure Functions file).
	Trace, TraceFile, AzureFunction string
	// Rate is the mean request rate. For a replayed file, zero keeps the
	// file's rate.
	Rate float64
	// Peak, when positive, rescales the trace so that its peak is Peak.
	Peak float64
	// Duration is the simulated time; for a file, zero keeps its length.
	Duration            time.Duration
	Policies            []string
	Seed                uint64
	Nodes, CoresPerNode int
	// ColdStart zero means sim's default.
	ColdStart time.Duration
	// MinSize and MaxSize, when non-zero, replace the app's input-size
	// range (and so its SLO).
	MinSize, MaxSize float64
	// MaxQueue is the per-function queue bound; zero means sim's default.
	MaxQueue int
	// ExecDist and ExecMean describe the function of the synthetic app
	// (App workload.SyntheticApp); Dist is then ignored.
	ExecDist string
	ExecMean time.Duration
	// ColdStartDist, KeepAlive and ColdBoot are passed to every run
	// (sim.Config's fields of the same names).
	ColdStartDist string
	KeepAlive     time.Duration
	ColdBoot      bool
	// IdleTimeout, when positive, stops an instance idle this long
	// (sim.Config.IdleTimeout; zero is sim's default), as `gantry serve
	// --idle-timeout` does live.
	IdleTimeout time.Duration
	// SLOTarget is sim.Config.SLOTarget for every run.
	SLOTarget float64
}

// Jobs validates the spec and makes one job per policy.
func (s Spec) Jobs() ([]Job, error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	app, dist, err := s.appAndDist()
	if err != nil {
		return nil, err
	}
	tr, err := s.trace()
	if err != nil {
		return nil, err
	}
	base := sim.Config{App: app, Dist: dist, Trace: tr, Seed: s.Seed,
		Nodes: s.Nodes, CoresPerNode: s.CoresPerNode, ColdStart: s.ColdStart, MaxQueue: s.MaxQueue,
		ColdStartDist: s.ColdStartDist, ColdBoot: s.ColdBoot, IdleTimeout: s.IdleTimeout, SLOTarget: s.SLOTarget}
	jobs := PolicyJobs(base, s.Policies, "", "")
	for i := range jobs {
		// Only the policy with a fixed keep-alive takes one; sim refuses
		// it elsewhere, and the caller asked for it with that policy.
		if caps, err := policy.CapsFor(jobs[i].Config.Policy); err == nil && caps.Instances.KeepAlive > 0 {
			jobs[i].Config.KeepAlive = s.KeepAlive
		}
	}
	return jobs, nil
}

func (s Spec) validate() error {
	switch {
	case s.Nodes <= 0 || s.CoresPerNode <= 0:
		return fmt.Errorf("%w: nodes (%d) and cores per node (%d) must be positive", ErrBadSpec, s.Nodes, s.CoresPerNode)
	case s.ColdStart < 0 || s.IdleTimeout < 0:
		return fmt.Errorf("%w: cold start %v and idle timeout %v must not be negative", ErrBadSpec, s.ColdStart, s.IdleTimeout)
	case bad(s.Rate) || bad(s.Peak):
		return fmt.Errorf("%w: rate %v and peak %v must not be negative", ErrBadSpec, s.Rate, s.Peak)
	case s.Duration < 0:
		return fmt.Errorf("%w: duration %v is negative", ErrBadSpec, s.Duration)
	case s.TraceFile == "" && s.Rate == 0:
		return fmt.Errorf("%w: %w: 0", ErrBadSpec, trace.ErrBadRate)
	}
	return CheckPolicies(s.Policies)
}

func (s Spec) appAndDist() (workload.App, workload.Distribution, error) {
	if s.App == workload.SyntheticApp {
		return workload.Synthetic(s.ExecDist, s.ExecMean)
	}
	app, err := s.app()
	if err != nil {
		return app, nil, err
	}
	dist, err := workload.LookupDist(s.Dist)
	return app, dist, err
}

func (s Spec) app() (workload.App, error) {
	app, err := workload.Lookup(s.App)
	if err != nil || (s.MinSize == 0 && s.MaxSize == 0) {
		return app, err
	}
	lo, hi := app.MinSize, app.MaxSize
	if s.MinSize != 0 {
		lo = s.MinSize
	}
	if s.MaxSize != 0 {
		hi = s.MaxSize
	}
	return app.WithSizeRange(lo, hi)
}

func bad(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) || v < 0 }

func (s Spec) trace() (trace.Trace, error) {
	var tr trace.Trace
	var err error
	if s.TraceFile == "" {
		tr, err = trace.Generate(s.Trace, s.Rate, s.Duration, s.Seed)
	} else {
		tr, err = s.replay()
	}
	if err != nil {
		return trace.Trace{}, err
	}
	if s.Peak > 0 {
		tr = tr.ScaleToPeak(s.Peak)
	}
	return tr, tr.Validate()
}

func (s Spec) replay() (trace.Trace, error) {
	tr, err := trace.ReadFile(s.TraceFile, s.AzureFunction)
	if err != nil {
		return trace.Trace{}, err
	}
	if s.Duration > 0 {
		if s.Duration < time.Second {
			return trace.Trace{}, fmt.Errorf("%w: %v", trace.ErrBadDuration, s.Duration)
		}
		tr = tr.Truncate(s.Duration)
	}
	if s.Rate > 0 && tr.Mean() > 0 {
		tr = tr.Scale(s.Rate / tr.Mean())
	}
	return tr, nil
}

// ParsePolicies reads a comma list of policy names, or "all". Duplicates are
// dropped; order is kept.
func ParsePolicies(list string) ([]string, error) {
	if strings.TrimSpace(list) == "all" {
		return policy.Names(), nil
	}
	var out []string
	for _, p := range strings.Split(list, ",") {
		p = strings.TrimSpace(p)
		if p != "" && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out, CheckPolicies(out)
}

// CheckPolicies reports the first unknown policy name, or an empty list.
// The ablations policy.New accepts are known too, so a single condition
// can compare them; "all" does not include them.
func CheckPolicies(names []string) error {
	if len(names) == 0 {
		return fmt.Errorf("%w: no policies (known: %v)", ErrBadSpec, policy.Names())
	}
	known := slices.Concat(policy.Names(), policy.Ablations(), policy.ChainAblations(), policy.Extras(), sim.OracleAblations())
	for _, n := range names {
		if !slices.Contains(known, n) {
			return fmt.Errorf("%w %q (known: %v, or all)", policy.ErrUnknownPolicy, n, policy.Names())
		}
	}
	return nil
}
