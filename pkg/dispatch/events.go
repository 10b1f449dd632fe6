package dispatch

// The backend's reports: an instance ready, a start failed, an instance
// gone.

import (
	"maps"
	"slices"
	"time"

	"gantry.dev/gantry/pkg/backend"
)

// events receives the backend's reports.
type events struct{ d *Dispatcher }

func (e events) Ready(inst backend.Instance) {
	d := e.d
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.cfg.Now()
	fn, ok := d.fns[inst.Function]
	if !d.peers.Decides() {
		d.lockedAdopt(fn, inst, now)
		return
	}
	if !ok || d.closed || len(fn.startingAt) == 0 {
		d.live--
		d.be.Stop(inst)
		return
	}
	d.lockedAdvance(now)
	fn.startingAt = fn.startingAt[1:]
	fn.loop.Ready(now)
	d.lockedMeasuredColdStart(fn, inst.ColdStart)
	fn.stats.Ready++
	fn.stats.ColdStartSum += inst.ColdStart
	in := &instance{Instance: inst, fn: fn, slots: d.peers.Slots(inst.ID, fn.decl.Concurrency), idleSince: now}
	d.seq += 2
	in.created, in.freedSeq = d.seq-1, d.seq
	fn.ready = append(fn.ready, in)
	d.byID[inst.ID] = in
	d.lockedRunBound(in, now)
	d.lockedFeed(in, now)
	d.peers.Changed(Locked{d}, fn.decl.Ref())
}

// lockedRunBound gives a new instance to the request waiting longest for
// an instance of its own (a dedicated policy), before the queue.
func (d *Dispatcher) lockedRunBound(in *instance, now time.Time) {
	fn := in.fn
	if len(fn.bound) == 0 || in.free() <= 0 {
		return
	}
	c := fn.bound[0]
	fn.bound = fn.bound[1:]
	d.lockedRun(c, in, now)
}

// lockedUnbind queues, when starts failed, the requests waiting for an
// instance of their own beyond the starts still pending, so that none
// waits for a start that will not come.
func (d *Dispatcher) lockedUnbind(fn *function) {
	for len(fn.bound) > len(fn.startingAt) {
		c := fn.bound[len(fn.bound)-1]
		fn.bound = fn.bound[:len(fn.bound)-1]
		fn.queue.Push(c.entry, c)
	}
}

// lockedAdopt takes, on a replica that does not decide, an instance the
// backend reports: the replica that decides started it, and says how many
// of its slots this one may use.
func (d *Dispatcher) lockedAdopt(fn *function, inst backend.Instance, now time.Time) {
	if d.closed || d.byID[inst.ID] != nil {
		return
	}
	if fn == nil {
		d.lockedKeepEarly(inst)
		return
	}
	d.lockedAdvance(now)
	d.live++
	fn.stats.Ready++
	in := &instance{Instance: inst, fn: fn, slots: d.peers.Slots(inst.ID, fn.decl.Concurrency), idleSince: now}
	d.seq += 2
	in.created, in.freedSeq = d.seq-1, d.seq
	fn.ready = append(fn.ready, in)
	d.byID[inst.ID] = in
	d.lockedFeed(in, now)
}

// maxEarly bounds the instances kept for functions not registered yet.
const maxEarly = 4096

// lockedKeepEarly keeps an instance reported before its function was
// registered. The backend reports each instance once, so dropping it
// would leave this replica without it for good: every request it takes
// for the function would wait in its queue with no instance to run on.
func (d *Dispatcher) lockedKeepEarly(inst backend.Instance) {
	n := 0
	for _, m := range d.early {
		n += len(m)
	}
	if n >= maxEarly {
		d.cfg.Logger.Warn("instance reported for a function not registered; too many such, not kept",
			"function", inst.Function, "instance", inst.ID, "kept", n)
		return
	}
	m := d.early[inst.Function]
	if m == nil {
		m = map[string]backend.Instance{}
		d.early[inst.Function] = m
	}
	m[inst.ID] = inst
}

// lockedAdoptEarly adopts the instances reported for fn before it was
// registered, in ID order.
func (d *Dispatcher) lockedAdoptEarly(fn *function, now time.Time) {
	ref := fn.decl.Ref()
	m := d.early[ref]
	delete(d.early, ref)
	for _, id := range slices.Sorted(maps.Keys(m)) {
		d.lockedAdopt(fn, m[id], now)
	}
}

func (e events) Failed(function string, err error) {
	d := e.d
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.cfg.Now()
	d.lockedAdvance(now)
	d.live--
	fn, ok := d.fns[function]
	if ok && len(fn.startingAt) > 0 {
		fn.startingAt = fn.startingAt[1:]
		fn.stats.StartFailures++
		d.cfg.Logger.Warn("instance failed to start", "function", function, "err", err)
		d.lockedFailure(fn, err, true, now)
	}
	if !d.closed {
		d.lockedGrant(now)
		if ok {
			d.lockedRestart(now)
		}
	}
}

func (e events) Exited(inst backend.Instance, err error) {
	d := e.d
	d.mu.Lock()
	defer d.mu.Unlock()
	in, ok := d.byID[inst.ID]
	if !ok {
		if m := d.early[inst.Function]; m != nil {
			delete(m, inst.ID)
			if len(m) == 0 {
				delete(d.early, inst.Function)
			}
		}
		return
	}
	delete(d.byID, inst.ID)
	if in.gone || d.closed {
		return
	}
	now := d.cfg.Now()
	d.lockedAdvance(now)
	in.gone = true
	fn := in.fn
	fn.ready = slices.DeleteFunc(fn.ready, func(x *instance) bool { return x == in })
	d.live--
	if !d.peers.Decides() && err == nil {
		fn.stats.Stopped++ // the replica that decides retired it
		return
	}
	fn.stats.Crashes++
	d.cfg.Logger.Warn("instance exited", "instance", inst.ID, "err", err)
	if d.peers.Decides() && d.fns[fn.decl.Ref()] == fn {
		d.lockedFailure(fn, err, false, now)
	}
	if !d.closed {
		d.lockedGrant(now)
		d.lockedEnsureProgress(fn, now)
	}
}
