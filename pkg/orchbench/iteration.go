package orchbench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"gantry.dev/gantry/pkg/ctxtime"
)

// iteration runs the churn and the services' scale-ups for one iteration
// length. Scale-ups started within it are seen through to the end, so an
// iteration may overrun by one scale-up.
func (r *runner) iteration(ctx context.Context, w *world, c Case, rep int) error {
	ictx, cancel := context.WithTimeout(ctx, r.opts.Iteration)
	defer cancel()
	var (
		sink sampleSink
		wg   sync.WaitGroup
		errs = make(chan error, r.opts.Services+1)
	)
	churned := make(chan int, 1)
	start := time.Now()
	wg.Go(func() { churned <- r.churn(ctx, ictx, w, c, rep) })
	for i := range r.opts.Services {
		wg.Go(func() {
			if err := r.serviceLoop(ctx, ictx, w, c, rep, i, &sink); err != nil && ctx.Err() == nil {
				errs <- err
			}
		})
	}
	stopProgress := r.progress(ictx, w.ctl, c, rep, start, &sink)
	wg.Wait()
	stopProgress()
	close(errs)
	for err := range errs {
		return err
	}
	r.record(w.ctl, c, &sink)
	r.addParts(w.ctl, c, sink.parts)
	r.traces.clear()
	objects := <-churned
	r.addChurn(w.ctl, c, objects, time.Since(start))
	r.step++
	r.logf("[%d/%d] %s %s/%d rep %d: %d scale-ups, %d churn objects, starts processing p50 %.0f ms, pods created p50 %.0f ms (%s elapsed)",
		r.step, r.totalSteps(), w.ctl, c.Mode, c.Burst, rep+1, sink.count(PodsReady), objects,
		sink.p50(StartsProcessing), sink.p50(PodsCreated), time.Since(r.started).Round(time.Second))
	return nil
}

func (r *runner) totalSteps() int {
	return len(r.opts.Controllers) * len(r.opts.Cases) * r.opts.Repetitions
}

func (r *runner) record(ctl string, c Case, sink *sampleSink) {
	for i := range sink.samples {
		sink.samples[i].Controller, sink.samples[i].Mode, sink.samples[i].Burst = ctl, c.Mode, c.Burst
	}
	r.samples = append(r.samples, sink.samples...)
	k := churnKey{ctl, c}
	r.patches[k] = append(r.patches[k], sink.patch...)
	for s, n := range sink.missed {
		r.missed[missKey{ctl, c, Stage(s)}] += n
	}
}

// serviceLoop scales one service up and back down until the iteration
// ends, waiting a random gap between cycles.
func (r *runner) serviceLoop(ctx, ictx context.Context, w *world, c Case, rep, i int, sink *sampleSink) error {
	rng := r.rngFor(c, rep, i)
	if ctxtime.Sleep(ictx, time.Duration(rng.Float64()*float64(r.opts.Gap))) != nil {
		return nil
	}
	for ictx.Err() == nil {
		if err := r.cycle(ctx, w, rep, i, sink); err != nil {
			return err
		}
		if ctxtime.Sleep(ictx, jitter(rng, r.opts.Gap)) != nil {
			return nil
		}
	}
	return nil
}

// jitter is uniform in [gap/2, 3gap/2).
func jitter(rng *rand.Rand, gap time.Duration) time.Duration {
	return gap/2 + time.Duration(rng.Float64()*float64(gap))
}

// cycle is one scale-up from zero, timed, then the scale-down back to
// zero, awaited so the next scale-up starts from zero again.
func (r *runner) cycle(ctx context.Context, w *world, rep, i int, sink *sampleSink) error {
	name := serviceName(i)
	p := w.tracker.begin(name, w.gens[i], r.opts.Replicas)
	sent := time.Now()
	gen, err := w.target.scale(ctx, name, r.opts.Replicas)
	t0 := time.Now() // the patch has returned: every stage is timed from here
	if err != nil {
		w.tracker.end(name)
		return fmt.Errorf("scale %s up: %w", name, err)
	}
	w.gens[i] = gen
	timeout := time.NewTimer(r.opts.StageTimeout)
	select {
	case <-p.done:
	case <-timeout.C:
	case <-ctx.Done():
	}
	timeout.Stop()
	seen := w.tracker.end(name)
	if ctx.Err() != nil {
		return nil
	}
	sink.add(rep, i, t0, seen)
	if isGantry(w.ctl) {
		if tr, ok := r.traces.take(w.svcNS, name, gen, 2*time.Second); ok {
			sink.addParts(breakdown(tr, t0, seen))
		}
	}
	sink.addPatch(t0.Sub(sent))
	return r.scaleDown(ctx, w, i)
}

func (r *runner) scaleDown(ctx context.Context, w *world, i int) error {
	name := serviceName(i)
	gen, err := w.target.scale(ctx, name, 0)
	if err != nil {
		return fmt.Errorf("scale %s down: %w", name, err)
	}
	w.gens[i] = gen
	err = poll(ctx, r.opts.StageTimeout, func(context.Context) (bool, error) {
		return w.tracker.settled(name, !isGantry(w.ctl)), nil
	})
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("%s did not return to zero pods within %v", name, r.opts.StageTimeout)
	}
	return nil
}

func (s *sampleSink) add(rep, service int, t0 time.Time, seen [numStages]time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for st, at := range seen {
		if at.IsZero() {
			s.missed[st]++
			continue
		}
		// An event can arrive before the patch's response is read; the
		// stage then took no measurable time after the patch returned.
		ms := max(0, float64(at.Sub(t0))/float64(time.Millisecond))
		s.samples = append(s.samples, Sample{Rep: rep, Service: service + 1, Stage: Stage(st), Ms: ms})
	}
}

func (s *sampleSink) addParts(p map[string]float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.parts = append(s.parts, p)
}

// addPatch records the scale patch's own round trip: how slow the
// apiserver answers the benchmark's requests under this churn.
func (s *sampleSink) addPatch(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.patch = append(s.patch, float64(d)/float64(time.Millisecond))
}

func (s *sampleSink) values(st Stage) []float64 {
	var out []float64
	for _, x := range s.samples {
		if x.Stage == st {
			out = append(out, x.Ms)
		}
	}
	return out
}

func (s *sampleSink) count(st Stage) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.values(st))
}

func (s *sampleSink) p50(st Stage) float64 { return Summarize(s.values(st)).P50 }

// churn creates and deletes single-pod objects in the churn namespace
// until ctx ends, and returns how many it created. Interval mode starts a
// burst every IntervalPeriod; continuous mode starts the next burst as
// soon as the last is deleted.
func (r *runner) churn(parent, ctx context.Context, w *world, c Case, rep int) int {
	return churnLoop(parent, ctx, w.target, c, rep, pacing{period: r.opts.IntervalPeriod, rate: r.opts.ChurnRate})
}

// pacing spaces the churn's bursts: period is the interval mode's, rate
// (objects per second, 0 for none) caps the continuous mode's.
type pacing struct {
	period time.Duration
	rate   float64
	// calls, if set, collects each create's and delete's round trip.
	calls *churnCalls
	// pace, if set, receives the schedule the loop kept.
	pace *churnPace
	// clock is the pacer's; nil is the real one.
	clock clock.Clock
}

// every is the grid the case's bursts are due on: the interval mode's
// period, the continuous mode's burst at the rate, or none (0).
func (p pacing) every(c Case) time.Duration {
	switch {
	case c.Mode == ModeInterval:
		return p.period
	case p.rate > 0:
		// A burst's objects spread over the time the rate allows them.
		return time.Duration(float64(c.Burst) / p.rate * float64(time.Second))
	}
	return 0
}

// churnCalls are the interference's API round trips, in ms: how fast the
// apiserver took one arm's objects, which bounds its rate.
type churnCalls struct {
	mu              sync.Mutex
	creates, delets []float64
}

func (c *churnCalls) time(deleting bool, call func() error) error {
	if c == nil {
		return call()
	}
	start := time.Now()
	err := call()
	ms := float64(time.Since(start)) / float64(time.Millisecond)
	c.mu.Lock()
	defer c.mu.Unlock()
	if deleting {
		c.delets = append(c.delets, ms)
	} else {
		c.creates = append(c.creates, ms)
	}
	return err
}

// churnLoop is churn on any target: each burst's objects are created at
// once, then deleted at once, and the next burst goes when the pacer says.
func churnLoop(parent, ctx context.Context, t target, c Case, rep int, p pacing) int {
	pc := newPacer(p.clock, p.every(c), c.Burst)
	created := 0
	for round := 0; pc.next(ctx) == nil; round++ {
		names := make([]string, c.Burst)
		for j := range names {
			names[j] = fmt.Sprintf("churn-%s-%d-%d-%d-%d", c.Mode, c.Burst, rep, round, j)
		}
		created += parallel(names, func(n string) error {
			return p.calls.time(false, func() error { return t.createChurn(ctx, n) })
		})
		if parent.Err() != nil {
			break // interrupted: the namespace's deletion removes the rest
		}
		// Deletes outlive the iteration briefly, so nothing is left
		// behind, but not an interrupt.
		dctx, cancel := context.WithTimeout(parent, 5*time.Second)
		parallel(names, func(n string) error {
			return p.calls.time(true, func() error { return t.deleteChurn(dctx, n) })
		})
		cancel()
	}
	if p.pace != nil {
		*p.pace = pc.pace(ctx)
	}
	return created
}

// parallel runs f on every name at once, as a burst of clients would, and
// returns how many succeeded.
func parallel(names []string, f func(string) error) int {
	var (
		wg sync.WaitGroup
		mu sync.Mutex
		ok int
	)
	for _, n := range names {
		wg.Go(func() {
			if f(n) == nil {
				mu.Lock()
				ok++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return ok
}

type churnKey struct {
	controller string
	c          Case
}

// Churn is how much interference one controller met in one case: the
// objects created (and deleted) and their rate over the iterations.
type Churn struct {
	Controller string  `json:"controller"`
	Mode       string  `json:"mode"`
	Burst      int     `json:"burst"`
	Objects    int     `json:"objects"`
	Seconds    float64 `json:"seconds"`
	PerSecond  float64 `json:"objects_per_s"`
	// Create and Delete are the objects' API round trips, where measured
	// (Knative runs).
	Create *Summary `json:"create_ms,omitempty"`
	Delete *Summary `json:"delete_ms,omitempty"`
	// The schedule, where paced (Knative runs; pacer.go): Seconds is then
	// the interference's own time (not the wait for the last scale-ups),
	// TargetPerSecond the rate the case asks for (0: back to back, no
	// target), DueObjects the objects its grid asked for, Shortfall the
	// fraction of them not created, LateBursts the bursts that started
	// more than half a period late and MaxLagMs the latest one.
	TargetPerSecond float64 `json:"target_per_s,omitempty"`
	DueObjects      int     `json:"due_objects,omitempty"`
	Shortfall       float64 `json:"shortfall"`
	Bursts          int     `json:"bursts,omitempty"`
	LateBursts      int     `json:"late_bursts"`
	MaxLagMs        float64 `json:"max_lag_ms"`
}

// addChurnPace records one paced iteration's interference.
func (r *runner) addChurnPace(ctl string, c Case, objects int, p churnPace) {
	r.addChurn(ctl, c, objects, p.elapsed)
	ch := r.churned[churnKey{ctl, c}]
	ch.TargetPerSecond = p.target
	ch.DueObjects += p.dueObjects
	ch.Bursts += p.bursts
	ch.LateBursts += p.late
	ch.MaxLagMs = max(ch.MaxLagMs, float64(p.maxLag)/float64(time.Millisecond))
	ch.Shortfall = 0
	if ch.DueObjects > 0 && ch.Objects < ch.DueObjects {
		ch.Shortfall = 1 - float64(ch.Objects)/float64(ch.DueObjects)
	}
}

// addChurnCalls records the round trips of one arm's interference.
func (r *runner) addChurnCalls(ctl string, c Case, calls *churnCalls) {
	ch := r.churned[churnKey{ctl, c}]
	if ch == nil || calls == nil {
		return
	}
	calls.mu.Lock()
	defer calls.mu.Unlock()
	if r.churnRTT == nil {
		r.churnRTT = map[churnKey]*churnCalls{}
	}
	all := r.churnRTT[churnKey{ctl, c}]
	if all == nil {
		all = &churnCalls{}
		r.churnRTT[churnKey{ctl, c}] = all
	}
	all.creates = append(all.creates, calls.creates...)
	all.delets = append(all.delets, calls.delets...)
	cs, ds := Summarize(all.creates), Summarize(all.delets)
	ch.Create, ch.Delete = &cs, &ds
}

func (r *runner) addChurn(ctl string, c Case, objects int, d time.Duration) {
	k := churnKey{ctl, c}
	ch := r.churned[k]
	if ch == nil {
		ch = &Churn{Controller: ctl, Mode: c.Mode, Burst: c.Burst}
		r.churned[k] = ch
	}
	ch.Objects += objects
	ch.Seconds += d.Seconds()
	ch.PerSecond = float64(ch.Objects) / ch.Seconds
}

// churnList is the churn in report order.
func (r *runner) churnList() []Churn {
	out := []Churn{}
	for _, c := range r.opts.Cases {
		for _, ctl := range r.opts.Controllers {
			if ch := r.churned[churnKey{ctl, c}]; ch != nil {
				out = append(out, *ch)
			}
		}
	}
	return out
}

// progress prints a line every progressEvery while an iteration runs, so
// a long run shows it is alive; the returned func stops it.
func (r *runner) progress(ctx context.Context, ctl string, c Case, rep int, start time.Time, sink *sampleSink) func() {
	if r.opts.Progress == nil {
		return func() {}
	}
	return everyTick(ctx, func() {
		r.logf("   %s %s/%d rep %d: %.0f of %.0f s, %d scale-ups measured",
			ctl, c.Mode, c.Burst, rep+1, time.Since(start).Seconds(), r.opts.Iteration.Seconds(), sink.count(PodsReady))
	})
}

// everyTick calls line every progressEvery until ctx ends or the returned
// func is called; that func returns once line can no longer run.
func everyTick(ctx context.Context, line func()) func() {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(progressEvery)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
				line()
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

const progressEvery = 10 * time.Second
