package dispatch

// The tick: the policy's decisions applied. Each rule site is a small
// locked* function of its own (plan a group, retire, reclaim idle, ensure
// progress, view, measured cold start, look-ahead), so that what decides
// can change behind it without touching how decisions are carried out.

import (
	"context"
	"fmt"
	"slices"
	"time"

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
	if d.closed || !d.peers.Decides() {
		return
	}
	now := d.cfg.Now()
	for _, g := range d.groups {
		d.lockedPlanGroup(g, now)
	}
	d.lockedGrant(now)
	d.peers.Planned(Locked{d})
}

// lockedRetireOne takes an idle instance out. While other replicas may
// still hold slots on it, it drains instead, and the peers hear of it:
// they withdraw those slots and stop it (Locked.StopDrained) once every
// replica has let go, so no replica sends a request to an instance on its
// way out.
func (d *Dispatcher) lockedRetireOne(in *instance, now time.Time) {
	if d.peers.Holds(in.fn.decl.Name, in.ID) {
		in.draining = true
		d.peers.Changed(Locked{d}, in.fn.decl.Name)
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
	if !d.peers.Decides() {
		return // the replica that decides scales, from this one's reports
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

// lockedGrant hands free capacity to the functions capacity held back,
// the most critical first.
func (d *Dispatcher) lockedGrant(now time.Time) {
	for d.peers.Decides() && (d.cfg.Capacity == 0 || d.live < d.cfg.Capacity) {
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
			if !in.draining && d.lockedIdle(in) && (oldest == nil || in.idleSince.Before(oldest.idleSince)) {
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
		if !in.draining && d.lockedIdle(in) && !in.idleSince.After(limit) {
			d.lockedRetireOne(in, now)
		}
	}
}

// lockedView describes fn to the policy.
func (d *Dispatcher) lockedView(fn *function, v *policy.View, now time.Time) {
	v.Counts = d.lockedCounts(fn)
	v.MaxWait = 0
	if enq, ok := fn.queue.OldestEnq(); ok {
		v.MaxWait = time.Duration(d.nanos(now) - enq)
	}
	v.Queue, v.Running, v.Free = v.Queue[:0], v.Running[:0], v.Free[:0]
	detailed := fn.g.pol.Caps().Detailed
	d.peers.Requests(fn.decl.Name, detailed, func(queued bool, it Item) {
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
		// Every slot no replica runs on is free to the plan, whoever it
		// is granted to: grants follow demand.
		free := fn.decl.Concurrency - len(in.running) - d.peers.Running(in.ID)
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
	if !ok || !d.peers.Decides() || fn.idx != 0 || len(g.chain) < 2 || now.Sub(g.lookedAt) < lookAheadGap {
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

// The policy core's optional hooks, used when the policy has them.
type (
	// coldStartSetter takes the measured cold start, so new instances are
	// planned with what starts really take rather than the declaration.
	coldStartSetter interface{ SetColdStart(d time.Duration) }
	// lookAheader runs the Look-Ahead Scaler alone: for every downstream
	// function, the instances to start now for the requests upstream of
	// it (out[f].Add), without the tick's other work.
	lookAheader interface {
		LookAhead(now time.Time, views []policy.View, out []policy.Decision)
	}
)

// coldStartWeight is the newest measurement's weight in a function's
// expected cold start.
const coldStartWeight = 0.3

// lookAheadGap bounds how often arrivals at a chain's head run the
// Look-Ahead Scaler: it builds every function's view, so at thousands of
// arrivals a second it runs at most once per gap, and the tick covers the
// rest.
const lookAheadGap = 5 * time.Millisecond

// Scale sets a function's instances to n now, as OpenFaaS's scale-function
// does; the autoscaler goes on deciding from there.
func (d *Dispatcher) Scale(name string, n int) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	fn, ok := d.fns[name]
	if err := d.peers.Writes(); err != nil {
		return err
	}
	switch {
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
