package sim

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"gantry.dev/gantry/pkg/bound"
	"gantry.dev/gantry/pkg/policy"
	"gantry.dev/gantry/pkg/workload"
)

// epoch is the wall-clock instant virtual time 0 maps to for the policy.
// Any fixed instant works; policies only compare and subtract times. It
// carries a monotonic clock reading (withMonotonic), as the live
// dispatcher's time.Now readings do, and so does every time derived
// from it with Add.
var epoch = withMonotonic(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))

// withMonotonic is t with a monotonic clock reading. Sub, Before and
// Equal between two times that both carry one compare the readings, two
// integers, instead of the wall clocks, whose Sub checks its own result
// for overflow with an Add and an Equal: that check was a tenth of
// gantry's cost per simulated request. The reading moves with Add exactly
// as the wall clock does, so every difference and comparison is the same.
func withMonotonic(t time.Time) time.Time {
	now := time.Now()
	return now.Add(t.Sub(now))
}

// maxDrain bounds how long the engine keeps running after the trace ends
// waiting for requests in flight; reaching it means the policy starved a
// function, which Run reports as an error rather than looping forever.
const maxDrain = 24 * time.Hour

// request is one app invocation in flight. Slots are reused through a free
// list so the hot path does not allocate.
type request struct {
	id      int64
	arrival int64   // at the app
	enq     int64   // at the current function
	size    float64 // input size at the current function
	pred    int64   // predicted execution time at the current function
	exec    int64   // sampled execution time at the current function
	fn      int32
	// class is its deadline class (Config.AsyncShare).
	class policy.Class
	// planSeq is its place among its planned container's jobs and
	// nextWait the next request waiting for that container (follow.go).
	planSeq, nextWait int32
	// End-to-end breakdown so far.
	queue, cold, execSum int64
}

// fnRuntime is one function's live state in the engine.
type fnRuntime struct {
	f workload.Function
	// draw samples its execution times and outputs (drawChain).
	draw     workload.Sampler
	slo      int64
	deadline int64 // cumulative SLO up to and including this function
	// asyncDeadline is an async request's budget up to here (policy.AsyncBudget).
	asyncDeadline int64
	queue         *policy.RunQueue[int32]
	// bound lists, from boundHead on, the requests waiting for an
	// instance of their own under a dedicated policy, in arrival order:
	// each takes the next instance of the function that becomes ready.
	bound     []int32
	boundHead int
	// want is the starts the cluster's room held back since the last
	// plan; draining counts containers giving their room up (capacity.go).
	want, draining int
	idle           idlePool
	// expiry lists the idle periods in the order they began (so in order
	// of when they expire) under a keep-alive; one evExpire is pending
	// for the earliest one still current.
	expiry        []idleRef
	expiryHead    int
	expiryPending bool
	lat           latency
	m             fnMetrics
}

type engine struct {
	ctx context.Context
	cfg Config
	pol policy.Policy
	// con is the driver contract for pol: its capabilities and the rules
	// of driving it, the same as the live dispatcher's.
	con      *policy.Contract
	order    policy.Order
	detail   bool
	spawnSeq uint64
	// wakeAt is the pending evWake's time (0: none), for a policy that
	// plans at instants of its own.
	wakeAt int64
	// freedSeq numbers the instants containers become idle (container.freed).
	freedSeq uint64
	// coldStarts is each function's expected cold start, fed with the
	// measured ones as the live dispatcher feeds them.
	coldStarts []policy.ColdStartEstimate
	// observe, when set, is told of every start, stop and run (the
	// conformance scripts read it).
	observe func(observation)
	// follow, when set, makes the engine follow the oracle's plan to the
	// job (follow.go) instead of dispatching on its own.
	follow *follower

	fns      []fnRuntime
	cl       *cluster
	ctrs     []container
	freeCtrs []int32
	reqs     []request
	freeReqs []int32
	events   eventHeap

	arrRng, sizeRng *rand.Rand
	// classRng draws which arrivals are async (a stream of its own, so a
	// run without async requests draws what it drew before).
	classRng *rand.Rand
	// async is the latency of async requests, against the async deadline.
	async           latency
	coldRng         *rand.Rand
	execRng, outRng *rand.Rand
	execKey, outKey *keyedSource
	// chainExec and chainOut hold, at r*len(fns)+f, request r's execution
	// time and output size at function f, drawn when it arrives (keyed,
	// so the draw's moment does not matter).
	chainExec []int64
	chainOut  []float64
	// accs, when set, accumulate the clairvoyant bound per function as
	// requests arrive (see computeBound).
	accs []*bound.Acc

	now        int64
	end        int64 // end of the trace
	arrivals   int64
	inFlight   int64
	done       int64
	spawnFails int64
	rejected   int64
	// infeasible counts the requests whose execution times alone exceed
	// the SLO: no policy meets them.
	infeasible int64
	app        latency
	// Little's law, checked at the end of every run: the time integral of
	// the requests in flight equals the sum of their times in the system.
	inFlightArea, sojournNs float64
	inFlightT               int64

	views   []policy.View
	scratch []policy.Queued[int32]
	decs    []policy.Decision
	err     error
}

// support is what the simulator honours beyond what every driver must:
// it knows the future, and it can plan at any instant.
var support = policy.Support{Clairvoyant: true, Wakes: true}

func newEngine(ctx context.Context, cfg Config, pol policy.Policy) (*engine, error) {
	con, err := policy.NewContract(pol, support)
	if err != nil {
		return nil, err
	}
	e := &engine{ctx: ctx, cfg: cfg, pol: pol, con: con, order: pol.Order(), detail: con.Caps.Detailed,
		cl: newCluster(&cfg), end: int64(cfg.Trace.Duration()), app: newLatency(cfg.App.SLO)}
	e.arrRng = rand.New(rand.NewPCG(cfg.Seed, 1))
	e.sizeRng = rand.New(rand.NewPCG(cfg.Seed, 2))
	e.classRng = rand.New(rand.NewPCG(cfg.Seed, 3))
	e.async = newLatency(cfg.AsyncDeadline)
	e.coldRng = rand.New(rand.NewPCG(cfg.Seed, 11))
	e.execKey, e.outKey = &keyedSource{}, &keyedSource{}
	e.execRng, e.outRng = rand.New(e.execKey), rand.New(e.outKey)
	slos, cum := functionSLOs(cfg.App)
	for i, f := range cfg.App.Chain {
		e.fns = append(e.fns, fnRuntime{f: f, draw: f.Sampler(), slo: int64(slos[i]), deadline: int64(cum[i]), lat: newLatency(slos[i]),
			asyncDeadline: int64(policy.AsyncBudget(cum[i], cfg.App.SLO, cfg.AsyncDeadline)),
			queue:         policy.NewRunQueue[int32](e.order, policy.RoundLen(cfg.Tick, slos[i])),
			idle:          newIdlePool(cfg.Nodes)})
		e.coldStarts = append(e.coldStarts, policy.NewColdStartEstimate(cfg.ColdStart))
	}
	e.views = make([]policy.View, len(e.fns))
	e.decs = make([]policy.Decision, len(e.fns))
	e.reserve()
	return e, nil
}

// reserve sizes the request pool for the most requests that can be in
// flight at once: every function's queue bound and every core, no more
// than the trace holds. Grown by doubling instead, an overloaded run's
// pool was copied a dozen times, and each copy of a large slice is a
// stretch the garbage collector must wait out to preempt the run.
func (e *engine) reserve() {
	n := float64(e.cfg.Nodes * e.cfg.CoresPerNode)
	if e.cfg.MaxQueue >= 0 {
		n += float64(e.cfg.MaxQueue) * float64(len(e.fns))
	} else {
		n = e.cfg.Trace.Total()
	}
	n = min(n, e.cfg.Trace.Total()+1024, 1<<20)
	e.reqs = make([]request, 0, int(n))
	perQueue := min(e.cfg.Trace.Total(), 1<<16)
	if e.cfg.MaxQueue >= 0 {
		perQueue = min(perQueue, float64(e.cfg.MaxQueue))
	}
	for i := range e.fns {
		e.fns[i].queue.Grow(int(perQueue))
	}
	e.chainExec = make([]int64, 0, int(n)*len(e.fns))
	e.chainOut = make([]float64, 0, int(n)*len(e.fns))
}

// functionSLOs splits the app SLO over the chain (policy.SplitSLO), each
// function weighted by its mean execution time at the largest input, its
// share of the chain's longest execution.
func functionSLOs(app workload.App) (share, cum []time.Duration) {
	w := make([]float64, len(app.Chain))
	size := app.MaxSize
	for i, f := range app.Chain {
		w[i] = float64(f.ExecMean(size))
		size = f.OutputMean(size)
	}
	return policy.SplitSLO(app.SLO, w)
}

func (e *engine) policyTime(t int64) time.Time { return epoch.Add(time.Duration(t)) }

func (e *engine) run() error {
	if !e.cfg.ColdBoot && e.follow == nil {
		e.prewarm() // a followed plan starts its own prewarm
	}
	e.events.push(0, evTick, 0)
	if t, ok := e.nextArrival(0); ok {
		e.events.push(t, evArrival, 0)
	}
	nextProgress := int64(e.cfg.Window)
	for n := 0; e.events.len() > 0 && e.err == nil; n++ {
		if e.follow != nil && !e.planAhead() {
			break
		}
		ev := e.events.pop()
		if (ev.kind == evExpire || ev.kind == evWake) && e.now >= e.end && e.inFlight == 0 {
			continue // the run is over; keep-alives left pending do not extend it
		}
		e.now = ev.at
		if (ev.kind == evTick || n%checkEvery == 0) && e.stopped() {
			break
		}
		e.handle(ev)
		if e.cfg.Progress != nil && e.now >= nextProgress {
			e.cfg.Progress(time.Duration(min(e.now, e.end)), time.Duration(e.end))
			nextProgress += int64(e.cfg.Window)
		}
	}
	if e.err == nil && (e.done+e.rejected != e.arrivals || e.inFlight != 0) {
		e.err = fmt.Errorf("%w: %d arrivals, %d completions, %d rejected, %d in flight", ErrInvariant, e.arrivals, e.done, e.rejected, e.inFlight)
	}
	if e.err == nil {
		e.err = e.checkLittle()
	}
	return e.err
}

// handle runs one event at the current time.
func (e *engine) handle(ev event) {
	switch ev.kind {
	case evArrival:
		e.onArrival()
	case evDone:
		e.onDone(ev.id)
	case evReady:
		e.onReady(ev.id)
	case evTick:
		e.onTick()
	case evExpire:
		e.onExpire(ev.id)
	case evWake:
		e.onWake()
	case evPlanStart:
		e.followStart(ev.id)
	case evPlanRetire:
		e.followRetire(ev.id)
	}
}

// checkEvery is how many events may pass between two looks at the
// context besides the one at every tick: a tick holds at most MaxRate x
// Tick arrivals, which could take longer than the second SIGTERM allows.
const checkEvery = 1 << 16

// stopped reports whether the run's context has ended, and records why.
func (e *engine) stopped() bool {
	if e.ctx.Err() == nil {
		return false
	}
	e.err = fmt.Errorf("sim: stopped after %v of %v simulated: %w", time.Duration(e.now), time.Duration(e.end), context.Cause(e.ctx))
	return true
}

// nextArrival draws the next arrival after t from a Poisson process whose
// rate is the trace's expected count in each second. The process is
// memoryless, so at a second boundary the draw restarts at the new rate.
func (e *engine) nextArrival(t int64) (int64, bool) {
	per := e.cfg.Trace.PerSecond
	for {
		s := t / int64(time.Second)
		if s >= int64(len(per)) {
			return 0, false
		}
		next := (s + 1) * int64(time.Second)
		if rate := per[s]; rate > 0 {
			gap := e.arrRng.ExpFloat64() / rate * float64(time.Second)
			if float64(t)+gap < float64(next) {
				return t + int64(gap), true
			}
		}
		t = next
	}
}

func (e *engine) onArrival() {
	if t, ok := e.nextArrival(e.now); ok {
		e.events.push(t, evArrival, 0)
	}
	r := e.newRequest()
	req := &e.reqs[r]
	req.id = e.arrivals
	req.arrival = e.now
	req.size = e.cfg.Dist.Sample(e.sizeRng, e.cfg.App.MinSize, e.cfg.App.MaxSize)
	if !(req.size > 0) || math.IsInf(req.size, 0) {
		e.err = fmt.Errorf("%w: distribution %q drew input size %v", ErrBadConfig, e.cfg.Dist.Name(), req.size)
		return
	}
	e.arrivals++
	req.class = e.drawClass()
	e.drawChain(r)
	e.countInFlight(1)
	e.enqueue(0, r)
}

// drawChain draws request r's execution time and output size at every
// function of the chain, and feeds the bound its jobs: the same draws and
// jobs as realize and computeBound.
func (e *engine) drawChain(r int32) {
	req := &e.reqs[r]
	n := len(e.fns)
	execs, outs := e.chainExec[int(r)*n:int(r+1)*n], e.chainOut[int(r)*n:int(r+1)*n]
	size := req.size
	var total int64
	for f := range e.fns {
		fn := &e.fns[f].draw
		e.execKey.reset(e.cfg.Seed, req.id, int32(f), streamExec)
		execs[f] = int64(fn.Exec(size, e.execRng))
		e.outKey.reset(e.cfg.Seed, req.id, int32(f), streamOutput)
		size = fn.Output(size, e.outRng)
		outs[f] = size
		total += execs[f]
	}
	if req.class == policy.Sync && total > int64(e.cfg.App.SLO) {
		e.infeasible++ // its execution alone misses the SLO
	}
	if e.accs == nil {
		return
	}
	var before int64
	for f, p := range execs {
		e.accs[f].Add(bound.Job{Release: req.arrival + before, Deadline: req.arrival + int64(e.cfg.App.SLO) - (total - before - p), Exec: p})
		before += p
	}
}

func (e *engine) newRequest() int32 {
	if n := len(e.freeReqs); n > 0 {
		r := e.freeReqs[n-1]
		e.freeReqs = e.freeReqs[:n-1]
		e.reqs[r] = request{}
		return r
	}
	e.reqs = append(e.reqs, request{})
	for range e.fns {
		e.chainExec = append(e.chainExec, 0)
		e.chainOut = append(e.chainOut, 0)
	}
	return int32(len(e.reqs) - 1)
}

// enqueue puts request r in function fn's queue, or straight onto an idle
// container when nothing is waiting.
func (e *engine) enqueue(fn int32, r int32) {
	if e.follow != nil {
		e.followEnqueue(fn, r)
		return
	}
	req := &e.reqs[r]
	req.fn, req.enq = fn, e.now
	rt := &e.fns[fn]
	a := policy.Arrival{Queued: rt.queue.Len(), Free: rt.idle.len() > 0, MaxQueue: e.maxQueue()}
	where := e.con.Admit(a)
	if where == policy.StartOwn && !e.bindNew(fn, r) {
		where = policy.Queue(a)
	}
	// The estimate is what a queued request carries (policy.Caps.Estimates);
	// a request that does not queue needs one only where the detailed
	// view reads the running requests' (scale.go). Admit, bindNew and
	// Refused change nothing Estimate reads, so it is the same estimate
	// as one made before them.
	if where == policy.Enqueue || e.detail {
		req.pred = e.con.Estimate(int(fn), req.size)
	}
	switch where {
	case policy.RunNow:
		e.start(e.takeIdle(rt), r)
	case policy.Refuse:
		size := req.size
		e.reject(fn, r)
		// A policy that counts refusals sees the demand the queue turned
		// away (policy.Caps.Refusals).
		add := e.con.Refused(e.policyTime(e.now), int(fn), size, e.counts(fn))
		if add, _, err := policy.Apply(policy.Decision{Add: add}, e.scaleOf(fn)); err == nil {
			e.spawn(fn, add)
		}
		return
	case policy.Enqueue:
		rt.queue.Push(e.entry(rt, req), r)
	}
	now := e.policyTime(e.now)
	add := e.pol.Arrive(now, int(fn), req.size, e.counts(fn))
	if add, _, err := policy.Apply(policy.Decision{Add: add}, e.scaleOf(fn)); err != nil {
		e.err = fmt.Errorf("%w: policy %s: %w", ErrInvariant, e.pol.Name(), err)
	} else {
		e.spawn(fn, add)
	}
	if e.con.LookAheadDue(now, int(fn), len(e.fns)) {
		e.fillViews()
		e.con.LookAhead(now, e.views, e.decs)
		for f, d := range e.decs {
			s := e.scaleOf(int32(f))
			e.spawn(int32(f), policy.Grow(d.Add, s.Live, s.MaxScale))
		}
	}
}

// scaleOf is what policy.Apply needs to know of fn.
func (e *engine) scaleOf(fn int32) policy.Scale {
	rt := &e.fns[fn]
	s := policy.Scale{Live: rt.m.live - rt.draining, Idle: rt.idle.len(), Queued: rt.queue.Len()}
	if len(e.cfg.Scale) > 0 {
		s.MinScale, s.MaxScale = e.cfg.Scale[fn].Min, e.cfg.Scale[fn].Max
	}
	return s
}

// maxQueue is the queue bound Admit applies; an unbounded run
// (Config.MaxQueue < 0) has none.
func (e *engine) maxQueue() int {
	if e.cfg.MaxQueue < 0 {
		return math.MaxInt
	}
	return e.cfg.MaxQueue
}

// countInFlight changes the requests in flight by delta, integrating them
// over time first.
func (e *engine) countInFlight(delta int64) {
	e.inFlightArea += float64(e.inFlight) * float64(e.now-e.inFlightT)
	e.inFlightT = e.now
	e.inFlight += delta
}

// checkLittle is Little's law L = λW on the run as a whole: the time
// integral of the requests in flight must equal the sum of every
// request's time in the system (completed or rejected), to rounding.
func (e *engine) checkLittle() error {
	if d := math.Abs(e.inFlightArea - e.sojournNs); d > 1e-9*max(e.sojournNs, 1) {
		return fmt.Errorf("%w: Little's law: requests in flight integrate to %.6g ns, their times in the system sum to %.6g ns",
			ErrInvariant, e.inFlightArea, e.sojournNs)
	}
	return nil
}

// reject drops request r at function fn's full queue. It counts as a
// request of the function and of the app that missed its SLO.
func (e *engine) reject(fn int32, r int32) {
	rt := &e.fns[fn]
	e.note(obsRefuse, fn, -1, e.reqs[r].id)
	rt.lat.rejected++
	e.classLatency(&e.reqs[r]).rejected++
	e.rejected++
	e.sojournNs += float64(e.now - e.reqs[r].arrival)
	e.countInFlight(-1)
	e.freeReqs = append(e.freeReqs, r)
}

// entry is what the run order needs of a request queued at rt. The
// deadline is absolute: the app arrival plus the SLO of every function up
// to this one, so time lost upstream eats into the slack here.
func (e *engine) entry(rt *fnRuntime, req *request) policy.Entry {
	if req.class == policy.Async {
		return policy.Enter(policy.Async, req.enq, req.arrival+rt.asyncDeadline, rt.asyncDeadline-rt.deadline, req.pred)
	}
	return policy.Enter(policy.Sync, req.enq, req.arrival+rt.deadline, 0, req.pred)
}

// counts describes fn to the policy; containers draining for a more
// critical function are on their way out and do not count.
func (e *engine) counts(fn int32) policy.Counts {
	rt := &e.fns[fn]
	return policy.Counts{Live: rt.m.live - rt.draining, Starting: rt.m.starting, Idle: rt.idle.len(), Queued: rt.queue.Len()}
}

// start runs request r on container id.
func (e *engine) start(id int32, r int32) {
	c := &e.ctrs[id]
	req := &e.reqs[r]
	rt := &e.fns[c.fn]
	wait := e.now - req.enq
	var cold int64
	if c.fresh {
		// The part of the wait spent behind this container's cold start.
		cold = min(wait, max(0, c.readyAt-max(req.enq, c.spawnAt)))
		c.fresh = false
	}
	req.queue += wait - cold
	req.cold += cold
	req.exec = e.chainExec[int(r)*len(e.fns)+int(c.fn)]
	req.execSum += req.exec
	c.state, c.req, c.startAt = csBusy, r, e.now
	rt.m.advance(e.now)
	rt.m.busy++
	rt.m.jobs++
	e.cl.setBusy(e.now, 1)
	rt.lat.record(e.now-req.enq+req.exec, wait-cold, cold, req.exec)
	e.events.push(e.now+req.exec, evDone, id)
	e.note(obsRun, c.fn, id, req.id)
}

func (e *engine) onDone(id int32) {
	c := &e.ctrs[id]
	if c.state != csBusy {
		e.err = fmt.Errorf("%w: container %d finished while %d", ErrInvariant, id, c.state)
		return
	}
	r, fn := c.req, c.fn
	rt := &e.fns[fn]
	rt.m.advance(e.now)
	rt.m.busy--
	e.cl.setBusy(e.now, -1)
	e.free(id)
	e.advanceRequest(r, fn)
}

// free hands a container that just finished to the next queued request, or
// parks it in the idle pool.
func (e *engine) free(id int32) {
	c := &e.ctrs[id]
	rt := &e.fns[c.fn]
	e.freedSeq++
	c.freed = e.freedSeq
	if c.draining {
		e.stopDrained(id)
		return
	}
	if e.follow != nil && e.followFree(id) {
		return
	}
	if r, _, ok := rt.queue.Pop(e.now); ok {
		e.start(id, r)
		return
	}
	c.state, c.idleAt = csIdle, e.now
	c.idleGen++
	rt.idle.push(id, c.node)
	if e.con.Caps.Instances.NewestFirst {
		rt.idle.compactNewest(e.ctrs)
		rt.idle.pushNewest(id, c.seq, c.idleGen)
	}
	if e.con.ExactExpiry() {
		rt.expiry = append(rt.expiry, idleRef{seq: c.seq, gen: c.idleGen, id: id})
		e.scheduleExpiry(c.fn)
	}
}

// takeIdle takes the idle container a request should run on, the one
// policy.Contract.TakesBefore picks: the newest by creation under a
// NewestFirst instance model, else the most recently idle on the lowest
// node. The idle pool keeps them in that order (TestIdlePoolFollowsTheContract).
func (e *engine) takeIdle(rt *fnRuntime) int32 {
	if e.con.Caps.Instances.NewestFirst {
		id := rt.idle.popNewest(e.ctrs)
		rt.idle.remove(id, e.ctrs[id].node)
		return id
	}
	return rt.idle.popLowest()
}

// current reports whether r is still the idle period of its container.
func (e *engine) current(r idleRef) bool {
	c := &e.ctrs[r.id]
	return c.state == csIdle && c.seq == r.seq && c.idleGen == r.gen
}

// scheduleExpiry drops the idle periods of fn that ended otherwise (their
// container took a request or was retired) from the head of its list and,
// unless one is pending, schedules an evExpire for the earliest current
// one: one event per expiry that may happen, not one per idle period.
func (e *engine) scheduleExpiry(fn int32) {
	rt := &e.fns[fn]
	for rt.expiryHead < len(rt.expiry) && !e.current(rt.expiry[rt.expiryHead]) {
		rt.expiryHead++
	}
	if rt.expiryHead > 1024 && rt.expiryHead > len(rt.expiry)/2 {
		rt.expiry = rt.expiry[:copy(rt.expiry, rt.expiry[rt.expiryHead:])]
		rt.expiryHead = 0
	}
	if rt.expiryPending || rt.expiryHead == len(rt.expiry) {
		return
	}
	head := &e.ctrs[rt.expiry[rt.expiryHead].id]
	e.events.push(head.idleAt+int64(e.keepAlive()), evExpire, fn)
	rt.expiryPending = true
}

// onExpire retires every container of fn whose current idle period has
// lasted the keep-alive (SimFaaS's expiration threshold), exactly when it
// does, down to the function's minimum, and schedules the next expiry.
func (e *engine) onExpire(fn int32) {
	rt := &e.fns[fn]
	rt.expiryPending = false
	for rt.expiryHead < len(rt.expiry) {
		r := rt.expiry[rt.expiryHead]
		if e.current(r) {
			c := &e.ctrs[r.id]
			if c.idleAt+int64(e.keepAlive()) > e.now {
				break
			}
			// At the function's minimum the container stays: its idle
			// period leaves the list unexpired.
			if s := e.scaleOf(fn); s.Live > s.MinScale {
				rt.idle.remove(r.id, c.node)
				e.kill(r.id)
			}
		}
		rt.expiryHead++
	}
	e.scheduleExpiry(fn)
	e.grant()
}

// advanceRequest moves a request to the next function, or completes it.
func (e *engine) advanceRequest(r int32, fn int32) {
	req := &e.reqs[r]
	f := &e.fns[fn].f
	out := e.chainOut[int(r)*len(e.fns)+int(fn)]
	if err := e.pol.Complete(int(fn), req.size, time.Duration(req.exec), out); err != nil {
		e.err = fmt.Errorf("%w: app %q function %q produced an unusable sample: %w", ErrBadConfig, e.cfg.App.Name, f.Name, err)
		return
	}
	if e.con.Caps.Outcomes {
		e.con.Finished(e.policyTime(e.now), int(fn), e.now, e.entry(&e.fns[fn], req)) // policy.Caps.Outcomes
	}
	if int(fn)+1 < len(e.fns) {
		req.size = out
		e.enqueue(fn+1, r)
		return
	}
	resp := e.now - req.arrival
	e.recordDone(req, resp)
	if e.cfg.OnComplete != nil {
		e.cfg.OnComplete(req.id, time.Duration(resp))
	}
	e.done++
	e.sojournNs += float64(resp)
	e.countInFlight(-1)
	e.freeReqs = append(e.freeReqs, r)
}

func (e *engine) onReady(id int32) {
	c := &e.ctrs[id]
	if c.state != csStarting || c.readyAt != e.now {
		return // prewarmed, or the slot was reused
	}
	rt := &e.fns[c.fn]
	rt.m.starting--
	e.measuredColdStart(c.fn, time.Duration(c.readyAt-c.spawnAt))
	e.note(obsReady, c.fn, id, -1)
	if len(rt.bound) > rt.boundHead {
		// A request waiting for an instance of its own takes the first
		// that is ready (instances are alike), as the live dispatcher
		// hands it out.
		r := rt.bound[rt.boundHead]
		rt.boundHead++
		if rt.boundHead == len(rt.bound) {
			rt.bound, rt.boundHead = rt.bound[:0], 0
		}
		rt.m.advance(e.now)
		rt.m.bound--
		e.start(id, r)
		return
	}
	e.free(id)
}

// bindNew gives request r a container of its own, started now: the
// request waits for that container's cold start rather than for a busy
// container to free up, as on platforms that run one request per
// container. It reports false when the cluster is full or the function
// at its maximum.
func (e *engine) bindNew(fn int32, r int32) bool {
	if s := e.scaleOf(fn); policy.Grow(1, s.Live, s.MaxScale) == 0 || e.spawnOne(fn) < 0 {
		return false
	}
	rt := &e.fns[fn]
	rt.bound = append(rt.bound, r)
	rt.m.advance(e.now)
	rt.m.bound++
	return true
}

// measuredColdStart folds a container's cold start into its function's
// expected one and plans the chain with the longest, as the live
// dispatcher does with the starts it measures.
func (e *engine) measuredColdStart(fn int32, d time.Duration) {
	e.coldStarts[fn].Observe(d)
	var longest time.Duration
	for _, c := range e.coldStarts {
		longest = max(longest, c.Value())
	}
	e.con.SetColdStart(longest)
}
