package sim

import "gantry.dev/gantry/pkg/policy"

// Capacity, as the driver contract has it (pkg/policy, rules.go): a start
// the cluster has no room for is held back and granted as room frees, the
// most critical function first; a function takes room from a less
// critical one, an idle container at once, a busy one once its request
// finishes. The live dispatcher does the same with its capacity.

// criticality is function fn's rank (Config.Criticality).
func (e *engine) criticality(fn int32) int {
	if len(e.cfg.Criticality) == 0 {
		return 0
	}
	return e.cfg.Criticality[fn]
}

// makeRoom frees a core for fn from a less critical function: it stops
// the idle container policy.YieldsBefore picks and reports true, or, with
// none idle, drains the busy one it picks and reports false.
func (e *engine) makeRoom(fn int32) bool {
	if !e.anyLessCritical(fn) {
		return false // the usual case, and it spares a scan of every container
	}
	if v := e.victim(fn, csIdle); v >= 0 {
		c := &e.ctrs[v]
		e.fns[c.fn].idle.remove(v, c.node)
		e.kill(v)
		return true
	}
	if v := e.victim(fn, csBusy); v >= 0 {
		e.ctrs[v].draining = true
		e.fns[e.ctrs[v].fn].draining++
	}
	return false
}

// anyLessCritical reports whether some function may give fn its room.
func (e *engine) anyLessCritical(fn int32) bool {
	for f := range e.fns {
		if policy.Preempts(e.criticality(fn), e.criticality(int32(f))) {
			return true
		}
	}
	return false
}

// victim is the container in state st that gives its room up to fn, or -1.
func (e *engine) victim(fn int32, st containerState) int32 {
	best := int32(-1)
	var bestY policy.Yielder
	for i := range e.ctrs {
		c := &e.ctrs[i]
		if c.state != st || c.draining || !policy.Preempts(e.criticality(fn), e.criticality(c.fn)) {
			continue
		}
		y := policy.Yielder{Criticality: e.criticality(c.fn), Idle: policy.Idle{Created: c.seq, FreedSeq: c.freed}}
		if best < 0 || policy.YieldsBefore(y, bestY) {
			best, bestY = int32(i), y
		}
	}
	return best
}

// stopDrained stops a draining container whose request has finished and
// grants its room.
func (e *engine) stopDrained(id int32) {
	c := &e.ctrs[id]
	c.draining = false
	e.fns[c.fn].draining--
	e.kill(id)
	e.grant()
}

// grant hands free room to the functions it held starts back for, in
// policy.GrantsBefore's order (ties to the earlier function of the chain).
func (e *engine) grant() {
	for {
		best := -1
		for f := range e.fns {
			rt := &e.fns[f]
			if rt.want > 0 && (best < 0 || policy.GrantsBefore(e.claim(int32(f)), e.claim(int32(best)))) {
				best = f
			}
		}
		if best < 0 {
			return
		}
		node := e.cl.place(e.now)
		if node < 0 {
			return
		}
		e.fns[best].want--
		e.startOn(int32(best), node)
	}
}

func (e *engine) claim(fn int32) policy.Claim {
	return policy.Claim{Criticality: e.criticality(fn), Queued: e.fns[fn].queue.Len()}
}
