package policy

import (
	"math"
	"time"

	"gantry.dev/gantry/pkg/batch"
)

// decide combines the proactive target with the reactive rule for one
// function. Containers an earlier call at this instant started that the
// view does not show (sameInstant) are not started again.
func (c *core) decide(f int, now time.Time, views []View, window bool, surge float64) Decision {
	v := &views[f]
	var d Decision
	switch c.p.react {
	case reactPerRequest:
		d.Add = max(0, v.Queued-v.Starting)
	case reactBottleneck:
		d.Add = c.bottleneck(f, v)
	case reactOverload:
		if c.hasLookAhead() && f > 0 {
			d.Add = c.lookAhead(f, views)
		} else {
			d.Add = c.overload(f, v)
		}
	}
	credit := c.instant.credit(f, v)
	if !c.targetOK {
		d.Add = max(0, d.Add-credit)
		return d
	}
	if c.p.ageRetire {
		return c.decideByAge(f, now, v, d, credit, surge)
	}
	target := c.heldTarget(f, now, surge)
	d.Add = max(d.Add, target-v.Live)
	keep, share := max(target, c.keptTarget(f)), retireShare
	if d, ok := c.dispersion(); ok && c.p.steadyRetire && d < steadyDispersion {
		// Steady load: the keep-alive guards against nothing the
		// load-quantile headroom does not already cover.
		keep, share = target, steadyRetireShare
	}
	if window && d.Add == 0 && v.Queued == 0 && v.Live > keep {
		// Idling detection: shed a share of the excess each window so a
		// brief lull does not throw away containers the next burst needs.
		excess := v.Live - keep
		d.Retire = min(v.Idle, int(math.Ceil(float64(excess)*share)))
	}
	d.Add = max(0, d.Add-credit)
	return d
}

// bottleneck is Fifer's reactive rule: when the longest queueing delay
// passes half the function's SLO, start enough containers for the queue at
// the static batch size.
func (c *core) bottleneck(f int, v *View) int {
	slo := c.fns[f].spec.SLO
	if v.Queued == 0 || v.MaxWait <= slo/2 {
		return 0
	}
	b := batch.StaticBatch(slo, time.Duration(c.meanExec(f)))
	return max(0, (v.Queued+b-1)/b-v.Starting)
}

// overload is Cypress's overload detection with IS batching: queued
// requests are packed first-fit onto the live containers (by when each is
// free); a request that would neither meet its deadline there nor start
// within a cold start gets a new container.
func (c *core) overload(f int, v *View) int {
	if len(v.Queue) == 0 {
		return 0
	}
	c.packer.Reset(v.Free, c.coldStart, len(v.Queue))
	for _, it := range v.Queue {
		c.packer.Place(c.lateItem(it.Exec, c.fns[f].spec.SLO-it.Waited))
	}
	return c.packer.Opened()
}

// lateItem is a request that must finish within deadline; waiting up to a
// cold start is accepted because a new container could not start it sooner.
func (c *core) lateItem(exec, deadline time.Duration) batch.Item {
	return batch.Item{Exec: exec, Deadline: max(deadline, c.coldStart+exec)}
}

// lookAhead is Cypress's Look-Ahead Scaler for a downstream function f: it
// packs f's own queue plus every request still upstream of f, with sizes
// and execution times carried down the chain by chained prediction, so f's
// containers start while those requests are still upstream.
func (c *core) lookAhead(f int, views []View) int {
	c.items = c.items[:0]
	slo := c.fns[f].spec.SLO
	for _, it := range views[f].Queue {
		c.items = append(c.items, c.lateItem(it.Exec, slo-it.Waited))
	}
	for j := range f {
		for _, it := range views[j].Queue {
			c.items = append(c.items, c.upstreamItem(j, f, it.Size, it.Exec))
		}
		for _, it := range views[j].Running {
			c.items = append(c.items, c.upstreamItem(j, f, it.Size, max(0, it.Exec-it.Waited)))
		}
	}
	if len(c.items) == 0 {
		return 0
	}
	c.packer.Reset(views[f].Free, c.coldStart, len(c.items))
	for _, it := range c.items {
		c.packer.Place(it)
	}
	return c.packer.Opened()
}

// upstreamItem is a request at function j < f with left time still to run
// there; it reaches f after that plus the functions in between.
func (c *core) upstreamItem(j, f int, size float64, left time.Duration) batch.Item {
	between, exec := c.chained(j, f, size)
	return c.lateItem(exec, left+between+c.fns[f].spec.SLO)
}

// chained is, for a request of input size at function j, its predicted
// execution time at each function after j and before f, summed, and at f.
// The look-ahead asks it of every request upstream at every arrival, with
// the same models until the next Plan refreshes them, so the answers are
// kept until then (chainMemo); the power-law models' math.Pow was most of
// a simulated chain's cost.
func (c *core) chained(j, f int, size float64) (between, exec time.Duration) {
	k := chainKey{j: int32(j), f: int32(f), size: size}
	if v, ok := c.chainMemo[k]; ok {
		return v.between, v.exec
	}
	size = c.outAt(j, size)
	for m := j + 1; m < f; m++ {
		between += time.Duration(c.execAt(m, size))
		size = c.outAt(m, size)
	}
	exec = time.Duration(c.execAt(f, size))
	if c.chainMemo == nil {
		c.chainMemo = make(map[chainKey]chainVal)
	}
	if len(c.chainMemo) < maxChainMemo {
		c.chainMemo[k] = chainVal{between: between, exec: exec}
	}
	return between, exec
}

// maxChainMemo bounds the predictions kept between two Plans.
const maxChainMemo = 1 << 16

type chainKey struct {
	j, f int32
	size float64
}

type chainVal struct{ between, exec time.Duration }

// decideByAge is the tick under the idle-age retirement: the target is
// the window's SLO sizing, or while a burst's excess is in force the
// sizing at the rate plus that excess (burstResize: the excess adds to
// the rate, not a factor on the whole target); containers below it
// start, idle ones above it past the rent-or-buy age retire.
func (c *core) decideByAge(f int, now time.Time, v *View, d Decision, credit int, surge float64) Decision {
	fs := &c.fns[f]
	target := fs.target
	if c.p.panic {
		target = c.heldTarget(f, now, surge)
	}
	m := fs.mix
	if m <= 0 {
		m = c.meanExec(f) / float64(time.Second)
	}
	if c.burst.excessNow(now) > 0 {
		target = max(target, fs.burstTarget)
	}
	if slo := fs.spec.SLO; v.Queued > 0 && ((v.MaxWait > slo && !c.steadyLoad()) || fs.refused) {
		// A request has waited past its whole SLO, or the full queue
		// refused one: the containers run below the demand, and a full
		// queue hides the refused part of it from the rate the sizing
		// sees. Add the backlog's work, done within one SLO. A late
		// request alone does not count on steady load: there the sizing
		// allows its ε of late requests, which least-slack order sets
		// at the back of the queue, and starting containers for them
		// that the steady-excess rule retires 5 s later tripled the
		// spawns (steady.go). A refusal counts always.
		target += int(math.Ceil(float64(v.Queued) * m / slo.Seconds()))
	}
	fs.refused = false
	d.Add = max(d.Add, target-v.Live)
	steady := 0
	if c.p.steadyExcess {
		steady = c.retireSteadyExcess(f, now, v, target) // keeps its clock whatever is decided
	}
	if d.Add == 0 {
		d.Retire = max(c.retireByAge(v, target), steady, c.retireAtStepEnd(now, v, target))
	}
	d.Add = max(0, d.Add-credit)
	return d
}
