package dispatch

// Capacity and criticality: one more instance fits, or a less critical
// function gives up one of its own, idle ones stopped at once and busy
// ones drained.

import (
	"slices"
	"time"

	"gantry.dev/gantry/pkg/policy"
)

// lockedTakeCapacity reports whether one more instance of fn fits. When the
// machine is full it makes room from less critical functions: an idle
// instance is stopped at once (and the room is fn's); a busy one is
// drained so that it stops after its current request, and the room it
// frees goes to the most critical function waiting (lockedGrant).
func (d *Dispatcher) lockedTakeCapacity(fn *function, now time.Time) bool {
	if d.cfg.Capacity == 0 || d.live < d.cfg.Capacity {
		d.lockedReserve(now)
		return true
	}
	if victim := d.lockedVictim(fn, true); victim != nil {
		d.lockedStop(victim, now)
		d.lockedReserve(now)
		return true
	}
	if victim := d.lockedVictim(fn, false); victim != nil {
		d.lockedDrain(victim)
	}
	return false
}

// lockedReserve counts one more live instance against the capacity.
func (d *Dispatcher) lockedReserve(now time.Time) {
	d.lockedAdvance(now)
	d.live++
}

// lockedVictim finds the instance that gives its room up to fn
// (policy.Preempts, policy.YieldsBefore), among idle ones or busy ones.
func (d *Dispatcher) lockedVictim(fn *function, idle bool) *instance {
	var best *instance
	for _, other := range d.fns {
		if !policy.Preempts(fn.decl.Criticality, other.decl.Criticality) {
			continue
		}
		for _, in := range other.ready {
			if in.draining || d.lockedIdle(in) != idle {
				continue
			}
			if best == nil || policy.YieldsBefore(in.yielder(), best.yielder()) {
				best = in
			}
		}
	}
	return best
}

func (in *instance) yielder() policy.Yielder {
	return policy.Yielder{Criticality: in.fn.decl.Criticality, Idle: in.order()}
}

// lockedStop takes an instance out of service and stops it.
func (d *Dispatcher) lockedStop(in *instance, now time.Time) {
	if in.gone {
		return
	}
	d.lockedAdvance(now)
	in.gone = true
	fn := in.fn
	fn.ready = slices.DeleteFunc(fn.ready, func(x *instance) bool { return x == in })
	d.live--
	fn.stats.Stopped++
	d.be.Stop(in.Instance)
}

// lockedReplace takes an unhealthy instance out of rotation, starts its
// replacement if requests wait (policy.Apply's stranded rule: with other
// instances serving, the next plan decides) and only then stops it.
func (d *Dispatcher) lockedReplace(in *instance, now time.Time) {
	if d.lockedOutOfRotation(in, now) {
		d.be.Stop(in.Instance)
	}
}

// lockedReplaceHung is lockedReplace for an instance that hung on one
// request: the other requests it runs may be healthy, and are let finish
// (each bounded by its timeout) before it stops, rather than cut (a 502
// each).
func (d *Dispatcher) lockedReplaceHung(in *instance, now time.Time) {
	if !d.lockedOutOfRotation(in, now) {
		return
	}
	if len(in.running) > 0 {
		in.stopWhenIdle = true
		return
	}
	d.be.Stop(in.Instance)
}

// lockedOutOfRotation takes an instance out of service for good and starts
// its replacement if requests wait; false if it was out already.
func (d *Dispatcher) lockedOutOfRotation(in *instance, now time.Time) bool {
	if in.gone {
		return false
	}
	d.lockedAdvance(now)
	in.gone = true
	fn := in.fn
	fn.ready = slices.DeleteFunc(fn.ready, func(x *instance) bool { return x == in })
	d.live--
	fn.stats.Replaced++
	d.lockedGrant(now)
	d.lockedEnsureProgress(fn, now)
	return true
}

// lockedDrain stops an instance after its current requests.
func (d *Dispatcher) lockedDrain(in *instance) {
	in.draining = true
	if d.lockedDrained(in) {
		d.lockedStop(in, d.cfg.Now())
	}
}

// lockedDrained reports a draining instance that may stop now: nothing
// runs on it here or elsewhere, and no other replica holds a slot on it.
func (d *Dispatcher) lockedDrained(in *instance) bool {
	return in.draining && d.lockedIdle(in) && !d.peers.Holds(in.fn.decl.Ref(), in.ID)
}
