package dispatch

import (
	"context"
	"fmt"
	"slices"
	"time"

	"gantry.dev/gantry/pkg/backend"
	"gantry.dev/gantry/pkg/policy"
	"gantry.dev/gantry/pkg/stack"
)

// Run is the autoscaler: it plans every Tick until ctx ends.
func (d *Dispatcher) Run(ctx context.Context) {
	t := time.NewTicker(d.cfg.Tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			d.Plan()
		}
	}
}

// Plan runs one autoscaler tick at the clock's time: idle reclaim, then the
// policy's Plan for every group, then the decisions.
func (d *Dispatcher) Plan() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed || d.role == Follower {
		return
	}
	now := d.cfg.Now()
	for _, g := range d.groups {
		d.lockedPlanGroup(g, now)
	}
	d.lockedGrant(now)
	if d.role == Leader {
		d.lockedStopDrained(now)
		d.lockedShareAll(now)
	}
}

// lockedStopDrained stops, on a leader, the draining instances whose last
// requests at other replicas have finished, and whose slots no replica
// holds any more, since they began to drain.
func (d *Dispatcher) lockedStopDrained(now time.Time) {
	for _, fn := range d.fns {
		for _, in := range slices.Clone(fn.ready) {
			if d.lockedDrained(in) {
				d.lockedStop(in, now)
			}
		}
	}
}

// lockedRetireOne takes an idle instance out. On a leader whose peers
// still hold slots on it, it drains instead: the grants are withdrawn, and
// lockedStopDrained stops it once every replica has reported letting go,
// so no replica sends a request to an instance on its way out.
func (d *Dispatcher) lockedRetireOne(in *instance, now time.Time) {
	if d.role == Leader && d.lockedPeersHold(in) {
		in.draining = true
		d.lockedShare(in.fn, now)
		return
	}
	d.lockedStop(in, now)
}

func (d *Dispatcher) lockedPlanGroup(g *group, now time.Time) {
	for i, fn := range g.chain {
		d.lockedReclaimIdle(fn, now)
		d.lockedView(fn, &g.views[i], now)
	}
	g.pol.Plan(now, g.views, g.decs)
	for i, fn := range g.chain {
		dec := g.decs[i]
		d.lockedRetire(fn, dec.Retire, now)
		add := max(dec.Add, fn.decl.MinScale-fn.liveCount())
		fn.want = 0 // recomputed from this tick's decision
		d.lockedScaleUp(fn, add, now)
		d.lockedEnsureProgress(fn, now)
	}
}

// lockedScaleUp starts up to n instances of fn within its maximum and the
// capacity; what capacity holds back is remembered in want.
func (d *Dispatcher) lockedScaleUp(fn *function, n int, now time.Time) {
	if d.role == Follower {
		return // the leader scales, from this replica's reports
	}
	n = min(n, fn.decl.MaxScale-fn.liveCount())
	start := 0
	for ; n > 0; n-- {
		if !d.lockedTakeCapacity(fn, now) {
			fn.want = max(fn.want, n)
			break
		}
		start++
	}
	d.lockedStart(fn, start, now)
}

// lockedStart asks the backend for n instances whose capacity is already
// reserved.
func (d *Dispatcher) lockedStart(fn *function, n int, now time.Time) {
	if n <= 0 {
		return
	}
	for range n {
		fn.startingAt = append(fn.startingAt, now)
	}
	fn.stats.Spawned += int64(n)
	d.be.Start(fn.decl.Name, n)
}

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

// lockedVictim finds the instance of the least critical function below
// fn's criticality, idle ones or busy ones; the longest idle first.
func (d *Dispatcher) lockedVictim(fn *function, idle bool) *instance {
	var best *instance
	for _, other := range d.fns {
		if other.decl.Criticality >= fn.decl.Criticality {
			continue
		}
		for _, in := range other.ready {
			if in.draining || in.idle() != idle {
				continue
			}
			if best == nil || other.decl.Criticality < best.fn.decl.Criticality ||
				(other.decl.Criticality == best.fn.decl.Criticality && in.idleSince.Before(best.idleSince)) {
				best = in
			}
		}
	}
	return best
}

// lockedGrant hands free capacity to the functions capacity held back,
// the most critical first.
func (d *Dispatcher) lockedGrant(now time.Time) {
	for d.role != Follower && (d.cfg.Capacity == 0 || d.live < d.cfg.Capacity) {
		var best *function
		for _, fn := range d.fns {
			if fn.want > 0 && (best == nil || fn.decl.Criticality > best.decl.Criticality ||
				(fn.decl.Criticality == best.decl.Criticality && fn.queue.Len() > best.queue.Len())) {
				best = fn
			}
		}
		if best == nil {
			return
		}
		best.want--
		d.lockedReserve(now)
		d.lockedStart(best, 1, now)
	}
}

// lockedEnsureProgress starts an instance for a function with queued
// requests and no instance at all, whatever the policy says, so no
// request is stranded.
func (d *Dispatcher) lockedEnsureProgress(fn *function, now time.Time) {
	if fn.queue.Len() > 0 && fn.liveCount() == 0 && fn.want == 0 {
		d.lockedScaleUp(fn, 1, now)
	}
}

// lockedRetire stops n idle instances of fn, the longest idle first,
// keeping the function's minimum.
func (d *Dispatcher) lockedRetire(fn *function, n int, now time.Time) {
	for ; n > 0 && fn.liveCount() > fn.decl.MinScale; n-- {
		var oldest *instance
		for _, in := range fn.ready {
			if !in.draining && in.idle() && (oldest == nil || in.idleSince.Before(oldest.idleSince)) {
				oldest = in
			}
		}
		if oldest == nil {
			return
		}
		d.lockedRetireOne(oldest, now)
	}
}

func (d *Dispatcher) lockedReclaimIdle(fn *function, now time.Time) {
	limit := now.Add(-d.cfg.IdleTimeout)
	for _, in := range slices.Clone(fn.ready) {
		if fn.liveCount() <= fn.decl.MinScale {
			return
		}
		if !in.draining && in.idle() && !in.idleSince.After(limit) {
			d.lockedRetireOne(in, now)
		}
	}
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

// lockedDrain stops an instance after its current requests.
func (d *Dispatcher) lockedDrain(in *instance) {
	in.draining = true
	if d.lockedDrained(in) {
		d.lockedStop(in, d.cfg.Now())
	}
}

// lockedView describes fn to the policy.
func (d *Dispatcher) lockedView(fn *function, v *policy.View, now time.Time) {
	v.Counts = fn.counts()
	v.MaxWait = 0
	if enq, ok := fn.queue.OldestEnq(); ok {
		v.MaxWait = time.Duration(d.nanos(now) - enq)
	}
	v.Queue, v.Running, v.Free = v.Queue[:0], v.Running[:0], v.Free[:0]
	detailed := fn.g.pol.Detailed()
	if d.role == Leader {
		d.lockedPeerView(fn, detailed, func(queued bool, it PeerItem) {
			if queued {
				v.MaxWait = max(v.MaxWait, it.Age)
			}
			if !detailed {
				return
			}
			pred := fn.g.pol.Estimate(fn.idx, it.Size)
			if queued {
				v.Queue = append(v.Queue, policy.Item{Size: it.Size, Exec: pred, Waited: it.Age})
				return
			}
			v.Running = append(v.Running, policy.Item{Size: it.Size, Exec: pred, Waited: it.Age})
			if in := d.byID[it.Instance]; in != nil && in.fn == fn && !in.draining {
				v.Free = append(v.Free, max(0, pred-it.Age))
			}
		})
	}
	if !detailed {
		return
	}
	for _, q := range fn.queue.Ordered(nil) {
		v.Queue = append(v.Queue, policy.Item{Size: q.Value.size, Exec: time.Duration(q.Pred),
			Waited: time.Duration(d.nanos(now) - q.Enq)})
	}
	for _, in := range fn.ready {
		if in.draining {
			continue
		}
		for _, c := range in.running {
			v.Running = append(v.Running, policy.Item{Size: c.size, Exec: time.Duration(c.entry.Pred), Waited: now.Sub(c.started)})
			v.Free = append(v.Free, max(0, c.started.Add(time.Duration(c.entry.Pred)).Sub(now)))
		}
		if in.suspect {
			continue // its free slots wait for its health check
		}
		free := in.free()
		if d.role == Leader {
			// Every slot no replica runs on is free to the plan, whoever
			// it is granted to: grants follow demand.
			free = fn.decl.Concurrency - len(in.running) - in.remote
		}
		for range free {
			v.Free = append(v.Free, 0)
		}
	}
	for _, at := range fn.startingAt {
		left := max(0, fn.coldStart-now.Sub(at))
		for range fn.decl.Concurrency {
			v.Free = append(v.Free, left)
		}
	}
}

// events receives the backend's reports.
type events struct{ d *Dispatcher }

func (e events) Ready(inst backend.Instance) {
	d := e.d
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.cfg.Now()
	fn, ok := d.fns[inst.Function]
	if d.role == Follower {
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
	fn.failStreak = 0
	d.lockedMeasuredColdStart(fn, inst.ColdStart)
	fn.stats.Ready++
	fn.stats.ColdStartSum += inst.ColdStart
	in := &instance{Instance: inst, fn: fn, slots: fn.decl.Concurrency, idleSince: now}
	if d.role == Leader {
		in.slots = 0 // lockedShare grants them
	}
	fn.ready = append(fn.ready, in)
	d.byID[inst.ID] = in
	d.lockedFeed(in, now)
	d.lockedShare(fn, now)
}

// lockedAdopt takes, on a follower, an instance the backend reports: the
// leader started it, and grants the slots this replica may use on it.
func (d *Dispatcher) lockedAdopt(fn *function, inst backend.Instance, now time.Time) {
	if fn == nil || d.closed || d.byID[inst.ID] != nil {
		return
	}
	d.lockedAdvance(now)
	d.live++
	fn.stats.Ready++
	in := &instance{Instance: inst, fn: fn, slots: min(d.fol.slots[inst.ID], fn.decl.Concurrency), idleSince: now}
	fn.ready = append(fn.ready, in)
	d.byID[inst.ID] = in
	d.lockedFeed(in, now)
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
		fn.failStreak++
		d.cfg.Logger.Warn("instance failed to start", "function", function, "err", err)
		if fn.failStreak >= startFailLimit {
			fn.failStreak = 0
			d.lockedFailQueued(fn, fmt.Errorf("%w: %q: %v", ErrStartFailed, function, err))
		}
	}
	if !d.closed {
		d.lockedGrant(now)
	}
}

func (e events) Exited(inst backend.Instance, err error) {
	d := e.d
	d.mu.Lock()
	defer d.mu.Unlock()
	in, ok := d.byID[inst.ID]
	if !ok {
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
	if d.role == Follower && err == nil {
		fn.stats.Stopped++ // the leader retired it
		return
	}
	fn.stats.Crashes++
	d.cfg.Logger.Warn("instance exited", "instance", inst.ID, "err", err)
	if !d.closed {
		d.lockedGrant(now)
		d.lockedEnsureProgress(fn, now)
	}
}

// lockedMeasuredColdStart folds a measured cold start into fn's expected
// one and tells the group's policy, when it takes it, the longest of its
// functions'.
func (d *Dispatcher) lockedMeasuredColdStart(fn *function, c time.Duration) {
	if c <= 0 {
		return
	}
	if !fn.measured {
		fn.coldStart, fn.measured = c, true
	} else {
		fn.coldStart = time.Duration(coldStartWeight*float64(c) + (1-coldStartWeight)*float64(fn.coldStart))
	}
	g := fn.g
	var longest time.Duration
	for _, f := range g.chain {
		longest = max(longest, f.coldStart)
	}
	g.coldStart = longest
	if s, ok := g.pol.(coldStartSetter); ok {
		s.SetColdStart(longest)
	}
}

// lockedLookAhead runs the Look-Ahead Scaler when a request reaches the
// first function of a chain, so downstream instances start while the
// request is still upstream rather than at the next tick. It needs the
// policy's LookAhead hook and runs at most once per lookAheadGap.
func (d *Dispatcher) lockedLookAhead(fn *function, now time.Time) {
	g := fn.g
	la, ok := g.pol.(lookAheader)
	if !ok || d.role == Follower || fn.idx != 0 || len(g.chain) < 2 || now.Sub(g.lookedAt) < lookAheadGap {
		return
	}
	g.lookedAt = now
	for i, f := range g.chain {
		d.lockedView(f, &g.views[i], now)
	}
	clear(g.decs)
	la.LookAhead(now, g.views, g.decs)
	for i, f := range g.chain[1:] {
		d.lockedScaleUp(f, g.decs[i+1].Add, now)
	}
}

// Scale sets a function's instances to n now, as OpenFaaS's scale-function
// does; the autoscaler goes on deciding from there.
func (d *Dispatcher) Scale(name string, n int) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	fn, ok := d.fns[name]
	switch {
	case d.role != Solo:
		return ErrScaledOut
	case !ok:
		return fmt.Errorf("%w: function %q", ErrNotFound, name)
	case n < 0 || n > fn.decl.MaxScale:
		return fmt.Errorf("%w: replicas %d must be in [0, %d], the function's maximum", stack.ErrInvalid, n, fn.decl.MaxScale)
	}
	now := d.cfg.Now()
	if live := fn.liveCount(); n > live {
		d.lockedScaleUp(fn, n-live, now)
		return nil
	}
	d.lockedRetire(fn, fn.liveCount()-n, now)
	for i := len(fn.ready) - 1; i >= 0 && fn.liveCount() > n; i-- {
		if !fn.ready[i].draining {
			fn.ready[i].draining = true
		}
	}
	return nil
}

// Close stops planning, fails what is still queued, and stops every
// instance. Call it after the HTTP server has drained.
func (d *Dispatcher) Close(ctx context.Context) error {
	d.mu.Lock()
	d.closed = true
	d.lockedAdvance(d.cfg.Now())
	for _, fn := range d.fns {
		d.lockedFailQueued(fn, ErrClosed)
	}
	d.mu.Unlock()
	d.endChecks()
	d.checks.Wait()
	return d.be.Close(ctx)
}
