package bound

// Planner is the clairvoyant greedy schedule the oracle follows, built one
// job at a time so that a driver can plan just ahead of its own clock and
// follow the plan to the job: which container runs each job, in which
// order, and when every container starts and stops. Per function:
//
//   - a job runs at its release on the idle container that became free
//     last (so the others stay idle and can be retired);
//   - with none idle, it waits for the busy container that frees *last*
//     while still letting it meet its deadline (best fit: the containers
//     that free sooner stay for jobs with less slack);
//   - otherwise a new container is started exactly one cold start before
//     the job's release (prewarm containers are idle at time 0); under
//     WarmStart a job released within the first cold start, when no
//     container could have been started early enough, gets one warm at
//     time 0 (the prewarmed plan: the run starts with every container its
//     first cold start needs), else one started at 0;
//   - a container idle for longer than a cold start is retired at the
//     instant it went idle: starting a fresh one later costs less.
//
// Jobs must be placed in order of release across every function (Place),
// and Advance(t) before the driver acts on anything at t: a container's
// retirement is known only once no job within a cold start of its going
// idle needs it.
//
// A room > 0 caps the containers live at once over every function (the
// cluster's cores): a job that would need a container beyond it waits for
// the busy container of its function that frees first, late, or is
// refused. A maxWait > 0 caps the jobs of a function waiting at once
// (released, not started), as a driver's queue bound does: past it a job
// gets a new container rather than wait.
type Planner struct {
	// FirstFit makes a job wait for the busy container that frees first
	// (if it still meets its deadline there) instead of best fit.
	FirstFit bool
	// WarmStart starts warm at time 0 the containers that jobs released
	// within the first cold start need beyond the prewarm.
	WarmStart bool
	cold      int64
	maxWait   int
	room      int
	live      int
	fns       []fnPlan
	ctrs      []pctr
	sink      Sink
}

// Sink receives the plan's container changes as they are decided. Start
// is never in the past of a driver that keeps its clock at least one
// cold start behind the releases it has placed; Retire is at or after the
// driver's clock once it has called Advance one cold start ahead of it.
type Sink interface {
	// Start starts container ctr of function fn at at; warm containers
	// (the prewarm) are ready at once.
	Start(ctr int32, fn int, at int64, warm bool)
	// Retire stops container ctr at at, once it has run its jobs jobs.
	Retire(ctr int32, at int64, jobs int32)
}

type pctr struct {
	free int64
	jobs int32
}

type fnPlan struct {
	busy frees
	idle []int32 // ordered by when they went idle; idle[:head] are retired
	head int
	wait []int64 // min-heap of the planned starts of the jobs waiting
}

// NewPlanner plans for fns functions, each starting with prewarm[f] warm
// containers (within room).
func NewPlanner(fns int, cold int64, prewarm []int, room, maxWait int, sink Sink) *Planner {
	p := &Planner{cold: cold, maxWait: maxWait, room: room, sink: sink, fns: make([]fnPlan, fns)}
	for f := range p.fns {
		p.fns[f].busy = newFrees()
		for range prewarm[f] {
			if !p.hasRoom() {
				break
			}
			id := p.newCtr(f, 0, true)
			p.fns[f].idle = append(p.fns[f].idle, id)
		}
	}
	return p
}

func (p *Planner) hasRoom() bool { return p.room <= 0 || p.live < p.room }

func (p *Planner) newCtr(fn int, at int64, warm bool) int32 {
	id := int32(len(p.ctrs))
	p.ctrs = append(p.ctrs, pctr{free: at})
	p.live++
	p.sink.Start(id, fn, at, warm)
	return id
}

// Containers is how many containers the plan has started so far.
func (p *Planner) Containers() int { return len(p.ctrs) }

// Advance moves the plan's clock to t: containers that have freed by t
// are idle, and those idle since before t − cold are retired.
func (p *Planner) Advance(t int64) {
	for f := range p.fns {
		p.advanceFn(f, t)
	}
}

func (p *Planner) advanceFn(f int, t int64) {
	fp := &p.fns[f]
	for {
		free, id, ok := fp.busy.Min()
		if !ok || free > t {
			break
		}
		fp.busy.Remove(free, id)
		fp.idle = append(fp.idle, id)
	}
	for fp.head < len(fp.idle) && p.ctrs[fp.idle[fp.head]].free < t-p.cold {
		p.retire(fp.idle[fp.head])
		fp.head++
	}
	if fp.head > 4096 && fp.head > len(fp.idle)/2 {
		fp.idle = fp.idle[:copy(fp.idle, fp.idle[fp.head:])]
		fp.head = 0
	}
}

func (p *Planner) retire(id int32) {
	c := &p.ctrs[id]
	p.live--
	p.sink.Retire(id, c.free, c.jobs)
}

// Place plans job j of function fn and returns the container that runs
// it, its position among that container's jobs and when it ends; ok is
// false when the plan refuses it (no room and nothing to wait for). Jobs
// come in order of release.
func (p *Planner) Place(fn int, j Job) (ctr, seq int32, end int64, ok bool) {
	p.Advance(j.Release)
	fp := &p.fns[fn]
	for len(fp.wait) > 0 && fp.wait[0] <= j.Release {
		popMin(&fp.wait)
	}
	id, start := p.pick(fn, j)
	if id < 0 {
		return -1, 0, 0, false
	}
	if start > j.Release {
		pushMin(&fp.wait, start)
	}
	c := &p.ctrs[id]
	c.free = start + j.Exec
	seq = c.jobs
	c.jobs++
	fp.busy.Insert(c.free, id)
	return id, seq, c.free, true
}

// pick chooses the container for j and when j starts on it.
func (p *Planner) pick(fn int, j Job) (int32, int64) {
	fp := &p.fns[fn]
	if fp.head < len(fp.idle) {
		id := fp.idle[len(fp.idle)-1]
		fp.idle = fp.idle[:len(fp.idle)-1]
		return id, j.Release
	}
	canWait := p.maxWait <= 0 || len(fp.wait) < p.maxWait
	if p.FirstFit {
		if free, id, ok := fp.busy.Min(); ok && canWait && free+j.Exec <= j.Deadline {
			fp.busy.Remove(free, id)
			return id, free
		}
	} else if free, id, ok := fp.busy.LastBy(j.Deadline - j.Exec); ok && canWait {
		fp.busy.Remove(free, id)
		return id, free
	}
	if p.hasRoom() {
		if j.Release < p.cold {
			if p.WarmStart {
				return p.newCtr(fn, 0, true), j.Release
			}
			return p.newCtr(fn, 0, false), p.cold
		}
		return p.newCtr(fn, j.Release-p.cold, false), j.Release
	}
	if free, id, ok := fp.busy.Min(); ok && canWait {
		fp.busy.Remove(free, id)
		return id, free
	}
	return -1, 0
}

// Finish retires every container when it goes idle: the plan has no more
// jobs.
func (p *Planner) Finish() {
	for f := range p.fns {
		fp := &p.fns[f]
		for _, id := range fp.idle[fp.head:] {
			p.retire(id)
		}
		fp.idle, fp.head = fp.idle[:0], 0
		fp.busy.Each(func(_ int64, id int32) { p.retire(id) })
		fp.busy = newFrees()
	}
}

func pushMin(h *[]int64, v int64) {
	*h = append(*h, v)
	s := *h
	for i := len(s) - 1; i > 0; {
		up := (i - 1) / 2
		if s[up] <= s[i] {
			break
		}
		s[i], s[up] = s[up], s[i]
		i = up
	}
}

func popMin(h *[]int64) {
	s := *h
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	for i := 0; ; {
		c := 2*i + 1
		if c >= len(s) {
			break
		}
		if c+1 < len(s) && s[c+1] < s[c] {
			c++
		}
		if s[i] <= s[c] {
			break
		}
		s[i], s[c] = s[c], s[i]
		i = c
	}
	*h = s
}
