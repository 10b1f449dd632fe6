package sim

import (
	"fmt"
	"math"
	"time"

	"gantry.dev/gantry/pkg/policy"
)

// spawn starts n containers for fn; each takes a core until retired. What
// the cluster has no room for is held back (want) until room frees.
func (e *engine) spawn(fn int32, n int) {
	for k := range n {
		if e.spawnOne(fn) < 0 {
			rt := &e.fns[fn]
			rt.want = max(rt.want, n-k)
			return
		}
	}
}

// spawnOne starts one container for fn and returns its id, or -1 (counted)
// when no node has room and no less critical function gives one up now.
func (e *engine) spawnOne(fn int32) int32 {
	node := e.cl.place(e.now)
	if node < 0 && e.makeRoom(fn) {
		node = e.cl.place(e.now)
	}
	if node < 0 {
		e.spawnFails++
		return -1
	}
	return e.startOn(fn, node)
}

// startOn starts a container of fn on a node whose room is reserved.
func (e *engine) startOn(fn int32, node int32) int32 {
	rt := &e.fns[fn]
	id := e.newContainer()
	e.spawnSeq++
	cold := e.drawColdStart()
	e.ctrs[id] = container{fn: fn, node: node, state: csStarting, fresh: true,
		spawnAt: e.now, readyAt: e.now + cold, seq: e.spawnSeq}
	rt.m.advance(e.now)
	rt.m.live++
	rt.m.starting++
	rt.m.spawned++
	rt.m.peak = max(rt.m.peak, rt.m.live)
	e.events.push(e.now+cold, evReady, id)
	e.note(obsStart, fn, id, -1)
	return id
}

// drawColdStart is one container's cold start: ColdStart, or a draw from
// ColdStartDist with that mean, from its own random stream (so the other
// draws of a run do not move), at least 1 µs and at most MaxColdStart.
func (e *engine) drawColdStart() int64 {
	mean := float64(e.cfg.ColdStart)
	var d float64
	switch e.cfg.ColdStartDist {
	case "exp":
		d = e.coldRng.ExpFloat64() * mean
	case "uniform":
		d = (1 - e.coldRng.Float64()) * 2 * mean
	case "lognormal":
		const sigma2 = math.Ln2 // coefficient of variation 1: σ² = ln(1 + cv²)
		d = mean * math.Exp(math.Sqrt(sigma2)*e.coldRng.NormFloat64()-sigma2/2)
	default:
		return int64(e.cfg.ColdStart)
	}
	return int64(min(float64(MaxColdStart), max(float64(time.Microsecond), d)))
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
	for i, want := range prewarmCounts(&e.cfg) {
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

// retire reclaims n idle containers of fn, highest nodes first.
func (e *engine) retire(fn int32, n int) {
	rt := &e.fns[fn]
	for ; n > 0 && rt.idle.len() > 0; n-- {
		e.kill(rt.idle.popHighest())
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
	e.note(obsStop, c.fn, id, -1)
}

// onTick reclaims containers idle past the timeout, then lets the policy
// plan. Ticks stop once the trace is over and nothing is in flight.
func (e *engine) onTick() {
	// A followed plan starts and stops every container itself.
	if e.follow == nil {
		for fn := range e.fns {
			e.reclaimIdle(int32(fn))
		}
		e.plan()
	}
	if e.err != nil {
		return
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

// plan lets the policy decide and applies its decisions; a Waker policy
// then gets an evWake at the instant it asks for, unless one is pending
// earlier.
func (e *engine) plan() {
	e.fillViews()
	e.pol.Plan(e.policyTime(e.now), e.views, e.decs)
	for fn, d := range e.decs {
		e.fns[fn].want = 0 // recomputed from this plan's decision
		add, retire, err := policy.Apply(d, e.scaleOf(int32(fn)))
		if err != nil {
			e.err = fmt.Errorf("%w: policy %s: %w", ErrInvariant, e.pol.Name(), err)
			return
		}
		e.retire(int32(fn), retire)
		e.spawn(int32(fn), add)
	}
	e.grant()
	if at, ok := e.con.NextWake(e.policyTime(e.now)); ok {
		t := int64(at.Sub(epoch))
		if t > e.now && (e.wakeAt <= e.now || t < e.wakeAt) {
			e.wakeAt = t
			e.events.push(t, evWake, 0)
		}
	}
}

// onWake runs a Waker policy's plan at the instant it asked for; a wake
// superseded by an earlier one is dropped.
func (e *engine) onWake() {
	if e.now != e.wakeAt || (e.now >= e.end && e.inFlight == 0) {
		return
	}
	e.wakeAt = 0
	e.plan()
}

// reclaimIdle stops the containers of fn idle past the timeout, keeping
// the function's minimum.
func (e *engine) reclaimIdle(fn int32) {
	rt := &e.fns[fn]
	limit := e.now - int64(e.cfg.IdleTimeout)
	s := e.scaleOf(fn)
	rt.idle.expire(limit, s.Live-s.MinScale, e.ctrs, e.kill)
}

// keepAlive is how long an idle container lives under the policy's
// instance model.
func (e *engine) keepAlive() time.Duration { return e.con.KeepAlive(e.cfg.IdleTimeout) }

// fillViews describes every function to the policy, reusing the buffers.
func (e *engine) fillViews() {
	for fn := range e.fns {
		v := &e.views[fn]
		rt := &e.fns[fn]
		v.Counts = e.counts(int32(fn))
		v.MaxWait = 0
		if oldest, ok := rt.queue.OldestEnq(); ok {
			v.MaxWait = time.Duration(e.now - oldest)
		}
		v.Queue, v.Running, v.Free, v.IdleAges = v.Queue[:0], v.Running[:0], v.Free[:0], v.IdleAges[:0]
		if e.detail {
			e.detailView(int32(fn), v)
		}
	}
}

// detailView lists fn's queue (its first viewCap requests in run order),
// running requests and containers for a policy that plans on them.
func (e *engine) detailView(fn int32, v *policy.View) {
	rt := &e.fns[fn]
	e.scratch = rt.queue.OrderedFirst(e.scratch[:0], e.viewCap())
	for _, q := range e.scratch {
		v.Queue = append(v.Queue, policy.Item{Size: e.reqs[q.Value].size, Exec: time.Duration(q.Pred), Waited: time.Duration(e.now - q.Enq)})
	}
	for i := range e.ctrs {
		c := &e.ctrs[i]
		if c.fn != fn || c.state == csFree || c.draining {
			continue // a draining container is on its way out, as live
		}
		v.Free = append(v.Free, e.freeIn(c))
		if c.state == csIdle {
			v.IdleAges = append(v.IdleAges, time.Duration(e.now-c.idleAt))
		}
		if c.state == csBusy {
			r := &e.reqs[c.req]
			v.Running = append(v.Running, policy.Item{Size: r.size, Exec: time.Duration(r.pred), Waited: time.Duration(e.now - c.startAt)})
		}
	}
}

// viewCap bounds the queued requests a detailed view lists
// (policy.ViewCap): the cluster's cores are its capacity.
func (e *engine) viewCap() int { return policy.ViewCap(e.cfg.Nodes * e.cfg.CoresPerNode) }

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

// idlePool holds a function's idle containers by node. Requests go to the
// lowest node's most recently idle container and retirement takes the
// highest node's, so load drains off the high nodes and they power down;
// the idle timeout removes the oldest on every node.
type idlePool struct {
	byNode [][]int32 // per node, idle container ids, oldest first
	n      int
	low    int // no node below low has an idle container
	// newest is a max-heap by creation order of the idle periods, for a
	// NewestFirst instance model; entries of periods that ended otherwise
	// are skipped when they surface.
	newest []idleRef
}

type idleRef struct {
	seq uint64
	gen uint32
	id  int32
}

func (p *idlePool) pushNewest(id int32, seq uint64, gen uint32) {
	p.newest = append(p.newest, idleRef{seq: seq, gen: gen, id: id})
	h := p.newest
	for i := len(h) - 1; i > 0; {
		up := (i - 1) / 2
		if h[up].seq >= h[i].seq {
			break
		}
		h[i], h[up] = h[up], h[i]
		i = up
	}
}

// popNewest removes and returns the idle container created last. The pool
// must hold one.
func (p *idlePool) popNewest(ctrs []container) int32 {
	for {
		h := p.newest
		top := h[0]
		last := len(h) - 1
		h[0] = h[last]
		h = h[:last]
		p.newest = h
		for i := 0; ; {
			c := 2*i + 1
			if c >= last {
				break
			}
			if c+1 < last && h[c+1].seq > h[c].seq {
				c++
			}
			if h[i].seq >= h[c].seq {
				break
			}
			h[i], h[c] = h[c], h[i]
			i = c
		}
		if c := &ctrs[top.id]; c.state == csIdle && c.seq == top.seq && c.idleGen == top.gen {
			return top.id
		}
	}
}

// compactNewest drops the entries of idle periods that have ended once
// they outnumber the live ones, so the heap stays proportional to the
// idle containers.
func (p *idlePool) compactNewest(ctrs []container) {
	if len(p.newest) <= 2*p.n+64 {
		return
	}
	h := p.newest
	kept := h[:0]
	for _, r := range h {
		if c := &ctrs[r.id]; c.state == csIdle && c.seq == r.seq && c.idleGen == r.gen {
			kept = append(kept, r)
		}
	}
	p.newest = nil
	for _, r := range kept {
		p.pushNewest(r.id, r.seq, r.gen)
	}
}

// remove takes container id out of node's idle list.
func (p *idlePool) remove(id, node int32) {
	s := p.byNode[node]
	for i, x := range s {
		if x == id {
			p.byNode[node] = append(s[:i], s[i+1:]...)
			p.n--
			return
		}
	}
}

func newIdlePool(nodes int) idlePool { return idlePool{byNode: make([][]int32, nodes), low: nodes} }

func (p *idlePool) len() int { return p.n }

func (p *idlePool) push(id, node int32) {
	p.byNode[node] = append(p.byNode[node], id)
	p.n++
	p.low = min(p.low, int(node))
}

// popLowest takes the most recently idle container of the lowest node.
func (p *idlePool) popLowest() int32 {
	for len(p.byNode[p.low]) == 0 {
		p.low++
	}
	s := p.byNode[p.low]
	id := s[len(s)-1]
	p.byNode[p.low] = s[:len(s)-1]
	p.n--
	return id
}

// popHighest takes the longest idle container of the highest node, the
// one policy.RetiresBefore picks.
func (p *idlePool) popHighest() int32 {
	i := len(p.byNode) - 1
	for len(p.byNode[i]) == 0 {
		i--
	}
	id := p.byNode[i][0]
	p.byNode[i] = p.byNode[i][1:]
	p.n--
	return id
}

// expire removes and returns (via kill) every container idle since limit
// or earlier, at most n of them.
func (p *idlePool) expire(limit int64, n int, ctrs []container, kill func(int32)) {
	for i := p.low; i < len(p.byNode) && p.n > 0 && n > 0; i++ {
		s := p.byNode[i]
		k := 0
		for k < len(s) && k < n && ctrs[s[k]].idleAt <= limit {
			k++
		}
		n -= k
		if k == 0 {
			continue
		}
		p.byNode[i] = s[k:]
		p.n -= k
		for _, id := range s[:k] {
			kill(id)
		}
	}
}
