package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"gantry.dev/gantry/pkg/policy"
)

// spawn starts n containers for fn; each takes a core until retired.
func (e *engine) spawn(fn int32, n int) {
	rt := &e.fns[fn]
	for range n {
		node := e.cl.place(e.now)
		if node < 0 {
			e.spawnFails++
			return
		}
		id := e.newContainer()
		e.ctrs[id] = container{fn: fn, node: node, state: csStarting, fresh: true,
			spawnAt: e.now, readyAt: e.now + int64(e.cfg.ColdStart)}
		rt.m.advance(e.now)
		rt.m.live++
		rt.m.starting++
		rt.m.spawned++
		rt.m.peak = max(rt.m.peak, rt.m.live)
		e.events.push(e.now+int64(e.cfg.ColdStart), evReady, id)
	}
}

// prewarmHeadroom covers the random excess of a Poisson load over its mean
// during the first windows, before any policy has history.
const prewarmHeadroom = 1.25

// prewarm starts every function with warm containers for the trace's first
// window: rate x mean execution time (from the ground truth, sampled with
// its own RNG so it does not shift the run's random streams) x headroom.
// It is the state a cluster would be in after serving that load; policies
// then grow or shrink it. Prewarmed containers count as spawned.
func (e *engine) prewarm() {
	per := e.cfg.Trace.PerSecond
	n := min(len(per), int(e.cfg.Window/time.Second))
	rate := 0.0
	for _, v := range per[:max(1, n)] {
		rate += v / float64(max(1, n))
	}
	rng := rand.New(rand.NewPCG(e.cfg.Seed, 5))
	const samples = 2000
	busy := make([]float64, len(e.fns))
	for range samples {
		size := e.cfg.Dist.Sample(rng, e.cfg.App.MinSize, e.cfg.App.MaxSize)
		for i := range e.fns {
			busy[i] += float64(e.fns[i].f.ExecMean(size)) / samples
			size = e.fns[i].f.OutputMean(size)
		}
	}
	for i := range e.fns {
		want := int(math.Ceil(rate * busy[i] / float64(time.Second) * prewarmHeadroom))
		e.spawn(int32(i), want)
	}
	for i := range e.ctrs {
		c := &e.ctrs[i]
		if c.state == csStarting {
			c.readyAt, c.fresh = 0, false
			e.fns[c.fn].m.starting--
			e.free(int32(i))
		}
	}
}

func (e *engine) newContainer() int32 {
	if n := len(e.freeCtrs); n > 0 {
		id := e.freeCtrs[n-1]
		e.freeCtrs = e.freeCtrs[:n-1]
		return id
	}
	e.ctrs = append(e.ctrs, container{})
	return int32(len(e.ctrs) - 1)
}

// retire reclaims the n longest-idle containers of fn.
func (e *engine) retire(fn int32, n int) {
	rt := &e.fns[fn]
	for ; n > 0 && rt.idle.len() > 0; n-- {
		e.kill(rt.idle.popFront())
	}
}

func (e *engine) kill(id int32) {
	c := &e.ctrs[id]
	rt := &e.fns[c.fn]
	rt.m.advance(e.now)
	rt.m.live--
	e.cl.release(e.now, c.node)
	c.state = csFree
	e.freeCtrs = append(e.freeCtrs, id)
}

// onTick reclaims containers idle past the timeout, then lets the policy
// plan. Ticks stop once the trace is over and nothing is in flight.
func (e *engine) onTick() {
	for fn := range e.fns {
		e.reclaimIdle(int32(fn))
	}
	e.fillViews()
	e.pol.Plan(e.policyTime(e.now), e.views, e.decs)
	for fn, d := range e.decs {
		if d.Add < 0 || d.Retire < 0 {
			e.err = fmt.Errorf("%w: policy %s returned %+v", ErrInvariant, e.pol.Name(), d)
			return
		}
		e.retire(int32(fn), d.Retire)
		e.spawn(int32(fn), d.Add)
		e.ensureProgress(int32(fn))
	}
	if e.now >= e.end && e.inFlight == 0 {
		return
	}
	if e.now > e.end+int64(maxDrain) {
		e.err = fmt.Errorf("%w: %d requests still in flight %v after the trace ended", ErrInvariant, e.inFlight, maxDrain)
		return
	}
	e.events.push(e.now+int64(e.cfg.Tick), evTick, 0)
}

func (e *engine) reclaimIdle(fn int32) {
	rt := &e.fns[fn]
	limit := e.now - int64(e.cfg.IdleTimeout)
	for rt.idle.len() > 0 && e.ctrs[rt.idle.front()].idleAt <= limit {
		e.kill(rt.idle.popFront())
	}
}

// ensureProgress starts a container for a function that has queued
// requests and none at all, whatever the policy says: no request is ever
// stranded, so every request completes.
func (e *engine) ensureProgress(fn int32) {
	rt := &e.fns[fn]
	if rt.queued() > 0 && rt.m.live == 0 {
		e.spawn(fn, 1)
	}
}

// fillViews describes every function to the policy, reusing the buffers.
func (e *engine) fillViews() {
	for fn := range e.fns {
		v := &e.views[fn]
		rt := &e.fns[fn]
		v.Counts = e.counts(int32(fn))
		v.MaxWait = e.maxWait(rt)
		v.Queue, v.Running, v.Free = v.Queue[:0], v.Running[:0], v.Free[:0]
		if e.detail {
			e.detailView(int32(fn), v)
		}
	}
}

func (e *engine) maxWait(rt *fnRuntime) time.Duration {
	if rt.queued() == 0 {
		return 0
	}
	oldest := e.now
	if rt.late.len() > 0 {
		oldest = e.reqs[rt.late.w[0].req].enq // late is FIFO: its head is its oldest
	}
	if e.order == policy.FIFO && rt.queue.len() > 0 {
		return time.Duration(e.now - min(oldest, e.reqs[rt.queue.w[0].req].enq))
	}
	for _, w := range rt.queue.w {
		oldest = min(oldest, e.reqs[w.req].enq)
	}
	return time.Duration(e.now - oldest)
}

func (e *engine) detailView(fn int32, v *policy.View) {
	rt := &e.fns[fn]
	// Run order: the heap's sorted order, then the late requests.
	e.scratch = append(e.scratch[:0], rt.queue.w...)
	slices.SortFunc(e.scratch, func(a, b waiting) int {
		if a.key != b.key {
			return cmpInt(a.key, b.key)
		}
		return cmpInt(int64(a.seq), int64(b.seq))
	})
	n := len(e.scratch)
	e.scratch = append(e.scratch, rt.late.w...)
	slices.SortFunc(e.scratch[n:], func(a, b waiting) int { return cmpInt(int64(a.seq), int64(b.seq)) })
	for _, w := range e.scratch {
		r := &e.reqs[w.req]
		v.Queue = append(v.Queue, policy.Item{Size: r.size, Exec: time.Duration(r.pred), Waited: time.Duration(e.now - r.enq)})
	}
	for i := range e.ctrs {
		c := &e.ctrs[i]
		if c.fn != fn || c.state == csFree {
			continue
		}
		v.Free = append(v.Free, e.freeIn(c))
		if c.state == csBusy {
			r := &e.reqs[c.req]
			v.Running = append(v.Running, policy.Item{Size: r.size, Exec: time.Duration(r.pred), Waited: time.Duration(e.now - c.startAt)})
		}
	}
}

// freeIn predicts when a container can take new work, from what a real
// system knows: the predicted (not the sampled) execution time.
func (e *engine) freeIn(c *container) time.Duration {
	switch c.state {
	case csStarting:
		return time.Duration(c.readyAt - e.now)
	case csBusy:
		return time.Duration(max(0, c.startAt+e.reqs[c.req].pred-e.now))
	}
	return 0
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// deque is a ring buffer of container ids: idle containers are reused
// newest first (pop back) and reclaimed oldest first (pop front).
type deque struct {
	buf        []int32
	head, size int
}

func (d *deque) len() int { return d.size }

func (d *deque) pushBack(v int32) {
	if d.size == len(d.buf) {
		d.grow()
	}
	d.buf[(d.head+d.size)%len(d.buf)] = v
	d.size++
}

func (d *deque) grow() {
	nb := make([]int32, max(16, 2*len(d.buf)))
	for i := range d.size {
		nb[i] = d.buf[(d.head+i)%len(d.buf)]
	}
	d.buf, d.head = nb, 0
}

func (d *deque) popBack() int32 {
	d.size--
	return d.buf[(d.head+d.size)%len(d.buf)]
}

func (d *deque) front() int32 { return d.buf[d.head] }

func (d *deque) popFront() int32 {
	v := d.buf[d.head]
	d.head = (d.head + 1) % len(d.buf)
	d.size--
	return v
}
