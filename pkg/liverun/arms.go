package liverun

import (
	"context"
	"errors"
	"io"
	"slices"
	"sync"
	"time"

	"gantry.dev/gantry/pkg/loadgen"
)

// An arm is one gateway process under one policy and stack; a side-by-side
// run drives every arm with the same streams of requests at the same time.
type armSpec struct {
	name      string
	policy    string
	stackFile string
}

// streamSpec is one stream of load sent to every arm alike: the same trace,
// seed, sizes and payloads, so every arm sees the same arrivals.
type streamSpec struct {
	name string
	// path is the gateway's route, e.g. /app/audio-translation.
	path string
	load loadgen.Config // URL is set per arm
	slo  time.Duration
	// warmup is the unmeasured load before (a zero trace: none).
	warmup loadgen.Config
}

// armsConfig is a side-by-side run.
type armsConfig struct {
	exe        string
	arms       []armSpec
	streams    []streamSpec
	functions  int // deployed functions each gateway must list before the load
	capacity   int
	startDelay time.Duration
	// idleTimeout is every gateway's --idle-timeout.
	idleTimeout time.Duration
	gatewayLog  io.Writer
	progress    func([]ArmProgress)
}

// ArmProgress is one arm's state during the run, for the progress line.
type ArmProgress struct {
	Name           string
	Phase          string // "start", "warmup" or "measure"
	Elapsed, Total time.Duration
	// Done, Errors, P99 and SLOCompliance cover the phase's answered
	// requests of every stream (P99 and compliance: the first stream's).
	Done, Errors  int64
	Live          int
	P99           time.Duration
	SLOCompliance float64
	// Functions is what the gateway says each of its functions is doing,
	// read once a second (empty until the first read answers).
	Functions []FunctionProgress
}

// FunctionProgress is one function of an arm's gateway as its
// /system/functions lists it: the SLO it is bound to and what it is doing.
type FunctionProgress struct {
	Name string `json:"name"`
	// SLO is the function's own SLO: in a chain, its budget of the app's.
	SLO string `json:"slo"`
	// State is ready, starting, backoff (crash-looping), failed or idle.
	State   string `json:"state"`
	Queued  int    `json:"queued"`
	Running int    `json:"running"`
	// Replicas counts instances ready or starting; Available, ready.
	Replicas  int `json:"replicas"`
	Available int `json:"availableReplicas"`
}

// armResult is what one arm measured.
type armResult struct {
	spec    armSpec
	streams []streamResult
	// live is the instances (ready or starting) every sampleEvery over the
	// measured phase, offsets from its start.
	live          []LivePoint
	avgLive       float64
	minLive       int
	maxLive       int
	spawned       int64
	interrupted   bool
	measuredStart time.Time
}

// streamResult is one stream's measured phase on one arm.
type streamResult struct {
	spec streamSpec
	res  *loadgen.Result
	// samples are the measured phase's answered requests, in arrival order
	// of completion, at most maxKeptSamples.
	samples []loadgen.Sample
}

// maxKeptSamples bounds the samples kept per stream for the plots.
const maxKeptSamples = 1 << 20

// arm is an arm while it runs.
type arm struct {
	spec armSpec
	gw   *gatewayProc

	mu sync.Mutex // guards what follows
	// phase's running figures, reset at each phase.
	phase   string
	elapsed time.Duration
	total   time.Duration
	stats   []*runningStats
	points  []timedCount
	measure bool
	fns     []FunctionProgress
}

// timedCount is one scrape of the gateway's instances.
type timedCount struct {
	at time.Time
	instanceCounts
}

// runningStats follows one stream's answered requests during a phase.
type runningStats struct {
	slo     time.Duration
	done    int64
	errors  int64
	within  int64
	lat     []time.Duration
	samples []loadgen.Sample
}

func (s *runningStats) add(smp loadgen.Sample, keep bool) {
	s.done++
	ok := smp.Kind == loadgen.KindOK
	if !ok {
		s.errors++
	}
	if ok && smp.Latency <= s.slo {
		s.within++
	}
	if smp.Measured && len(s.lat) < maxKeptSamples {
		s.lat = append(s.lat, smp.Latency)
	}
	if keep && len(s.samples) < maxKeptSamples {
		s.samples = append(s.samples, smp)
	}
}

func (s *runningStats) p99() time.Duration {
	if len(s.lat) == 0 {
		return 0
	}
	l := slices.Clone(s.lat)
	slices.Sort(l)
	return l[min(len(l)-1, int(0.99*float64(len(l))))]
}

// runArms starts every arm's gateway, warms all of them up together, then
// measures all of them together, and stops them. An interrupted run stops
// them in a hurry and in the background, so that its partial report is
// written meanwhile: stopped waits for that (it is a no-op otherwise).
func runArms(ctx context.Context, cfg armsConfig) (_ []armResult, stopped func(), err error) {
	arms, err := startArms(ctx, cfg)
	stopped = func() {}
	// An interrupt stops the gateways at once, beside the load's own
	// drain, rather than after it: in turn the two took 1.3 s from
	// SIGINT to the first SIGTERM and 2 s in all on a loaded machine. The
	// final counts are read first, while the gateways still serve.
	inter := &interruptStop{scraped: make(chan struct{}), done: make(chan struct{})}
	cancelInter := context.AfterFunc(ctx, func() { inter.run(arms) })
	defer func() {
		if !cancelInter() {
			// Started by the interrupt: the report is written while
			// the gateways stop; an error waits for them.
			stopped = func() { <-inter.done }
			if err != nil {
				stopped()
			}
			return
		}
		if ctx.Err() == nil || err != nil {
			stopArms(arms, ctx.Err() != nil)
			return
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			stopArms(arms, true)
		}()
		stopped = func() { <-done }
	}()
	if err != nil {
		return nil, stopped, err
	}
	stopSampling := sampleArms(ctx, arms)
	defer stopSampling()
	stopProgress := reportProgress(arms, cfg.progress)
	defer stopProgress()
	if cfg.streams[0].warmup.Trace.Duration() > 0 {
		if _, err := driveArms(ctx, arms, cfg.streams, "warmup", true); err != nil {
			return nil, stopped, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, stopped, err
	}
	before := scrapeAll(ctx, arms)
	from := time.Now()
	results, err := driveArms(ctx, arms, cfg.streams, "measure", false)
	if err != nil {
		return nil, stopped, err
	}
	// An interrupt read the final counts as it came, while the gateways
	// still served.
	var after []instanceCounts
	if ctx.Err() != nil {
		after = inter.finalCounts()
	} else {
		sctx, cancel := context.WithTimeout(ctx, scrapeTimeout)
		after = scrapeAll(sctx, arms)
		cancel()
	}
	to := time.Now()
	stopProgress()
	stopSampling()
	out := make([]armResult, len(arms))
	for i, a := range arms {
		out[i] = a.result(results[i], before[i], after[i], from, to)
		for j := range out[i].streams {
			out[i].streams[j].spec = cfg.streams[j]
		}
	}
	return out, stopped, nil
}

// interruptStop reads every arm's counts and then stops every gateway in
// a hurry, once, when the run is interrupted.
type interruptStop struct {
	counts  []instanceCounts
	scraped chan struct{} // closed once counts is set
	done    chan struct{} // closed once every gateway has stopped
}

func (s *interruptStop) run(arms []*arm) {
	defer close(s.done)
	begun := time.Now()
	sctx, cancel := context.WithTimeout(context.Background(), interruptedScrapeTimeout)
	s.counts = scrapeAll(sctx, arms)
	cancel()
	close(s.scraped)
	// The load gives what is in flight upDrain, then aborts it; the
	// gateways answer it in a hurry only past that, with a margin for a
	// loaded machine's late timers, so that an interrupt does not show as
	// 503s in the partial report.
	grace := max(0, upDrain+interruptMargin-time.Since(begun))
	var wg sync.WaitGroup
	for _, a := range arms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.gw.stopHurried(grace)
		}()
	}
	wg.Wait()
}

// interruptMargin is how long past the load's drain an interrupted run's
// gateways wait before they answer what is still open.
const interruptMargin = 50 * time.Millisecond

// finalCounts waits for the interrupt's read of the counts.
func (s *interruptStop) finalCounts() []instanceCounts {
	<-s.scraped
	return s.counts
}

func startArms(ctx context.Context, cfg armsConfig) ([]*arm, error) {
	arms := make([]*arm, len(cfg.arms))
	errs := make([]error, len(cfg.arms))
	var wg sync.WaitGroup
	for i, spec := range cfg.arms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			gw, err := startGateway(ctx, gatewaySpec{exe: cfg.exe, policy: spec.policy, stackFile: spec.stackFile,
				capacity: cfg.capacity, startDelay: cfg.startDelay, idleTimeout: cfg.idleTimeout, log: cfg.gatewayLog})
			if err != nil {
				errs[i] = err
				return
			}
			arms[i] = &arm{spec: spec, gw: gw, phase: "start"}
			errs[i] = gw.waitHealthy(ctx, cfg.functions)
		}()
	}
	wg.Wait()
	return slices.DeleteFunc(arms, func(a *arm) bool { return a == nil }), errors.Join(errs...)
}

// stopArms stops every gateway at once; hurry when the run was
// interrupted.
func stopArms(arms []*arm, hurry bool) {
	var wg sync.WaitGroup
	for _, a := range arms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.gw.stop(hurry)
		}()
	}
	wg.Wait()
}

// driveArms sends every stream to every arm at once and waits for all.
func driveArms(ctx context.Context, arms []*arm, streams []streamSpec, phase string, warmup bool) ([][]*loadgen.Result, error) {
	results := make([][]*loadgen.Result, len(arms))
	errs := make([]error, len(arms)*len(streams))
	var wg sync.WaitGroup
	for i, a := range arms {
		a.beginPhase(phase, streams, warmup)
		results[i] = make([]*loadgen.Result, len(streams))
		for j, st := range streams {
			lc := st.load
			if warmup {
				lc = st.warmup
			}
			lc.URL = a.gw.url + st.path
			lc.OnSample = func(s loadgen.Sample) { a.sample(j, s) }
			if j == 0 {
				lc.ProgressEvery = 250 * time.Millisecond
				lc.Progress = func(_, _ int64, elapsed, total time.Duration) { a.setTime(elapsed, total) }
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i][j], errs[i*len(streams)+j] = loadgen.Run(ctx, lc)
			}()
		}
	}
	wg.Wait()
	return results, errors.Join(errs...)
}

func (a *arm) beginPhase(phase string, streams []streamSpec, warmup bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.phase, a.elapsed, a.total, a.measure = phase, 0, 0, !warmup
	a.stats = make([]*runningStats, len(streams))
	for j, st := range streams {
		a.stats[j] = &runningStats{slo: st.slo}
	}
}

func (a *arm) sample(stream int, s loadgen.Sample) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.stats[stream].add(s, a.measure)
}

func (a *arm) setTime(elapsed, total time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.elapsed, a.total = elapsed, total
}

func (a *arm) progress() ArmProgress {
	a.mu.Lock()
	defer a.mu.Unlock()
	p := ArmProgress{Name: a.spec.name, Phase: a.phase, Elapsed: a.elapsed, Total: a.total, Functions: a.fns}
	if n := len(a.points); n > 0 {
		p.Live = a.points[n-1].live
	}
	for j, s := range a.stats {
		p.Done += s.done
		p.Errors += s.errors
		if j == 0 {
			p.P99 = s.p99()
			if s.done > 0 {
				p.SLOCompliance = float64(s.within) / float64(s.done)
			}
		}
	}
	return p
}

// sampleArms scrapes every arm's instance counts every sampleEvery until
// the returned func is called (it may be called more than once).
func sampleArms(ctx context.Context, arms []*arm) (stop func()) {
	quit := make(chan struct{})
	var wg sync.WaitGroup
	for _, a := range arms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(sampleEvery)
			defer t.Stop()
			for {
				if c, err := a.gw.counts(ctx); err == nil {
					a.mu.Lock()
					a.points = append(a.points, timedCount{at: time.Now(), instanceCounts: c})
					a.mu.Unlock()
				}
				select {
				case <-quit:
					return
				case <-ctx.Done():
					return
				case <-t.C:
				}
			}
		}()
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			close(quit)
			wg.Wait()
		})
	}
}

// upDrain is how long an interrupted run waits for the requests in flight
// before it aborts them: short, since the user asked it to stop within a
// second.
const upDrain = 100 * time.Millisecond

// scrapeTimeout bounds the final read of the gateways' counts;
// interruptedScrapeTimeout bounds it after SIGINT (a read that fails
// leaves the spawned count to the samples).
const (
	scrapeTimeout            = 2 * time.Second
	interruptedScrapeTimeout = 300 * time.Millisecond
)

// scrapeAll reads every arm's counts now, all at once (an interrupted run
// waits for the slowest, not for their sum); a failed read leaves zeros.
func scrapeAll(ctx context.Context, arms []*arm) []instanceCounts {
	out := make([]instanceCounts, len(arms))
	var wg sync.WaitGroup
	for i, a := range arms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], _ = a.gw.counts(ctx)
		}()
	}
	wg.Wait()
	return out
}

// reportProgress calls progress with every arm's state every second until
// the returned func is called (it may be called more than once).
func reportProgress(arms []*arm, progress func([]ArmProgress)) (stop func()) {
	if progress == nil {
		return func() {}
	}
	quit, exited := make(chan struct{}), make(chan struct{})
	snapshot := func() {
		ps := make([]ArmProgress, len(arms))
		for i, a := range arms {
			ps[i] = a.progress()
		}
		progress(ps)
	}
	go func() {
		defer close(exited)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-quit:
				// The last figures, without a read of gateways that may
				// be stopping already.
				snapshot()
				return
			case <-t.C:
				readFunctions(arms)
				snapshot()
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(quit)
			<-exited
		})
	}
}

// functionsReadTimeout bounds the progress's read of a gateway's
// functions: a gateway too slow to answer keeps its last figures.
const functionsReadTimeout = 500 * time.Millisecond

// readFunctions reads every arm's functions, all at once.
func readFunctions(arms []*arm) {
	ctx, cancel := context.WithTimeout(context.Background(), functionsReadTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, a := range arms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fns, err := a.gw.functions(ctx)
			if err != nil {
				return
			}
			a.mu.Lock()
			a.fns = fns
			a.mu.Unlock()
		}()
	}
	wg.Wait()
}

// result assembles an arm's measured phase.
func (a *arm) result(res []*loadgen.Result, before, after instanceCounts, from, to time.Time) armResult {
	a.mu.Lock()
	defer a.mu.Unlock()
	r := armResult{spec: a.spec, spawned: after.started - before.started, measuredStart: from, minLive: -1}
	sum, n := 0.0, 0
	var first, last int64 = -1, 0
	for _, p := range a.points {
		if p.at.Before(from) || p.at.After(to) {
			continue
		}
		if first < 0 {
			first = p.started
		}
		last = p.started
		r.live = append(r.live, LivePoint{Offset: p.at.Sub(from), Live: p.live})
		sum += float64(p.live)
		n++
		r.maxLive = max(r.maxLive, p.live)
		if r.minLive < 0 || p.live < r.minLive {
			r.minLive = p.live
		}
	}
	if n > 0 {
		r.avgLive = sum / float64(n)
	}
	if r.spawned < 0 && first >= 0 {
		// A final read failed: count from the samples instead.
		r.spawned = last - first
	}
	r.minLive = max(r.minLive, 0)
	for j, lr := range res {
		if lr.Interrupted {
			r.interrupted = true
		}
		r.streams = append(r.streams, streamResult{res: lr, samples: a.stats[j].samples})
	}
	return r
}
