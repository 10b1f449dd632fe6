// Package queuebench measures how soon a critical event starts processing
// on a queue saturated with background work, for client-go's workqueue,
// controller-runtime's priorityqueue and Gantry's rtqueue engine.
package queuebench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Queue and scenario names, as they appear in the output. The gantry
// queues switch the engine's mechanisms on one at a time, all at the same
// number of workers as the baselines, so the gap to client-go splits into
// what each mechanism adds:
//
//	clientgo        client-go's FIFO workqueue, goroutine workers
//	ctrlruntime     controller-runtime's priorityqueue, goroutine workers
//	gantry-order    rtqueue: priority order; no reserve, threads untouched
//	gantry-reserve  + Reserve of the workers kept for critical items
//	gantry-nort     + nice values (the pool without CAP_SYS_NICE)
//	gantry          + SCHED_FIFO: the whole engine
const (
	QueueClientGo      = "clientgo"
	QueueCtrlRuntime   = "ctrlruntime"
	QueueGantryOrder   = "gantry-order"
	QueueGantryReserve = "gantry-reserve"
	QueueGantryNoRT    = "gantry-nort"
	QueueGantry        = "gantry"

	// ScenarioMixed: items are half CPU, half blocking I/O.
	ScenarioMixed = "mixed"
	// ScenarioCPUHog: items are pure CPU, with more workers than cores.
	ScenarioCPUHog = "cpuhog"
)

// Queues and Scenarios list every name in output order.
var (
	Queues    = []string{QueueClientGo, QueueCtrlRuntime, QueueGantryOrder, QueueGantryReserve, QueueGantryNoRT, QueueGantry}
	Scenarios = []string{ScenarioMixed, ScenarioCPUHog}
)

// ErrUnknownName reports a queue or scenario name not in the lists above.
var ErrUnknownName = errors.New("queuebench: unknown name")

// DefaultWorkers is kube-controller-manager's deployment and replicaset
// controllers' worker count (--concurrent-*-syncs) and the paper's fixed
// pool of five watchdog threads (its Table 2).
const DefaultWorkers = 5

// Options shape a run. Zero fields take the defaults.
type Options struct {
	// Duration bounds each case, warm-up included.
	Duration time.Duration
	// Backlog is how many background items the feeder keeps queued.
	Backlog int
	// CriticalEvery is the critical items' period.
	CriticalEvery time.Duration
	// ItemWork is one background item's work; CriticalWork one critical
	// item's (default 2ms). Both are split as the scenario says.
	ItemWork     time.Duration
	CriticalWork time.Duration
	// Workers lists the worker counts to compare at; every queue gets the
	// same count (default [DefaultWorkers]). The gantry queues run a fixed
	// pool of exactly that many threads.
	Workers []int
	// Reserve is how many of a gantry pool's workers take only critical
	// items, in the variants that have a reserve (default 1).
	Reserve int
	// GOMAXPROCS lists the values to compare at; every queue runs at each.
	// Empty means, for each worker count w, NumCPU (what a controller gets
	// by default) and NumCPU + w (the engine's rule: a P for every worker).
	GOMAXPROCS []int
	Queues     []string
	Scenarios  []string
}

func (o Options) withDefaults() Options {
	if o.Duration == 0 {
		o.Duration = 5 * time.Second
	}
	if o.Backlog == 0 {
		o.Backlog = 50
	}
	if o.CriticalEvery == 0 {
		o.CriticalEvery = 10 * time.Millisecond
	}
	if o.ItemWork == 0 {
		o.ItemWork = 20 * time.Millisecond
	}
	if o.CriticalWork == 0 {
		o.CriticalWork = 2 * time.Millisecond
	}
	if len(o.Workers) == 0 {
		o.Workers = []int{DefaultWorkers}
	}
	if o.Reserve == 0 {
		o.Reserve = 1
	}
	if len(o.Queues) == 0 {
		o.Queues = Queues
	}
	if len(o.Scenarios) == 0 {
		o.Scenarios = Scenarios
	}
	return o
}

// procsFor is the GOMAXPROCS values a worker count is measured at.
func (o Options) procsFor(workers int) []int {
	if len(o.GOMAXPROCS) > 0 {
		return o.GOMAXPROCS
	}
	n := runtime.NumCPU()
	return []int{n, n + workers}
}

// Validate reports options no run can use.
func (o Options) Validate() error {
	o = o.withDefaults()
	switch {
	case o.Duration < 100*time.Millisecond:
		return fmt.Errorf("queuebench: duration %v is under 100ms", o.Duration)
	case o.Backlog < 1 || o.CriticalEvery <= 0 || o.ItemWork <= 0 || o.CriticalWork <= 0:
		return fmt.Errorf("queuebench: backlog, critical period and the work per item must be positive")
	case o.Reserve < 1:
		return fmt.Errorf("queuebench: reserve %d < 1", o.Reserve)
	}
	for _, w := range o.Workers {
		if w <= o.Reserve || w > 1000 {
			return fmt.Errorf("queuebench: %d workers: need more than the reserve (%d) and at most 1000", w, o.Reserve)
		}
	}
	for _, p := range o.GOMAXPROCS {
		if p < 1 || p > 1024 {
			return fmt.Errorf("queuebench: GOMAXPROCS %d must be in 1..1024", p)
		}
	}
	for _, q := range o.Queues {
		if !slices.Contains(Queues, q) {
			return fmt.Errorf("%w: queue %q (have %v)", ErrUnknownName, q, Queues)
		}
	}
	for _, s := range o.Scenarios {
		if !slices.Contains(Scenarios, s) {
			return fmt.Errorf("%w: scenario %q (have %v)", ErrUnknownName, s, Scenarios)
		}
	}
	return nil
}

// Case is one queue under one scenario at one worker count and GOMAXPROCS.
type Case struct {
	Queue, Scenario     string
	Workers, GOMAXPROCS int
}

// Result is one case: enqueue-to-start (p50, p99, max) and enqueue-to-done
// (done_*) of the critical items, and background throughput.
type Result struct {
	Queue          string  `json:"queue"`
	Scenario       string  `json:"scenario"`
	Workers        int     `json:"workers"`
	GOMAXPROCS     int     `json:"gomaxprocs"`
	P50us          float64 `json:"p50_us"`
	P99us          float64 `json:"p99_us"`
	MaxUs          float64 `json:"max_us"`
	DoneP50us      float64 `json:"done_p50_us"`
	DoneP99us      float64 `json:"done_p99_us"`
	BackgroundPerS float64 `json:"background_per_s"`

	// Critical is how many critical items were measured.
	Critical int64 `json:"-"`
	// LagP99us is the p99 delay from a critical item's tick to its Add:
	// time the producer goroutine itself waited for a CPU and a P.
	LagP99us float64 `json:"-"`
	// BackgroundPerCPUs is background items per CPU-second the whole
	// process used in the window: the engine's cost per item, which,
	// unlike BackgroundPerS, does not depend on how much of a shared
	// machine's CPU the process managed to get.
	BackgroundPerCPUs float64 `json:"-"`
	// Policy is what the worker threads ran at: "-" for goroutine workers,
	// "untouched", SCHED_OTHER (nice values) or SCHED_FIFO.
	Policy string `json:"-"`
}

// Report is the --json output: every case, and the split of client-go's
// gap to Gantry into its mechanisms.
type Report struct {
	Results []Result `json:"results"`
	Shares  []Share  `json:"shares"`
}

// Run runs every selected case: scenario, then worker count, then
// GOMAXPROCS, then queue, so the cases compared with each other run back
// to back.
func Run(ctx context.Context, opts Options) (Report, error) {
	if err := opts.Validate(); err != nil {
		return Report{}, err
	}
	opts = opts.withDefaults()
	rep := Report{Shares: []Share{}}
	for _, s := range opts.Scenarios {
		for _, w := range opts.Workers {
			for _, p := range opts.procsFor(w) {
				for _, q := range opts.Queues {
					if err := ctx.Err(); err != nil {
						rep.Shares = Shares(rep.Results)
						return rep, err
					}
					rep.Results = append(rep.Results, RunCase(ctx, Case{Queue: q, Scenario: s, Workers: w, GOMAXPROCS: p}, opts))
				}
			}
		}
	}
	rep.Shares = Shares(rep.Results)
	return rep, nil
}

// RunCase runs one case; its names must be valid.
func RunCase(ctx context.Context, cs Case, opts Options) Result {
	opts = opts.withDefaults()
	e := newEngine(cs.Queue, cs.Workers, opts.Reserve)
	prev := runtime.GOMAXPROCS(cs.GOMAXPROCS)
	defer runtime.GOMAXPROCS(prev)
	c := newCaseRun(cs.Scenario, opts)
	res := c.run(ctx, e)
	res.Queue, res.Scenario, res.Workers, res.GOMAXPROCS = cs.Queue, cs.Scenario, cs.Workers, runtime.GOMAXPROCS(0)
	res.Policy = e.policy()
	return res
}

func newEngine(queue string, workers, reserve int) engine {
	switch queue {
	case QueueClientGo:
		return newClientGo(workers)
	case QueueCtrlRuntime:
		return newCtrlRuntime(workers)
	}
	v, _ := gantryVariantOf(queue)
	return newGantry(v, workers, reserve)
}

// caseRun holds one case's measurements.
type caseRun struct {
	scenario string
	opts     Options
	stopping atomic.Bool
	measure  atomic.Bool
	enq      []atomic.Int64 // critical id -> enqueue time (unix ns); 0 once started
	working  []atomic.Int64 // critical id -> enqueue time while its work runs
	pending  atomic.Int64   // measured critical items not yet done
	bgDone   atomic.Int64

	mu   sync.Mutex // guards the histograms
	lat  *hdrhistogram.Histogram
	done *hdrhistogram.Histogram
	lag  *hdrhistogram.Histogram
}

func newCaseRun(scenario string, opts Options) *caseRun {
	n := int(opts.Duration/opts.CriticalEvery) + 16
	hist := func() *hdrhistogram.Histogram { return hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 3) }
	return &caseRun{scenario: scenario, opts: opts, enq: make([]atomic.Int64, n), working: make([]atomic.Int64, n),
		lat: hist(), done: hist(), lag: hist()}
}

// run warms up for a tenth of the duration (at most 1s), then measures
// until the duration is over. Critical items still waiting at the end are
// not dropped from the figures, which would flatter a slow queue: the
// background keeps flowing until each is done (or, after a grace period,
// it is counted at its age so far, a lower bound).
func (c *caseRun) run(ctx context.Context, e engine) Result {
	window, cancelWindow := context.WithTimeout(ctx, c.opts.Duration)
	defer cancelWindow()
	feedCtx, stopFeed := context.WithCancel(ctx)
	defer stopFeed()
	e.start(c.handle)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); c.feed(feedCtx, e) }()
	go func() { defer wg.Done(); c.produce(window, e) }()
	warm := min(c.opts.Duration/10, time.Second)
	select {
	case <-time.After(warm):
	case <-window.Done():
	}
	c.measure.Store(true)
	start, cpu0 := time.Now(), processCPU()
	<-window.Done()
	elapsed, cpu := time.Since(start), processCPU()-cpu0
	c.measure.Store(false)
	c.awaitPending(ctx, c.opts.Duration+10*time.Second)
	stopFeed()
	c.stopping.Store(true)
	wg.Wait()
	e.stop()
	return c.result(elapsed, cpu)
}

// awaitPending waits for every measured critical item to finish, then
// records the ones that did not at their age so far: one never started
// counts in both the start and the done figures, one still working in the
// done figures.
func (c *caseRun) awaitPending(ctx context.Context, grace time.Duration) {
	deadline := time.Now().Add(grace)
	for c.pending.Load() > 0 && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
	now := time.Now()
	for i := range c.enq {
		if at := c.enq[i].Swap(0); at != 0 {
			c.record(c.lat, now.Sub(time.Unix(0, at)))
			c.record(c.done, now.Sub(time.Unix(0, at)))
		}
		if at := c.working[i].Swap(0); at != 0 {
			c.record(c.done, now.Sub(time.Unix(0, at)))
		}
	}
}

func (c *caseRun) result(elapsed, cpu time.Duration) Result {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := Result{P50us: float64(c.lat.ValueAtQuantile(50)), P99us: float64(c.lat.ValueAtQuantile(99)),
		MaxUs: float64(c.lat.Max()), DoneP50us: float64(c.done.ValueAtQuantile(50)), DoneP99us: float64(c.done.ValueAtQuantile(99)),
		Critical: c.lat.TotalCount(), LagP99us: float64(c.lag.ValueAtQuantile(99))}
	if elapsed > 0 {
		r.BackgroundPerS = float64(c.bgDone.Load()) / elapsed.Seconds()
	}
	if cpu > 0 {
		r.BackgroundPerCPUs = float64(c.bgDone.Load()) / cpu.Seconds()
	}
	return r
}

// feed keeps Backlog background items queued, so the queue never empties.
func (c *caseRun) feed(ctx context.Context, e engine) {
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	var id uint64
	for {
		for e.len() < c.opts.Backlog {
			id++
			e.add(key{id: id})
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// produce adds one critical item per period and records when.
func (c *caseRun) produce(ctx context.Context, e engine) {
	t := time.NewTicker(c.opts.CriticalEvery)
	defer t.Stop()
	for id := 0; id < len(c.enq); id++ {
		var tick time.Time
		select {
		case <-ctx.Done():
			return
		case tick = <-t.C:
		}
		now := time.Now()
		if c.measure.Load() {
			c.pending.Add(1)
			c.enq[id].Store(now.UnixNano())
			c.record(c.lag, now.Sub(tick))
		}
		e.add(key{critical: true, id: uint64(id)})
	}
}

func (c *caseRun) handle(k key) {
	if k.critical {
		c.handleCritical(k)
		return
	}
	if c.stopping.Load() {
		return
	}
	c.work(c.opts.ItemWork)
	if c.measure.Load() {
		c.bgDone.Add(1)
	}
}

// handleCritical times the start, does the critical item's own work (a
// reconcile computes and waits on the API server too), and times the end.
func (c *caseRun) handleCritical(k key) {
	start := time.Now()
	at := c.enq[k.id].Swap(0)
	if at != 0 {
		c.record(c.lat, start.Sub(time.Unix(0, at)))
		c.working[k.id].Store(at)
	}
	if !c.stopping.Load() {
		c.work(c.opts.CriticalWork)
	}
	if at != 0 && c.working[k.id].Swap(0) != 0 {
		c.record(c.done, time.Since(time.Unix(0, at)))
		c.pending.Add(-1)
	}
}

// work is d of an item's work: in mixed, half CPU and half sleep standing
// in for blocking I/O; in cpuhog, all CPU.
func (c *caseRun) work(d time.Duration) {
	if c.scenario == ScenarioCPUHog {
		cpuWork(d)
		return
	}
	cpuWork(d / 2)
	time.Sleep(d / 2)
}

func (c *caseRun) record(h *hdrhistogram.Histogram, d time.Duration) {
	us := max(int64(d/time.Microsecond), 1)
	c.mu.Lock()
	defer c.mu.Unlock()
	_ = h.RecordValue(min(us, h.HighestTrackableValue())) // clamped, so it cannot fail
}
