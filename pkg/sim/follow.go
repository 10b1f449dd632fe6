package sim

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"gantry.dev/gantry/pkg/bound"
	"gantry.dev/gantry/pkg/policy"
	"gantry.dev/gantry/pkg/workload"
)

// follower makes the engine follow the oracle's plan to the job
// (docs/simulator.md, "The oracle follows its plan"): a bound.Planner,
// fed the run's own requests replayed from the same seeded streams, plans
// one cold start (and a nanosecond) ahead of the engine's clock; the
// engine starts and stops every planned container when the plan says,
// and runs each request on the container the plan gave it, in the plan's
// order on that container. Execution times are the engine's own draws, so
// every request starts and ends when the plan says, and the run meets
// every SLO the plan meets.
type follower struct {
	ctx context.Context
	cfg *Config
	e   *engine // nil for a dry run, which only measures the plan
	// area is a dry run's container-time (container·ns); startAt holds
	// each planned container's start for it.
	area    float64
	startAt []int64
	// missed counts, in a dry run, the requests that could meet their SLO
	// and that the plan makes miss it.
	missed int64
	// shares gives each stage the deadline of its SLO share alone
	// (arrival + cumulative share), not a share of the request's slack.
	shares bool
	pl     *bound.Planner
	lead   int64 // how far ahead of the engine's clock the plan runs
	// horizon: every release up to it is planned.
	horizon  int64
	finished bool
	err      error

	// The replayed arrivals (see realize).
	src             *engine
	sizeRng         *rand.Rand
	execKey, outKey *keyedSource
	// draws samples each function's execution times and outputs.
	draws           []workload.Sampler
	execRng, outRng *rand.Rand
	nextArr, nextID int64
	hasArr          bool

	cum    []int64 // each function's deadline from arrival (cumulative SLO share)
	stages stageHeap
	assign []assignQueue // per function, in the order planned
	pcs    []plannedCtr  // per planned container
	// pending lists planned containers that found no room when due.
	pending []int32
	// edges, when set, records a dry run's starts (+1) and stops (-1)
	// per function (plannedSteps); startFn is each container's function.
	edges   [][]policy.PlanStep
	startFn []int32
}

// plannedCtr is a planned container's state in the engine.
type plannedCtr struct {
	fn    int32
	eng   int32 // engine container, -1 before its start and after its stop
	total int32 // jobs it runs, once the plan has retired it; -1 before
	// head and tail list the engine requests that arrived for it and
	// wait, in the plan's order (linked through request.nextWait).
	head, tail int32
	warm       bool
}

type assignment struct {
	id       int64
	ctr, seq int32 // ctr -1: the plan refuses the request
}

// assignQueue holds a function's planned assignments in release order;
// the engine takes each when its request arrives, nearly always the head.
type assignQueue struct {
	q    []assignment
	head int
}

func (a *assignQueue) push(x assignment) {
	if a.head > 1024 && a.head > len(a.q)/2 {
		a.q = a.q[:copy(a.q, a.q[a.head:])]
		a.head = 0
	}
	a.q = append(a.q, x)
}

func (a *assignQueue) take(id int64) (assignment, bool) {
	for i := a.head; i < len(a.q); i++ {
		if a.q[i].id != id {
			continue
		}
		x := a.q[i]
		copy(a.q[a.head+1:i+1], a.q[a.head:i])
		a.head++
		return x, true
	}
	return assignment{}, false
}

// stage is a request's job at a function after the first, released when
// the plan ends its job at the function before.
type stage struct {
	release, arrival, id int64
	// before is the execution time of the request's stages before this
	// one; slack is its SLO less its whole execution time (at least 0).
	before, slack int64
	fn            int32
	feasible      bool // its execution alone is within the SLO
	size          float64
}

type stageHeap []stage

func (h stageHeap) before(i, j int) bool {
	a, b := &h[i], &h[j]
	return a.release < b.release || (a.release == b.release && (a.id < b.id || (a.id == b.id && a.fn < b.fn)))
}

func (h *stageHeap) push(s stage) {
	*h = append(*h, s)
	for i := len(*h) - 1; i > 0; {
		up := (i - 1) / 2
		if !h.before(i, up) {
			break
		}
		(*h)[i], (*h)[up] = (*h)[up], (*h)[i]
		i = up
	}
}

func (h *stageHeap) pop() stage {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	*h = s
	for i := 0; ; {
		c := 2*i + 1
		if c >= len(s) {
			break
		}
		if c+1 < len(s) && h.before(c+1, c) {
			c++
		}
		if !h.before(c, i) {
			break
		}
		s[i], s[c] = s[c], s[i]
		i = c
	}
	return top
}

// room is how many containers the cluster holds at once.
func room(cfg *Config) int {
	per := cfg.CoresPerNode
	if cfg.ContainerMemoryMB > 0 {
		per = min(per, cfg.MemoryPerNodeMB/cfg.ContainerMemoryMB)
	}
	return cfg.Nodes * per
}

// planRule is one way the oracle can build its plan.
type planRule struct {
	firstFit bool // first fit, not best fit (bound.Planner.FirstFit)
	shares   bool // stage deadlines from the SLO shares (follower.shares)
	steps    bool // a dry run records its starts and stops (follower.edges)
}

// newFollower plans cfg's run for engine e, or, with e nil, for a dry run
// that only measures the plan.
func newFollower(ctx context.Context, cfg *Config, e *engine, rule planRule) *follower {
	f := &follower{ctx: ctx, cfg: cfg, e: e, lead: int64(cfg.ColdStart) + 1, horizon: math.MinInt64, shares: rule.shares}
	f.src = &engine{cfg: *cfg}
	f.src.arrRng = rand.New(rand.NewPCG(cfg.Seed, 1))
	f.sizeRng = rand.New(rand.NewPCG(cfg.Seed, 2))
	f.execKey, f.outKey = &keyedSource{}, &keyedSource{}
	f.draws = samplers(cfg.App)
	f.execRng, f.outRng = rand.New(f.execKey), rand.New(f.outKey)
	f.nextArr, f.hasArr = f.src.nextArrival(0)
	_, cum := functionSLOs(cfg.App)
	for _, c := range cum {
		f.cum = append(f.cum, int64(c))
	}
	f.assign = make([]assignQueue, len(cfg.App.Chain))
	if rule.steps {
		f.edges = make([][]policy.PlanStep, len(cfg.App.Chain))
	}
	// The plan keeps each function's waiting requests within the queue
	// bound, so the engine's bound never refuses a planned request.
	wait := 0
	if cfg.MaxQueue > 0 {
		wait = cfg.MaxQueue
	}
	f.pl = bound.NewPlanner(len(cfg.App.Chain), int64(cfg.ColdStart), prewarmCounts(cfg), room(cfg), wait, f)
	f.pl.FirstFit, f.pl.WarmStart = rule.firstFit, true
	return f
}

// choosePlan plans cfg's run every way the oracle can, without running
// the engine, and returns the rule whose plan holds the least
// container-time among those that make no request miss that could meet
// its SLO. Best fit and first fit each win on some runs; for a chain,
// stage deadlines from the SLO shares alone hold fewer containers on some
// runs but can make a request miss whose later stages run long, so they
// count only where they do not. With firstFitOnly (the ablation
// oracle-first-fit) best fit is not among the rules.
func choosePlan(ctx context.Context, cfg *Config, firstFitOnly bool) (planRule, error) {
	rules := []planRule{{}, {firstFit: true}}
	if len(cfg.App.Chain) > 1 {
		rules = append(rules, planRule{shares: true}, planRule{firstFit: true, shares: true})
	}
	if firstFitOnly {
		rules = slices.DeleteFunc(rules, func(r planRule) bool { return !r.firstFit })
	}
	plans := make([]*follower, len(rules))
	for i, r := range rules {
		plans[i] = newFollower(ctx, cfg, nil, r)
	}
	if err := dryRun(ctx, cfg, plans); err != nil {
		return rules[0], err
	}
	best, bestArea := rules[0], math.Inf(1)
	for i, p := range plans {
		if p.missed == 0 && p.area < bestArea {
			best, bestArea = rules[i], p.area
		}
	}
	return best, nil
}

// dryRun plans cfg's whole run with every dry follower of plans.
func dryRun(ctx context.Context, cfg *Config, plans []*follower) error {
	// One replay of the arrivals and their draws feeds every plan, each
	// in the order ahead would (an arrival before a later stage released
	// at the same instant).
	src := newFollower(ctx, cfg, nil, planRule{})
	for n := 0; src.hasArr; n++ {
		if n%checkEvery == 0 && ctx.Err() != nil {
			return fmt.Errorf("sim: stopped planning the oracle: %w", context.Cause(ctx))
		}
		size := cfg.Dist.Sample(src.sizeRng, cfg.App.MinSize, cfg.App.MaxSize)
		if !(size > 0) || math.IsInf(size, 0) {
			return fmt.Errorf("%w: distribution %q drew input size %v", ErrBadConfig, cfg.Dist.Name(), size)
		}
		s := stage{release: src.nextArr, arrival: src.nextArr, id: src.nextID, size: size}
		exec, out, total := src.chainExec(s.id, size)
		s.slack = int64(cfg.App.SLO) - total
		s.feasible, s.slack = s.slack >= 0, max(0, s.slack)
		for _, p := range plans {
			p.drainBefore(s.release)
			p.placeDrawn(s, exec, out)
		}
		src.nextID++
		src.nextArr, src.hasArr = src.src.nextArrival(src.nextArr)
	}
	for _, p := range plans {
		p.drainBefore(math.MaxInt64)
		p.pl.Advance(math.MaxInt64)
		p.pl.Finish()
	}
	return nil
}

// plannedSteps is the first-fit plan of cfg's run as each function's live
// containers over time, for the ablation oracle-no-follow: the oracle
// before it followed its plan, which held the plan's container counts
// and let the engine dispatch by its own rule (least slack).
func plannedSteps(ctx context.Context, cfg *Config) ([][]policy.PlanStep, error) {
	f := newFollower(ctx, cfg, nil, planRule{firstFit: true, steps: true})
	if err := dryRun(ctx, cfg, []*follower{f}); err != nil {
		return nil, err
	}
	out := make([][]policy.PlanStep, len(f.edges))
	for fn, edges := range f.edges {
		// Stable: a start and a stop at one instant keep the plan's order.
		slices.SortStableFunc(edges, func(a, b policy.PlanStep) int { return cmp.Compare(a.At, b.At) })
		live := 0
		for _, e := range edges {
			live += e.Live
			if n := len(out[fn]); n > 0 && out[fn][n-1].At == e.At {
				out[fn][n-1].Live = live
				continue
			}
			out[fn] = append(out[fn], policy.PlanStep{At: e.At, Live: live})
		}
	}
	return out, nil
}

// drainBefore plans the jobs of later stages released before t.
func (f *follower) drainBefore(t int64) {
	for len(f.stages) > 0 && f.stages[0].release < t {
		f.place(f.stages.pop())
	}
}

// Start is the plan starting a container: the engine does it at at.
func (f *follower) Start(ctr int32, fn int, at int64, warm bool) {
	if f.e == nil {
		f.startAt = append(f.startAt, at)
		if f.edges != nil {
			f.startFn = append(f.startFn, int32(fn))
			f.edges[fn] = append(f.edges[fn], policy.PlanStep{At: time.Duration(at), Live: 1})
		}
		return
	}
	f.pcs = append(f.pcs, plannedCtr{fn: int32(fn), eng: -1, total: -1, head: -1, tail: -1, warm: warm})
	f.e.events.push(at, evPlanStart, ctr)
}

// Retire is the plan stopping a container once it has run jobs jobs.
func (f *follower) Retire(ctr int32, at int64, jobs int32) {
	if f.e == nil {
		f.area += float64(at - f.startAt[ctr])
		if f.edges != nil {
			fn := f.startFn[ctr]
			f.edges[fn] = append(f.edges[fn], policy.PlanStep{At: time.Duration(at), Live: -1})
		}
		return
	}
	f.pcs[ctr].total = jobs
	f.e.events.push(at, evPlanRetire, ctr)
}

// ahead plans every release up to until; it reports false once the
// context has ended or the replayed requests are unusable (f.err).
func (f *follower) ahead(until int64) bool {
	for n := 1; ; n++ {
		if n%checkEvery == 0 && f.ctx.Err() != nil {
			f.err = fmt.Errorf("sim: stopped planning the oracle at %v: %w", until, context.Cause(f.ctx))
			return false
		}
		fromArr := f.hasArr && (len(f.stages) == 0 || f.nextArr <= f.stages[0].release)
		switch {
		case fromArr && f.nextArr <= until:
			if !f.arrive() {
				return false
			}
		case !fromArr && len(f.stages) > 0 && f.stages[0].release <= until:
			f.place(f.stages.pop())
		default:
			f.pl.Advance(until)
			f.horizon = until
			if !f.hasArr && len(f.stages) == 0 && !f.finished {
				f.pl.Finish()
				f.finished = true
			}
			return true
		}
	}
}

// arrive takes the next replayed arrival and plans its first job.
func (f *follower) arrive() bool {
	cfg := f.cfg
	size := cfg.Dist.Sample(f.sizeRng, cfg.App.MinSize, cfg.App.MaxSize)
	if !(size > 0) || math.IsInf(size, 0) {
		f.err = fmt.Errorf("%w: distribution %q drew input size %v", ErrBadConfig, cfg.Dist.Name(), size)
		return false
	}
	s := stage{release: f.nextArr, arrival: f.nextArr, id: f.nextID, size: size}
	exec, out, total := f.chainExec(s.id, size)
	s.slack = int64(cfg.App.SLO) - total
	s.feasible, s.slack = s.slack >= 0, max(0, s.slack)
	f.nextID++
	f.nextArr, f.hasArr = f.src.nextArrival(f.nextArr)
	f.placeDrawn(s, exec, out)
	return true
}

// draw is request id's execution time and output size at function fn for
// input size, the engine's own draws (keyed, as drawChain draws them).
// The last function's output is not drawn: nothing plans with it.
func (f *follower) draw(id int64, fn int32, size float64) (int64, float64) {
	cfg := f.cfg
	fc := &f.draws[fn]
	f.execKey.reset(cfg.Seed, id, fn, streamExec)
	exec := int64(fc.Exec(size, f.execRng))
	if int(fn)+1 == len(cfg.App.Chain) {
		return exec, 0
	}
	f.outKey.reset(cfg.Seed, id, fn, streamOutput)
	return exec, fc.Output(size, f.outRng)
}

// chainExec is request id's execution time and output at the first
// function, and its execution time over the whole chain.
func (f *follower) chainExec(id int64, size float64) (exec int64, out float64, total int64) {
	exec, out = f.draw(id, 0, size)
	total, size = exec, out
	for fn := 1; fn < len(f.cfg.App.Chain); fn++ {
		e, o := f.draw(id, int32(fn), size)
		total, size = total+e, o
	}
	return exec, out, total
}

// place plans job s. Its deadline gives the request's slack (its SLO
// less its execution time over the chain, known to the clairvoyant) to
// the stages in proportion to their SLO shares: a stage that ends by its
// deadline leaves the next one able to end by its own on a container of
// its own, so every request that can meet its SLO does.
func (f *follower) place(s stage) {
	exec, out := f.draw(s.id, s.fn, s.size)
	f.placeDrawn(s, exec, out)
}

// placeDrawn is place with the job's draws already made.
func (f *follower) placeDrawn(s stage, exec int64, out float64) {
	cfg := f.cfg
	share := float64(f.cum[s.fn]) / float64(cfg.App.SLO)
	deadline := s.arrival + s.before + exec + int64(float64(s.slack)*share)
	if f.shares {
		deadline = s.arrival + f.cum[s.fn]
	}
	ctr, seq, end, ok := f.pl.Place(int(s.fn), bound.Job{Release: s.release, Deadline: deadline, Exec: exec})
	last := int(s.fn)+1 == len(cfg.App.Chain)
	if s.feasible && (!ok || (last && end-s.arrival > int64(cfg.App.SLO))) {
		f.missed++
	}
	if !ok {
		ctr = -1
	}
	if f.e != nil {
		f.assign[s.fn].push(assignment{id: s.id, ctr: ctr, seq: seq})
	}
	if ok && !last {
		f.stages.push(stage{release: end, arrival: s.arrival, id: s.id, before: s.before + exec, slack: s.slack, feasible: s.feasible, fn: s.fn + 1, size: out})
	}
}

// planAhead keeps the plan lead ahead of the next event, so that every
// start, stop and assignment the engine needs is decided before it is
// due. It reports false when planning failed (e.err is set).
func (e *engine) planAhead() bool {
	f := e.follow
	for e.events.len() > 0 {
		until := e.events.firstAt() + f.lead
		if until <= f.horizon {
			return true
		}
		if !f.ahead(until) {
			e.err = f.err
			return false
		}
	}
	return true
}

// followStart starts planned container k, or holds it back until room
// frees (only when the cluster cannot hold the plan).
func (e *engine) followStart(k int32) {
	f := e.follow
	node := e.cl.place(e.now)
	if node < 0 {
		e.spawnFails++
		f.pending = append(f.pending, k)
		return
	}
	e.startPlanned(k, node)
}

func (e *engine) startPlanned(k int32, node int32) {
	f := e.follow
	p := &f.pcs[k]
	id := e.startOn(p.fn, node)
	p.eng = id
	c := &e.ctrs[id]
	c.plan, c.planNext = k+1, 0
	if p.warm && e.now == 0 {
		// The prewarm: ready at once, as prewarm makes it.
		c.readyAt, c.fresh = 0, false
		e.fns[p.fn].m.starting--
		e.free(id)
	}
}

// startPending starts the planned containers held back, as room frees.
func (e *engine) startPending() {
	f := e.follow
	for len(f.pending) > 0 {
		node := e.cl.place(e.now)
		if node < 0 {
			return
		}
		k := f.pending[0]
		f.pending = f.pending[1:]
		e.startPlanned(k, node)
	}
}

// followRetire stops planned container k once it has run its jobs.
func (e *engine) followRetire(k int32) {
	p := &e.follow.pcs[k]
	if p.eng < 0 {
		return // held back for room: it stops after its jobs
	}
	c := &e.ctrs[p.eng]
	if c.state == csIdle && c.planNext >= p.total {
		e.fns[c.fn].idle.remove(p.eng, c.node)
		e.stopPlanned(p.eng)
	}
}

func (e *engine) stopPlanned(id int32) {
	k := e.ctrs[id].plan - 1
	e.follow.pcs[k].eng = -1
	e.kill(id)
	e.startPending()
}

// followEnqueue runs request r at function fn on the container the plan
// gave it, now if the container is idle and r is its next job, else
// after the jobs the plan put before it.
func (e *engine) followEnqueue(fn int32, r int32) {
	f := e.follow
	req := &e.reqs[r]
	req.fn, req.enq = fn, e.now
	a, ok := f.assign[fn].take(req.id)
	if !ok {
		e.err = fmt.Errorf("%w: request %d reached function %d unplanned", ErrInvariant, req.id, fn)
		return
	}
	if a.ctr < 0 {
		e.reject(fn, r)
		return
	}
	req.planSeq = a.seq
	if id := f.pcs[a.ctr].eng; id >= 0 {
		if c := &e.ctrs[id]; c.state == csIdle && c.planNext == a.seq {
			e.fns[fn].idle.remove(id, c.node)
			c.planNext++
			e.start(id, r)
			return
		}
	}
	f.wait(a.ctr, r, &e.reqs)
}

// wait lists request r for planned container k in the plan's order.
func (f *follower) wait(k int32, r int32, reqs *[]request) {
	rs := *reqs
	p := &f.pcs[k]
	rs[r].nextWait = -1
	seq := rs[r].planSeq
	switch {
	case p.tail < 0:
		p.head, p.tail = r, r
	case rs[p.tail].planSeq < seq:
		rs[p.tail].nextWait, p.tail = r, r
	case seq < rs[p.head].planSeq:
		rs[r].nextWait, p.head = p.head, r
	default:
		at := p.head
		for rs[at].nextWait >= 0 && rs[rs[at].nextWait].planSeq < seq {
			at = rs[at].nextWait
		}
		rs[r].nextWait, rs[at].nextWait = rs[at].nextWait, r
	}
}

// followFree gives a planned container that just became free its next
// planned job if that has arrived, or stops it after its last; it reports
// false when the container is to idle.
func (e *engine) followFree(id int32) bool {
	c := &e.ctrs[id]
	k := c.plan - 1
	if k < 0 {
		return false
	}
	p := &e.follow.pcs[k]
	if r := p.head; r >= 0 && e.reqs[r].planSeq == c.planNext {
		p.head = e.reqs[r].nextWait
		if p.head < 0 {
			p.tail = -1
		}
		c.planNext++
		e.start(id, r)
		return true
	}
	if p.total >= 0 && c.planNext >= p.total {
		e.stopPlanned(id)
		return true
	}
	return false
}
