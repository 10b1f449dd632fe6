package dispatch

import (
	"slices"
	"time"

	"gantry.dev/gantry/pkg/policy"
)

// group is the set of functions one policy instance decides for: an app's
// chain, or a lone function.
type group struct {
	name string
	slo  time.Duration
	// declaredSLO is the app's own SLO; 0 means the sum of its functions'.
	declaredSLO time.Duration
	chain       []*function
	pol         policy.Policy
	// con is the driver contract for pol: its capabilities and the rules
	// of driving it, the same as the simulator's.
	con   *policy.Contract
	views []policy.View
	decs  []policy.Decision
	// cum[i] is the SLO budget up to and including function i.
	cum []time.Duration
}

// budget is function i's own share of the group's SLO.
func (g *group) budget(i int) time.Duration {
	if i == 0 {
		return g.cum[0]
	}
	return g.cum[i] - g.cum[i-1]
}

// coldStart is the cold start the policy plans new instances with: the
// longest of its functions' expected ones.
func (g *group) coldStart() time.Duration {
	var longest time.Duration
	for _, f := range g.chain {
		longest = max(longest, f.coldStart.Value())
	}
	return longest
}

// lockedNewGroup builds the group and policy for a chain without
// touching the chain's functions or the dispatcher, so that a policy that
// refuses the spec leaves everything as it was. slo 0 means the sum of
// the functions' SLOs, which policy.SplitSLO shares out by their declared
// ones.
func (d *Dispatcher) lockedNewGroup(chain []*function, name string, slo time.Duration) (*group, error) {
	var sum time.Duration
	weights := make([]float64, len(chain))
	for i, fn := range chain {
		sum += fn.decl.SLO
		weights[i] = float64(fn.decl.SLO)
	}
	declared := slo
	if slo <= 0 {
		slo = sum
	}
	share, cum := policy.SplitSLO(slo, weights)
	g := &group{name: name, slo: slo, declaredSLO: declared, chain: chain, views: make([]policy.View, len(chain)),
		decs: make([]policy.Decision, len(chain)), cum: cum}
	spec := policy.Spec{App: name, AppSLO: slo, Window: d.cfg.Window, Start: d.cfg.Now(), Seed: d.cfg.Seed, Tick: d.cfg.Tick,
		MinSize: chain[0].decl.MinSize, MaxSize: chain[0].decl.MaxSize, ColdStart: g.coldStart()}
	for i, fn := range chain {
		spec.Functions = append(spec.Functions, policy.FunctionSpec{Name: fn.decl.Ref(), SLO: share[i],
			SizeSensitive: fn.decl.SizeSensitive})
		// The strictest target a function of the chain declares.
		spec.SLOTarget = max(spec.SLOTarget, fn.decl.SLOTarget/100)
	}
	if spec.SLOTarget == 0 {
		spec.SLOTarget = d.cfg.SLOTarget
	}
	pol, err := d.cfg.NewPolicy(d.cfg.Policy, spec)
	if err != nil {
		return nil, err
	}
	if g.con, err = policy.NewContract(pol, support); err != nil {
		return nil, err
	}
	g.pol = pol
	return g, nil
}

// lockedJoin puts g's functions in it and g among the groups the tick
// plans. A function's queue is kept while requests wait in it, so they
// keep their place.
func (d *Dispatcher) lockedJoin(g *group) {
	for i, fn := range g.chain {
		fn.g, fn.idx = g, i
		if fn.queue == nil || fn.queue.Len() == 0 {
			fn.queue = policy.NewRunQueue[*call](g.pol.Order(), policy.RoundLen(d.cfg.Tick, g.budget(i)))
		}
	}
	d.groups = append(d.groups, g)
}

// lockedLeave takes g out of the groups the tick plans.
func (d *Dispatcher) lockedLeave(g *group) {
	d.groups = slices.DeleteFunc(d.groups, func(x *group) bool { return x == g })
}
