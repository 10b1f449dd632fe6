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

	"gantry.dev/gantry/pkg/rtqueue"
)

// Queue and scenario names, as they appear in the output.
const (
	QueueClientGo    = "clientgo"
	QueueCtrlRuntime = "ctrlruntime"
	QueueGantry      = "gantry"
	QueueGantryNoRT  = "gantry-nort"

	// ScenarioMixed: background items are half CPU, half blocking I/O.
	ScenarioMixed = "mixed"
	// ScenarioCPUHog: background items are pure CPU on every core.
	ScenarioCPUHog = "cpuhog"
)

// Queues and Scenarios list every name in output order.
var (
	Queues    = []string{QueueClientGo, QueueCtrlRuntime, QueueGantry, QueueGantryNoRT}
	Scenarios = []string{ScenarioMixed, ScenarioCPUHog}
)

// ErrUnknownName reports a queue or scenario name not in the lists above.
var ErrUnknownName = errors.New("queuebench: unknown name")

// Options shape a run. Zero fields take the workload.
type Options struct {
	// Duration bounds each case, warm-up included.
	Duration time.Duration
	// Backlog is how many background items the feeder keeps queued.
	Backlog int
	// CriticalEvery is the critical items' period.
	CriticalEvery time.Duration
	// ItemWork is one background item's work.
	ItemWork time.Duration
	// GOMAXPROCS for the gantry cases: 0 means
	// rtqueue.RecommendedGOMAXPROCS, negative leaves it unchanged.
	GOMAXPROCS int
	// BaselineGOMAXPROCS for the clientgo and ctrlruntime cases: 0 leaves
	// it unchanged (what a vanilla controller runs with).
	BaselineGOMAXPROCS int
	Queues             []string
	Scenarios          []string
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
	if len(o.Queues) == 0 {
		o.Queues = Queues
	}
	if len(o.Scenarios) == 0 {
		o.Scenarios = Scenarios
	}
	return o
}

// Validate reports options no run can use.
func (o Options) Validate() error {
	o = o.withDefaults()
	switch {
	case o.Duration < 100*time.Millisecond:
		return fmt.Errorf("queuebench: duration %v is under 100ms", o.Duration)
	case o.Backlog < 1 || o.CriticalEvery <= 0 || o.ItemWork <= 0:
		return fmt.Errorf("queuebench: backlog, critical period and item work must be positive")
	case o.BaselineGOMAXPROCS < 0:
		return fmt.Errorf("queuebench: baseline GOMAXPROCS %d < 0", o.BaselineGOMAXPROCS)
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

// Result is one case. The JSON fields are exactly the issue's; the rest
// shows in the table only.
type Result struct {
	Queue          string  `json:"queue"`
	Scenario       string  `json:"scenario"`
	P50us          float64 `json:"p50_us"`
	P99us          float64 `json:"p99_us"`
	MaxUs          float64 `json:"max_us"`
	BackgroundPerS float64 `json:"background_per_s"`

	// Critical is how many critical items were measured.
	Critical int64 `json:"-"`
	// LagP99us is the p99 delay from a critical item's tick to its Add:
	// time the producer goroutine itself waited for a CPU and a P.
	LagP99us float64 `json:"-"`
	// Procs is GOMAXPROCS during the case.
	Procs int `json:"-"`
	// BackgroundPerCPUs is background items per CPU-second the whole
	// process used in the window: the engine's cost per item, which,
	// unlike BackgroundPerS, does not depend on how much of a shared
	// machine's CPU the process managed to get.
	BackgroundPerCPUs float64 `json:"-"`
	// Policy is the gantry pool's scheduling policy, empty for baselines.
	Policy string `json:"-"`
}

// Report is the --json output.
type Report struct {
	Results []Result `json:"results"`
}

// Run runs every selected case, scenario by scenario.
func Run(ctx context.Context, opts Options) (Report, error) {
	if err := opts.Validate(); err != nil {
		return Report{}, err
	}
	opts = opts.withDefaults()
	var rep Report
	for _, s := range opts.Scenarios {
		for _, q := range opts.Queues {
			if err := ctx.Err(); err != nil {
				return rep, err
			}
			rep.Results = append(rep.Results, RunCase(ctx, q, s, opts))
		}
	}
	return rep, nil
}

// RunCase runs one queue under one scenario; names must be valid.
func RunCase(ctx context.Context, queue, scenario string, opts Options) Result {
	opts = opts.withDefaults()
	e, procs := newEngine(queue, opts)
	prev := runtime.GOMAXPROCS(procs)
	defer runtime.GOMAXPROCS(prev)
	c := newCaseRun(scenario, opts)
	res := c.run(ctx, e)
	res.Queue, res.Scenario, res.Procs = queue, scenario, runtime.GOMAXPROCS(0)
	if g, ok := e.(*gantry); ok {
		res.Policy = g.pool.Policy().String()
	}
	return res
}

func newEngine(queue string, opts Options) (engine, int) {
	procs := runtime.GOMAXPROCS(0)
	if opts.BaselineGOMAXPROCS > 0 {
		procs = opts.BaselineGOMAXPROCS
	}
	switch queue {
	case QueueClientGo:
		return newClientGo(), procs
	case QueueCtrlRuntime:
		return newCtrlRuntime(), procs
	}
	procs = runtime.GOMAXPROCS(0)
	g := newGantry(queue == QueueGantry)
	switch {
	case opts.GOMAXPROCS == 0:
		procs = rtqueue.RecommendedGOMAXPROCS(g.cfg, runtime.NumCPU())
	case opts.GOMAXPROCS > 0:
		procs = opts.GOMAXPROCS
	}
	return g, procs
}

// caseRun holds one case's measurements.
type caseRun struct {
	scenario string
	opts     Options
	stopping atomic.Bool
	measure  atomic.Bool
	enq      []atomic.Int64 // critical id -> enqueue time (unix ns); 0 once started
	pending  atomic.Int64   // measured critical items not yet started
	bgDone   atomic.Int64

	mu  sync.Mutex // guards lat and lag
	lat *hdrhistogram.Histogram
	lag *hdrhistogram.Histogram
}

func newCaseRun(scenario string, opts Options) *caseRun {
	n := int(opts.Duration/opts.CriticalEvery) + 16
	return &caseRun{scenario: scenario, opts: opts, enq: make([]atomic.Int64, n),
		lat: hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 3),
		lag: hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 3)}
}

// run warms up for a tenth of the duration (at most 1s), then measures
// until the duration is over. Critical items still waiting at the end are
// not dropped from the figures, which would flatter a slow queue: the
// background keeps flowing until each has started (or, after a grace
// period, it is counted at its age so far, a lower bound).
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

// awaitPending waits for every measured critical item to start, then
// records the ones that did not at their age so far.
func (c *caseRun) awaitPending(ctx context.Context, grace time.Duration) {
	deadline := time.Now().Add(grace)
	for c.pending.Load() > 0 && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
	now := time.Now()
	for i := range c.enq {
		if at := c.enq[i].Swap(0); at != 0 {
			c.record(c.lat, now.Sub(time.Unix(0, at)))
		}
	}
}

func (c *caseRun) result(elapsed, cpu time.Duration) Result {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := Result{P50us: float64(c.lat.ValueAtQuantile(50)), P99us: float64(c.lat.ValueAtQuantile(99)),
		MaxUs: float64(c.lat.Max()), Critical: c.lat.TotalCount(), LagP99us: float64(c.lag.ValueAtQuantile(99))}
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
	c.background()
	if c.measure.Load() {
		c.bgDone.Add(1)
	}
}

func (c *caseRun) handleCritical(k key) {
	start := time.Now()
	if at := c.enq[k.id].Swap(0); at != 0 {
		c.record(c.lat, start.Sub(time.Unix(0, at)))
		c.pending.Add(-1)
	}
}

func (c *caseRun) background() {
	if c.scenario == ScenarioCPUHog {
		cpuWork(c.opts.ItemWork)
		return
	}
	cpuWork(c.opts.ItemWork / 2)
	time.Sleep(c.opts.ItemWork / 2)
}

func (c *caseRun) record(h *hdrhistogram.Histogram, d time.Duration) {
	us := max(int64(d/time.Microsecond), 1)
	c.mu.Lock()
	defer c.mu.Unlock()
	_ = h.RecordValue(min(us, h.HighestTrackableValue())) // clamped, so it cannot fail
}
