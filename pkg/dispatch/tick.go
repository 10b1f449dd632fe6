package dispatch

// The tick: the policy's decisions applied. Each rule site is a small
// locked* function of its own (plan a group, retire, reclaim idle, ensure
// progress, view, measured cold start, look-ahead), so that what decides
// can change behind it without touching how decisions are carried out.

import (
	"context"
	"fmt"
	"time"

	"gantry.dev/gantry/pkg/policy"
	"gantry.dev/gantry/pkg/stack"
)

// Run is the autoscaler: it plans at once and then every Tick until ctx
// ends, as the simulator ticks from time zero, and between ticks stops
// instances whose exact keep-alive ends (Expire). A keep-alive ends at
// least a tick after the instance went idle, so the next expiry read at
// each wake-up is never missed.
func (d *Dispatcher) Run(ctx context.Context) {
	d.Plan()
	next := d.cfg.Now().Add(d.cfg.Tick)
	timer := time.NewTimer(d.cfg.Tick)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		if now := d.cfg.Now(); !now.Before(next) {
			d.Plan()
			next = next.Add(d.cfg.Tick * (1 + time.Duration(now.Sub(next)/d.cfg.Tick)))
		} else {
			d.Expire()
			d.Restart()
		}
		wake := next
		if at, ok := d.NextExpiry(); ok && at.Before(wake) {
			wake = at
		}
		if at, ok := d.NextRestart(); ok && at.Before(wake) {
			wake = at // a crash loop's back-off ends: its probe starts on time
		}
		timer.Reset(max(0, wake.Sub(d.cfg.Now())))
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
	d.lockedRestart(now)
	d.lockedGrant(now)
	d.peers.Planned(Locked{d})
}

// lockedRetireOne takes an idle instance out. While other replicas may
// still hold slots on it, it drains instead, and the peers hear of it:
// they withdraw those slots and stop it (Locked.StopDrained) once every
// replica has let go, so no replica sends a request to an instance on its
// way out.
func (d *Dispatcher) lockedRetireOne(in *instance, now time.Time) {
	if d.peers.Holds(in.fn.decl.Ref(), in.ID) {
		in.draining = true
		d.peers.Changed(Locked{d}, in.fn.decl.Ref())
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
		fn.want = 0 // recomputed from this tick's decision
		d.lockedApply(fn, g.decs[i], now)
	}
}

// lockedApply carries out a decision for fn as policy.Apply says:
// retirements first, then starts within the capacity. Arrivals pass
// through it too, so a request is never stranded.
func (d *Dispatcher) lockedApply(fn *function, dec policy.Decision, now time.Time) {
	add, retire, err := policy.Apply(dec, d.lockedScale(fn))
	if err != nil {
		d.cfg.Logger.Error("the policy returned a decision no driver can apply", "function", fn.decl.Name, "err", err)
		return
	}
	d.lockedRetire(fn, retire, now)
	d.lockedScaleUp(fn, add, now)
}

// lockedScaleUp starts up to n instances of fn within its maximum and the
// capacity; what capacity holds back is remembered in want.
func (d *Dispatcher) lockedScaleUp(fn *function, n int, now time.Time) {
	if !d.peers.Decides() {
		return // the replica that decides scales, from this one's reports
	}
	n = min(n, fn.decl.MaxScale-fn.liveCount(), d.lockedStarts(fn, now))
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
	d.be.Start(fn.decl.Ref(), n)
}

// lockedGrant hands free capacity to the functions capacity held back,
// the most critical first.
func (d *Dispatcher) lockedGrant(now time.Time) {
	for d.peers.Decides() && (d.cfg.Capacity == 0 || d.live < d.cfg.Capacity) {
		// Groups and chains in deploy order, so that ties go the same way
		// every run, as in the simulator.
		var best *function
		for _, g := range d.groups {
			for _, fn := range g.chain {
				if fn.want > 0 && d.lockedStarts(fn, now) > 0 && (best == nil || policy.GrantsBefore(fn.claim(), best.claim())) {
					best = fn
				}
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
// request is stranded (policy.Apply); not while capacity holds a start
// back for it already.
func (d *Dispatcher) lockedEnsureProgress(fn *function, now time.Time) {
	if fn.want == 0 {
		d.lockedApply(fn, policy.Decision{}, now)
	}
}

// lockedRetire stops n idle instances of fn, in policy.RetiresBefore's
// order; policy.Apply has kept the function's minimum.
func (d *Dispatcher) lockedRetire(fn *function, n int, now time.Time) {
	for ; n > 0; n-- {
		in := d.lockedOldestIdle(fn, time.Time{}, false)
		if in == nil {
			return
		}
		d.lockedRetireOne(in, now)
	}
}

// lockedReclaimIdle stops, oldest first, the instances of fn idle past the
// idle timeout (or exactly their keep-alive, under an instance model that
// fixes one), keeping the function's minimum.
func (d *Dispatcher) lockedReclaimIdle(fn *function, now time.Time) {
	d.lockedExpire(fn, now.Add(-d.cfg.IdleTimeout))
	if fn.g.con.ExactExpiry() {
		d.lockedExpire(fn, now.Add(-fn.g.con.KeepAlive(d.cfg.IdleTimeout)))
	}
}

// lockedExpire stops, oldest first, the idle instances of fn idle since
// limit or earlier, down to the function's minimum.
func (d *Dispatcher) lockedExpire(fn *function, limit time.Time) {
	for fn.liveCount() > fn.decl.MinScale {
		in := d.lockedOldestIdle(fn, limit, true)
		if in == nil {
			return
		}
		d.lockedRetireOne(in, d.cfg.Now())
	}
}

// Expire stops the idle instances whose keep-alive has ended, for the
// policies whose instance model expires them exactly rather than at a
// tick (policy.Contract.ExactExpiry); Run calls it at NextExpiry.
func (d *Dispatcher) Expire() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed || !d.peers.Decides() {
		return
	}
	now := d.cfg.Now()
	for _, g := range d.groups {
		if !g.con.ExactExpiry() {
			continue
		}
		for _, fn := range g.chain {
			d.lockedExpire(fn, now.Add(-g.con.KeepAlive(d.cfg.IdleTimeout)))
		}
	}
	d.lockedGrant(now)
}

// NextExpiry is the earliest instant an idle instance's keep-alive ends,
// for the policies that expire instances exactly.
func (d *Dispatcher) NextExpiry() (time.Time, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var next time.Time
	for _, g := range d.groups {
		if !g.con.ExactExpiry() {
			continue
		}
		keep := g.con.KeepAlive(d.cfg.IdleTimeout)
		for _, fn := range g.chain {
			if fn.liveCount() <= fn.decl.MinScale {
				continue // at its minimum nothing of fn expires
			}
			for _, in := range fn.ready {
				if at := in.idleSince.Add(keep); !in.draining && d.lockedIdle(in) && (next.IsZero() || at.Before(next)) {
					next = at
				}
			}
		}
	}
	return next, !next.IsZero()
}

// lockedView describes fn to the policy.
func (d *Dispatcher) lockedView(fn *function, v *policy.View, now time.Time) {
	v.Counts = d.lockedCounts(fn)
	v.MaxWait = 0
	if enq, ok := fn.queue.OldestEnq(); ok {
		v.MaxWait = time.Duration(d.nanos(now) - enq)
	}
	v.Queue, v.Running, v.Free, v.IdleAges = v.Queue[:0], v.Running[:0], v.Free[:0], v.IdleAges[:0]
	detailed := fn.g.pol.Caps().Detailed
	d.peers.Requests(fn.decl.Ref(), detailed, func(queued bool, it Item) {
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
	d.viewBuf = fn.queue.OrderedFirst(d.viewBuf[:0], policy.ViewCap(d.cfg.Capacity))
	for _, q := range d.viewBuf {
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
		if d.lockedIdle(in) {
			v.IdleAges = append(v.IdleAges, now.Sub(in.idleSince))
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
		left := max(0, fn.coldStart.Value()-now.Sub(at))
		for range fn.decl.Concurrency {
			v.Free = append(v.Free, left)
		}
	}
}

// lockedMeasuredColdStart folds a measured cold start into fn's expected
// one (policy.ColdStartEstimate) and plans the group with the longest of
// its functions', as the simulator does with the starts it makes.
func (d *Dispatcher) lockedMeasuredColdStart(fn *function, c time.Duration) {
	fn.coldStart.Observe(c)
	fn.g.con.SetColdStart(fn.g.coldStart())
}

// lockedLookAhead runs the Look-Ahead Scaler when a request reaches the
// first function of a chain (policy.Contract.LookAheadDue), so downstream
// instances start while the request is still upstream rather than at the
// next tick.
func (d *Dispatcher) lockedLookAhead(fn *function, now time.Time) {
	g := fn.g
	if !d.peers.Decides() || !g.con.LookAheadDue(now, fn.idx, len(g.chain)) {
		return
	}
	for i, f := range g.chain {
		d.lockedView(f, &g.views[i], now)
	}
	g.con.LookAhead(now, g.views, g.decs)
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
	if err := d.peers.Writes(); err != nil {
		return err
	}
	switch {
	case !ok:
		return fmt.Errorf("%w: function %q", ErrNotFound, name)
	case n < fn.decl.MinScale || n > fn.decl.MaxScale:
		// Below the minimum the autoscaler would start them again at
		// once: the count would be accepted and not kept.
		return fmt.Errorf("%w: replicas %d must be in [%d, %d], the function's scale bounds (com.openfaas.scale.min and .max)",
			stack.ErrInvalid, n, fn.decl.MinScale, fn.decl.MaxScale)
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
