package policy

import (
	"fmt"
	"sort"
	"time"
)

// PlanStep is a change in a clairvoyant plan's live containers for one
// function: from At (an offset from Spec.Start) on, Live containers.
type PlanStep struct {
	At   time.Duration
	Live int
}

// Waker is implemented by policies that need Plan called at instants of
// their own choosing besides the regular ticks (the clairvoyant oracle,
// which starts each container exactly one cold start before it is
// needed). NextWake returns the next such instant after now, if any.
type Waker interface {
	NextWake(now time.Time) (time.Time, bool)
}

// oracle is the constructive clairvoyant policy: it follows a plan that
// was made knowing every future arrival, input size and execution time
// (Truth.Planned, built by the driver; docs/simulator.md). It holds
// exactly the plan's live containers, waking at each change of the plan,
// and runs queues least slack first. It is an achievable upper bound on
// the fewest containers; pkg/bound's lower bound sits below it.
type oracle struct {
	spec  Spec
	plans [][]PlanStep
	next  []int // per function, the index of the first step after the last call
}

func newOracle(spec Spec) (*oracle, error) {
	if len(spec.Functions) == 0 {
		return nil, fmt.Errorf("%w: no functions", ErrBadSpec)
	}
	if spec.Truth == nil || len(spec.Truth.Planned) != len(spec.Functions) {
		return nil, fmt.Errorf("%w: the oracle needs Truth.Planned for every function", ErrBadSpec)
	}
	return &oracle{spec: spec, plans: spec.Truth.Planned, next: make([]int, len(spec.Functions))}, nil
}

func (*oracle) Name() string { return "oracle" }
func (*oracle) Order() Order { return LeastSlack }
func (*oracle) Caps() Caps   { return oracleCaps }

// Estimate is the true mean execution time when the driver gave it.
func (o *oracle) Estimate(fn int, size float64) time.Duration {
	if t := o.spec.Truth; t.ExecMean != nil {
		return t.ExecMean(fn, size)
	}
	return o.spec.Functions[fn].SLO / 2
}

func (o *oracle) Arrive(_ time.Time, _ int, _ float64, c Counts) int {
	if c.Live == 0 && c.Queued > 0 {
		return 1
	}
	return 0
}

// Complete learns nothing (the oracle knows the models); it still rejects
// what no policy accepts.
func (o *oracle) Complete(fn int, size float64, exec time.Duration, output float64) error {
	if fn < 0 || fn >= len(o.plans) {
		return fmt.Errorf("%w: function %d of %d", ErrBadSpec, fn, len(o.plans))
	}
	return checkSample(size, exec, output)
}

// planned is the plan's live containers for fn at offset d.
func (o *oracle) planned(fn int, d time.Duration) int {
	p := o.plans[fn]
	i := o.next[fn]
	if i > 0 && p[i-1].At > d {
		i = sort.Search(len(p), func(k int) bool { return p[k].At > d })
	}
	for i < len(p) && p[i].At <= d {
		i++
	}
	o.next[fn] = i
	if i == 0 {
		return 0
	}
	return p[i-1].Live
}

func (o *oracle) Plan(now time.Time, views []View, out []Decision) {
	d := now.Sub(o.spec.Start)
	for fn := range out {
		want := o.planned(fn, d)
		v := &views[fn]
		out[fn] = Decision{Add: max(0, want-v.Live), Retire: max(0, min(v.Idle, v.Live-want))}
	}
}

// NextWake is the plan's next change after now.
func (o *oracle) NextWake(now time.Time) (time.Time, bool) {
	d := now.Sub(o.spec.Start)
	var best time.Duration
	found := false
	for fn, p := range o.plans {
		i := o.next[fn]
		for i < len(p) && p[i].At <= d {
			i++
		}
		if i < len(p) && (!found || p[i].At < best) {
			best, found = p[i].At, true
		}
	}
	return o.spec.Start.Add(best), found
}
